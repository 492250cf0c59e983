/* gemm.c — y[n, rows] = x[n, cols] · Wᵀ on the CPU: f32 weights here
 * (gemv_rows, or OpenBLAS's sgemm beyond 12 rows), int8 weights in int8.c,
 * FP8 in fp8.c, GGUF block weights in gemm_blocks.c (kernels/cuda/gemm.cu
 * is the CUDA counterpart). */
#include <cblas.h>

#include "kernels/cpu/cpu_impl.h"

/* Token rows up to which matmul streams W once through gemv_rows instead of
 * handing it to sgemm (see sgemm_rows): one thread, 8192 x 1152 weights,
 * gemv_rows stays ahead of single-threaded sgemm up to 11-12 rows (a
 * verification of k = 8 drafts is 9). */
#define GEMV_MAX_ROWS 12

/* Eight floats, loaded from any float address (GCC's generic vectors: SIMD
 * where the target has it, plain code elsewhere). */
typedef float v8f __attribute__((vector_size(32), aligned(4)));

/* How far ahead of the eight weights being multiplied gemv_row asks for W's
 * lines, and into the L2 (hint 2, _MM_HINT_T1), not the L1.  Without it
 * the rows' multiply-adds and W's stream did not overlap: on the AMD EPYC, two
 * threads, 3072 x 576 from memory took 0.52-0.60 ms at 8 rows where 1 row
 * took 0.22 and 8 rows in cache 0.18; 4 KiB ahead into the L2 brought 8
 * rows to 0.25-0.27 (the 113 MB lm_head: 8.4 to 4.3 ms, 1 row 3.6).  Into
 * the L1 instead (hint 3) it got 0.39-0.42: the lines then evict the token
 * rows, which every weight is multiplied with. */
#define GEMV_PREFETCH_FLOATS 1024

/* y[:, r] = x · W[r]ᵀ for n <= GEMV_MAX_ROWS token rows, reading the row of
 * W once for all n: a verification of speculative drafts (a few rows) then
 * costs about what one row does, where n sgemv calls would read W n times
 * and sgemm would pack it first.  Each output is summed in the same order
 * whatever n is, so a row's result does not depend on its batch.  Inlined
 * with a constant n (gemv_rows), so that the accumulators stay in
 * registers: with n known only at run time they live on the stack, and
 * every step of the sum waits for a store. */
static inline __attribute__((always_inline)) void gemv_row(float *y, const float *x, const float *wr, int n,
                                                           int rows, int cols, int r)
{
    int vec = cols / 8 * 8;
    v8f acc[GEMV_MAX_ROWS] = {{0}};
    for (int c = 0; c < vec; c += 8) {
        v8f wv = *(const v8f *)(wr + c);
        if (c % 16 == 0)
            __builtin_prefetch(wr + c + GEMV_PREFETCH_FLOATS, 0, 2);
#pragma GCC unroll 12
        for (int i = 0; i < n; i++)
            acc[i] += wv * *(const v8f *)(x + (size_t)i * cols + c);
    }
    for (int i = 0; i < n; i++) {
        float sum = 0;
        for (int l = 0; l < 8; l++)
            sum += acc[i][l];
        for (int c = vec; c < cols; c++)
            sum += wr[c] * x[(size_t)i * cols + c];
        y[(size_t)i * rows + r] = sum;
    }
}

/* One loop over W's rows r0..r1 for each n in 1..GEMV_MAX_ROWS. */
#define GEMV_CASE(N)                                                                                   \
    case N:                                                                                            \
        for (int r = r0; r < r1; r++)                                                                  \
            gemv_row(y, x, w + (size_t)r * cols, N, rows, cols, r);                                   \
        return;

static void gemv_rows(float *y, const float *x, const float *w, int n, int rows, int cols, int r0, int r1)
{
    switch (n) {
        GEMV_CASE(1) GEMV_CASE(2) GEMV_CASE(3) GEMV_CASE(4) GEMV_CASE(5) GEMV_CASE(6) GEMV_CASE(7) GEMV_CASE(8)
        GEMV_CASE(9) GEMV_CASE(10) GEMV_CASE(11) GEMV_CASE(12)
    }
}

/* y[:, r0:r1] = x · W[r0:r1]ᵀ, single-threaded.  Up to GEMV_MAX_ROWS rows
 * go through gemv_rows (for those sgemm spends more time packing W than
 * multiplying), more through OpenBLAS's sgemm.  One row too: a decode
 * row's bits are then the same alone as beside a verification's drafts,
 * and prefetched it beat sgemv (f32 batch-1 step 23.6-27.0 -> 19.8-21.8
 * ms, AMD EPYC, 2 threads). */
