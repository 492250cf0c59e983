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

/* The shrink's and the expand's vectors: VL columns, loaded from f32 or
 * bf16 (whose bits are an f32's high half), multiplied and added in one
 * rounding, and (the shrink's) summed across. */
#if defined(__AVX512F__)
typedef __m512 vec;
#define VL 16
#define vec_zero() _mm512_setzero_ps()
#define vec_set1(f) _mm512_set1_ps(f)
#define vec_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vec_mul(a, b) _mm512_mul_ps(a, b)
#define vec_store(p, v) _mm512_storeu_ps(p, v)
#define vec_load_f32(p) _mm512_loadu_ps(p)
#define vec_hsum(v) _mm512_reduce_add_ps(v)
#define vec_load_bf16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define VL 8
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#define vec_zero() _mm256_setzero_ps()
#define vec_set1(f) _mm256_set1_ps(f)
#define vec_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vec_mul(a, b) _mm256_mul_ps(a, b)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_load_f32(p) _mm256_loadu_ps(p)
#define vec_hsum(v) hsum8(v)
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
#define vec_hsum(v) (v)
#endif

/* Columns [c, c + VL) of row k of a factor (A or Bᵀ), and column c alone;
 * bf16 is a constant where these are inlined, so the type is tested once a
 * part, not once a load. */
static inline vec row_load(const tram_weight *w, int bf16, int k, int c)
{
    size_t at = (size_t)k * w->cols + c;
    return bf16 ? vec_load_bf16((const uint16_t *)w->data + at) : vec_load_f32((const float *)w->data + at);
}

static inline float row_at(const tram_weight *w, int bf16, int k, int c)
{
    size_t at = (size_t)k * w->cols + c;
    return bf16 ? tram_bf16_to_f32(((const uint16_t *)w->data)[at]) : ((const float *)w->data)[at];
}

/* At many adapters a decode step waits on memory for the factors (each
 * read once a step, 156 MB of them at 16 rank-16 adapters of the default
 * model), and the hardware prefetcher, which follows a few sequential
 * streams, lags behind the four or sixteen rows a loop here reads side by
 * side: each row is fetched ahead of its loads, this many columns (the
 * best of 64 to 1024 on a Xeon, bench/results/lora.md; much further and the
 * fetches pass a row's end into rows that are being read already). */
#define PREFETCH_COLS 128

static inline void row_prefetch(const tram_weight *w, int bf16, int k, int c)
{
    __builtin_prefetch((const char *)w->data + ((size_t)k * w->cols + c) * (bf16 ? 2 : 4));
}

/* The first PREFETCH_COLS columns of rows [r0, r1), which the fetches
 * ahead of the loads miss: all requested before the loads reach them
 * (the next block of A's rows while one is read, all of Bᵀ's as the expand
 * starts), so that they arrive together rather than one miss after another. */
static void heads_prefetch(const tram_weight *w, int bf16, int r0, int r1)
{
    for (int r = r0; r < TRAM_MIN(r1, w->rows); r++)
        for (int c = 0; c < TRAM_MIN(PREFETCH_COLS, w->cols); c += 64 / (bf16 ? 2 : 4))
            row_prefetch(w, bf16, r, c);
}

/* t[u] = x · A's row k + u for u < nk: VL lanes of products summed along
 * the row, the lanes then summed, the last columns (in not a multiple of
 * VL) added one by one.  The order is this file's own, not OpenBLAS's (an
 * sgemm over A widened to f32 was the shrink before: the widening pass was
 * a second read of every A, and its sums depended on which of OpenBLAS's
 * kernels the CPU got). */
static inline __attribute__((always_inline)) void dots(const float *x, const tram_weight *A, int bf16, int k,
                                                       int nk, float *t)
{
    int in = A->cols, c = 0;
    vec acc[4] = {vec_zero(), vec_zero(), vec_zero(), vec_zero()};
    for (; c + VL <= in; c += VL) {
        vec xv = vec_load_f32(x + c);
#pragma GCC unroll 4
        for (int u = 0; u < nk; u++)
            row_prefetch(A, bf16, k + u, c + PREFETCH_COLS);
#pragma GCC unroll 4
        for (int u = 0; u < nk; u++)
            acc[u] = vec_fma(xv, row_load(A, bf16, k + u, c), acc[u]);
    }
    for (int u = 0; u < nk; u++) {
        float sum = vec_hsum(acc[u]);
        for (int cc = c; cc < in; cc++)
            sum = fmaf(x[cc], row_at(A, bf16, k + u, cc), sum);
        t[u] = sum;
    }
}

