/* int8.c — W8A8 GEMM/GEMV kernels for the CPU (see int8.h), and the CPU
 * backend's int8 ops on them (at the end), as kernels/cuda/int8.cu holds
 * CUDA's.
 *
 * A kernel computes one tile: mr token rows × one packed group of 64 output
 * rows, over all of K, into int32 tile[mr][64].  The driver walks the tiles,
 * split over threads, and writes each through the epilogue (dequantized f32,
 * or the raw int32 for tests).  AVX2 and AVX-512 kernels carry target
 * attributes, so the file builds for any x86-64 and picks at run time. */
#include "kernels/cpu/cpu_int8.h"

#include <string.h>

#include "kernels/cpu/cpu_impl.h"
#include "kernels/cpu/sparse24_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define G TRAM_I8_GROUP
#define CHUNK 64   /* token rows per work item: a group's weights are reused this often */
#define MAX_MR 4

/* ---------------------------------------------------------------- layout */

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }
static int round4(int x) { return (x + 3) & ~3; }
static int groups_of(int rows) { return (rows + G - 1) / G; }

size_t tram_i8_matrix_bytes(int rows, int cols)
{
    size_t padded = (size_t)groups_of(rows) * G;
    return align64(sizeof(tram_i8_matrix)) + align64(padded * sizeof(int32_t)) + padded * round4(cols);
}

static tram_i8_matrix *matrix_init(void *mem, int rows, int cols)
{
    tram_i8_matrix *m = mem;
    size_t padded;
    m->rows = rows;
    m->cols = cols;
    m->kp = round4(cols);
    m->groups = groups_of(rows);
    padded = (size_t)m->groups * G;
    m->row_sums = (int32_t *)((char *)mem + align64(sizeof(*m)));
    m->q = (int8_t *)((char *)m->row_sums + align64(padded * sizeof(int32_t)));
    memset(m->row_sums, 0, padded * sizeof(int32_t));
    memset(m->q, 0, padded * m->kp);
    return m;
}

/* Where element (row, k) lives in the packed array. */
static size_t packed_index(const tram_i8_matrix *m, int row, int k)
{
    return ((size_t)(row / G) * (m->kp / 4) + k / 4) * (4 * G) + (row % G) * 4 + k % 4;
}

static void set(tram_i8_matrix *m, int row, int k, int8_t v)
{
    m->q[packed_index(m, row, k)] = v;
    m->row_sums[row] += v;
}

/* ---------------------------------------------------------------- packing */

tram_i8_matrix *tram_i8_matrix_pack(void *mem, const float *w, int rows, int cols, float *scales)
{
    tram_i8_matrix *m = matrix_init(mem, rows, cols);
    for (int r = 0; r < rows; r++) {
        const float *wr = w + (size_t)r * cols;
        float inv;
        scales[r] = tram_i8_row_scale(wr, cols, &inv);
        for (int k = 0; k < cols; k++)
            set(m, r, k, tram_i8_round(wr[k], inv));
    }
    return m;
}

tram_i8_matrix *tram_i8_matrix_pack_q(void *mem, const int8_t *q, int rows, int cols)
{
    tram_i8_matrix *m = matrix_init(mem, rows, cols);
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++)
            set(m, r, k, q[(size_t)r * cols + k]);
    return m;
}

void tram_i8_matrix_row(const tram_i8_matrix *m, int row, float scale, float *out)
{
    for (int k = 0; k < m->cols; k++)
        out[k] = m->q[packed_index(m, row, k)] * scale;
}

/* ---------------------------------------------------------------- kernels */

typedef void (*tile_fn)(int32_t *tile, const int8_t *x, int ldx, const int8_t *wg, const int32_t *sums,
                        int k4s);

static void generic_tile(int32_t *tile, const int8_t *x, int ldx, const int8_t *wg, const int32_t *sums,
                         int k4s)
{
    (void)ldx;
    (void)sums;
    memset(tile, 0, G * sizeof(int32_t));
    for (int k4 = 0; k4 < k4s; k4++) {
        const int8_t *wk = wg + (size_t)k4 * 4 * G, *xk = x + 4 * k4;
        for (int c = 0; c < G; c++)
            for (int b = 0; b < 4; b++)
                tile[c] += xk[b] * wk[c * 4 + b];
    }
}

#if defined(__x86_64__)
static int32_t load4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* AVX2: |a| (u8) times sign(w, a) (s8) is a*w, so vpmaddubsw's unsigned ×
 * signed product works for two signed operands; pairs of products stay within
 * int16 (2 * 127 * 127 < 32768), vpmaddwd against ones widens to int32.  Each
 * half group (32 rows) takes 4 accumulators per token row. */
