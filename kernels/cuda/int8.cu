/* int8.cu — W8A8 matrix products on CUDA (kernels/cuda/cuda_int8.h), int8
 * and FP8 (E4M3).
 *
 * A product runs in three launches: the activations are quantized per token
 * row (bf16 → int8 + one f32 scale; matmul_q skips this, its input was
 * quantized by the op that produced it, see tram_qact), cuBLASLt multiplies int8 × int8 into
 * int32, and an epilogue kernel writes y = acc · x_scale[token] · w_scale[row]
 * as bf16.  cuBLASLt's int8 path on Hopper takes only the TN layout with m, k
 * and the leading dimensions multiples of 4 and 16-byte aligned pointers, so
 * weights are stored padded to [mp][kp] (rows and columns rounded up to 4,
 * zeros after), activations quantized into a [n][kp] scratch and the int32
 * sums land in a [n][mp] scratch: both scratch buffers are cudaMalloc'ed
 * (256-byte aligned) and grow only.  Column-major cuBLASLt then sees
 * Yᵀ[mp, n] = op_T(W)[mp, kp] · Xᵀ[kp, n] with A = W (ld kp), B = X (ld kp),
 * C = Y (ld mp).  The algorithm is chosen once per (m, n, k) and cached.
 *
 * FP8 runs the same three launches with E4M3 codes (scale max|x| / 448, the
 * KV cache's rounding: kernels/kv_format.h) and f32 sums: cuBLASLt's FP8
 * kernels on sm_90 take E4M3 A and B in the TN layout with f32 compute and
 * scale type, C and D f32 (no A/B scale pointers: the per-row and per-token
 * scales are the epilogue's), m, k and the leading dimensions multiples of
 * 16; so FP8 weights and activations are padded to 16.
 *
 * A 2:4 int8 weight (TRAM_W_S24_INT8, compressed by sparse24.cu) runs the
 * same three launches with cuSPARSELt's int32 sums in the middle one: the
 * same quantized activations, the same epilogue, so the same bits. */
#include <stdlib.h>
#include <string.h>

#include <cuda_fp8.h>

#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/cuda_int8.h"
#include "kernels/cuda/quant_row.cuh"
#include "kernels/fp8_format.h"
#include "kernels/int8_format.h"

#define ROW_THREADS 256
#define INT8_PLANS 64

/* The two formats: their cuBLASLt types and the padding their kernels need. */
typedef enum { FMT_INT8 = 0, FMT_FP8 = 1, FMTS = 2 } lowp_format;

struct cuda_int8 {
    cublasLtMatmulDesc_t op[FMTS];  /* Wᵀ·X: int8 → int32 sums; E4M3 → f32 sums */
    cuda_gemm_plan plans[FMTS][INT8_PLANS];
    int next_evict[FMTS];           /* round robin once every slot is taken */
    void *xq, *x_scales, *acc;      /* scratch, grow-only (codes, f32, 4-byte sums) */
    size_t xq_bytes, x_scales_bytes, acc_bytes;
};

static int round4(int x) { return (x + 3) & ~3; }
static int round16(int x) { return (x + 15) & ~15; }
static int padded(lowp_format f, int x) { return f == FMT_INT8 ? round4(x) : round16(x); }
static lowp_format format_of(const tram_weight *w) { return w->type == TRAM_W_FP8 ? FMT_FP8 : FMT_INT8; }

/* ---------------------------------------------------------------- state and plans */

static cuda_int8 *int8_state(tram_backend *be)
{
    cuda_state *c = cuda_of(be);
    if (c->int8)
        return c->int8;
    cuda_int8 *s = (cuda_int8 *)calloc(1, sizeof(*s));
    if (!s) {
        cuda_fail(be, "int8: out of host memory");
        return NULL;
    }
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    static const cublasComputeType_t compute[FMTS] = {CUBLAS_COMPUTE_32I, CUBLAS_COMPUTE_32F};
    static const cudaDataType_t scale[FMTS] = {CUDA_R_32I, CUDA_R_32F};
    int rc = 0;
    for (int f = 0; f < FMTS && !rc; f++)
        rc = CUBLAS_CHECK(&c->st, cublasLtMatmulDescCreate(&s->op[f], compute[f], scale[f])) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulDescSetAttribute(s->op[f], CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                                 sizeof(ta))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulDescSetAttribute(s->op[f], CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                                 sizeof(tb)));
    if (rc) {
        for (int f = 0; f < FMTS; f++)
            if (s->op[f])
                cublasLtMatmulDescDestroy(s->op[f]);
        free(s);
        return NULL;
    }
    return c->int8 = s;
}

