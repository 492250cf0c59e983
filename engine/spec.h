/* spec.h — speculative decoding: the proposers behind one interface.
 *
 * A proposer guesses up to max_k tokens that follow a sequence's tokens; the
 * engine runs them as extra query tokens of the sequence in the same unified
 * batch (1 + k rows of logits) and keeps the longest run its own draws agree
 * with, plus the draw after it (engine.c's verify_drafts).  The verifier never
 * looks inside a proposer: n-gram lookup guesses from the text, a draft model
 * (the quantized self-draft, spec_draft.c) runs a cheaper model over the
 * sequence in KV blocks of its own, and EAGLE or MTP heads would be one more
 * implementation of this struct. */
#ifndef TRAM_SPEC_H
#define TRAM_SPEC_H

#include <stdint.h>

#include "engine/block_manager.h"
#include "engine/step_cost.h"
#include "engine/tram.h"
#include "models/model.h"

/* One decoding sequence's part of a proposal: what the proposer sees of
 * it, and where its guesses go. */
typedef struct {
    const int32_t *tokens;
    int n;                          /* tokens[0, n): prompt and output so far */
    const tram_block_table *table;  /* its KV blocks, covering n + max_k tokens */
    int *draft_computed;            /* of tokens, those whose KV a draft model holds */
    int max_k;                      /* the most guesses wanted */
    int32_t *out;                   /* [max_k]: the guesses */
    int got;                        /* written: how many (0: no guess this step) */
} tram_propose_seq;

typedef struct tram_proposer tram_proposer;

struct tram_proposer {
    const char *name;           /* the --speculative-config method */
    int runs_model;             /* its guesses cost a forward pass each (no shadow guesses) */
    /* where such a proposer adds each pass's tokens and seconds (set by the
     * scheduler, whose rule prices the passes from them), or NULL */
    tram_step_cost *pass_cost;
    /* Guesses for all of a step's speculating sequences at once (a draft
     * model runs them together, one pass per guess position; one sequence
     * is a batch of one): each seqs[i].got is set; -1 on error, when no
     * guess counts. */
    int (*propose)(tram_proposer *p, tram_propose_seq *seqs, int num_seqs, tram_error *err);
    /* A KV pool of its own (a separate draft model's) resized to num_blocks
     * when the target's is (the pool fitted to GPU memory); NULL: none. */
    int (*resize_kv)(tram_proposer *p, int num_blocks, tram_error *err);
    void (*destroy)(tram_proposer *p);
};

/* The settings checked (method known, k in [1, TRAM_SPEC_MAX_TOKENS], the
 * lookup window sane); -1 with the field's name on failure. */
int tram_spec_config_check(const tram_spec_config *c, tram_error *err);

/* What a draft model is loaded from: its file (the target's own for the
 * self-draft) with the limits it runs under (the self-draft's keep the
 * file's GGUF blocks, or on CUDA quantize to int8), on the target's backend (rank 0), drawing from the
 * first vocab logits, for at most max_batch sequences a step; file NULL
 * for a proposer without a model.  kv_from: the target, whose KV pool the
 * self-draft reads and writes (models/model.h, tram_model_share_kv), or
 * NULL for a draft with a pool of its own. */
typedef struct {
    tram_model_file *file;
    tram_backend *be;
    tram_model_limits lim;
    int vocab;
    int max_batch;
    const tram_model *kv_from;
} tram_draft_env;

/* The proposer c names, or NULL in *out when speculation is off. */
int tram_proposer_create(tram_proposer **out, const tram_spec_config *c, const tram_draft_env *env,
                         tram_error *err);
void tram_proposer_destroy(tram_proposer *p);

/* n-gram prompt lookup (vLLM's "ngram"): finds the most recent earlier
 * occurrence of the last n tokens, for n from lookup_max down to lookup_min,
 * and proposes the tokens that followed it. */
int tram_ngram_propose(const int32_t *tokens, int n, int lookup_min, int lookup_max, int max_k,
                       int32_t *out);

/* A draft model's proposer (spec_draft.c), named method: the quantized
 * self-draft ("self": the target's own file with its GGUF blocks kept,
 * drafting for the f32 target; on CUDA quantized to int8, drafting for the
 * bf16 one) or a separate model ("draft_model").  It
 * drafts greedily, one forward pass per guess position for all the
 * sequences of a step together. */
int tram_draft_proposer_create(tram_proposer **out, const char *method, const tram_draft_env *env,
                               tram_error *err);

/* draft_model's file, opened from c->model (a preset with dummy weights
 * when dummy), checked against the target: the same vocabulary, a context
 * of at least max_model_len. */
int tram_spec_open_draft(tram_model_file **out, const tram_spec_config *c, int dummy,
                         const tram_model_config *target, int max_model_len, tram_error *err);

