/* cuda.h — what the CUDA backend offers beyond the op table of
 * kernels/backend.h: random weights made on the device (--load-format
 * dummy), sampling on the device, and CUDA graphs of decode steps.  Plain C
 * prototypes; only compiled into bin/tram-cuda (TRAM_CUDA). */
#ifndef TRAM_CUDA_H
#define TRAM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "kernels/backend.h"
#include "kernels/sampling_params.h"
#include "kernels/variants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- presence ---- */

/* 0 when GPU device_index is usable; else -1 and one sentence saying why. */
int tram_cuda_probe(int device_index, tram_error *err);

/* ---- kernel variants ---- */

/* Selects each family's kernel variant (kernels/variants.h; NULL: all 1).
 * Fails naming the family when kv asks for a variant this build lacks.
 * Drops captured CUDA graphs, which hold the kernels chosen before. */
int tram_cuda_set_kernel_variants(tram_backend *be, const tram_kernel_variants *kv, tram_error *err);

/* ---- dummy weights ---- */

/* Fills w (rows × cols) with uniform random values in [-scale, scale] drawn
 * on the device from `seed`, in `type` (rows == 1: f32, as every vector). */
void tram_cuda_random_weight(tram_backend *be, tram_weight *w, int rows, int cols, tram_wtype type,
                             uint64_t seed, float scale);

/* ---- sampling on the device ---- */

/* One row to draw from, under kernels/sampling_params.h's rules (p.seed is the
 * Philox key), with kernels/cpu/sampling.c as the reference. */
typedef struct {
    tram_sampler_row p;
    int row;               /* row of the logits to draw from */
    int seat;              /* token counts of this sequence (tram_cuda_seat_load); -1: none,
                              then the penalties must be off */
    int bias_start, num_bias;  /* its entries of the call's bias list (-INFINITY bans) */
    uint64_t step;         /* Philox subsequence: sample index << 32 | output position */
} tram_cuda_sampling;

/* Sizes the sampler once, so that no later call allocates: at most `rows`
 * rows of tram_cuda_sample and sequences of tram_cuda_verify per call,
 * `draws` rows of tram_cuda_verify (at least rows), `max_bias` bias entries
 * per call, `seats` sequences of token counts over `vocab` ids, histories of
 * at most `max_history` tokens. */
int tram_cuda_sampler_reserve(tram_backend *be, int rows, int draws, int max_bias, int seats, int vocab,
                              int max_history, tram_error *err);

/* Sets seat's counts from a sequence's tokens: prompt [0, prompt_len) marks
 * ids seen, output [prompt_len, num_tokens) counts them.  Queued, no sync. */
int tram_cuda_seat_load(tram_backend *be, int seat, const int32_t *tokens, int prompt_len,
                        int num_tokens, tram_error *err);

/* Logits on the device: bf16 [rows][stride], of which ids [0, vocab) are
 * drawn from (a model may have more rows in lm_head than its tokenizer ids). */
typedef struct {
    const void *data;
    int rows, stride, vocab;
} tram_cuda_logits;

/* Draws one token per params[i] into ids[i]; logprobs[i] (may be NULL) is the
 * log-softmax of the raw row at that id.  A seat's count of its drawn id
 * grows by one.  Only ids and logprobs cross to the host.  Rows with bias or
 * penalties are processed in f32 scratch: the logits stay unchanged. */
int tram_cuda_sample(tram_backend *be, const tram_cuda_logits *logits, const tram_cuda_sampling *params,
                     int n, const tram_logit_bias *bias, int num_bias, int32_t *ids, float *logprobs,
                     tram_error *err);

/* One sequence's rows for tram_cuda_verify: params[first, first + rows). */
typedef struct {
    int first, rows;
} tram_cuda_verify_seq;

/* Speculative decoding's verification on the device: for each sequence (one
 * block each), its rows drawn in order as tram_cuda_sample draws them, until
 * a draw differs from the row's draft (drafts[i]; -1 for a sequence's last
 * row, the bonus draw, which no draw equals).  Row j's draw sees the draws
 * before it in the seat's counts, so when they were its drafts it sees what
 * decoding without drafts would have; each row's own params carry its
 * position (step) and bias list.  For a proposer whose q is a point mass on
 * its draft this is the rejection sampler exactly (kernels/cpu/cpu_sampling.h,
 * tram_rejection_sample): the draft is kept with probability p(draft), and
 * the draw that differs comes from p without it.  ids[i] gets row i's draw,
 * or -1 past the sequence's first mismatch (never drawn); only ids cross to
 * the host.  A sequence's seat, if any, ends holding its drawn tokens, so it
 * stays right whatever was accepted.  No two sequences may share a seat. */
int tram_cuda_verify(tram_backend *be, const tram_cuda_logits *logits, const tram_cuda_sampling *params,
                     const int32_t *drafts, int n, const tram_cuda_verify_seq *seqs, int num_seqs,
                     const tram_logit_bias *bias, int num_bias, int32_t *ids, tram_error *err);

/* ---- token masks (structured outputs) ---- */

/* Sizes the mask buffers once: at most `rows` masks of `words` uint32 words
 * per call. */
int tram_cuda_mask_reserve(tram_backend *be, int rows, int words, tram_error *err);
/* Uploads n packed bitmasks (mask i at masks[i * words], bit id & 31 of word
 * id >> 5 for token id) and sets every logit of row rows[i] whose bit is
 * clear (ids past the mask too) to -INFINITY, in place: kernels/cpu/mask.c on
 * the device, run before tram_cuda_sample and the host rows' download.
 * Queued; masks may be reused on return. */
int tram_cuda_apply_masks(tram_backend *be, const tram_cuda_logits *logits, const int32_t *rows,
                          const uint32_t *masks, int n, int words, tram_error *err);

/* ---- CUDA graphs of decode steps ---- */

/* Capture: call begin, run the forward ops of a decode step padded to
 * `bucket` sequences (tram_cuda_graph_bucket in launch_plan.h) on buffers
 * whose addresses never change, then end.  Inside a capture no op may upload,
 * download, sync or allocate: upload the step's batch arrays before replay.
 * Replay re-runs the captured ops on the current contents of those buffers. */
int tram_cuda_graph_begin(tram_backend *be, tram_error *err);
int tram_cuda_graph_end(tram_backend *be, int bucket, tram_error *err);
int tram_cuda_graph_ready(tram_backend *be, int bucket);
int tram_cuda_graph_replay(tram_backend *be, int bucket, tram_error *err);

/* ---- device facts (benchmarks, logs) ---- */

typedef struct {
    char name[256];
    int num_sms;
    size_t total_bytes, free_bytes;
} tram_cuda_device_info;

int tram_cuda_device_info_of(tram_backend *be, tram_cuda_device_info *out, tram_error *err);

#ifdef __cplusplus
}
#endif

#endif
