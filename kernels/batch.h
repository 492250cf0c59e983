/* batch.h — the unified batch: one flattened set of tokens per forward pass,
 * whatever mix of prefill chunks and decodes it holds (vLLM V1's shape).
 * Chunked prefill, prefix-cache hits and preemption all reduce to this. */
#ifndef TRAM_BATCH_H
#define TRAM_BATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int num_tokens, num_seqs;
    const int32_t *token_ids;     /* [num_tokens]                                */
    const int32_t *positions;     /* [num_tokens] position of each token         */
    const int32_t *slot_mapping;  /* [num_tokens] block * block_size + offset    */
    const int32_t *query_start;   /* [num_seqs + 1] prefix sums into the tokens  */
    const int32_t *seq_lens;      /* [num_seqs] context length after this step   */
    const int32_t *block_tables;  /* [num_seqs][max_blocks_per_seq]              */
    int max_blocks_per_seq;
    /* Rows (token indices) whose logits the caller wants, in output order:
     * usually the last token of each sequence; every prompt token when prompt
     * logprobs are asked for. */
    const int32_t *logits_rows;   /* [num_logits] */
    int num_logits;
    /* The shortest and longest query range (host ints; 0: unknown).  The
     * model sets them when it uploads the batch, so that a backend knows
     * without a download whether the batch holds decode rows (ranges of 1)
     * and prefill rows, and how long a prefill chunk is. */
    int min_query_len, max_query_len;
    /* [num_seqs] the LoRA slot each sequence's rows use (models/lora_slots.h),
     * -1 for the base model alone; NULL: no sequence uses one.  Host memory,
     * read when the batch is uploaded. */
    const int32_t *seq_lora;
} tram_batch;

/* Block-table entries the batch uses: the most blocks any sequence spans.
 * Uploads copy these columns only, not max_blocks_per_seq of them. */
static inline int tram_batch_used_blocks(const tram_batch *b, int block_size)
{
    int used = 0;
    for (int s = 0; s < b->num_seqs; s++) {
        int n = (b->seq_lens[s] + block_size - 1) / block_size;
        used = n > used ? n : used;
    }
    return used < b->max_blocks_per_seq ? used : b->max_blocks_per_seq;
}

/* Each sequence's first `used` table entries, rows `used` apart, into out. */
static inline void tram_batch_pack_tables(const tram_batch *b, int used, int32_t *out)
{
    for (int s = 0; s < b->num_seqs; s++)
        for (int j = 0; j < used; j++)
            out[(long)s * used + j] = b->block_tables[(long)s * b->max_blocks_per_seq + j];
}

#ifdef __cplusplus
}
#endif

#endif
