/* lora.c — LoRA's grouped shrink and expand on the CPU (the reference of
 * kernels/cuda/lora.cu).  Each group's rows are shrunk through A and
 * expanded through B, then scaled and added to the projection's output:
 * products over a group's rows, however many of the step's rows use its
 * adapter (Punica's SGMV).
 *
 * The whole site (every group of the projections of one layer that read one
 * input: q|k|v, gate|up, o, down) is one stealable job on the backend's pool
 * (pool.h): an item is a block of one group's rows, shrunk and expanded
 * through each of the site's parts into the computing thread's scratch,
 * then added to y by the thread that commits it.  One job rather than a
 * shrink job and an expand job, and one for q, k and v rather than three:
 * a decode step at many adapters is mostly small products, and each job's
 * hand-off costs as much as a small group's arithmetic.  Each part keeps
 * its own products (the same shapes as a part alone), so a site's sums are
 * those of its parts one by one. */
#include <cblas.h>
#include <math.h>
#include <string.h>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_impl.h"
#include "kernels/dequant.h"

#define SCRATCH_FLOATS ((int)(TRAM_POOL_SCRATCH_BYTES / sizeof(float)))

typedef struct {
    float *y;
    const float *x;
    const tram_lora_group *groups;
    const tram_lora_scratch *s;
    tram_lora_site site;
    int n_groups, y_stride;
    int width;            /* the site's columns, its parts' together */
    int t_ld;             /* a row's shrunk values: max_rank for each part */
    int rows;             /* rows of a group per item */
} lora_job;
_Static_assert(sizeof(lora_job) <= TRAM_POOL_JOB_BYTES, "a stealable job's bytes are copied into the pool");

static int f32_or_bf16(const tram_weight *w) { return w->type == TRAM_W_F32 || w->type == TRAM_W_BF16; }

/* One part's A and Bᵀ against its widths and the scratch: both present, or
 * both absent (the adapter leaves the part alone). */
static int part_fits(const tram_weight *a, const tram_weight *bt, int in, int out, int max_rank)
{
    if (!a || !bt)
        return !a && !bt;
    return f32_or_bf16(a) && f32_or_bf16(bt) && a->cols == in && bt->cols == out && bt->rows == a->rows &&
           a->rows <= max_rank;
}

/* One group's factors and rows against the site's widths and the scratch. */
static int group_fits(const tram_lora_group *G, const lora_job *j)
{
    const tram_lora_scratch *s = j->s;
    int parts = 0;
    for (int p = 0; p < j->site.n_parts; p++) {
        if (!part_fits(G->a[p], G->bt[p], j->site.in, j->site.out[p], s->max_rank))
            return 0;
        parts += G->a[p] != NULL;
    }
    return parts && j->site.in <= s->max_in && j->width <= s->max_out && G->first >= 0 && G->count >= 1 &&
           G->first + G->count <= s->max_rows;
}

static int group_items(const lora_job *j, const tram_lora_group *G)
{
    return (G->count + j->rows - 1) / j->rows;
}

typedef struct {
    tram_lora_group g;    /* a copy, checked against the site */
    int r0, n;            /* rows [r0, r0 + n) of the group's run of order */
} lora_item;

/* Item i of the job; 0 when it names nothing that fits, which only a worker
 * late for a finished job can see (the groups and order are the next
 * site's by then, rewritten as it reads them): it computes nothing, and its
 * result is never committed.  The group is copied before it is checked, so
 * that what the item computes from is what fits its site, even late. */
static int locate(const lora_job *j, int i, lora_item *it)
{
    for (int g = 0; g < j->n_groups; g++) {
        it->g = j->groups[g];
        if (!group_fits(&it->g, j))
            return 0;
        int n = group_items(j, &it->g);
        if (i < n) {
            it->r0 = i * j->rows;
            it->n = TRAM_MIN(j->rows, it->g.count - it->r0);
            return 1;
        }
        i -= n;
    }
    return 0;
}

/* Floats of a bf16 A widened at a time: 128 KiB on the computing thread's
 * stack, all of a rank-16 A up to 2048 wide (the default model's). */
#define WIDE_FLOATS (32 * 1024)

/* Rows [r0, r0 + n) of A as f32: A's own rows, or (bf16) those rows widened
 * into wide, exactly. */
static const float *a_rows(const tram_weight *A, int r0, int n, float *wide)
{
    size_t first = (size_t)r0 * A->cols, count = (size_t)n * A->cols;
    if (A->type == TRAM_W_F32)
        return (const float *)A->data + first;
    tram_error err; /* bf16 has no blocks: it cannot fail */
    tram_dequantize(TRAM_GGML_BF16, (const uint16_t *)A->data + first, wide, (int64_t)count, &err);
    return wide;
}