static inline __attribute__((always_inline)) void shrink_typed(const lora_job *j, const tram_weight *A, int bf16,
                                                               const int32_t *rows, int n, float *t)
{
    int k = 0;
    heads_prefetch(A, bf16, 0, 4);
    for (; k + 4 <= A->rows; k += 4) {
        heads_prefetch(A, bf16, k + 4, k + 8);
        for (int i = 0; i < n; i++)
            dots(j->x + (size_t)rows[i] * j->site.in, A, bf16, k, 4, t + (size_t)i * j->t_ld + k);
    }
    for (; k < A->rows; k++)
        for (int i = 0; i < n; i++)
            dots(j->x + (size_t)rows[i] * j->site.in, A, bf16, k, 1, t + (size_t)i * j->t_ld + k);
}

/* t [n][t_ld] (part p's columns) = x[rows] · Aᵀ, A (f32 or bf16) read in
 * place, four of its rows at a time against each row of x (those rows stay
 * in L1 over a group's rows: a prefill's). */
static void shrink_part(const lora_job *j, const tram_weight *A, const int32_t *rows, int n, float *t)
{
    if (A->type == TRAM_W_BF16)
        shrink_typed(j, A, 1, rows, n, t);
    else
        shrink_typed(j, A, 0, rows, n, t);
}

/* ys [n][ys_ld] (part p's columns) = scale · t · Bᵀ: each output summed over
 * the rank in order, by fused multiply-adds from zero, then scaled.  That is
 * what OpenBLAS's sgemm gives for a K this small (its microkernel's order,
 * the scale applied once), as an earlier form of this op called it, so the
 * sums are the same bits; here Bᵀ's rows are read in place, f32 or bf16,
 * with nothing packed (at one row a group, packing B was most of the
 * expand), each rank row fetched ahead. */
static inline __attribute__((always_inline)) void expand_typed(const lora_job *j, const tram_weight *Bt, int bf16,
                                                               float scale, int n, const float *t, float *ys,
                                                               int ys_ld)
{
    int rank = Bt->rows, out = Bt->cols;
    heads_prefetch(Bt, bf16, 0, rank);
    for (int i = 0; i < n; i++) {
        const float *ti = t + (size_t)i * j->t_ld;
        float *yi = ys + (size_t)i * ys_ld;
        int c = 0;
        for (; c + 4 * VL <= out; c += 4 * VL) {
            vec acc[4] = {vec_zero(), vec_zero(), vec_zero(), vec_zero()};
            for (int k = 0; k < rank; k++) {
                vec tk = vec_set1(ti[k]);
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++)
                    row_prefetch(Bt, bf16, k, c + u * VL + PREFETCH_COLS);
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++)
                    acc[u] = vec_fma(tk, row_load(Bt, bf16, k, c + u * VL), acc[u]);
            }
            for (int u = 0; u < 4; u++)
                vec_store(yi + c + u * VL, vec_mul(vec_set1(scale), acc[u]));
        }
        for (; c < out; c++) {
            float acc = 0.0f;
            for (int k = 0; k < rank; k++)
                acc = fmaf(ti[k], row_at(Bt, bf16, k, c), acc);
            yi[c] = scale * acc;
        }
    }
}

static void expand_part(const lora_job *j, const tram_weight *Bt, float scale, int n, const float *t, float *ys,
                        int ys_ld)
{
    if (Bt->type == TRAM_W_BF16)
        expand_typed(j, Bt, 1, scale, n, t, ys, ys_ld);
    else
        expand_typed(j, Bt, 0, scale, n, t, ys, ys_ld);
}

/* ys [n][ys_ld] = scale · (x[rows] · Aᵀ) · Bᵀ for each part the group
 * adapts (its columns of ys), through t [n][t_ld]. */
static void compute_item(const lora_job *j, const lora_item *it, float *t, float *ys, int ys_ld)
{
    const tram_lora_group *G = &it->g;
    const int32_t *rows = j->s->order + G->first + it->r0;
    for (int p = 0, col = 0; p < j->site.n_parts; col += j->site.out[p++]) {
        if (!G->a[p])
            continue;
        float *tp = t + p * j->s->max_rank;
        shrink_part(j, G->a[p], rows, it->n, tp);
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
