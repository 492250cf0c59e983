/* ops.cu — the element-wise and row-wise ops of the CUDA backend: embedding
 * gather, (fused residual-add +) RMSNorm, per-head RMSNorm of q and k, bias, RoPE, KV store, SiLU·mul,
 * row gather, q/k/v split, and the f32 copy to the host.  bf16 in memory,
 * f32 in registers; one block per token row where a row reduction is needed.
 * The RMSNorm and SiLU·mul kernels come in two instances: QUANT also writes
 * the row's int8 copy for a W8A8 matmul (quant_row.cuh) from the values each
 * thread just wrote, so the row is not read back from another kernel. */
#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/kv_quant.cuh"
#include "kernels/cuda/quant_row.cuh"

#define ROW_THREADS 256

/* ---------------------------------------------------------------- embed */

/* Ids outside the table give a zero row (the host checks ids before upload;
 * this only keeps a bad id from reading out of bounds). */
static __global__ void kernel_embed(bf16 *x, const bf16 *table, const int32_t *ids, int vocab, int dim)
{
    int t = blockIdx.x, id = ids[t];
    bf16 *row = x + (size_t)t * dim;
    const bf16 *src = table + (size_t)id * dim;
    int valid = id >= 0 && id < vocab;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        row[j] = valid ? src[j] : __float2bfloat16(0.0f);
}

void cuda_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    if (table->type == TRAM_W_INT8) {
        tram_cuda_int8_embed(be, x, table, ids, n);
        return;
    }
    if (table->type != TRAM_W_BF16) {
        cuda_fail(be, "embed: the table must be bf16");
        return;
    }
    kernel_embed<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)x, (const bf16 *)table->data, ids, table->rows,
                                                     table->cols);
    LAUNCH_CHECK(&c->st, "kernel_embed");
}

/* ---------------------------------------------------------------- RMSNorm */

/* Where a QUANT kernel writes row blockIdx.x's int8 copy. */
typedef struct {
    int8_t *q;
    float *scales;
    int kp;
} qrow_out;

static qrow_out qrow_of(const tram_qact *qa)
{
    return qa ? qrow_out{qa->q, qa->scales, qa->kp} : qrow_out{NULL, NULL, 0};
}

/* Stores v as bf16 at o[j]; returns |stored value| for the row's max. */
static __device__ __forceinline__ float store_abs(bf16 *o, int j, float v)
{
    bf16 b = __float2bfloat16(v);
    o[j] = b;
    return fabsf(__bfloat162float(b));
}

/* o = x · rsqrt(Σx² / dim + eps) · w, given ss, this thread's share of Σx²:
 * each thread reads only the elements j ≡ threadIdx.x (mod blockDim.x) it
 * summed, so x may be a row the thread has just written. */
template <bool QUANT>
static __device__ __forceinline__ void rmsnorm_store(bf16 *o, const bf16 *x, const float *w, int dim, float eps,
                                                     float ss, qrow_out qo)
{
    float amax = 0.0f;
    float inv = rsqrtf(block_sum(ss) / dim + eps);
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        amax = fmaxf(amax, store_abs(o, j, __bfloat162float(x[j]) * inv * w[j]));
    if (QUANT)
        quantize_row(qo.q + (size_t)blockIdx.x * qo.kp, qo.scales + blockIdx.x, o, dim, qo.kp, amax);
}

template <bool QUANT>
static __global__ void kernel_rmsnorm(bf16 *out, const bf16 *x, const float *w, int dim, float eps, qrow_out qo)
{
    const bf16 *xr = x + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        ss += v * v;
    }
    rmsnorm_store<QUANT>(out + (size_t)blockIdx.x * dim, xr, w, dim, eps, ss, qo);
}

/* The residual is stored in bf16; the norm reads the stored (rounded) sum so
 * that this layer and the next see the same residual. */
template <bool QUANT>
static __global__ void kernel_add_rmsnorm(bf16 *residual, bf16 *out, const bf16 *delta, const float *w, int dim,
                                          float eps, qrow_out qo)
{
    bf16 *r = residual + (size_t)blockIdx.x * dim;
    const bf16 *d = delta + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        bf16 s = __float2bfloat16(__bfloat162float(r[j]) + __bfloat162float(d[j]));
        r[j] = s;
        float v = __bfloat162float(s);
        ss += v * v;
    }
    /* each thread reads back only the elements it wrote itself */
    rmsnorm_store<QUANT>(out + (size_t)blockIdx.x * dim, r, w, dim, eps, ss, qo);
}

static int check_vector(tram_backend *be, const char *op, const tram_weight *w)
{
    if (w->type == TRAM_W_F32 && w->rows == 1)
        return 0;
    cuda_fail(be, "%s: the weight must be an f32 vector (rows = 1), got type %d with %d rows", op, w->type, w->rows);
    return -1;
}