/* t [n][t_ld] (part p's columns) = x[rows] · Aᵀ: a product per piece of A's
 * rows (all of them when A is f32, read in place; as many as wide holds
 * when it is bf16, the same values: a rank-16 A that fits is the product an
 * f32 one gives) and per run of consecutive rows (a sequence's prefill is
 * one run). */
static void shrink_part(const lora_job *j, const tram_weight *A, const int32_t *rows, int n, float *t, float *wide)
{
    int in = j->site.in, piece = A->type == TRAM_W_F32 ? A->rows : TRAM_MAX(1, WIDE_FLOATS / in);
    for (int r0 = 0; r0 < A->rows; r0 += piece) {
        int nr = TRAM_MIN(piece, A->rows - r0);
        const float *a = a_rows(A, r0, nr, wide);
        for (int i = 0, run; i < n; i += run) {
            for (run = 1; i + run < n && rows[i + run] == rows[i] + run; run++)
                ;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, run, nr, in, 1.0f, j->x + (size_t)rows[i] * in, in,
                        a, in, 0.0f, t + (size_t)i * j->t_ld + r0, j->t_ld);
        }
    }
}

/* The expand's vectors: VL output columns, loaded from f32 or bf16 (whose
 * bits are an f32's high half), multiplied and added in one rounding. */
#if defined(__AVX512F__)
typedef __m512 vec;
#define VL 16
#define vec_zero() _mm512_setzero_ps()
#define vec_set1(f) _mm512_set1_ps(f)
#define vec_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vec_mul(a, b) _mm512_mul_ps(a, b)
#define vec_store(p, v) _mm512_storeu_ps(p, v)
#define vec_load_f32(p) _mm512_loadu_ps(p)
#define vec_load_bf16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define VL 8
#define vec_zero() _mm256_setzero_ps()
#define vec_set1(f) _mm256_set1_ps(f)
#define vec_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vec_mul(a, b) _mm256_mul_ps(a, b)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_load_f32(p) _mm256_loadu_ps(p)
#define vec_load_bf16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#else
typedef float vec;
#define VL 1
#define vec_zero() 0.0f
#define vec_set1(f) (f)
#define vec_fma(a, b, c) fmaf(a, b, c)
#define vec_mul(a, b) ((a) * (b))
#define vec_store(p, v) (*(p) = (v))
#define vec_load_f32(p) (*(p))
#define vec_load_bf16(p) tram_bf16_to_f32(*(p))
#endif

/* Columns [c, c + VL) of Bᵀ's row k. */
static inline vec bt_load(const tram_weight *Bt, int k, int c)
{
    size_t at = (size_t)k * Bt->cols + c;
    return Bt->type == TRAM_W_F32 ? vec_load_f32((const float *)Bt->data + at)
                                  : vec_load_bf16((const uint16_t *)Bt->data + at);
}

static inline float bt_at(const tram_weight *Bt, int k, int c)
{
    size_t at = (size_t)k * Bt->cols + c;
    return Bt->type == TRAM_W_F32 ? ((const float *)Bt->data)[at] : tram_bf16_to_f32(((const uint16_t *)Bt->data)[at]);
}

/* ys [n][ys_ld] (part p's columns) = scale · t · Bᵀ: each output summed over
 * the rank in order, by fused multiply-adds from zero, then scaled.  That is
 * what OpenBLAS's sgemm gives for a K this small (its microkernel's order,
 * the scale applied once), as an earlier form of this op called it, so the
 * sums are the same bits; here Bᵀ's rows are read in place, f32 or bf16,
 * with nothing packed (at one row a group, packing B was most of the
 * expand). */
static void expand_part(const lora_job *j, const tram_weight *Bt, float scale, int n, const float *t, float *ys,
                        int ys_ld)
{
    int rank = Bt->rows, out = Bt->cols;
    for (int i = 0; i < n; i++) {
        const float *ti = t + (size_t)i * j->t_ld;
        float *yi = ys + (size_t)i * ys_ld;
        int c = 0;
        for (; c + 4 * VL <= out; c += 4 * VL) {
            vec acc[4] = {vec_zero(), vec_zero(), vec_zero(), vec_zero()};
            for (int k = 0; k < rank; k++) {
                vec tk = vec_set1(ti[k]);
                for (int u = 0; u < 4; u++)
                    acc[u] = vec_fma(tk, bt_load(Bt, k, c + u * VL), acc[u]);
            }
            for (int u = 0; u < 4; u++)
                vec_store(yi + c + u * VL, vec_mul(vec_set1(scale), acc[u]));
        }
        for (; c < out; c++) {
            float acc = 0.0f;
            for (int k = 0; k < rank; k++)
                acc = fmaf(ti[k], bt_at(Bt, k, c), acc);
            yi[c] = scale * acc;
        }
    }
}