__attribute__((target("avx2"), always_inline)) static inline void
avx2_tile(int mr, int32_t *tile, const int8_t *x, int ldx, const int8_t *wg, int k4s)
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int half = 0; half < 2; half++) {
        __m256i acc[2][4];
        for (int r = 0; r < mr; r++)
            for (int p = 0; p < 4; p++)
                acc[r][p] = _mm256_setzero_si256();
        for (int k4 = 0; k4 < k4s; k4++) {
            const int8_t *wk = wg + (size_t)k4 * 4 * G + half * 2 * G;
            __m256i w[4];
            for (int p = 0; p < 4; p++)
                w[p] = _mm256_loadu_si256((const __m256i *)(wk + 32 * p));
            for (int r = 0; r < mr; r++) {
                __m256i a = _mm256_set1_epi32(load4(x + (size_t)r * ldx + 4 * k4));
                __m256i abs_a = _mm256_abs_epi8(a);
                for (int p = 0; p < 4; p++) {
                    __m256i prod = _mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(w[p], a));
                    acc[r][p] = _mm256_add_epi32(acc[r][p], _mm256_madd_epi16(prod, ones));
                }
            }
        }
        for (int r = 0; r < mr; r++)
            for (int p = 0; p < 4; p++)
                _mm256_storeu_si256((__m256i *)(tile + r * G + half * 32 + 8 * p), acc[r][p]);
    }
}

__attribute__((target("avx2"))) static void avx2_tile2(int32_t *tile, const int8_t *x, int ldx,
                                                        const int8_t *wg, const int32_t *sums, int k4s)
{
    (void)sums;
    avx2_tile(2, tile, x, ldx, wg, k4s);
}

__attribute__((target("avx2"))) static void avx2_tile1(int32_t *tile, const int8_t *x, int ldx,
                                                        const int8_t *wg, const int32_t *sums, int k4s)
{
    (void)sums;
    avx2_tile(1, tile, x, ldx, wg, k4s);
}

/* AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes, so activations
 * enter as a + 128 (an xor of the sign bit) and 128 * Σ_k w is taken off at the
 * end: Σ (a + 128) w - 128 Σ w = Σ a w, exactly. */
#define VNNI_TARGET "avx512f,avx512bw,avx512vnni"

__attribute__((target(VNNI_TARGET), always_inline)) static inline void
vnni_tile(int mr, int32_t *tile, const int8_t *x, int ldx, const int8_t *wg, const int32_t *sums, int k4s)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i acc[MAX_MR][4];
    for (int r = 0; r < mr; r++)
        for (int p = 0; p < 4; p++)
            acc[r][p] = _mm512_setzero_si512();
    for (int k4 = 0; k4 < k4s; k4++) {
        const int8_t *wk = wg + (size_t)k4 * 4 * G;
        __m512i w[4];
        for (int p = 0; p < 4; p++)
            w[p] = _mm512_loadu_si512(wk + 64 * p);
        for (int r = 0; r < mr; r++) {
            __m512i a = _mm512_xor_si512(_mm512_set1_epi32(load4(x + (size_t)r * ldx + 4 * k4)), flip);
            for (int p = 0; p < 4; p++)
                acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], a, w[p]);
        }
    }
    for (int p = 0; p < 4; p++) {
        __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(sums + 16 * p), 7);
        for (int r = 0; r < mr; r++)
            _mm512_storeu_si512(tile + r * G + 16 * p, _mm512_sub_epi32(acc[r][p], offset));
    }
}

__attribute__((target(VNNI_TARGET))) static void vnni_tile4(int32_t *tile, const int8_t *x, int ldx,
                                                             const int8_t *wg, const int32_t *sums, int k4s)
{
    vnni_tile(4, tile, x, ldx, wg, sums, k4s);
}

__attribute__((target(VNNI_TARGET))) static void vnni_tile1(int32_t *tile, const int8_t *x, int ldx,
                                                             const int8_t *wg, const int32_t *sums, int k4s)
{
    vnni_tile(1, tile, x, ldx, wg, sums, k4s);
}
#endif

typedef struct {
    int mr;          /* token rows of the wide tile */
    tile_fn wide;    /* mr rows */
    tile_fn one;     /* one row, for the remainder */
} kernel_desc;

static kernel_desc describe(tram_cpu_kernel k)
{
#if defined(__x86_64__)
    if (k == TRAM_CPU_VNNI)
        return (kernel_desc){.mr = 4, .wide = vnni_tile4, .one = vnni_tile1};
    if (k == TRAM_CPU_AVX2)
        return (kernel_desc){.mr = 2, .wide = avx2_tile2, .one = avx2_tile1};
#endif
    (void)k;
    return (kernel_desc){.mr = 1, .wide = generic_tile, .one = generic_tile};
}