static void sgemm_rows(float *y, const float *x, const float *w, int n, int rows, int cols, int r0, int r1)
{
    if (n <= GEMV_MAX_ROWS) {
        gemv_rows(y, x, w, n, rows, cols, r0, r1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, r1 - r0, cols, 1.0f, x, cols,
                w + (size_t)r0 * cols, cols, 0.0f, y + r0, rows);
}

typedef struct {
    float *y;
    const float *x;
    const tram_weight *w;
    int n;
} sgemm_job;

static void sgemm_chunk(void *arg, int r0, int r1)
{
    const sgemm_job *j = arg;
    sgemm_rows(j->y, j->x, j->w->data, j->n, j->w->rows, j->w->cols, r0, r1);
}

/* Rows of W per chunk: 16-row multiples keep each chunk's rows cache-line
 * aligned; a GEMV chunk covers about 64 KiB of weights (cheap to claim, many
 * for a late thread's share to be taken over), a GEMM chunk a quarter of a
 * thread's share (each sgemm call packs x again). */
static int sgemm_chunk_rows(tram_backend *be, const tram_weight *w, int n)
{
    int rows = n <= GEMV_MAX_ROWS ? 65536 / (int)(w->cols * sizeof(float))
                                  : w->rows / (4 * tram_cpu_pool_threads(cpu_of(be)->pool));
    return TRAM_MAX(16, (rows + 15) / 16 * 16);
}

/* y[n, rows] = x[n, cols] · Wᵀ.  The output columns are split into chunks
 * that the backend's pool (pool.h) hands out, and OpenBLAS runs
 * single-threaded inside each: one pool of threads on the cores, instead of
 * OpenBLAS's pool fighting ours for them.  Each output row is computed by one
 * call over its whole K, so the chunking does not change its bits. */
void cpu_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n)
{
    if (tram_wtype_takes_qact(w->type)) {
        cpu_int8_matmul(be, y, x, w, n);
        return;
    }
    if (w->type == TRAM_W_S24) {
        cpu_s24_matmul(be, y, x, w, n);
        return;
    }
    if (w->type == TRAM_W_FP8) {
        cpu_fp8_matmul(be, y, x, w, n);
        return;
    }
    if (tram_q_block_bytes(w->type)) {
        cpu_blocks_matmul(be, y, x, w, n);
        return;
    }
    if (w->type != TRAM_W_F32) {
        cpu_fail(be, "matmul: unsupported weight type");
        return;
    }
    sgemm_job j = {.y = y, .x = x, .w = w, .n = n};
    tram_cpu_pool_run(cpu_of(be)->pool, w->rows, sgemm_chunk_rows(be, w, n), sgemm_chunk, &j);
}

typedef struct {
    float *y;
    const float *x;
    const tram_weight *w;
    const int32_t *off;
    int per_expert, chunk; /* chunks of `chunk` rows per expert */
} grouped_job;

/* Items are (expert, chunk of its output rows), expert-major. */
static void grouped_chunk(void *arg, int i0, int i1)
{
    const grouped_job *j = arg;
    for (int i = i0; i < i1; i++) {
        int e = i / j->per_expert, r0 = i % j->per_expert * j->chunk, m = j->off[e + 1] - j->off[e];
        const tram_weight *w = &j->w[e];
        if (m)
            sgemm_rows(j->y + (size_t)j->off[e] * w->rows, j->x + (size_t)j->off[e] * w->cols, w->data, m, w->rows,
                       w->cols, r0, TRAM_MIN(r0 + j->chunk, w->rows));
    }
}

/* The experts' products at once (a grouped GEMM): group e is y_e[m_e, rows]
 * = x_e[m_e, cols] · W_eᵀ over rows [off[e], off[e+1]) of x and y.  With f32
 * weights (of one shape, as a projection's experts are) one pool job serves
 * every group, its items slices of every expert's output rows: one job per
 * projection, not one per expert.  Other formats go group by group through
 * cpu_matmul. */
void cpu_matmul_grouped(tram_backend *be, float *y, const float *x, const tram_weight *w, const int32_t *off,
                        int count)
{
    int all_f32 = 1;
    for (int e = 0; e < count; e++)
        all_f32 &= w[e].type == TRAM_W_F32 && w[e].rows == w[0].rows && w[e].cols == w[0].cols;
    if (!all_f32 || count < 1) {
        for (int e = 0; e < count; e++)
            if (off[e + 1] > off[e])
                cpu_matmul(be, y + (size_t)off[e] * w[e].rows, x + (size_t)off[e] * w[e].cols, &w[e],
                           off[e + 1] - off[e]);
        return;
    }
    int chunk = sgemm_chunk_rows(be, &w[0], off[count] / count + 1);
    grouped_job j = {.y = y, .x = x, .w = w, .off = off, .per_expert = (w[0].rows + chunk - 1) / chunk,
                     .chunk = chunk};
    tram_cpu_pool_run(cpu_of(be)->pool, count * j.per_expert, 1, grouped_chunk, &j);
}