/* An int8 copy must have the op's output width (NULL: none wanted). */
static int check_qact(tram_backend *be, const char *op, const tram_qact *qa, int cols)
{
    if (!qa || (qa->cols == cols && qa->kp == tram_qact_stride(cols)))
        return 0;
    cuda_fail(be, "%s: int8 activations of width %d for an output of width %d", op, qa->cols, cols);
    return -1;
}

static void rmsnorm(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w, int n,
                    float eps)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0 || check_vector(be, "rmsnorm", w) || check_qact(be, "rmsnorm_q", qa, w->cols))
        return;
    auto kernel = qa ? kernel_rmsnorm<true> : kernel_rmsnorm<false>;
    kernel<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)out, (const bf16 *)x, (const float *)w->data, w->cols, eps,
                                             qrow_of(qa));
    LAUNCH_CHECK(&c->st, "kernel_rmsnorm");
}

void cuda_rmsnorm(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps)
{
    rmsnorm(be, out, NULL, x, w, n, eps);
}

void cuda_rmsnorm_q(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w, int n,
                    float eps)
{
    rmsnorm(be, out, qa, x, w, n, eps);
}

static void add_rmsnorm(tram_backend *be, void *residual, void *out, const tram_qact *qa, const void *delta,
                        const tram_weight *w, int n, float eps)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0 || check_vector(be, "add_rmsnorm", w) || check_qact(be, "add_rmsnorm_q", qa, w->cols))
        return;
    auto kernel = qa ? kernel_add_rmsnorm<true> : kernel_add_rmsnorm<false>;
    kernel<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)residual, (bf16 *)out, (const bf16 *)delta,
                                             (const float *)w->data, w->cols, eps, qrow_of(qa));
    LAUNCH_CHECK(&c->st, "kernel_add_rmsnorm");
}

void cuda_add_rmsnorm(tram_backend *be, void *residual, void *out, const void *delta, const tram_weight *w,
                      int n, float eps)
{
    add_rmsnorm(be, residual, out, NULL, delta, w, n, eps);
}

void cuda_add_rmsnorm_q(tram_backend *be, void *residual, void *out, const tram_qact *qa, const void *delta,
                        const tram_weight *w, int n, float eps)
{
    add_rmsnorm(be, residual, out, qa, delta, w, n, eps);
}

/* ---------------------------------------------------------------- per-head RMSNorm */

/* One warp per (token, head) of the fused q/k/v rows: the first n_heads
 * heads scaled by q_norm, the next ones (the KV heads' k) by k_norm; v is
 * not touched.  Each lane reads back only the values it summed. */
static __global__ void kernel_head_rmsnorm(bf16 *qkv, const float *q_norm, const float *k_norm, int n_heads,
                                           int stride, int head_dim, float eps)
{
    int h = blockIdx.y;
    bf16 *x = qkv + (size_t)blockIdx.x * stride + (size_t)h * head_dim;
    const float *w = h < n_heads ? q_norm : k_norm;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < head_dim; j += 32) {
        float v = __bfloat162float(x[j]);
        ss += v * v;
    }
    float inv = rsqrtf(warp_sum(ss) / head_dim + eps);
    for (int j = threadIdx.x; j < head_dim; j += 32)
        x[j] = __float2bfloat16(__bfloat162float(x[j]) * inv * w[j]);
}

void cuda_head_rmsnorm(tram_backend *be, void *qkv, const tram_weight *q_norm, const tram_weight *k_norm, int n,
                       const tram_attn_shape *s, float eps)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0 || check_vector(be, "head_rmsnorm q", q_norm) || check_vector(be, "head_rmsnorm k", k_norm))
        return;
    if (q_norm->cols != s->head_dim || k_norm->cols != s->head_dim) {
        cuda_fail(be, "head_rmsnorm: norms of %d and %d values for heads of %d", q_norm->cols, k_norm->cols,
                  s->head_dim);
        return;
    }
    /* tokens on x (up to 2^31 - 1), heads on y (up to 65535) */
    dim3 grid((unsigned)n, (unsigned)(s->n_heads + s->n_kv_heads));
    kernel_head_rmsnorm<<<grid, 32, 0, c->stream>>>((bf16 *)qkv, (const float *)q_norm->data,
                                                    (const float *)k_norm->data, s->n_heads,
                                                    (s->n_heads + 2 * s->n_kv_heads) * s->head_dim, s->head_dim, eps);
    LAUNCH_CHECK(&c->st, "kernel_head_rmsnorm");
}

/* ---------------------------------------------------------------- bias */

static __global__ void kernel_add_bias(bf16 *y, const float *bias, int cols)
{
    bf16 *row = y + (size_t)blockIdx.x * cols;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        row[j] = __float2bfloat16(__bfloat162float(row[j]) + bias[j]);
}

