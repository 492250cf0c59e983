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

#endif
