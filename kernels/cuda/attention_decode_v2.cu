/* attention_decode_v2.cu — variant 2 of decode attention (kernels/variants.h),
 * for the rows of sequences with one query token.
 *
 * Decode reads each sequence's whole K/V once per step, so this kernel is
 * about bytes in flight.  Block (t, kvh, s) serves token t, every query head
 * of KV head kvh's GQA group, split s of the token's keys.  A key row of HD
 * bf16 is HD/8 lanes × 16 bytes, so a warp holds 32/(HD/8) keys at once (2
 * for HD 128, 4 for HD 64), two steps of them unrolled: each lane has four
 * 16-byte loads (two K, two V rows) outstanding before it multiplies.  Warps
 * take whole KV blocks in turn and read a block's table entry once.  The
 * head dim and the group are template arguments, so q, the accumulators and
 * the group loop live in registers; shapes without an instance go to
 * variant 1.
 *
 * Splits come from each token's own context (tram_cuda_token_splits): the
 * grid's z extent is the bound any context could need, and blocks past
 * their token's count return at once.  Scores are kept in base 2 (q is
 * pre-scaled by log2 e), partials as (max, sum, acc) like variant 1's. */
#include "kernels/cuda/attention.cuh"

#define WARPS 4
#define UNROLL 2  /* warp steps of keys loaded before any is used */

/* Eight bf16 of a 16-byte load, widened. */
static __device__ __forceinline__ void widen8(const uint4 &u, float *f)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 v = __bfloat1622float2(h[i]);
        f[2 * i] = v.x;
        f[2 * i + 1] = v.y;
    }
}

/* One lane's online-softmax state: G heads × its 8 dims of one key stream. */
template <int G>
struct softmax_state {
    float m[G], l[G], acc[G][8];
};

/* Folds one key (score s per head, base 2; -inf: no key) into the state. */
template <int G>
static __device__ __forceinline__ void fold_key(softmax_state<G> &st, const float *s, const float *v)
{
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (s[g] == -INFINITY)
            continue;
        float m_new = fmaxf(st.m[g], s[g]);
        float corr = exp2f(st.m[g] - m_new), pr = exp2f(s[g] - m_new);
        st.l[g] = st.l[g] * corr + pr;
#pragma unroll
        for (int e = 0; e < 8; e++)
            st.acc[g][e] = st.acc[g][e] * corr + pr * v[e];
        st.m[g] = m_new;
    }
}

/* Merges the state of the lane `offset` away (another key stream, same dims). */
template <int G>
static __device__ __forceinline__ void merge_lane(softmax_state<G> &st, int offset)
{
#pragma unroll
    for (int g = 0; g < G; g++) {
        float m_o = __shfl_xor_sync(0xffffffffu, st.m[g], offset);
        float l_o = __shfl_xor_sync(0xffffffffu, st.l[g], offset);
        float M = fmaxf(st.m[g], m_o);
        float f = M == -INFINITY ? 0.0f : exp2f(st.m[g] - M), f_o = M == -INFINITY ? 0.0f : exp2f(m_o - M);
        st.l[g] = st.l[g] * f + l_o * f_o;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            float a_o = __shfl_xor_sync(0xffffffffu, st.acc[g][e], offset);
            st.acc[g][e] = st.acc[g][e] * f + a_o * f_o;
        }
        st.m[g] = M;
    }
}

/* Scores of one key for every head: this lane's 8-dim dot products, summed
 * over the LANES lanes that hold the key (aligned groups of the warp). */
template <int G, int LANES>
static __device__ __forceinline__ void key_scores(const float (*q)[8], const float *k, bool valid, float *s)
{
#pragma unroll
    for (int g = 0; g < G; g++) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++)
            d += q[g][e] * k[e];
#pragma unroll
        for (int off = LANES / 2; off > 0; off /= 2)
            d += __shfl_xor_sync(0xffffffffu, d, off);
        s[g] = valid ? d : -INFINITY;
    }
}