void cuda_add_bias(tram_backend *be, void *y, const tram_weight *bias, int n)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0 || check_vector(be, "add_bias", bias))
        return;
    kernel_add_bias<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)y, (const float *)bias->data, bias->cols);
    LAUNCH_CHECK(&c->st, "kernel_add_bias");
}

/* ---------------------------------------------------------------- RoPE */

/* One block per token; each thread rotates pairs of q heads then k heads.
 * Interleaved style pairs (2i, 2i+1), NeoX style (i, i + half). */
static __global__ void kernel_rope(bf16 *q, bf16 *k, const int32_t *positions, const float *inv_freq,
                                   int n_heads, int n_kv_heads, int head_dim, int neox)
{
    int t = blockIdx.x, half = head_dim / 2;
    float pos = (float)positions[t];
    int pairs = (n_heads + n_kv_heads) * half;
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
        int head = p / half, i = p % half;
        bf16 *h = head < n_heads ? q + ((size_t)t * n_heads + head) * head_dim
                                 : k + ((size_t)t * n_kv_heads + head - n_heads) * head_dim;
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float s, cs;
        sincosf(pos * inv_freq[i], &s, &cs);
        float x0 = __bfloat162float(h[a]), x1 = __bfloat162float(h[b]);
        h[a] = __float2bfloat16(x0 * cs - x1 * s);
        h[b] = __float2bfloat16(x0 * s + x1 * cs);
    }
}

void cuda_rope(tram_backend *be, void *q, void *k, const int32_t *positions, int n, const tram_attn_shape *s,
               const float *inv_freq, tram_rope_style style)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    if (s->head_dim % 2) {
        cuda_fail(be, "rope: head_dim %d is odd", s->head_dim);
        return;
    }
    kernel_rope<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)q, (bf16 *)k, positions, inv_freq, s->n_heads,
                                                    s->n_kv_heads, s->head_dim, style == TRAM_ROPE_NEOX);
    LAUNCH_CHECK(&c->st, "kernel_rope");
}

/* ---------------------------------------------------------------- KV store */

/* Negative slots are padding tokens (e.g. a CUDA graph's unused rows): skipped. */
static __global__ void kernel_kv_store(bf16 *k_cache, bf16 *v_cache, const bf16 *k, const bf16 *v,
                                       const int32_t *slot_mapping, int kd)
{
    int t = blockIdx.x;
    int64_t slot = slot_mapping[t];
    if (slot < 0)
        return;
    for (int j = threadIdx.x; j < kd; j += blockDim.x) {
        k_cache[slot * kd + j] = k[(size_t)t * kd + j];
        v_cache[slot * kd + j] = v[(size_t)t * kd + j];
    }
}

typedef struct {
    uint8_t *k_cache, *v_cache;
    const bf16 *k, *v;
    const int32_t *slot_mapping;
    int n_kv_heads, head_dim;
    size_t slot_bytes, scales_offset; /* kernels/kv_format.h's, computed on the host */
} kv_store_params;

/* A quantized cache (kv_quant.cuh): one warp per KV head of the token's K
 * and V, the scale from the head's own max. */
template <int KV>
static __global__ void kernel_kv_store_quantized(kv_store_params p)
{
    int t = blockIdx.x, warps = blockDim.x / 32, n_kv_heads = p.n_kv_heads, head_dim = p.head_dim;
    int64_t slot = p.slot_mapping[t];
    if (slot < 0)
        return;
    size_t kd = (size_t)n_kv_heads * head_dim;
    for (int i = threadIdx.x / 32; i < 2 * n_kv_heads; i += warps) {
        int h = i % n_kv_heads;
        const bf16 *x = (i < n_kv_heads ? p.k : p.v) + (size_t)t * kd + (size_t)h * head_dim;
        kv_quantize_head<KV>((i < n_kv_heads ? p.k_cache : p.v_cache) + slot * p.slot_bytes, p.scales_offset, x, h,
                             head_dim);
    }
}

void cuda_kv_store(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                   const int32_t *slot_mapping, int n, const tram_attn_shape *s)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    kv_store_params p = {
        .k_cache = (uint8_t *)k_cache, .v_cache = (uint8_t *)v_cache, .k = (const bf16 *)k, .v = (const bf16 *)v,
        .slot_mapping = slot_mapping, .n_kv_heads = s->n_kv_heads, .head_dim = s->head_dim,
        .slot_bytes = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, s->head_dim, sizeof(bf16)),
        .scales_offset = tram_kv_scales_offset(s->n_kv_heads, s->head_dim),
    };
    if (s->kv_dtype == TRAM_KV_AUTO)
        kernel_kv_store<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)k_cache, (bf16 *)v_cache, (const bf16 *)k,
                                                            (const bf16 *)v, slot_mapping, s->n_kv_heads * s->head_dim);
    else if (s->kv_dtype == TRAM_KV_INT8)
        kernel_kv_store_quantized<TRAM_KV_INT8><<<n, ROW_THREADS, 0, c->stream>>>(p);
    else
        kernel_kv_store_quantized<TRAM_KV_FP8><<<n, ROW_THREADS, 0, c->stream>>>(p);
    LAUNCH_CHECK(&c->st, "kernel_kv_store");
}