extern "C" void tram_cuda_int8_destroy(tram_backend *be)
{
    cuda_state *c = cuda_of(be);
    cuda_int8 *s = c->int8;
    if (!s)
        return;
    for (int f = 0; f < FMTS; f++) {
        for (int i = 0; i < INT8_PLANS; i++)
            cuda_gemm_plan_clear(&s->plans[f][i]);
        cublasLtMatmulDescDestroy(s->op[f]);
    }
    cudaFree(s->xq);
    cudaFree(s->x_scales);
    cudaFree(s->acc);
    free(s);
    c->int8 = NULL;
}

static int plan_build(cuda_state *c, cuda_int8 *s, lowp_format f, cuda_gemm_plan *p, int m, int n, int k)
{
    static const cudaDataType_t in[FMTS] = {CUDA_R_8I, CUDA_R_8F_E4M3}, out[FMTS] = {CUDA_R_32I, CUDA_R_32F};
    uint64_t ws = CUDA_GEMM_WORKSPACE;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    p->m = m, p->n = n, p->k = k;
    int rc = CUBLAS_CHECK(&c->st, cublasLtMatrixLayoutCreate(&p->a, in[f], k, m, k)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatrixLayoutCreate(&p->b, in[f], k, n, k)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatrixLayoutCreate(&p->c, out[f], m, n, m)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceCreate(&pref)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceSetAttribute(
                                      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulAlgoGetHeuristic(c->lt, s->op[f], p->a, p->b, p->c, p->c, pref, 1,
                                                                 &res, &found));
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (!rc && !found)
        rc = tram_cuda_record(&c->st, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic",
                              f == FMT_INT8 ? "no int8 algorithm for this shape" : "no FP8 algorithm for this shape");
    if (rc) {
        cuda_gemm_plan_clear(p);
        return -1;
    }
    p->algo = res.algo;
    return 0;
}

/* Few distinct shapes occur (a model's matrices × batch sizes): a short
 * list searched in order is enough. */
static cuda_gemm_plan *plan_for(cuda_state *c, cuda_int8 *s, lowp_format f, int m, int n, int k)
{
    cuda_gemm_plan *free_slot = NULL;
    for (int i = 0; i < INT8_PLANS; i++) {
        cuda_gemm_plan *p = &s->plans[f][i];
        if (p->m == m && p->n == n && p->k == k)
            return p;
        if (!p->m && !free_slot)
            free_slot = p;
    }
    cuda_gemm_plan *p = free_slot ? free_slot : &s->plans[f][s->next_evict[f]++ % INT8_PLANS];
    cuda_gemm_plan_clear(p);
    return plan_build(c, s, f, p, m, n, k) ? NULL : p;
}

/* ---------------------------------------------------------------- kernels */

/* One block per token row (quant_row.cuh). */
static __global__ void kernel_quantize_rows(int8_t *q, float *scales, const bf16 *x, int cols, int kp)
{
    const bf16 *xr = x + (size_t)blockIdx.x * cols;
    float amax = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        amax = fmaxf(amax, fabsf(__bfloat162float(xr[j])));
    quantize_row(q + (size_t)blockIdx.x * kp, scales + blockIdx.x, xr, cols, kp, amax);
}

/* One block per token row: E4M3 codes of x / (max|x| / 448), zeros after
 * cols, as tram_kv_quantize_slot rounds (CUDA's saturating conversion). */
static __global__ void kernel_quantize_rows_fp8(uint8_t *q, float *scales, const bf16 *x, int cols, int kp,
                                                float act_max)
{
    const bf16 *xr = x + (size_t)blockIdx.x * cols;
    float amax = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        amax = fmaxf(amax, fabsf(__bfloat162float(xr[j])));
    amax = block_max(amax);
    if (act_max > 0.0f) /* fp8_format.h: FBGEMM's activation_scale_ub */
        amax = fminf(amax, act_max);
    float inv = amax > 0.0f ? TRAM_FP8_MAX / amax : 0.0f;
    for (int j = threadIdx.x; j < kp; j += blockDim.x)
        q[(size_t)blockIdx.x * kp + j] =
            j < cols ? (uint8_t)__nv_cvt_float_to_fp8(__bfloat162float(xr[j]) * inv, __NV_SATFINITE, __NV_E4M3) : 0;
    if (threadIdx.x == 0)
        scales[blockIdx.x] = amax / TRAM_FP8_MAX;
}

/* y[i][r] = acc[i][r] · x_scale[i] · w_scale[r], in the CPU epilogue's order
 * (int32 sums of int8 products, f32 sums of E4M3 ones). */
template <typename ACC>
static __global__ void kernel_dequant(bf16 *y, const ACC *acc, const float *x_scales, const float *w_scales,
                                      int n, int rows, int ld)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)n * rows)
        return;
    int t = (int)(i / rows), r = (int)(i % rows);
    y[i] = __float2bfloat16((float)acc[(size_t)t * ld + r] * x_scales[t] * w_scales[r]);
}

