/* gemm.cu — y[n, rows] = x[n, cols] · Wᵀ through cuBLASLt, bf16 operands,
 * f32 accumulation.  Column-major cuBLASLt sees the row-major W [rows][cols]
 * as a cols × rows matrix, so Yᵀ = op_T(W) · X with m = rows, n = tokens,
 * k = cols (the TN layout).  The heuristic picks an algorithm once per shape
 * and pointer alignment; the plan (layouts + algorithm) is cached in an
 * open-addressed table, one workspace serves every call.  This is variant 1
 * of the gemm family; with variant 2 a plan is timed once among the
 * heuristic's candidates and a GEMV (gemm_v2.cu) when first built. */
#include <stdlib.h>

#include "kernels/cuda/cuda_impl.cuh"

#define PROBES 8

int cuda_gemm_init(cuda_state *c)
{
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    c->plans = (cuda_gemm_plan *)calloc(CUDA_GEMM_PLANS, sizeof(cuda_gemm_plan));
    if (!c->plans)
        return tram_fail(&c->st.err, "cuda backend: out of host memory for GEMM plans");
    if (CUBLAS_CHECK(&c->st, cublasLtCreate(&c->lt)) ||
        CUBLAS_CHECK(&c->st, cublasLtMatmulDescCreate(&c->gemm_op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
        CUBLAS_CHECK(&c->st, cublasLtMatmulDescSetAttribute(c->gemm_op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta))) ||
        CUBLAS_CHECK(&c->st, cublasLtMatmulDescSetAttribute(c->gemm_op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb))) ||
        CUDA_CHECK(&c->st, cudaMalloc(&c->workspace, CUDA_GEMM_WORKSPACE)))
        return -1;
    return 0;
}

void cuda_gemm_destroy(cuda_state *c)
{
    for (int i = 0; c->plans && i < CUDA_GEMM_PLANS; i++)
        cuda_gemm_plan_clear(&c->plans[i]);
    free(c->plans);
    c->plans = NULL;
    if (c->gemm_op)
        cublasLtMatmulDescDestroy(c->gemm_op);
    if (c->lt)
        cublasLtDestroy(c->lt);
    cudaFree(c->workspace);
    cudaFree(c->gemv_partial);
}

/* Largest power of two (<= 256, what the heuristic assumes by default) that
 * divides every address: an algorithm chosen for it works on these buffers. */
static int alignment_of(const void *a, const void *b, const void *y)
{
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)y | 256;
    return (int)(bits & (~bits + 1));
}

/* The shapes variant 2 times: decode's (a CUDA graph bucket's padded batch
 * is a power of two) and the GEMV's few rows; prefill's many sizes keep the
 * heuristic's first choice. */
static int tuned_shape(int n) { return n <= TRAM_CUDA_GEMV_MAX_N || (n & (n - 1)) == 0; }

static int plan_build(cuda_state *c, cuda_gemm_plan *p, int m, int n, int k, int align, const void *w, const void *x,
                      void *y)
{
    uint32_t al = (uint32_t)align;
    uint64_t ws = CUDA_GEMM_WORKSPACE;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res[CUDA_GEMM_CANDIDATES];
    int found = 0, variant = cuda_variant(c, TRAM_KERNEL_GEMM);
    int want = variant == 2 && tuned_shape(n) ? CUDA_GEMM_CANDIDATES : 1;
    p->m = m, p->n = n, p->k = k, p->align = align, p->variant = variant;
    int rc = CUBLAS_CHECK(&c->st, cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, k, m, k)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, k, n, k)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, m, n, m)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceCreate(&pref)) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof(al))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof(al))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof(al))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof(al))) ||
             CUBLAS_CHECK(&c->st, cublasLtMatmulAlgoGetHeuristic(c->lt, c->gemm_op, p->a, p->b, p->c, p->c, pref, want, res, &found));
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (!rc && !found)
        rc = tram_cuda_record(&c->st, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "no algorithm for this shape");
    if (rc) {
        cuda_gemm_plan_clear(p);
        return -1;
    }
    p->algo = res[0].algo;
    if (want > 1 && cuda_gemm_tune(c, p, res, found, w, x, y)) {
        cuda_gemm_plan_clear(p);
        return -1;
    }
    return 0;
}

/* The cached plan for (m, n, k, align) under the current gemm variant; a
 * miss builds it (on the call's buffers: variant 2 times candidates on
 * them) in a free probe slot, or evicts the home slot when all probes are
 * taken. */
static cuda_gemm_plan *plan_for(cuda_state *c, int m, int n, int k, const void *w, const void *x, void *y)
{
    int align = alignment_of(w, x, y), variant = cuda_variant(c, TRAM_KERNEL_GEMM);
    uint32_t h = ((uint32_t)m * 73856093u) ^ ((uint32_t)n * 19349663u) ^ ((uint32_t)k * 83492791u) ^ (uint32_t)align;
    cuda_gemm_plan *free_slot = NULL;
    for (int i = 0; i < PROBES; i++) {
        cuda_gemm_plan *p = &c->plans[(h + i) % CUDA_GEMM_PLANS];
        if (p->align == align && p->m == m && p->n == n && p->k == k && p->variant == variant)
            return p;
        if (!p->m && !free_slot)
            free_slot = p;
    }
    cuda_gemm_plan *p = free_slot ? free_slot : &c->plans[h % CUDA_GEMM_PLANS];
    cuda_gemm_plan_clear(p);
    return plan_build(c, p, m, n, k, align, w, x, y) ? NULL : p;
}

void cuda_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    if (w->type == TRAM_W_INT8 || w->type == TRAM_W_FP8 || w->type == TRAM_W_S24_INT8) {
        tram_cuda_int8_matmul(be, y, x, w, n);
        return;
    }
    if (w->type == TRAM_W_S24) {
        cuda_sparse24_matmul(be, y, x, w, n);
        return;
    }
    if (w->type != TRAM_W_BF16) {
        cuda_fail(be, "matmul: weight %dx%d has type %d, only bf16, int8, FP8 and 2:4 bf16 or int8 run on CUDA",
                  w->rows, w->cols, w->type);
        return;
    }
    cuda_gemm_plan *p = plan_for(c, w->rows, n, w->cols, w->data, x, y);
    if (!p)
        return;
    if (p->gemv_splits) {
        cuda_gemv(c, p, y, x, w->data);
        return;
    }
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(&c->st, cublasLtMatmul(c->lt, c->gemm_op, &one, w->data, p->a, x, p->b, &zero, y, p->c, y, p->c,
                                        &p->algo, c->workspace, CUDA_GEMM_WORKSPACE, c->stream));
}