template <int HD, int G>
static __global__ void __launch_bounds__(WARPS * 32) kernel_decode_v2(attn_params p)
{
    constexpr int LANES = HD / 8, KEYS = 32 / LANES;  /* lanes per key row, keys per warp step */
    __shared__ float s_acc[WARPS][G][HD];
    __shared__ float s_m[WARPS][G], s_l[WARPS][G];
    int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane / LANES, part = lane % LANES;
    int seq = tram_cuda_seq_of_token(p.query_start, p.num_seqs, t);
    if (!attn_serves(p, seq))
        return;
    int ctx = tram_cuda_context_len(p.positions[t], p.seq_lens[seq]);
    int splits = tram_cuda_token_splits(ctx, p.block_size, p.splits);
    if (split >= splits)
        return;
    int start, end;
    tram_cuda_split_blocks(ctx, p.block_size, splits, split, &start, &end);
    const int32_t *table = p.block_tables + (size_t)seq * p.max_blocks;
    size_t row_elems = (size_t)p.n_kv_heads * HD, head_off = (size_t)kvh * HD + part * 8;

    float q[G][8];
    softmax_state<G> st;
#pragma unroll
    for (int g = 0; g < G; g++) {
        uint4 raw = *reinterpret_cast<const uint4 *>(p.q + ((size_t)t * p.n_heads + kvh * G + g) * HD + part * 8);
        widen8(raw, q[g]);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            q[g][e] *= p.scale * 1.4426950408889634f;  /* log2 e: scores in base 2 */
            st.acc[g][e] = 0.0f;
        }
        st.m[g] = -INFINITY;
        st.l[g] = 0.0f;
    }

    for (int blk = start / p.block_size + warp; blk * p.block_size < end; blk += WARPS) {
        int64_t base = (int64_t)table[blk] * p.block_size;  /* one table read per block */
        int first = blk * p.block_size, n = min(p.block_size, end - first);
        for (int o = 0; o < n; o += KEYS * UNROLL) {  /* the same trip count in every lane */
            uint4 kraw[UNROLL], vraw[UNROLL];
            bool valid[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                int key = o + u * KEYS + sub;
                valid[u] = key < n;
                size_t at = (size_t)(base + (valid[u] ? key : 0)) * row_elems + head_off;
                kraw[u] = *reinterpret_cast<const uint4 *>(p.k_cache + at);
                vraw[u] = *reinterpret_cast<const uint4 *>(p.v_cache + at);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                float kf[8], vf[8], s[G];
                widen8(kraw[u], kf);
                widen8(vraw[u], vf);
                key_scores<G, LANES>(q, kf, valid[u], s);
                fold_key<G>(st, s, vf);
            }
        }
    }
#pragma unroll
    for (int off = LANES; off < 32; off *= 2)
        merge_lane<G>(st, off);
    if (sub == 0) {
#pragma unroll
        for (int g = 0; g < G; g++) {
#pragma unroll
            for (int e = 0; e < 8; e++)
                s_acc[warp][g][part * 8 + e] = st.acc[g][e];
            if (part == 0) {
                s_m[warp][g] = st.m[g];
                s_l[warp][g] = st.l[g];
            }
        }
    }
    __syncthreads();
    attn_merge_warps<HD, true>(p, &s_acc[0][0][0], &s_m[0][0], &s_l[0][0], WARPS, G, t, kvh, split, splits);
}

/* Merges a token's splits (its own count) into the output; tokens of one
 * split were written by the kernel itself. */
static __global__ void kernel_decode_v2_combine(attn_params p, int head_dim)
{
    int t = blockIdx.x, h = blockIdx.y;
    int seq = tram_cuda_seq_of_token(p.query_start, p.num_seqs, t);
    if (!attn_serves(p, seq))
        return;
    int splits = tram_cuda_token_splits(tram_cuda_context_len(p.positions[t], p.seq_lens[seq]), p.block_size,
                                        p.splits);
    if (splits == 1)
        return;
    attn_combine_splits<true>(p, t, h, splits, head_dim);
}

typedef void (*decode_kernel)(attn_params);

/* The instances: head dim 64 and 128, GQA groups 1 to 8. */
template <int HD>
static decode_kernel instance(int group)
{
    switch (group) {
    case 1: return kernel_decode_v2<HD, 1>;
    case 2: return kernel_decode_v2<HD, 2>;
    case 3: return kernel_decode_v2<HD, 3>;
    case 4: return kernel_decode_v2<HD, 4>;
    case 5: return kernel_decode_v2<HD, 5>;
    case 6: return kernel_decode_v2<HD, 6>;
    case 7: return kernel_decode_v2<HD, 7>;
    case 8: return kernel_decode_v2<HD, 8>;
    default: return NULL;
    }
}

int cuda_attention_decode_v2(cuda_state *c, const attn_params &p, int head_dim)
{
    decode_kernel k = head_dim == 64 ? instance<64>(p.group) : head_dim == 128 ? instance<128>(p.group) : NULL;
    if (!k)
        return -1;
    k<<<dim3(p.num_tokens, p.n_kv_heads, p.splits), WARPS * 32, 0, c->stream>>>(p);
    if (LAUNCH_CHECK(&c->st, "kernel_decode_v2") || p.splits == 1)
        return 0;
    kernel_decode_v2_combine<<<dim3(p.num_tokens, p.n_heads), head_dim, 0, c->stream>>>(p, head_dim);
    LAUNCH_CHECK(&c->st, "kernel_decode_v2_combine");
    return 0;
}