int tram_i8_kernel_available(tram_cpu_kernel k)
{
    tram_cpu_features f = tram_cpu_features_detect();
    if (k == TRAM_CPU_VNNI)
        return f.avx512f && f.avx512bw && f.avx512vnni;
    if (k == TRAM_CPU_AVX2)
        return f.avx2;
    return k == TRAM_CPU_GENERIC;
}

tram_cpu_kernel tram_i8_kernel_best(void) { return tram_cpu_kernel_best(tram_i8_kernel_available); }

/* ---------------------------------------------------------------- driver */

typedef struct {
    kernel_desc kd;
    void *out;                    /* f32 y[n][rows], or the int32 products when x_scales is NULL */
    const float *x_scales, *w_scales;
    const int8_t *xq;
    const tram_i8_matrix *w;
    int n, chunks;                /* token rows, and their chunks of CHUNK */
} i8_job;

/* A tile's mr token rows (from row0) of the group starting at weight row
 * col0, ncols wide, into dst (rows ld elements apart): f32 with the scales
 * applied, or the raw int32. */
static void store_tile(const i8_job *j, const int32_t *tile, int row0, int mr, int col0, int ncols,
                       void *dst, size_t ld)
{
    for (int r = 0; r < mr; r++) {
        const int32_t *t = tile + r * G;
        if (!j->x_scales) {
            memcpy((int32_t *)dst + r * ld, t, ncols * sizeof(int32_t));
            continue;
        }
        float *y = (float *)dst + r * ld, xs = j->x_scales[row0 + r];
        const float *ws = j->w_scales + col0;
        for (int c = 0; c < ncols; c++)
            y[c] = (float)t[c] * xs * ws[c];
    }
}

/* Work item = (group, chunk of CHUNK token rows), numbered group-major so a
 * thread's consecutive items reuse one group's weights from cache.  Its
 * products go to dst, whose row 0 is the chunk's first token row and whose
 * column 0 the group's first output. */
static void item_rows(const i8_job *j, int it, int *first, int *last, int *g)
{
    *g = it / j->chunks;
    *first = it % j->chunks * CHUNK;
    *last = TRAM_MIN(*first + CHUNK, j->n);
}

static void compute_item(const i8_job *j, int it, void *dst, size_t ld)
{
    _Alignas(64) int32_t tile[MAX_MR * G];
    int g, first, last;
    item_rows(j, it, &first, &last, &g);
    const int8_t *wg = j->w->q + (size_t)g * G * j->w->kp;
    const int32_t *sums = j->w->row_sums + (size_t)g * G;
    int k4s = j->w->kp / 4, ncols = TRAM_MIN(G, j->w->rows - g * G);
    for (int i = first; i < last;) {
        int mr = i + j->kd.mr <= last ? j->kd.mr : 1;
        (mr > 1 ? j->kd.wide : j->kd.one)(tile, j->xq + (size_t)i * j->w->kp, j->w->kp, wg, sums, k4s);
        store_tile(j, tile, i, mr, g * G, ncols, (int32_t *)dst + (size_t)(i - first) * ld, ld);
        i += mr;
    }
}

static int32_t *item_out(const i8_job *j, int it)
{
    int g, first, last;
    item_rows(j, it, &first, &last, &g);
    return (int32_t *)j->out + (size_t)first * j->w->rows + g * G;
}

static void items_in_place(void *arg, int begin, int end)
{
    const i8_job *j = arg;
    for (int it = begin; it < end; it++)
        compute_item(j, it, item_out(j, it), (size_t)j->w->rows);
}

/* The stealable form (pool.h): each item's tile of the scratch holds its
 * rows, G apart, copied to the output by the thread that commits it. */
#define ITEM_SCRATCH (CHUNK * G)

static void items_compute(const void *arg, int begin, int end, void *scratch)
{
    for (int it = begin; it < end; it++)
        compute_item(arg, it, (int32_t *)scratch + (size_t)(it - begin) * ITEM_SCRATCH, G);
}

static void items_commit(const void *arg, int begin, int end, const void *scratch)
{
    const i8_job *j = arg;
    for (int it = begin; it < end; it++) {
        int g, first, last;
        item_rows(j, it, &first, &last, &g);
        const int32_t *tile = (const int32_t *)scratch + (size_t)(it - begin) * ITEM_SCRATCH;
        int ncols = TRAM_MIN(G, j->w->rows - g * G);
        int32_t *out = item_out(j, it);
        for (int i = first; i < last; i++)
            memcpy(out + (size_t)(i - first) * j->w->rows, tile + (size_t)(i - first) * G, ncols * sizeof(int32_t));
    }
}

