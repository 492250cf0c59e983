/* cuda_impl.cuh — the CUDA backend's private state, shared by its .cu files
 * (backend.cu: the op table, memory and life cycle; ops.cu: element-wise
 * kernels; attention.cu; gemm.cu; int8.cu; sampling.cu; graph.cu; moe.cu;
 * lora.cu; sparse24.cu), as
 * kernels/cpu/cpu_impl.h is the CPU's.  The helpers every file uses are
 * inline here, so that no file calls back into backend.cu. */
#ifndef TRAM_CUDA_IMPL_CUH
#define TRAM_CUDA_IMPL_CUH

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cuda_int8.h"
#include "kernels/cuda/launch_plan.h"

typedef __nv_bfloat16 bf16;

/* One cached GEMM shape (gemm.cu's bf16 products, int8.cu's int8 ones):
 * layouts and the algorithm the heuristic chose. */
typedef struct {
    int m, n, k;  /* m 0: empty slot */
    int align;    /* the pointers' alignment the algorithm was chosen for (bf16) */
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    int variant;      /* the gemm variant the plan was made for (bf16) */
    int gemv_splits;  /* variant 2: > 0 when gemm_v2.cu's GEMV beat cuBLASLt */
} cuda_gemm_plan;

/* Frees a plan's layouts and empties its slot. */
static inline void cuda_gemm_plan_clear(cuda_gemm_plan *p)
{
    if (p->m) {
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
    }
    memset(p, 0, sizeof(*p));
}

#define CUDA_GEMM_PLANS 1024
#define CUDA_GEMM_CANDIDATES 8  /* heuristic results gemm variant 2 times */
#define CUDA_GEMM_WORKSPACE (32u << 20)  /* what cuBLAS recommends for Hopper */

typedef struct cuda_int8 cuda_int8;  /* int8.cu's scratch and plans */
typedef struct cuda_moe cuda_moe;    /* moe.cu's cuBLAS handle and grouped-GEMM arrays */

/* The most experts one rank holds of a layer (moe.cu's fixed arrays). */
#define TRAM_MOE_MAX_EXPERTS 1024
typedef struct cuda_sampler cuda_sampler;
typedef struct cuda_masks cuda_masks;      /* mask.cu's buffers */
typedef struct cuda_sparse24 cuda_sparse24;  /* sparse24.cu's cuSPARSELt handle, plans and padding */

typedef struct {
    int device, num_sms;
    cudaStream_t stream;
    tram_cuda_status st;

    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t gemm_op;   /* bf16 in/out, f32 accumulate, Wᵀ·X */
    void *workspace;
    cuda_gemm_plan *plans;          /* [CUDA_GEMM_PLANS], open addressing */

    float *gemv_partial;            /* gemm_v2.cu's split-K sums, grow-only (at tuning) */
    size_t gemv_partial_bytes;
    float *attn_partial;            /* split-KV scratch, sized once at create */
    int64_t attn_partial_rows;

    float *stage;                   /* f32 staging for to_host_f32, grow-only */
    size_t stage_bytes;
    cuda_sampler *sampler;          /* sampling.cu's buffers; NULL until reserved */
    cuda_masks *masks;              /* mask.cu's buffers; NULL until reserved */

    ncclComm_t comm;                /* NULL when world_size == 1 */
    cudaGraphExec_t graphs[TRAM_CUDA_GRAPH_BUCKETS];
    cuda_int8 *int8;                /* NULL until the first int8 weight */
    tram_kernel_variants variants;  /* variants.cu: each family's kernel variant */
    cuda_moe *moe;                  /* NULL until the first MoE layer */
    cuda_sparse24 *s24;             /* NULL until sparse24_prepare loads cuSPARSELt */
} cuda_state;

static inline cuda_state *cuda_of(tram_backend *be) { return (cuda_state *)be->impl; }

/* The kernel variant family f runs (1 unless tram_cuda_set_kernel_variants chose another). */
static inline int cuda_variant(const cuda_state *c, tram_kernel_family f) { return tram_kernel_variant(&c->variants, f); }

/* Records a failure that is not a CUDA call (bad shape, unsupported type). */
static inline void cuda_fail(tram_backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void cuda_fail(tram_backend *be, const char *fmt, ...)
{
    cuda_state *c = cuda_of(be);
    if (c->st.failed)
        return;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tram_fail(&c->st.err, "cuda backend: %s", msg);
    c->st.failed = 1;
}

/* Destroys the captured graphs; each bucket is captured again when next met. */
void cuda_graphs_drop(cuda_state *c);

/* Grows a device buffer to at least `bytes` (contents are not kept).  A
 * graph may hold the old address, so growing drops every captured graph. */
static inline int cuda_reserve(cuda_state *c, void **buf, size_t *have, size_t bytes)
{
    if (*have >= bytes)
        return 0;
    if (*buf) {
        if (CUDA_CHECK(&c->st, cudaFree(*buf)))
            return -1;
        cuda_graphs_drop(c);  /* their kernels may point at the freed buffer */
    }
    *buf = NULL;
    *have = 0;
    if (CUDA_CHECK(&c->st, cudaMalloc(buf, bytes)))
        return -1;
    *have = bytes;
    return 0;
}

/* ops, installed in the table by tram_backend_cuda_create (ops.cu, then attention.cu and gemm.cu) */
void cuda_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n);
void cuda_rmsnorm(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps);
void cuda_add_rmsnorm(tram_backend *be, void *residual, void *out, const void *delta,
                      const tram_weight *w, int n, float eps);
