/* moe.cu — the mixture-of-experts FFN on CUDA (kernels/cpu/moe.c is the
 * reference): route each token on the device (softmax, top-k), group the
 * routed rows by expert, gather them, run the experts' products as one
 * cuBLAS grouped GEMM per projection (gate‖up, then down; int8 experts run
 * one cuBLASLt int8 product each, through cuda_matmul), and add each token's
 * expert outputs back in ascending expert order, weighted, in f32.
 *
 * The grouped GEMM takes each group's size from the host, so the op copies
 * the per-expert offsets back and waits for them: a pass with MoE layers
 * cannot be captured in a CUDA graph (the engine runs MoE models eagerly). */
#include <cublas_v2.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_impl.cuh"

#define MOE_THREADS 256

struct cuda_moe {
    cublasHandle_t blas;
    int32_t *host_offsets;       /* pinned, [TRAM_MOE_MAX_EXPERTS + 1] */
    const void **host_ptrs;      /* pinned, [3][TRAM_MOE_MAX_EXPERTS]: A, B, C per group */
    const void **dev_ptrs;       /* the same on the device, [2 projections][3][..] */
    int m[TRAM_MOE_MAX_EXPERTS], n[TRAM_MOE_MAX_EXPERTS], k[TRAM_MOE_MAX_EXPERTS];
    int lda[TRAM_MOE_MAX_EXPERTS], ldb[TRAM_MOE_MAX_EXPERTS], ldc[TRAM_MOE_MAX_EXPERTS];
    int size[TRAM_MOE_MAX_EXPERTS];
    float alpha[TRAM_MOE_MAX_EXPERTS], beta[TRAM_MOE_MAX_EXPERTS];
    cublasOperation_t ta[TRAM_MOE_MAX_EXPERTS], tb[TRAM_MOE_MAX_EXPERTS];
};

void cuda_moe_free(cuda_state *c)
{
    cuda_moe *m = c->moe;
    if (!m)
        return;
    if (m->blas)
        cublasDestroy(m->blas);
    cudaFreeHost(m->host_offsets);
    cudaFreeHost(m->host_ptrs);
    cudaFree(m->dev_ptrs);
    free(m);
    c->moe = NULL;
}

static cuda_moe *moe_state(cuda_state *c)
{
    if (c->moe)
        return c->moe;
    cuda_moe *m = (cuda_moe *)calloc(1, sizeof(cuda_moe));
    if (!m) {
        tram_cuda_record(&c->st, __FILE__, __LINE__, "calloc", "out of host memory");
        return NULL;
    }
    c->moe = m;
    size_t ptrs = 3 * TRAM_MOE_MAX_EXPERTS * sizeof(void *);
    if (CUBLAS_CHECK(&c->st, cublasCreate(&m->blas)) ||
        CUBLAS_CHECK(&c->st, cublasSetStream(m->blas, c->stream)) ||
        CUDA_CHECK(&c->st, cudaMallocHost((void **)&m->host_offsets, (TRAM_MOE_MAX_EXPERTS + 1) * sizeof(int32_t))) ||
        CUDA_CHECK(&c->st, cudaMallocHost((void **)&m->host_ptrs, 2 * ptrs)) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&m->dev_ptrs, 2 * ptrs))) {
        cuda_moe_free(c);
        return NULL;
    }
    return m;
}

/* One thread per token: its top_k experts and weights (moe.c's route_token). */
static __global__ void kernel_route(const bf16 *logits, int n, tram_moe_layer L, int32_t *expert, float *weight)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    const bf16 *l = logits + (size_t)t * L.n_experts;
    int32_t *ex = expert + (size_t)t * L.top_k;
    float *w = weight + (size_t)t * L.top_k;
    float max = __bfloat162float(l[0]), sum = 0.0f, top = 0.0f;
    for (int e = 1; e < L.n_experts; e++)
        max = fmaxf(max, __bfloat162float(l[e]));
    for (int e = 0; e < L.n_experts; e++)
        sum += expf(__bfloat162float(l[e]) - max);
    for (int j = 0; j < L.top_k; j++) {
        int best = -1;
        for (int e = 0; e < L.n_experts; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++)
                taken |= ex[i] == e;
            if (!taken && (best < 0 || __bfloat162float(l[e]) > __bfloat162float(l[best])))
                best = e;
        }
        ex[j] = best;
        top += w[j] = expf(__bfloat162float(l[best]) - max) / sum;
    }
    for (int j = 0; L.norm_topk && j < L.top_k; j++)
        w[j] /= top;
}

