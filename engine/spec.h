/* spec.h — speculative decoding: the proposers behind one interface.
 *
 * A proposer guesses up to max_k tokens that follow a sequence's tokens; the
 * engine runs them as extra query tokens of the sequence in the same unified
 * batch (1 + k rows of logits) and keeps the longest run its own draws agree
 * with, plus the draw after it (engine.c's verify_item).  The verifier never
 * looks inside a proposer, so a model-based one (a draft model, EAGLE or MTP
 * heads) is one more implementation of this struct. */
#ifndef TRAM_SPEC_H
#define TRAM_SPEC_H

#include <stdint.h>

#include "engine/tram.h"

typedef struct tram_proposer tram_proposer;

struct tram_proposer {
    const char *name;           /* the --speculative-config method */
    /* Writes at most max_k guesses of the tokens after tokens[0, n) to out;
     * returns how many (0: no guess this step). */
    int (*propose)(tram_proposer *p, const int32_t *tokens, int n, int max_k, int32_t *out);
    void (*destroy)(tram_proposer *p);
};

/* The settings checked (method known, k in [1, TRAM_SPEC_MAX_TOKENS], the
 * lookup window sane); -1 with the field's name on failure. */
int tram_spec_config_check(const tram_spec_config *c, tram_error *err);

/* The proposer c names ("ngram"), or NULL in *out when speculation is off. */
int tram_proposer_create(tram_proposer **out, const tram_spec_config *c, tram_error *err);
void tram_proposer_destroy(tram_proposer *p);

/* n-gram prompt lookup (vLLM's "ngram"): finds the most recent earlier
 * occurrence of the last n tokens, for n from lookup_max down to lookup_min,
 * and proposes the tokens that followed it. */
int tram_ngram_propose(const int32_t *tokens, int n, int lookup_min, int lookup_max, int max_k,
                       int32_t *out);

/* ---------------------------------------------------------------- the automatic rule
 *
 * A step verifies a sequence's drafts only when they are expected to pay:
 * with P tokens expected from a step of N tokens so far, j more drafts that
 * yield g(j) accepted tokens on average are worth it when
 *     (P + g(j)) / T(N + j) > P / T(N),
 * T being the measured time of a decode step by its token count.  g comes
 * from the sequence's own record: with acceptance a per draft position,
 * g(j) = a + a^2 + ... + a^j.  So drafts go where they are accepted, and only
 * while verifying is nearly free; a large batch (T grows with N) or text
 * with nothing to copy turns them off by itself. */

/* A sequence's drafts so far, decayed so that the record follows its text:
 * each draft position accepted is a hit, the first rejected a miss.  While
 * the rule declines its drafts, the first one is still checked against the
 * token drawn (shadow), so a sequence that starts to copy is noticed. */
typedef struct {
    float hits, misses;
    int32_t shadow;            /* a declined first draft, or -1 */
} tram_spec_record;

void tram_spec_record_init(tram_spec_record *r);
/* accepted of proposed drafts (1 of 1 or 0 of 1 for a shadow check). */
void tram_spec_record_add(tram_spec_record *r, int accepted, int proposed);
/* The chance a draft position is accepted: (hits + 1) / (hits + misses + 2). */
double tram_spec_acceptance(const tram_spec_record *r);

/* Recent decode steps' seconds as a line in their token count, t = a + b n,
 * least squares with older steps forgotten (engine.c measures). */
typedef struct {
    double w, n, t, nn, nt;    /* decayed sums of 1, n, t, n^2, n t */
} tram_step_cost;

void tram_step_cost_add(tram_step_cost *c, int tokens, double seconds);
/* 1 with a and b set when the recent steps' token counts vary enough to fit
 * the line; 0 before (the rule then lets every draft through, which is what
 * makes them vary). */
int tram_step_cost_line(const tram_step_cost *c, double *a, double *b);

/* How many of `proposed` drafts to verify in a step of `tokens` tokens so
 * far that expects `yield` tokens (0: none); *gain is their expected accepted
 * tokens. */
int tram_spec_choose(const tram_spec_record *r, int proposed, const tram_step_cost *c, double tokens,
                     double yield, double *gain);

#endif