/* ---------------------------------------------------------------- the automatic rule
 *
 * Each step, each decoding sequence verifies the j of its k drafts (j in
 * 0..k) that make the step's output the fastest:
 *     j = argmax (P + g(j)) / T(N + j),
 * with P the tokens the step is expected to yield and N the tokens it runs
 * so far (every decoding sequence's one, and the drafts chosen before this
 * sequence's), T the measured time of a decode step by its token count (a
 * line, t = a + b n, fitted to recent steps, b being what a step's extra
 * token costs, with each size's own measured departure from it added), and
 * g(j) the accepted tokens j drafts are expected to yield from
 * the sequence's own record: with r_i the chance that draft i is accepted
 * when the drafts before it were,
 *     g(j) = r_0 + r_0 r_1 + ... + r_0 r_1 ... r_{j-1}.
 * So drafts go where they are accepted, as deep as their acceptance holds,
 * and only while verifying is cheap: a large batch (T steep in N) or text
 * with nothing to copy turns them down by itself.  A sequence whose drafts
 * are declined verifies one draft now and then (a probe, after 4 declined
 * steps, then 8, 16, ... up to 256), so that a proposer that starts to pay
 * is noticed; one whose guesses cost no model pass is instead checked every
 * step against the token drawn (its shadow) and never probes, and the
 * rule weighs only the guesses it has (they are made before it decides).
 * Until the line is first fitted, the steps that measure it verify few
 * drafts (tram_step_cost_drafts).
 *
 * A draft model's passes are priced apart, by a second line of their own
 * measured time by the tokens they run (P(m) = p0 + p1 m, m being the
 * sequences drafting that deep): the step's draws are then T(N + j) plus
 * the passes.  A pass serves every sequence drafting that deep, so its p0
 * is shared, and no one sequence can judge it: the step's depth D (the most
 * drafts a sequence verifies) is chosen for the whole step
 * (tram_spec_depth), each sequence then choosing its j up to D with the D
 * passes' p0 paid and p1 a draft.  Priced per token instead, as the step
 * line alone would, a few sequences at batch 32 drafted 8 deep on passes
 * that cost 8 p0 for five sequences' drafts (0.87x, bench/results/spec.md). */

/* A sequence's drafts so far, decayed so that the record follows its text:
 * per draft position, the times it was verified (the drafts before it
 * accepted) and accepted. */
typedef struct {
    float tries[TRAM_SPEC_MAX_TOKENS], hits[TRAM_SPEC_MAX_TOKENS];
    int32_t shadow;            /* a declined first draft, or -1 */
    int wait, backoff;         /* declined steps until the next probe; the wait after it */
} tram_spec_record;

void tram_spec_record_init(tram_spec_record *r);
/* accepted of proposed drafts (1 of 1 or 0 of 1 for a shadow check). */
void tram_spec_record_add(tram_spec_record *r, int accepted, int proposed);
/* r_i: the chance draft i is accepted when the drafts before it were, its
 * record smoothed towards r_{i-1}'s (r_0's towards 1/2), so that a position
 * never verified counts as its predecessor. */
double tram_spec_acceptance(const tram_spec_record *r, int i);

/* g(j): the accepted tokens j drafts are expected to yield. */
double tram_spec_gain(const tram_spec_record *r, int j);

/* How many of `proposed` drafts to verify in a step of `tokens` tokens so
 * far that expects `yield` tokens (0: none): the j maximising (yield +
 * g(j)) / (T(tokens + j) + the price's passes), every draft while no line
 * is fitted; *gain is their expected accepted tokens.  No probes: for
 * guesses checked against the token drawn every step (n-gram's shadows),
 * whose record never goes stale, a probe would only cost its token. */
int tram_spec_best(const tram_spec_record *r, int proposed, const tram_step_cost *c, double tokens, double yield,
                   const tram_draft_price *price, double *gain);

/* tram_spec_best with probes, for a draft model's guesses, which are checked
 * only when verified: a declined sequence's wait counts down here, and at
 * its end one draft is verified. */
int tram_spec_choose(tram_spec_record *r, int proposed, const tram_step_cost *c, double tokens, double yield,
                     const tram_draft_price *price, double *gain);

/* The depth of a draft model's step whose num decoding sequences have the
 * records recs and may verify up to proposed[i] drafts each, starting from
 * `tokens` and `yield`: the D in 0..max proposed whose step, each sequence
 * choosing its j up to D in turn (tram_spec_best at tram_pass_price(D)),
 * yields the most per second, its passes costed at the sequences each one
 * really serves.  Needs a fitted step line. */
int tram_spec_depth(const tram_spec_record *const *recs, const int *proposed, int num, const tram_step_cost *c,
                    const tram_step_cost *pass, double tokens, double yield);

#endif