/* One block: the rows held here grouped by expert, tokens ascending within
 * an expert (thread e scans the rows for expert first + e). */
static __global__ void kernel_group(const int32_t *expert, int rows, tram_moe_layer L, int32_t *order,
                                    int32_t *slot, int32_t *offsets)
{
    __shared__ int32_t start[TRAM_MOE_MAX_EXPERTS + 1];
    for (int e = threadIdx.x; e < L.count; e += blockDim.x) {
        int count = 0;
        for (int r = 0; r < rows; r++)
            count += expert[r] == L.first + e;
        start[e + 1] = count;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        start[0] = 0;
        for (int e = 0; e < L.count; e++)
            start[e + 1] += start[e];
    }
    __syncthreads();
    for (int e = threadIdx.x; e <= L.count; e += blockDim.x)
        offsets[e] = start[e];
    for (int r = threadIdx.x; r < rows; r += blockDim.x)
        if (expert[r] < L.first || expert[r] >= L.first + L.count)
            slot[r] = -1;
    for (int e = threadIdx.x; e < L.count; e += blockDim.x) {
        int next = start[e];
        for (int r = 0; r < rows; r++)
            if (expert[r] == L.first + e) {
                slot[r] = next;
                order[next++] = r;
            }
    }
}

static __global__ void kernel_gather(bf16 *xg, const bf16 *x, const int32_t *order, int top_k, int dim)
{
    const bf16 *src = x + (size_t)(order[blockIdx.x] / top_k) * dim;
    bf16 *dst = xg + (size_t)blockIdx.x * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        dst[j] = src[j];
}

/* out[t] = Σ weight · y over t's choices held here, ascending expert order. */
static __global__ void kernel_add_back(bf16 *out, const bf16 *y, const int32_t *expert, const float *weight,
                                       const int32_t *slot, int top_k, int dim)
{
    int t = blockIdx.x;
    const int32_t *ex = expert + (size_t)t * top_k;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
        float acc = 0.0f;
        int done = -1;
        for (int j = 0; j < top_k; j++) {
            int next = -1;
            for (int i = 0; i < top_k; i++)
                if (ex[i] > done && (next < 0 || ex[i] < ex[next]))
                    next = i;
            done = ex[next];
            int s = slot[(size_t)t * top_k + next];
            if (s >= 0)
                acc += __bfloat162float(y[(size_t)s * dim + d]) * weight[(size_t)t * top_k + next];
        }
        out[(size_t)t * dim + d] = __float2bfloat16(acc);
    }
}

/* y rows of each expert = x rows · W_eᵀ for the experts w[0..count) whose
 * offsets the host holds; one grouped GEMM for bf16 experts (TN, like
 * gemm.cu), one cuda_matmul each for int8 ones. */
static void grouped_matmul(tram_backend *be, cuda_moe *m, int proj, void *y, const void *x,
                           const tram_weight *w, int count, const int32_t *off)
{
    cuda_state *c = cuda_of(be);
    const void **host = m->host_ptrs + (size_t)proj * 3 * TRAM_MOE_MAX_EXPERTS;
    const void **dev = m->dev_ptrs + (size_t)proj * 3 * TRAM_MOE_MAX_EXPERTS;
    int groups = 0, rows = w[0].rows, cols = w[0].cols;
    for (int e = 0; e < count; e++) {
        int n = off[e + 1] - off[e];
        if (!n)
            continue;
        if (w[e].type != TRAM_W_BF16) {
            cuda_matmul(be, (bf16 *)y + (size_t)off[e] * rows, (const bf16 *)x + (size_t)off[e] * cols, &w[e], n);
            continue;
        }
        host[groups] = w[e].data;
        host[TRAM_MOE_MAX_EXPERTS + groups] = (const bf16 *)x + (size_t)off[e] * cols;
        host[2 * TRAM_MOE_MAX_EXPERTS + groups] = (bf16 *)y + (size_t)off[e] * rows;
        m->ta[groups] = CUBLAS_OP_T;
        m->tb[groups] = CUBLAS_OP_N;
        m->m[groups] = rows, m->n[groups] = n, m->k[groups] = cols;
        m->lda[groups] = cols, m->ldb[groups] = cols, m->ldc[groups] = rows;
        m->size[groups] = 1, m->alpha[groups] = 1.0f, m->beta[groups] = 0.0f;
        groups++;
    }
    if (!groups)
        return;
    if (CUDA_CHECK(&c->st, cudaMemcpyAsync(dev, host, 3 * TRAM_MOE_MAX_EXPERTS * sizeof(void *),
                                           cudaMemcpyHostToDevice, c->stream)))
        return;
    CUBLAS_CHECK(&c->st, cublasGemmGroupedBatchedEx(
                             m->blas, m->ta, m->tb, m->m, m->n, m->k, m->alpha, dev, CUDA_R_16BF, m->lda,
                             dev + TRAM_MOE_MAX_EXPERTS, CUDA_R_16BF, m->ldb, m->beta,
                             (void *const *)(dev + 2 * TRAM_MOE_MAX_EXPERTS), CUDA_R_16BF, m->ldc, groups, m->size,
                             CUBLAS_COMPUTE_32F));
}