/* ---------------------------------------------------------------- SiLU·mul */

template <bool QUANT>
static __global__ void kernel_silu_mul(bf16 *out, const bf16 *gate_up, int ffn, qrow_out qo)
{
    const bf16 *g = gate_up + (size_t)blockIdx.x * 2 * ffn, *u = g + ffn;
    bf16 *o = out + (size_t)blockIdx.x * ffn;
    float amax = 0.0f;
    for (int j = threadIdx.x; j < ffn; j += blockDim.x) {
        float gv = __bfloat162float(g[j]);
        amax = fmaxf(amax, store_abs(o, j, gv / (1.0f + __expf(-gv)) * __bfloat162float(u[j])));
    }
    if (QUANT)
        quantize_row(qo.q + (size_t)blockIdx.x * qo.kp, qo.scales + blockIdx.x, o, ffn, qo.kp, amax);
}

static void silu_mul(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0 || check_qact(be, "silu_mul_q", qa, ffn))
        return;
    auto kernel = qa ? kernel_silu_mul<true> : kernel_silu_mul<false>;
    kernel<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)out, (const bf16 *)gate_up, ffn, qrow_of(qa));
    LAUNCH_CHECK(&c->st, "kernel_silu_mul");
}

void cuda_silu_mul(tram_backend *be, void *out, const void *gate_up, int n, int ffn)
{
    silu_mul(be, out, NULL, gate_up, n, ffn);
}

void cuda_silu_mul_q(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn)
{
    silu_mul(be, out, qa, gate_up, n, ffn);
}

/* ---------------------------------------------------------------- q/k/v split */

static __global__ void kernel_split_qkv(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int qd, int kd)
{
    int t = blockIdx.x, width = qd + 2 * kd;
    const bf16 *src = qkv + (size_t)t * width;
    for (int j = threadIdx.x; j < width; j += blockDim.x) {
        bf16 *dst = j < qd ? q + (size_t)t * qd + j
                  : j < qd + kd ? k + (size_t)t * kd + j - qd
                                : v + (size_t)t * kd + j - qd - kd;
        *dst = src[j];
    }
}

void cuda_split_qkv(tram_backend *be, void *q, void *k, void *v, const void *qkv, int n, int qd, int kd)
{
    cuda_state *c = cuda_of(be);
    if (n <= 0)
        return;
    kernel_split_qkv<<<n, ROW_THREADS, 0, c->stream>>>((bf16 *)q, (bf16 *)k, (bf16 *)v, (const bf16 *)qkv, qd, kd);
    LAUNCH_CHECK(&c->st, "kernel_split_qkv");
}

/* ---------------------------------------------------------------- gather */

static __global__ void kernel_gather_rows(bf16 *out, const bf16 *x, const int32_t *rows, int dim)
{
    const bf16 *src = x + (size_t)rows[blockIdx.x] * dim;
    bf16 *dst = out + (size_t)blockIdx.x * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        dst[j] = src[j];
}

void cuda_gather_rows(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows, int dim)
{
    cuda_state *c = cuda_of(be);
    if (n_rows <= 0)
        return;
    kernel_gather_rows<<<n_rows, ROW_THREADS, 0, c->stream>>>((bf16 *)out, (const bf16 *)x, rows, dim);
    LAUNCH_CHECK(&c->st, "kernel_gather_rows");
}

/* ---------------------------------------------------------------- to host */

static __global__ void kernel_bf16_to_f32(float *dst, const bf16 *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

/* Widened on the device, then one copy; synchronous, since the caller reads
 * dst right after. */
void cuda_to_host_f32(tram_backend *be, float *dst, const void *src, size_t n)
{
    cuda_state *c = cuda_of(be);
    if (n == 0 || cuda_reserve(c, (void **)&c->stage, &c->stage_bytes, n * sizeof(float)))
        return;
    int blocks = tram_cuda_grid_1d((int64_t)n, 256);
    kernel_bf16_to_f32<<<blocks > 65536 ? 65536 : blocks, 256, 0, c->stream>>>(c->stage, (const bf16 *)src, n);
    if (LAUNCH_CHECK(&c->st, "kernel_bf16_to_f32"))
        return;
    if (!CUDA_CHECK(&c->st, cudaMemcpyAsync(dst, c->stage, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream)))
        CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream));
}
