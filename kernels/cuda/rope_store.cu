/* rope_store.cu — the fused q/k/v product made ready for attention (the
 * rope-kv family of kernels/variants.h; kernels/cpu/rope_store.c is the
 * reference).
 *
 * Variant 1 runs today's three kernels: split_qkv copies the product into
 * q, k and v, rope rotates q and k in place, kv_store copies k and v into
 * the cache.  Variant 2 is one kernel that reads each row of the product
 * once and writes every value where it is consumed: rotated q into q,
 * rotated k and v straight into the cache slot (not at all for a padding
 * row's negative slot).  Per token it computes each frequency's sine and
 * cosine once into shared memory, where variant 1 recomputes them for every
 * head; the arithmetic per element is the same as variant 1's. */
#include "kernels/cuda/cuda_impl.cuh"

#define THREADS 256

typedef struct {
    bf16 *q, *k_cache, *v_cache;
    const bf16 *qkv;
    const int32_t *positions, *slot_mapping;
    const float *inv_freq;
    int n_heads, n_kv_heads, head_dim, neox;
} rope_store_params;

static __global__ void __launch_bounds__(THREADS) kernel_rope_store(rope_store_params p)
{
    __shared__ float s_sin[TRAM_CUDA_ATTN_MAX_HEAD_DIM / 2], s_cos[TRAM_CUDA_ATTN_MAX_HEAD_DIM / 2];
    int t = blockIdx.x, half = p.head_dim / 2;
    int qd = p.n_heads * p.head_dim, kd = p.n_kv_heads * p.head_dim;
    float pos = (float)p.positions[t];
    for (int i = threadIdx.x; i < half; i += blockDim.x)
        sincosf(pos * p.inv_freq[i], &s_sin[i], &s_cos[i]);
    __syncthreads();
    const bf16 *row = p.qkv + (size_t)t * (qd + 2 * kd);
    int64_t slot = p.slot_mapping[t];
    /* rotated pairs: q heads, then k heads (skipped for a padding row) */
    int pairs = (p.n_heads + (slot >= 0 ? p.n_kv_heads : 0)) * half;
    for (int idx = threadIdx.x; idx < pairs; idx += blockDim.x) {
        tram_cuda_rope_pair r = tram_cuda_rope_pair_of(idx, p.n_heads, p.n_kv_heads, p.head_dim, p.neox, slot);
        bf16 *dst = r.to_cache ? p.k_cache : p.q + (size_t)t * qd;
        float x0 = __bfloat162float(row[r.src_a]), x1 = __bfloat162float(row[r.src_b]);
        dst[r.dst_a] = __float2bfloat16(x0 * s_cos[r.freq] - x1 * s_sin[r.freq]);
        dst[r.dst_b] = __float2bfloat16(x0 * s_sin[r.freq] + x1 * s_cos[r.freq]);
    }
    if (slot < 0)
        return;
    const __nv_bfloat162 *v = reinterpret_cast<const __nv_bfloat162 *>(row + qd + kd);
    __nv_bfloat162 *vc = reinterpret_cast<__nv_bfloat162 *>(p.v_cache + slot * kd);
    for (int j = threadIdx.x; j < kd / 2; j += blockDim.x)
        vc[j] = v[j];
}

void cuda_rope_store(tram_backend *be, void *q, void *k, void *v, void *k_cache, void *v_cache, const void *qkv,
                     const int32_t *positions, const int32_t *slot_mapping, int n, const tram_attn_shape *s,
                     const float *inv_freq, tram_rope_style style)
{
    cuda_state *c = cuda_of(be);
    int qd = s->n_heads * s->head_dim, kd = s->n_kv_heads * s->head_dim;
    if (n <= 0)
        return;
    /* variant 2 writes bf16 slots; a quantized cache takes kv_store's */
    if (cuda_variant(c, TRAM_KERNEL_ROPE_KV) == 1 || s->head_dim % 2 || s->head_dim > TRAM_CUDA_ATTN_MAX_HEAD_DIM ||
        s->kv_dtype != TRAM_KV_AUTO) {
        cuda_split_qkv(be, q, k, v, qkv, n, qd, kd);
        cuda_rope(be, q, k, positions, n, s, inv_freq, style);
        cuda_kv_store(be, k_cache, v_cache, k, v, slot_mapping, n, s);
        return;
    }
    rope_store_params p = {
        .q = (bf16 *)q, .k_cache = (bf16 *)k_cache, .v_cache = (bf16 *)v_cache, .qkv = (const bf16 *)qkv,
        .positions = positions, .slot_mapping = slot_mapping, .inv_freq = inv_freq, .n_heads = s->n_heads,
        .n_kv_heads = s->n_kv_heads, .head_dim = s->head_dim, .neox = style == TRAM_ROPE_NEOX,
    };
    kernel_rope_store<<<n, THREADS, 0, c->stream>>>(p);
    LAUNCH_CHECK(&c->st, "kernel_rope_store");
}
