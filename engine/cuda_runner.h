/* cuda_runner.h — what the engine does only with the CUDA backend: the KV
 * pool fitted to GPU memory, CUDA graphs of decode steps and sampling on the
 * device.  These functions exist in every build (without CUDA they fail with
 * one sentence), so that engine/engine.c and cli/main.c need no
 * #ifdef. */
#ifndef TRAM_CUDA_RUNNER_H
#define TRAM_CUDA_RUNNER_H

#include "kernels/base.h"
#include "engine/ranks.h"
#include "engine/scheduler.h"
#include "kernels/cuda/cuda.h"
#include "models/model.h"

/* 0 when a usable NVIDIA GPU is present; else -1 and one sentence saying why
 * (no device, no driver, or a binary built without CUDA). */
int tram_cuda_runner_probe(tram_error *err);

typedef struct {
    int max_tokens, max_seqs;    /* the engine's step limits */
    int block_size, max_blocks_per_seq, max_model_len;
    double utilization;          /* --gpu-memory-utilization */
    int reserved_blocks;         /* blocks of the pool kept from the block manager */
    size_t reserved_bytes;       /* device memory taken after the fit (LoRA slots' factors) */
    tram_kv_dtype kv;            /* --kv-cache-dtype: a block's bytes (kernels/kv_format.h) */
    size_t draft_block_bytes;    /* a draft model's KV beside each block (its pool has as many, on rank 0) */
} tram_cuda_pool_spec;

/* KV blocks the profiling pass needs: create the model with this pool first. */
int tram_cuda_profile_blocks(const tram_cuda_pool_spec *s);
/* Runs a profiling forward pass of a full token budget (every buffer a step
 * grows is then allocated), then returns in *num_blocks how many KV blocks
 * for the block manager fit in utilization × device memory beside what is in
 * use (the profiling pool excepted), the reserved blocks and bytes.  Fails with the
 * numbers when not even one sequence of max_model_len fits. */
int tram_cuda_fit_pool(tram_ranks *ranks, const tram_cuda_pool_spec *s, int *num_blocks, tram_error *err);

/* ---- the CUDA step: graphs and sampling on the device ----
 *
 * A decode-only step of n sequences is padded to the graph bucket of n (pad
 * rows decode token 0 at position 0 into a block of their own, outside the
 * block manager, so real KV is never touched); the bucket's graph is
 * captured the first time the bucket is met, after one eager run of the same
 * padded batch (so that every buffer and GEMM plan the pass needs exists
 * before the capture), and replayed afterwards.  Every other step runs
 * eagerly.  Then each row whose sequence the device sampler can serve is
 * drawn there; only the other rows' logits are downloaded.  Whether a row
 * is drawn on the device depends on its own request alone (never on the
 * rest of the batch), so a seeded request reproduces whatever shares its
 * steps.
 *
 * A speculating sequence (k drafts: k + 1 logits rows, the verifier's
 * batched forward) runs eagerly: a graph holds one token and one row per
 * sequence.  When the device draws its requests' tokens and no grammar
 * constrains it, its rows are drawn there in order until a draw differs
 * from its draft (tram_cuda_verify), row j as decoding without drafts would
 * draw the token j further on (tram_cuda_sampling_ahead), with the draws
 * before it in its seat's counts; only the drawn ids come back, the rows
 * past the first mismatch are neither drawn nor downloaded
 * (TRAM_CUDA_NOT_DRAWN).  A grammar-constrained one is verified on the host
 * (its masks past row 0 need the matcher moved through the drafts), as are
 * the requests the host sampler serves anyway.  Rollback needs nothing
 * here: the block manager truncates the table, the next step's batch
 * carries the positions and tables, and a seat ends holding exactly the
 * draws the engine keeps (the accepted drafts and the draw after them); a
 * sequence the host verified leaves its seat a length that no longer
 * matches, so the seat is loaded again. */

/* Bias and ban entries one row may bring to the device sampler. */
#define TRAM_CUDA_MAX_BIAS 512

/* The pure host logic, compiled in every build and unit-tested on the CPU. */

/* Graph bucket of a step: decode-only (every sequence one token and one
 * logits row), no sequence with a LoRA adapter, with a bucket no larger than
 * max_seqs; else 0 (run eagerly, unpadded). */
int tram_cuda_step_bucket(const tram_batch *b, int max_seqs);

/* Arrays of a padded batch, each for max_seqs rows (query_start one more). */
typedef struct {
    int32_t *token_ids, *positions, *slot_mapping, *query_start, *seq_lens, *block_tables, *logits_rows;
} tram_cuda_padded;

/* The decode-only batch b padded to `bucket` sequences in p's arrays; pad
 * rows use block pad_block; no row carries an adapter (seq_lora NULL).  Of each row's block table only the columns the
 * step uses (tram_batch_used_blocks) are copied. */