static __global__ void kernel_embed_int8(bf16 *x, const int8_t *table, const float *scales, const int32_t *ids,
                                         int vocab, int dim, int kp)
{
    int t = blockIdx.x, id = ids[t];
    int valid = id >= 0 && id < vocab;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        x[(size_t)t * dim + j] = __float2bfloat16(valid ? table[(size_t)id * kp + j] * scales[id] : 0.0f);
}

/* ---------------------------------------------------------------- upload */

/* w from host codes q[mp][kp] (padded, zeros after each row) and scales[rows]. */
static void upload_padded(tram_backend *be, tram_weight *w, const uint8_t *q, const float *scales, int rows,
                          int cols, lowp_format f)
{
    cuda_state *c = cuda_of(be);
    size_t bytes = (size_t)padded(f, rows) * padded(f, cols);
    w->data = be->alloc(be, bytes);
    w->scales = w->data ? (float *)be->alloc(be, (size_t)rows * sizeof(float)) : NULL;
    if (!w->scales)
        return;
    w->type = f == FMT_INT8 ? TRAM_W_INT8 : TRAM_W_FP8, w->rows = rows, w->cols = cols;
    be->upload(be, w->data, q, bytes);
    be->upload(be, w->scales, scales, (size_t)rows * sizeof(float));
    CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream));  /* before the host copies go */
}

/* Host buffers for a weight's padded codes and its scales; 0 when allocated. */
static int host_buffers(tram_backend *be, int rows, int cols, lowp_format f, uint8_t **q, float **scales)
{
    *q = (uint8_t *)calloc((size_t)padded(f, rows) * padded(f, cols), 1);
    *scales = (float *)malloc((size_t)rows * sizeof(float));
    if (*q && *scales)
        return 0;
    cuda_fail(be, "%s weight %dx%d: out of host memory", f == FMT_INT8 ? "int8" : "FP8", rows, cols);
    return -1;
}

/* w from host f32 rows, quantized per row on the host in format f. */
static void upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols, lowp_format f)
{
    memset(w, 0, sizeof(*w));
    if (!int8_state(be))
        return;
    if (f == FMT_INT8 && cols > TRAM_I8_MAX_COLS) {
        cuda_fail(be, "int8 weight %dx%d: more than %d columns could overflow int32 sums", rows, cols,
                  TRAM_I8_MAX_COLS);
        return;
    }
    int kp = padded(f, cols);
    uint8_t *q = NULL;
    float *scales = NULL;
    if (!host_buffers(be, rows, cols, f, &q, &scales)) {
        for (int r = 0; r < rows; r++) {
            const float *x = host + (size_t)r * cols;
            uint8_t *qr = q + (size_t)r * kp;
            scales[r] = f == FMT_INT8 ? tram_i8_quantize(x, cols, kp, (int8_t *)qr)
                                      : tram_fp8_quantize_row(x, cols, kp, qr);
        }
        upload_padded(be, w, q, scales, rows, cols, f);
    }
    free(q);
    free(scales);
}