void cuda_moe_ffn(tram_backend *be, void *out, const void *x, const void *logits, const tram_moe_layer *L,
                  const tram_moe_scratch *s, int n)
{
    cuda_state *c = cuda_of(be);
    int rows = n * L->top_k;
    if (n <= 0)
        return;
    if (rows > s->max_rows || L->count > TRAM_MOE_MAX_EXPERTS || L->first + L->count > L->n_experts) {
        cuda_fail(be, "moe: %d routed rows or experts [%d, %d) exceed the scratch or the layer", rows, L->first,
                  L->first + L->count);
        return;
    }
    cuda_moe *m = moe_state(c);
    if (!m)
        return;
    kernel_route<<<(n + MOE_THREADS - 1) / MOE_THREADS, MOE_THREADS, 0, c->stream>>>(
        (const bf16 *)logits, n, *L, s->expert, s->weight);
    LAUNCH_CHECK(&c->st, "kernel_route");
    kernel_group<<<1, MOE_THREADS, 0, c->stream>>>(s->expert, rows, *L, s->order, s->slot, s->offsets);
    LAUNCH_CHECK(&c->st, "kernel_group");
    /* the grouped GEMM's sizes live on the host */
    if (CUDA_CHECK(&c->st, cudaMemcpyAsync(m->host_offsets, s->offsets, (L->count + 1) * sizeof(int32_t),
                                           cudaMemcpyDeviceToHost, c->stream)) ||
        CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream)))
        return;
    int held = m->host_offsets[L->count];
    if (held) {
        kernel_gather<<<held, MOE_THREADS, 0, c->stream>>>((bf16 *)s->x, (const bf16 *)x, s->order, L->top_k,
                                                           s->dim);
        LAUNCH_CHECK(&c->st, "kernel_gather");
        grouped_matmul(be, m, 0, s->gate_up, s->x, L->gate_up, L->count, m->host_offsets);
        cuda_silu_mul(be, s->hidden, s->gate_up, held, L->ffn);
        grouped_matmul(be, m, 1, s->y, s->hidden, L->down, L->count, m->host_offsets);
    }
    kernel_add_back<<<n, MOE_THREADS, 0, c->stream>>>((bf16 *)out, (const bf16 *)s->y, s->expert, s->weight,
                                                      s->slot, L->top_k, s->dim);
    LAUNCH_CHECK(&c->st, "kernel_add_back");
}

static __global__ void kernel_add_gated(bf16 *y, const bf16 *x, const bf16 *gate, int dim)
{
    float g = 1.0f / (1.0f + expf(-__bfloat162float(gate[blockIdx.x])));
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        size_t i = (size_t)blockIdx.x * dim + j;
        y[i] = __float2bfloat16(__bfloat162float(y[i]) + g * __bfloat162float(x[i]));
    }
}

void cuda_add_gated(tram_backend *be, void *y, const void *x, const void *gate, int n, int dim)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    kernel_add_gated<<<n, MOE_THREADS, 0, c->stream>>>((bf16 *)y, (const bf16 *)x, (const bf16 *)gate, dim);
    LAUNCH_CHECK(&c->st, "kernel_add_gated");
}