/* ys [n][ys_ld] = scale · (x[rows] · Aᵀ) · Bᵀ for each part the group
 * adapts (its columns of ys), through t [n][t_ld]. */
static void compute_item(const lora_job *j, const lora_item *it, float *t, float *ys, int ys_ld)
{
    const tram_lora_group *G = &it->g;
    const int32_t *rows = j->s->order + G->first + it->r0;
    float wide[WIDE_FLOATS];
    for (int p = 0, col = 0; p < j->site.n_parts; col += j->site.out[p++]) {
        if (!G->a[p])
            continue;
        float *tp = t + p * j->s->max_rank;
        shrink_part(j, G->a[p], rows, it->n, tp, wide);
        expand_part(j, G->bt[p], G->scale, it->n, tp, ys + col, ys_ld);
    }
}

static void commit_item(const lora_job *j, const lora_item *it, const float *ys, int ys_ld)
{
    const tram_lora_group *G = &it->g;
    const int32_t *rows = j->s->order + G->first + it->r0;
    for (int i = 0; i < it->n; i++) {
        float *row = j->y + (size_t)rows[i] * j->y_stride;
        const float *add = ys + (size_t)i * ys_ld;
        for (int p = 0, col = 0; p < j->site.n_parts; col += j->site.out[p++]) {
            if (!G->a[p])
                continue; /* the adapter leaves this part's columns alone */
            for (int c = col; c < col + j->site.out[p]; c++)
                row[c] += add[c];
        }
    }
}

/* The stealable form: one item per chunk (the job has at most
 * TRAM_POOL_MAX_CHUNKS), t then ys in the thread's scratch. */
static void steal_compute(const void *job, int begin, int end, void *scratch)
{
    const lora_job *j = job;
    lora_item it;
    (void)end;
    if (locate(j, begin, &it))
        compute_item(j, &it, scratch, (float *)scratch + (size_t)j->rows * j->t_ld, j->width);
}

static void steal_commit(const void *job, int begin, int end, const void *scratch)
{
    const lora_job *j = job;
    lora_item it;
    (void)end;
    if (locate(j, begin, &it))
        commit_item(j, &it, (const float *)scratch + (size_t)j->rows * j->t_ld, j->width);
}

/* The ordinary form, for sites too large for the scratch: each item's t
 * and ys in its own rows of the model's scratch. */
static void run_items(void *job, int begin, int end)
{
    const lora_job *j = job;
    for (int i = begin; i < end; i++) {
        lora_item it;
        if (!locate(j, i, &it))
            continue;
        size_t row = (size_t)it.g.first + it.r0;
        float *t = (float *)j->s->t + row * j->t_ld, *ys = (float *)j->s->ys + row * j->s->max_out;
        compute_item(j, &it, t, ys, j->s->max_out);
        commit_item(j, &it, ys, j->s->max_out);
    }
}

void cpu_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_site *site,
              const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s)
{
    if (n_groups < 1)
        return;
    if (site->n_parts < 1 || site->n_parts > TRAM_LORA_MAX_PARTS) {
        cpu_fail(be, "lora: a site has 1 to TRAM_LORA_MAX_PARTS parts");
        return;
    }
    lora_job j = {y, x, groups, s, *site, n_groups, y_stride, 0, site->n_parts * s->max_rank, 1};
    for (int p = 0; p < site->n_parts; p++)
        j.width += site->out[p];
    int per_row = j.t_ld + j.width, items = 0;
    j.rows = TRAM_MAX(1, SCRATCH_FLOATS / per_row);
    for (int g = 0; g < n_groups; g++) {
        if (!group_fits(&groups[g], &j)) {
            cpu_fail(be, "lora: a group's factors or rows do not fit the site or the scratch");
            return;
        }
        items += group_items(&j, &groups[g]);
    }
    tram_cpu_pool *pool = cpu_of(be)->pool;
    if (per_row <= SCRATCH_FLOATS && items <= TRAM_POOL_MAX_CHUNKS) {
        tram_pool_stealable st = {.compute = steal_compute, .commit = steal_commit, .job = &j, .job_bytes = sizeof(j)};
        tram_cpu_pool_run_stealable(pool, items, 1, &st);
        return;
    }
    tram_cpu_pool_run(pool, items, 1, run_items, &j);
}