extern "C" void tram_cuda_fp8_upload_codes(tram_backend *be, tram_weight *w, const uint8_t *codes,
                                           const float *scales, int rows, int cols)
{
    memset(w, 0, sizeof(*w));
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (tram_fp8_is_nan(codes[i])) {
            cuda_fail(be, "FP8 weight %dx%d holds a NaN code", rows, cols);
            return;
        }
    int kp = padded(FMT_FP8, cols);
    uint8_t *q = NULL;
    float *s = NULL;
    if (int8_state(be) && !host_buffers(be, rows, cols, FMT_FP8, &q, &s)) {
        for (int r = 0; r < rows; r++)
            memcpy(q + (size_t)r * kp, codes + (size_t)r * cols, cols);
        memcpy(s, scales, (size_t)rows * sizeof(float));
        upload_padded(be, w, q, s, rows, cols, FMT_FP8);
    }
    free(q);
    free(s);
}

extern "C" void tram_cuda_int8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    upload(be, w, host, rows, cols, FMT_INT8);
}

extern "C" void tram_cuda_fp8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    upload(be, w, host, rows, cols, FMT_FP8);
}

/* ---------------------------------------------------------------- products */

/* acc[n][mp] = xq[n][kp] · Wᵀ into s->acc: int32 sums of an int8 w (2:4
 * ones through cuSPARSELt, whose shapes are multiples of 32, so mp = rows
 * and kp = cols), f32 sums of an FP8 one (alpha and beta in the op's scale
 * type). */
static int gemm_acc(tram_backend *be, cuda_int8 *s, const void *xq, const tram_weight *w, int n)
{
    cuda_state *c = cuda_of(be);
    lowp_format f = format_of(w);
    int mp = padded(f, w->rows), kp = padded(f, w->cols);
    if (cuda_reserve(c, &s->acc, &s->acc_bytes, (size_t)n * mp * sizeof(int32_t)))
        return -1;
    if (w->type == TRAM_W_S24_INT8) {
        cuda_sparse24_matmul(be, s->acc, xq, w, n);
        return c->st.failed ? -1 : 0;
    }
    cuda_gemm_plan *p = plan_for(c, s, f, mp, n, kp);
    if (!p)
        return -1;
    const int32_t one = 1, zero = 0;
    const float onef = 1.0f, zerof = 0.0f;
    const void *alpha = f == FMT_INT8 ? (const void *)&one : (const void *)&onef;
    const void *beta = f == FMT_INT8 ? (const void *)&zero : (const void *)&zerof;
    return CUBLAS_CHECK(&c->st, cublasLtMatmul(c->lt, s->op[f], alpha, w->data, p->a, xq, p->b, beta, s->acc, p->c,
                                               s->acc, p->c, &p->algo, c->workspace, CUDA_GEMM_WORKSPACE,
                                               c->stream));
}

/* Quantizes bf16 rows x[n][cols] into s->xq and s->x_scales, in format f
 * (FP8: each row's max|x| clamped to act_max when positive). */
static int quantize_rows(tram_backend *be, cuda_int8 *s, lowp_format f, const void *x, int n, int cols,
                         float act_max)
{
    cuda_state *c = cuda_of(be);
    int kp = padded(f, cols);
    if (cuda_reserve(c, &s->xq, &s->xq_bytes, (size_t)n * kp) ||
        cuda_reserve(c, &s->x_scales, &s->x_scales_bytes, (size_t)n * sizeof(float)))
        return -1;
    if (f == FMT_FP8)
        kernel_quantize_rows_fp8<<<n, ROW_THREADS, 0, c->stream>>>((uint8_t *)s->xq, (float *)s->x_scales,
                                                                    (const bf16 *)x, cols, kp, act_max);
    else
        kernel_quantize_rows<<<n, ROW_THREADS, 0, c->stream>>>((int8_t *)s->xq, (float *)s->x_scales,
                                                                (const bf16 *)x, cols, kp);
    return LAUNCH_CHECK(&c->st, "kernel_quantize_rows");
}

