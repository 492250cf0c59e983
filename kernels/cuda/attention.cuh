/* attention.cuh — what the attention kernels share: their parameters, which
 * tokens a launch serves, and the launchers of the numbered variants
 * (kernels/variants.h).  attention.cu holds variant 1 and picks the
 * variants; attention_decode_v2.cu and attention_prefill_v2.cu hold the
 * variant-2 kernels and call nothing back. */
#ifndef TRAM_CUDA_ATTENTION_CUH
#define TRAM_CUDA_ATTENTION_CUH

#include "kernels/cuda/cuda_impl.cuh"

/* Which tokens one launch attends: a mixed batch may send its decode rows
 * (sequences with one query token) and its prefill rows (longer query
 * ranges) to different variants. */
typedef enum {
    ATTN_ALL = 0,
    ATTN_DECODE_ROWS = 1,
    ATTN_PREFILL_ROWS = 2,
} attn_rows;

typedef struct {
    bf16 *out;                          /* [tokens][n_heads][head_dim] */
    const bf16 *q;                      /* [tokens][n_heads][head_dim] */
    const bf16 *k_cache, *v_cache;      /* [slots][n_kv_heads][head_dim] (kv TRAM_KV_AUTO) */
    const uint8_t *k_codes, *v_codes;   /* [slots][slot_bytes] (kv int8 or fp8: variant 1 only) */
    tram_kv_dtype kv;
    size_t slot_bytes, scales_offset;   /* kernels/kv_format.h's, for a quantized cache */
    const int32_t *positions, *query_start, *seq_lens, *block_tables;
    int num_tokens, num_seqs, max_blocks, n_heads, n_kv_heads, group, block_size;
    int splits;                         /* variant 1: every token's; variant 2: the grid's bound */
    float scale;
    float *part_acc;                    /* [splits][tokens][n_heads][head_dim] */
    float *part_ml;                     /* [splits][tokens][n_heads][2]: max, sum */
    attn_rows rows;
} attn_params;

/* Whether this launch serves sequence seq's tokens. */
static __device__ __forceinline__ bool attn_serves(const attn_params &p, int seq)
{
    if (p.rows == ATTN_ALL)
        return true;
    bool decode = p.query_start[seq + 1] - p.query_start[seq] == 1;
    return decode == (p.rows == ATTN_DECODE_ROWS);
}

/* exp of a softmax exponent: natural (variant 1) or base 2 (variant 2, whose
 * scores are pre-scaled by log2 e). */
template <bool BASE2>
static __device__ __forceinline__ float attn_exp(float x)
{
    return BASE2 ? exp2f(x) : __expf(x);
}

/* Merges a block's per-warp softmax states — s_acc[warp][g][HD], s_m and s_l
 * [warp][g], g < gstride — for the query heads of KV head kvh and writes
 * token t's output, or split's partials when the token has several splits. */
template <int HD, bool BASE2>
static __device__ void attn_merge_warps(const attn_params &p, const float *s_acc, const float *s_m, const float *s_l,
                                        int warps, int gstride, int t, int kvh, int split, int splits)
{
    for (int idx = threadIdx.x; idx < p.group * HD; idx += blockDim.x) {
        int g = idx / HD, d = idx % HD, h = kvh * p.group + g;
        float M = -INFINITY, L = 0.0f, A = 0.0f;
        for (int w = 0; w < warps; w++)
            M = fmaxf(M, s_m[w * gstride + g]);
        for (int w = 0; M != -INFINITY && w < warps; w++) {
            float f = attn_exp<BASE2>(s_m[w * gstride + g] - M);
            L += s_l[w * gstride + g] * f;
            A += s_acc[(w * gstride + g) * HD + d] * f;
        }
        if (splits == 1) {
            p.out[((size_t)t * p.n_heads + h) * HD + d] = __float2bfloat16(L > 0.0f ? A / L : 0.0f);
            continue;
        }
        size_t row = ((size_t)split * p.num_tokens + t) * p.n_heads + h;
        p.part_acc[row * HD + d] = A;
        if (d == 0) {
            p.part_ml[2 * row] = M;
            p.part_ml[2 * row + 1] = L;
        }
    }
}

/* out = Σ_s exp(m_s − M)·acc_s / Σ_s exp(m_s − M)·l_s over token t's splits, head h. */
template <bool BASE2>
static __device__ void attn_combine_splits(const attn_params &p, int t, int h, int splits, int head_dim)
{
    float M = -INFINITY;
    for (int s = 0; s < splits; s++)
        M = fmaxf(M, p.part_ml[2 * (((size_t)s * p.num_tokens + t) * p.n_heads + h)]);
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float L = 0.0f, A = 0.0f;
        for (int s = 0; M != -INFINITY && s < splits; s++) {
            size_t row = ((size_t)s * p.num_tokens + t) * p.n_heads + h;
            float f = attn_exp<BASE2>(p.part_ml[2 * row] - M);
            L += p.part_ml[2 * row + 1] * f;
            A += p.part_acc[row * head_dim + d] * f;
        }
        p.out[((size_t)t * p.n_heads + h) * head_dim + d] = __float2bfloat16(L > 0.0f ? A / L : 0.0f);
    }
}

/* Variant 2 of decode attention for p (p.rows == ATTN_DECODE_ROWS); returns 0
 * after queueing it, or -1, queueing nothing, when the shape has no instance
 * (then variant 1 serves it). */
int cuda_attention_decode_v2(cuda_state *c, const attn_params &p, int head_dim);

/* Variant 2 of prefill attention (tensor cores) for the prefill rows of p,
 * at most max_query_len tokens per sequence; 0, or -1 as above. */
int cuda_attention_prefill_v2(cuda_state *c, const attn_params &p, int head_dim, int max_query_len);

#endif