/* Items one at a time on the pool.  Up to one chunk of token rows (decode,
 * small batches: steps short enough that one descheduled thread would
 * double them) the job is stealable, so a thread holding an item does not
 * hold the product; a prefill writes in place, sparing the copy. */
static void run(i8_job *j, tram_cpu_pool *pool)
{
    int items = j->w->groups * j->chunks;
    int max_chunk = (items + TRAM_POOL_MAX_CHUNKS - 1) / TRAM_POOL_MAX_CHUNKS;
    if (j->chunks == 1 && (size_t)max_chunk * ITEM_SCRATCH * sizeof(int32_t) <= TRAM_POOL_SCRATCH_BYTES) {
        tram_pool_stealable s = {.compute = items_compute, .commit = items_commit, .job = j,
                                 .job_bytes = sizeof(*j)};
        tram_cpu_pool_run_stealable(pool, items, 1, &s);
        return;
    }
    tram_cpu_pool_run(pool, items, 1, items_in_place, j);
}

void tram_i8_gemm_f32(tram_cpu_kernel k, float *y, const int8_t *xq, const float *x_scales, int n,
                      const tram_i8_matrix *w, const float *w_scales, tram_cpu_pool *pool)
{
    i8_job j = {.kd = describe(k), .out = y, .x_scales = x_scales, .w_scales = w_scales, .xq = xq, .w = w,
                .n = n, .chunks = (n + CHUNK - 1) / CHUNK};
    run(&j, pool);
}

void tram_i8_gemm_i32(tram_cpu_kernel k, int32_t *acc, const int8_t *xq, int n, const tram_i8_matrix *w,
                      tram_cpu_pool *pool)
{
    i8_job j = {.kd = describe(k), .out = acc, .xq = xq, .w = w, .n = n, .chunks = (n + CHUNK - 1) / CHUNK};
    run(&j, pool);
}

/* ---------------------------------------------------------------- backend ops */

/* Int8 weights: each row quantized symmetric and packed for the kernels;
 * data holds the packed tram_i8_matrix. */
void cpu_int8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    if (cols > TRAM_I8_MAX_COLS) {
        cpu_fail(be, "int8 weights wider than 65536 columns could overflow int32 sums");
        return;
    }
    w->data = cpu_alloc(be, tram_i8_matrix_bytes(rows, cols));
    w->scales = w->data ? cpu_alloc(be, rows * sizeof(float)) : NULL;
    if (!w->scales)
        return;
    tram_i8_matrix_pack(w->data, host, rows, cols, w->scales);
    w->type = TRAM_W_INT8;
    w->rows = rows;
    w->cols = cols;
}

/* The W8A8 product of a dense or a 2:4 sparse int8 weight (sparse24_int8.h). */
static void matmul_qact(tram_backend *be, float *y, const tram_qact *qa, const tram_weight *w, int n)
{
    cpu_state *s = cpu_of(be);
    if (w->type == TRAM_W_S24_INT8) {
        tram_s24i8_gemm(s->s24i8_kernel, s->pool, y, qa->q, qa->scales, w, n);
        return;
    }
    tram_i8_gemm_f32(s->i8_kernel, y, qa->q, qa->scales, n, w->data, w->scales, s->pool);
}

typedef struct {
    const tram_qact *qa;
    const float *x;
} qact_job;

static void qact_rows(void *arg, int begin, int end)
{
    const qact_job *q = arg;
    for (int i = begin; i < end; i++)
        qact_row(q->qa, i, q->x + (size_t)i * q->qa->cols);
}

/* W8A8 on an input that no op quantized for us (the attention output, the
 * lm_head's rows): each token row is quantized here first, one more pass over
 * n*cols floats against rows*cols weight bytes for the product itself.  Only
 * the first passes of a new largest batch grow the scratch. */
void cpu_int8_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    cpu_state *s = cpu_of(be);
    int kp = tram_qact_stride(w->cols);
    if (cpu_reserve(be, (void **)&s->xq, &s->xq_cap, (size_t)n * kp) ||
        cpu_reserve(be, (void **)&s->xs, &s->xs_cap, (size_t)n * sizeof(float)))
        return;
    tram_qact qa = {.q = s->xq, .scales = s->xs, .cols = w->cols, .kp = kp};
    qact_job q = {.qa = &qa, .x = x};
    cpu_rows(be, n, qact_rows, &q);
    matmul_qact(be, y, &qa, w, n);
}

void cpu_matmul_q(tram_backend *be, void *y, const tram_qact *qa, const tram_weight *w, int n)
{
    if (!tram_wtype_takes_qact(w->type)) {
        cpu_fail(be, "matmul_q: the weight must be int8 (dense or 2:4 sparse)");
        return;
    }
    if (!qact_check(be, qa, w->cols))
        matmul_qact(be, y, qa, w, n);
}
