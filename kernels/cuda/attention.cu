/* attention.cu — paged attention over the unified batch.
 *
 * One launch serves decode rows and prefill chunks alike: block (t, kvh, s)
 * attends query token t with every query head of KV head kvh's GQA group to
 * split s of the keys the token may see (positions <= its own, causal within
 * a chunk), reading K and V through its sequence's block table.  Each warp
 * takes every WARPS-th key with an online softmax; lanes hold head_dim/32
 * elements.  With one split the block writes the output; with several
 * (flash-decoding, for few tokens over long contexts) it writes unnormalized
 * partials and kernel_attention_combine merges them.  This is variant 1 of
 * the decode and prefill families (kernels/variants.h); cuda_attention sends
 * a family's rows to its variant 2 when chosen and instantiated.  An int8 or
 * fp8 cache (--kv-cache-dtype, kernels/kv_format.h) is read by variant 1
 * alone, each lane's codes dequantized as they are loaded (kv_quant.cuh). */
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/kv_quant.cuh"
#include "kernels/cuda/reduce.cuh"

#define WARPS TRAM_CUDA_ATTN_WARPS
#define MAXG TRAM_CUDA_ATTN_MAX_GROUP

/* A lane's E values of KV head kvh at slot: bf16 as stored, or codes times
 * the slot's scale for the head. */
template <int E, int KV>
static __device__ __forceinline__ void kv_lane_values(float *x, const attn_params &p, const bf16 *cache,
                                                      const uint8_t *codes, int64_t slot, int kvh, int lane)
{
    constexpr int HD = 32 * E;
    if (KV == TRAM_KV_AUTO) {
        const bf16 *r = cache + slot * p.n_kv_heads * HD + (size_t)kvh * HD + lane * E;
#pragma unroll
        for (int e = 0; e < E; e++)
            x[e] = __bfloat162float(r[e]);
        return;
    }
    const uint8_t *s = codes + slot * p.slot_bytes, *c = s + (size_t)kvh * HD + lane * E;
    float scale = kv_slot_scale(s, p.scales_offset, kvh);
#pragma unroll
    for (int e = 0; e < E; e++)
        x[e] = kv_code_value<KV>(c[e]) * scale;
}

template <int E, int KV>
static __global__ void __launch_bounds__(WARPS * 32) kernel_attention(attn_params p)
{
    constexpr int HD = 32 * E;
    __shared__ float s_acc[WARPS][MAXG][HD];
    __shared__ float s_m[WARPS][MAXG], s_l[WARPS][MAXG];
    int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int seq = tram_cuda_seq_of_token(p.query_start, p.num_seqs, t);
    if (!attn_serves(p, seq))
        return;
    int ctx = tram_cuda_context_len(p.positions[t], p.seq_lens[seq]);
    int start, end;
    tram_cuda_split_range(ctx, p.splits, split, &start, &end);
    const int32_t *table = p.block_tables + (size_t)seq * p.max_blocks;

    float q[MAXG][E], acc[MAXG][E], m[MAXG], l[MAXG];
#pragma unroll
    for (int g = 0; g < MAXG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        const bf16 *qh = p.q + ((size_t)t * p.n_heads + kvh * p.group + g) * HD + lane * E;
#pragma unroll
        for (int e = 0; e < E; e++) {
            q[g][e] = g < p.group ? __bfloat162float(qh[e]) * p.scale : 0.0f;
            acc[g][e] = 0.0f;
        }
    }

    for (int j = start + warp; j < end; j += WARPS) {
        int64_t slot = (int64_t)table[j / p.block_size] * p.block_size + j % p.block_size;
        float kf[E], vf[E];
        kv_lane_values<E, KV>(kf, p, p.k_cache, p.k_codes, slot, kvh, lane);
        kv_lane_values<E, KV>(vf, p, p.v_cache, p.v_codes, slot, kvh, lane);
#pragma unroll
        for (int g = 0; g < MAXG; g++) {
            if (g >= p.group)
                break;
            float s = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++)
                s += q[g][e] * kf[e];
            s = warp_sum(s);
            float m_new = fmaxf(m[g], s);
            float corr = __expf(m[g] - m_new), pr = __expf(s - m_new);
            l[g] = l[g] * corr + pr;
#pragma unroll
            for (int e = 0; e < E; e++)
                acc[g][e] = acc[g][e] * corr + pr * vf[e];
            m[g] = m_new;
        }
    }

#pragma unroll
    for (int g = 0; g < MAXG; g++) {
#pragma unroll
        for (int e = 0; e < E; e++)
            s_acc[warp][g][lane * E + e] = acc[g][e];
        if (lane == 0) {
            s_m[warp][g] = m[g];
            s_l[warp][g] = l[g];
        }
    }
    __syncthreads();
    attn_merge_warps<HD, false>(p, &s_acc[0][0][0], &s_m[0][0], &s_l[0][0], WARPS, MAXG, t, kvh, split, p.splits);
}

/* Each token's splits merged into its output. */
static __global__ void kernel_attention_combine(attn_params p, int head_dim)
{
    int t = blockIdx.x, h = blockIdx.y;
    if (!attn_serves(p, tram_cuda_seq_of_token(p.query_start, p.num_seqs, t)))
        return;
    attn_combine_splits<false>(p, t, h, p.splits, head_dim);
}