tram_batch tram_cuda_pad_batch(const tram_batch *b, int bucket, int pad_block, int block_size,
                               const tram_cuda_padded *p);

/* 1 and the device sampler's parameters (row and bias_start 0, seat -1) when
 * s's next token can be drawn on the device; 0 when it needs the host
 * sampler (logprobs, prompt logprobs, the step that forks n samples, more
 * than TRAM_CUDA_MAX_BIAS bias and ban entries).  *bias gets its entries:
 * the logit bias, then -INFINITY for each banned id while min_tokens holds. */
int tram_cuda_sampling_of(const tram_seq *s, tram_cuda_sampling *sp, tram_logit_bias *bias, int *num_bias);

/* Row j (>= 1) of a speculating sequence's verification, from its row 0's
 * parameters `first` (tram_cuda_sampling_of, row set): the next row, the
 * position j further on (the uniform decoding would use there), and the
 * bans only while min_tokens still holds at that position (they follow the
 * logit bias in first's entries, so a row's entries are a prefix of them). */
tram_cuda_sampling tram_cuda_sampling_ahead(const tram_seq *s, const tram_cuda_sampling *first, int j);

/* Which device token-count row ("seat") holds which sequence's history. */
typedef struct {
    uint64_t key;      /* the sequence (tram_cuda_seq_key); 0: empty */
    int len;           /* tokens its counts hold */
    uint64_t used;     /* step of last use */
} tram_cuda_seat;

uint64_t tram_cuda_seq_key(const tram_seq *s);
/* The seat for sequence `key` of num_tokens tokens in step `step`; *load = 1
 * when its counts must be loaded first (a new seat, or a history that
 * changed behind the device).  Takes an empty seat or the least recently
 * used one not used in this step; -1 when all are.  The seat then holds
 * num_tokens + 1 tokens: the draw adds its own. */
int tram_cuda_seat_for(tram_cuda_seat *seats, int num_seats, uint64_t key, int num_tokens, uint64_t step,
                       int *load);

/* The runner itself (CUDA builds; elsewhere create fails with a sentence). */
typedef struct tram_cuda_runner tram_cuda_runner;

typedef struct {
    int max_seqs, max_rows;      /* the engine's step limits */
    int max_logits;              /* logits rows the model keeps on the device (tram_model_limits) */
    int vocab, logits_width;     /* ids drawn, and the logits' row length */
    int max_model_len, block_size;
    int pad_block;               /* graphs' pad block; -1: no graphs (--enforce-eager) */
    int mask_words;              /* uint32 words of a grammar's token mask (grammar/grammar.h) */
} tram_cuda_runner_spec;

/* Allocates every buffer a step needs, device ones included (create it
 * before tram_cuda_fit_pool, so that they count). */
int tram_cuda_runner_create(tram_cuda_runner **out, tram_backend *be, const tram_cuda_runner_spec *spec,
                            tram_error *err);
void tram_cuda_runner_destroy(tram_cuda_runner *g);
/* The pad block is known once the pool is sized. */
void tram_cuda_runner_set_pad_block(tram_cuda_runner *g, int pad_block);

/* Runs the scheduled step: the forward pass on every rank (each a graph
 * replay when eligible), device draws from rank 0's logits, and
 * logits[row][logits_width] (host) for the rows left to the host sampler.
 * The runner's backend is rank 0's. */
int tram_cuda_runner_step(tram_cuda_runner *g, tram_ranks *ranks, const tram_batch *b, const tram_sched_item *items,
                          const int *item_row0, const int *item_nrows, float *logits, tram_error *err);
/* The next step's token masks: masks[i * mask_words ..] for logits row
 * rows[i], applied on the device after the forward pass, before any row is
 * drawn or downloaded (grammar-constrained sequences).  The arrays must
 * stay valid until that step returns. */
void tram_cuda_runner_set_masks(tram_cuda_runner *g, const int32_t *rows, const uint32_t *masks, int n);
/* A row of a verification on the device past its first mismatch. */
#define TRAM_CUDA_NOT_DRAWN (-2)

/* The token drawn on the device for logits row `row` of the last step, -1
 * when that row is the host's, or TRAM_CUDA_NOT_DRAWN. */
int32_t tram_cuda_runner_token(const tram_cuda_runner *g, int row);

typedef struct {
    uint64_t eager_steps, graph_steps, captures, device_rows, host_rows;
    uint64_t verified_rows;      /* device_rows that were rows of a verification */
} tram_cuda_runner_stats;
void tram_cuda_runner_stats_get(const tram_cuda_runner *g, tram_cuda_runner_stats *out);

#endif