/* y (bf16) = dequant(xq · Wᵀ): the GEMM, then the epilogue. */
static void product(tram_backend *be, cuda_int8 *s, void *y, const void *xq, const float *x_scales,
                    const tram_weight *w, int n)
{
    cuda_state *c = cuda_of(be);
    if (gemm_acc(be, s, xq, w, n))
        return;
    int64_t total = (int64_t)n * w->rows;
    int ld = padded(format_of(w), w->rows), blocks = tram_cuda_grid_1d(total, 256);
    if (format_of(w) == FMT_FP8)
        kernel_dequant<float><<<blocks, 256, 0, c->stream>>>((bf16 *)y, (const float *)s->acc, x_scales, w->scales,
                                                               n, w->rows, ld);
    else
        kernel_dequant<int32_t><<<blocks, 256, 0, c->stream>>>((bf16 *)y, (const int32_t *)s->acc, x_scales,
                                                                 w->scales, n, w->rows, ld);
    LAUNCH_CHECK(&c->st, "kernel_dequant");
}

/* An int8 or FP8 w: the activations quantized in its format first. */
extern "C" void tram_cuda_int8_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n)
{
    cuda_int8 *s = int8_state(be);
    if (n <= 0 || !s || quantize_rows(be, s, format_of(w), x, n, w->cols, w->act_max))
        return;
    product(be, s, y, s->xq, (const float *)s->x_scales, w, n);
}

extern "C" void tram_cuda_int8_matmul_q(tram_backend *be, void *y, const tram_qact *qa, const tram_weight *w, int n)
{
    if (!tram_wtype_takes_qact(w->type) || qa->cols != w->cols || qa->kp != round4(w->cols)) {
        cuda_fail(be, "matmul_q: needs an int8 weight and activations quantized at its width %d (got %d)",
                  w->cols, qa->cols);
        return;
    }
    cuda_int8 *s = int8_state(be);
    if (n > 0 && s)
        product(be, s, y, qa->q, qa->scales, w, n);
}

extern "C" void tram_cuda_int8_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    kernel_embed_int8<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)x, (const int8_t *)table->data, table->scales, ids,
                                                         table->rows, table->cols, round4(table->cols));
    LAUNCH_CHECK(&c->st, "kernel_embed_int8");
}

/* ---------------------------------------------------------------- test entry points */

extern "C" int tram_cuda_int8_products(tram_backend *be, int32_t *acc, const int8_t *xq, int n,
                                       const tram_weight *w, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cuda_int8 *s = int8_state(be);
    int mp = round4(w->rows), kp = round4(w->cols);
    int32_t *all = (int32_t *)malloc((size_t)n * mp * sizeof(int32_t));
    int8_t *padded = (int8_t *)calloc((size_t)n * kp, 1);
    if (!all || !padded)
        cuda_fail(be, "int8 products: out of host memory");
    else if (s && !cuda_reserve(c, &s->xq, &s->xq_bytes, (size_t)n * kp)) {
        for (int i = 0; i < n; i++)
            memcpy(padded + (size_t)i * kp, xq + (size_t)i * w->cols, w->cols);
        be->upload(be, s->xq, padded, (size_t)n * kp);
        if (!gemm_acc(be, s, s->xq, w, n))
            be->download(be, all, s->acc, (size_t)n * mp * sizeof(int32_t));
    }
    int rc = be->sync(be, err);
    for (int i = 0; !rc && i < n; i++)
        memcpy(acc + (size_t)i * w->rows, all + (size_t)i * mp, w->rows * sizeof(int32_t));
    free(all);
    free(padded);
    return rc;
}

extern "C" int tram_cuda_int8_quantize(tram_backend *be, int8_t *q, float *scales, const void *x, int n, int cols,
                                       tram_error *err)
{
    cuda_int8 *s = int8_state(be);
    int kp = round4(cols);
    int8_t *all = (int8_t *)malloc((size_t)n * kp);
    if (!all)
        cuda_fail(be, "int8 quantize: out of host memory");
    else if (s && !quantize_rows(be, s, FMT_INT8, x, n, cols, 0.0f)) {
        be->download(be, all, s->xq, (size_t)n * kp);
        be->download(be, scales, s->x_scales, (size_t)n * sizeof(float));
    }
    int rc = be->sync(be, err);
    for (int i = 0; !rc && i < n; i++)
        memcpy(q + (size_t)i * cols, all + (size_t)i * kp, cols);
    free(all);
    return rc;
}