static int check_shape(tram_backend *be, const tram_attn_shape *s)
{
    if (s->n_kv_heads < 1 || s->n_heads % s->n_kv_heads || s->n_heads / s->n_kv_heads > MAXG) {
        cuda_fail(be, "attention: %d query heads over %d KV heads is not supported (group of 1..%d)",
                  s->n_heads, s->n_kv_heads, MAXG);
        return -1;
    }
    if (s->head_dim != 64 && s->head_dim != 128 && s->head_dim != 256) {
        cuda_fail(be, "attention: head_dim %d is not supported (64, 128 or 256)", s->head_dim);
        return -1;
    }
    if (s->block_size < 1) {
        cuda_fail(be, "attention: block_size %d", s->block_size);
        return -1;
    }
    return 0;
}

template <int KV>
static void launch_v1(cuda_state *c, const attn_params &p, int hd)
{
    dim3 grid(p.num_tokens, p.n_kv_heads, p.splits);
    if (hd == 64)
        kernel_attention<2, KV><<<grid, WARPS * 32, 0, c->stream>>>(p);
    else if (hd == 128)
        kernel_attention<4, KV><<<grid, WARPS * 32, 0, c->stream>>>(p);
    else
        kernel_attention<8, KV><<<grid, WARPS * 32, 0, c->stream>>>(p);
}

/* Variant 1 over the rows p.rows names. */
static void attention_v1(cuda_state *c, attn_params p, int hd)
{
    if (p.kv == TRAM_KV_INT8)
        launch_v1<TRAM_KV_INT8>(c, p, hd);
    else if (p.kv == TRAM_KV_FP8)
        launch_v1<TRAM_KV_FP8>(c, p, hd);
    else
        launch_v1<TRAM_KV_AUTO>(c, p, hd);
    if (LAUNCH_CHECK(&c->st, "kernel_attention") || p.splits == 1)
        return;
    kernel_attention_combine<<<dim3(p.num_tokens, p.n_heads), hd, 0, c->stream>>>(p, hd);
    LAUNCH_CHECK(&c->st, "kernel_attention_combine");
}

/* Decode rows and prefill rows each go to their family's variant; a batch
 * with neither family above variant 1 runs variant 1 once over every row.
 * The batch's host counts (min/max_query_len, 0 when unknown) spare the
 * launch of a family the batch has no rows of. */
void cuda_attention(tram_backend *be, void *out, const void *q, const void *k_cache, const void *v_cache,
                    const tram_batch *b, const tram_attn_shape *s)
{
    cuda_state *c = cuda_of(be);
    if (b->num_tokens <= 0 || b->num_seqs <= 0 || check_shape(be, s))
        return;
    int T = b->num_tokens, hd = s->head_dim;
    int splits = tram_cuda_attn_splits(T, s->n_kv_heads, b->max_blocks_per_seq * s->block_size, c->num_sms);
    int64_t rows = (int64_t)splits * T * s->n_heads;
    if (rows > c->attn_partial_rows)
        splits = 1;  /* cannot happen by tram_cuda_attn_partial_rows; stay correct anyway */
    bool quantized = s->kv_dtype != TRAM_KV_AUTO;
    attn_params p = {
        .out = (bf16 *)out, .q = (const bf16 *)q,
        .k_cache = quantized ? NULL : (const bf16 *)k_cache, .v_cache = quantized ? NULL : (const bf16 *)v_cache,
        .k_codes = quantized ? (const uint8_t *)k_cache : NULL, .v_codes = quantized ? (const uint8_t *)v_cache : NULL,
        .kv = s->kv_dtype, .slot_bytes = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, hd, sizeof(bf16)),
        .scales_offset = tram_kv_scales_offset(s->n_kv_heads, hd),
        .positions = b->positions, .query_start = b->query_start, .seq_lens = b->seq_lens,
        .block_tables = b->block_tables, .num_tokens = T, .num_seqs = b->num_seqs,
        .max_blocks = b->max_blocks_per_seq, .n_heads = s->n_heads, .n_kv_heads = s->n_kv_heads,
        .group = s->n_heads / s->n_kv_heads, .block_size = s->block_size, .splits = splits, .scale = s->scale,
        .part_acc = c->attn_partial, .part_ml = c->attn_partial + rows * hd, .rows = ATTN_ALL,
    };
    int decode_v = cuda_variant(c, TRAM_KERNEL_DECODE), prefill_v = cuda_variant(c, TRAM_KERNEL_PREFILL);
    if ((decode_v == 1 && prefill_v == 1) || quantized) {
        attention_v1(c, p, hd);
        return;
    }
    if (b->min_query_len <= 1) {  /* decode rows, or unknown */
        p.rows = ATTN_DECODE_ROWS;
        if (decode_v == 1 || cuda_attention_decode_v2(c, p, hd))
            attention_v1(c, p, hd);
    }
    if (b->max_query_len != 1) {  /* prefill rows, or unknown */
        p.rows = ATTN_PREFILL_ROWS;
        int longest = b->max_query_len > 0 ? b->max_query_len : T;
        if (prefill_v == 1 || cuda_attention_prefill_v2(c, p, hd, longest))
            attention_v1(c, p, hd);
    }
}
