/* cpu_sampling.h — the host sampler: picks the next token from one row of f32
 * logits under kernels/sampling_params.h's rules, and computes logprobs.  It is the
 * reference kernels/cuda/sampling.cu is checked against.
 *
 * Randomness is counter-based: the uniform number used for a token is a hash
 * of (seed, sample index, completion position), so a seeded request gets the
 * same tokens whatever else shares its batch, and preemption (which recomputes
 * but never resamples) changes nothing. */
#ifndef TRAM_CPU_SAMPLING_H
#define TRAM_CPU_SAMPLING_H

#include <stdint.h>

#include "kernels/base.h"
#include "kernels/sampling_params.h"

typedef struct tram_sampler tram_sampler;

/* One draw: the row's parameters, its bias list and bans, and the token
 * history the penalties read. */
typedef struct {
    tram_sampler_row p;
    const tram_logit_bias *bias;  /* added in order */
    int num_bias;
    const int32_t *banned;        /* then masked out (EOS and stop tokens before min_tokens) */
    int num_banned;
    int sample_index;             /* which of the request's samples */
    const int32_t *prompt;        /* repetition penalty looks at prompt and output */
    int prompt_len;
    const int32_t *output;        /* tokens generated so far; output_len is the position */
    int output_len;
} tram_sample_input;

/* Scratch space for rows of vocab logits, allocated once. */
int tram_sampler_create(tram_sampler **out, int vocab, tram_error *err);
void tram_sampler_destroy(tram_sampler *s);

/* The token drawn from logits[vocab] (left unchanged) under in. */
int32_t tram_sample(tram_sampler *s, const float *logits, const tram_sample_input *in);

/* The ids the draw of tram_sample chooses among (positive probability, after
 * min-p, top-k and top-p) into ids[vocab], best first; returns how many.  A
 * greedy row has one: its argmax.  (What the device sampler's kept prefix is
 * checked against.) */
int tram_sample_kept(tram_sampler *s, const float *logits, const tram_sample_input *in, int32_t *ids);

/* The distribution tram_sample draws from, normalized, into probs[vocab]:
 * every parameter of in applied (bias, bans, penalties, temperature, min-p,
 * top-k, top-p); a greedy row is a point mass on its argmax. */
void tram_sample_probs(tram_sampler *s, const float *logits, const tram_sample_input *in, float *probs);

/* The rejection sampler of speculative decoding (Leviathan et al.), for a
 * draft token drawn from q: it is kept when u_accept < min(1, p(d) / q(d));
 * else the token is drawn with u_resample from norm(max(0, p - q)), so the
 * result is distributed as p whatever q is.  p and q are normalized
 * probs[vocab] (tram_sample_probs of the target's and the draft's rows);
 * residual[vocab] is scratch.  Returns the token, *accepted whether it is
 * the draft.  For a point mass q on d (a deterministic proposer such as
 * n-gram lookup), d is kept with probability p(d) and the residual is p
 * without d: the same law as drawing x from p and keeping d when x = d,
 * which is how the engine verifies such drafts (engine.c, verify_drafts). */
int32_t tram_rejection_sample(const float *p, const float *q, int vocab, int32_t draft, double u_accept,
                              double u_resample, float *residual, int *accepted);

/* Logprob and rank of `token` in the raw distribution of logits, and its k best
 * alternatives written to top[k]. */
void tram_logprobs(tram_sampler *s, const float *logits, int32_t token, int k,
                   tram_logprob_entry *out, tram_token_logprob *top);

/* The index of the largest of x[0..n), the first of equals: greedy's pick. */
int32_t tram_argmax(const float *x, int n);

/* The uniform number in [0, 1) for (seed, sample, position). */
double tram_sample_uniform(uint64_t seed, int sample_index, int position);

#endif