void cuda_add_bias(tram_backend *be, void *y, const tram_weight *bias, int n);
void cuda_rope(tram_backend *be, void *q, void *k, const int32_t *positions, int n,
               const tram_attn_shape *s, const float *inv_freq, tram_rope_style style);
void cuda_kv_store(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                   const int32_t *slot_mapping, int n, const tram_attn_shape *s);
void cuda_silu_mul(tram_backend *be, void *out, const void *gate_up, int n, int ffn);
void cuda_rmsnorm_q(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w, int n,
                    float eps);
void cuda_add_rmsnorm_q(tram_backend *be, void *residual, void *out, const tram_qact *qa, const void *delta,
                        const tram_weight *w, int n, float eps);
void cuda_silu_mul_q(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn);
void cuda_rope_store(tram_backend *be, void *q, void *k, void *v, void *k_cache, void *v_cache, const void *qkv,
                     const int32_t *positions, const int32_t *slot_mapping, int n, const tram_attn_shape *s,
                     const float *inv_freq, tram_rope_style style);
void cuda_head_rmsnorm(tram_backend *be, void *qkv, const tram_weight *q_norm, const tram_weight *k_norm, int n,
                       const tram_attn_shape *s, float eps);
void cuda_split_qkv(tram_backend *be, void *q, void *k, void *v, const void *qkv, int n, int qd, int kd);
void cuda_gather_rows(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows, int dim);
void cuda_to_host_f32(tram_backend *be, float *dst, const void *src, size_t n);
void cuda_attention(tram_backend *be, void *out, const void *q, const void *k_cache,
                    const void *v_cache, const tram_batch *b, const tram_attn_shape *s);
void cuda_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n);

/* gemm_v2.cu: times the heuristic's candidates for plan p and, for n <= 8,
 * the GEMV, on the call's own buffers, and keeps the fastest in p; while the
 * stream is being captured it times nothing and p keeps its algorithm. */
int cuda_gemm_tune(cuda_state *c, cuda_gemm_plan *p, const cublasLtMatmulHeuristicResult_t *candidates, int found,
                   const void *w, const void *x, void *y);
/* y = x·Wᵀ by gemm_v2.cu's GEMV in p->gemv_splits column splits (n <= 8). */
void cuda_gemv(cuda_state *c, const cuda_gemm_plan *p, void *y, const void *x, const void *w);

/* moe.cu: the mixture-of-experts FFN, the shared expert's gated add, and
 * the state they keep */
void cuda_moe_ffn(tram_backend *be, void *out, const void *x, const void *logits, const tram_moe_layer *L,
                  const tram_moe_scratch *s, int n);
void cuda_add_gated(tram_backend *be, void *y, const void *x, const void *gate, int n, int dim);
void cuda_moe_free(cuda_state *c);

/* lora.cu: LoRA's grouped shrink and expand (tram_backend.lora) */
void cuda_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_site *site,
               const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s);

/* sparse24.cu: 2:4 sparse bf16 and int8 weights through cuSPARSELt, loaded
 * at run time (tram_backend.sparse24_prepare, sparse24_fits); compress turns
 * a dense bf16 or int8 w that is 2:4 into a TRAM_W_S24 or TRAM_W_S24_INT8
 * one (at upload, int8's scales kept); matmul writes bf16 for the first,
 * the int32 sums [n][rows] for the second (int8.cu dequantizes them) */
int cuda_sparse24_prepare(tram_backend *be, tram_wtype t, int max_rows, tram_error *why);
int cuda_sparse24_fits(tram_backend *be, tram_wtype t, int rows, int cols, tram_error *why);
void cuda_sparse24_compress(tram_backend *be, tram_weight *w);
void cuda_sparse24_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n);
void cuda_sparse24_free(cuda_state *c);

/* Frees sampling.cu's buffers (tram_cuda_sampler_reserve). */
void cuda_sampler_free(cuda_state *c);
/* Frees mask.cu's buffers (tram_cuda_mask_reserve). */
void cuda_masks_free(cuda_state *c);

/* gemm.cu's cuBLASLt handle, descriptor, workspace and plan table */
int cuda_gemm_init(cuda_state *c);
void cuda_gemm_destroy(cuda_state *c);

#endif
