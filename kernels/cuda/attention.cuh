/* attention.cuh — what the attention kernels share: their parameters, which
 * tokens a launch serves, and the launchers of the numbered variants
 * (kernels/variants.h).  attention.cu holds variant 1 and picks the
 * variants; attention_decode_v2.cu holds the variant-2 decode kernel and
 * calls nothing back. */
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
    const bf16 *k_cache, *v_cache;      /* [slots][n_kv_heads][head_dim] */
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

/* Variant 2 of decode attention for p (p.rows == ATTN_DECODE_ROWS); returns 0
 * after queueing it, or -1, queueing nothing, when the shape has no instance
 * (then variant 1 serves it). */
int cuda_attention_decode_v2(cuda_state *c, const attn_params &p, int head_dim);

#endif
