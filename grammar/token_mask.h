/* token_mask.h — which tokens a grammar position allows, precomputed
 * (internal to grammar/).
 *
 * XGrammar's observation: at a stack whose top is position p, most tokens
 * are decided by p's own rule alone.  Walking the vocabulary trie from the
 * one-frame stack [p] sorts every token into
 *   accepted:  its bytes are all matched without leaving p's rule (or
 *              leaving it exactly at the last byte), whatever lies below;
 *   rejected:  it fails inside p's rule;
 *   uncertain: p's rule can end before the token does, so the rest of the
 *              token depends on the frames below p.
 * At run time a stack's mask is its top's accepted set plus those of its
 * top's uncertain tokens that the whole stack accepts (checked in trie
 * order, sharing each prefix's state with the previous token).
 *
 * In the body of a counted repetition (ir.h) the walk runs with the loop
 * under [p] at any count, so tokens that run on into the next iteration
 * are still accepted by p alone; within max_len iterations of the loop's
 * max, the accepted tokens long enough to reach it are checked as well.
 *
 * A position is walked on first use, not at compile (llguidance and
 * XGrammar avoid precomputing a whole grammar the same way): compiling
 * walks the start state's positions, what the first mask needs, and a
 * matcher that meets a position not walked yet walks it then, under the
 * table's lock, so that a schema of a thousand strings costs at compile
 * only what its first token can reach.  The walks of a grammar share one
 * automaton of stack sets (token_mask.c), kept between walks.  A walked
 * position's sets never change; what a position allows is the same
 * whenever it is walked (tests/unit/test_grammar.c compares the two). */
#ifndef TRAM_GRAMMAR_TOKEN_MASK_H
#define TRAM_GRAMMAR_TOKEN_MASK_H

#include <stdatomic.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/stacks.h"
#include "grammar/vocab_trie.h"
#include "kernels/base.h"

typedef struct {
    uint32_t *bits;            /* accepted, as a bitmask [words], when many */
    int32_t *ids;              /* else accepted ids */
    int num_ids;
    int32_t *uncertain;        /* indices into the trie's sorted tokens, ascending */
    int num_uncertain;
    int32_t loop;              /* the counted loop (REPEAT position) p is the body of, or -1 */
} tram_pos_mask;

struct tram_mask_walker;

/* Shared by every matcher of a grammar: a const table still walks the
 * positions it has not yet (through walker, under its lock). */
typedef struct {
    tram_pos_mask *pos;        /* [num_pos]: a BYTES position's sets, once walked[p] says so */
    _Atomic uint8_t *walked;   /* [num_pos] */
    int num_pos;
    int words;                 /* uint32 words per mask row */
    struct tram_mask_walker *walker;
} tram_mask_table;

/* Builds the table and walks the tops of `start` (the grammar's start
 * state).  A walk past its budget (TRAM_GRAMMAR_MAX_STEPS,
 * TRAM_GRAMMAR_MAX_MEMORY in grammar.h) or past a bound of stacks.h is an
 * error naming it; later, at run time, such a walk leaves its position
 * allowing nothing (the matcher fails closed). */
int tram_mask_table_build(tram_mask_table *mt, const tram_gbnf *g, const tram_vocab_trie *t,
                          const tram_stackset *start, tram_error *err);
/* Walks now every position the root reaches, as an eager compile would. */
int tram_mask_table_walk_all(const tram_mask_table *mt, const tram_gbnf *g, tram_error *err);
/* The table's memory so far (it grows as positions are walked). */
size_t tram_mask_table_bytes(const tram_mask_table *mt);
void tram_mask_table_free(tram_mask_table *mt);

/* Scratch for one matcher's run-time work: a stack set per byte depth. */
typedef struct {
    tram_stackset *levels;     /* [max_len + 1] */
    int num_levels;
    int32_t *buf;              /* [TRAM_MAX_STACK_DEPTH + 1] */
    uint32_t *accepted;        /* [words]: a position's accepted ids as a bitmask */
    int words;
    int refused_incomplete;    /* a token was refused for a bound of its stack set (too
                                  ambiguous, too costly), not by the grammar */
} tram_mask_scratch;

int tram_mask_scratch_init(tram_mask_scratch *s, const tram_vocab_trie *t, tram_error *err);
void tram_mask_scratch_free(tram_mask_scratch *s);

/* ORs the tokens that state `st` allows (text tokens only) into mask,
 * walking the positions it meets that are not walked yet.  Returns 1 when
 * a position's walk failed (a bound: it allows nothing), else 0. */
int tram_mask_fill(const tram_mask_table *mt, const tram_gbnf *g, const tram_vocab_trie *t,
                    const tram_stackset *st, uint32_t *mask, tram_mask_scratch *s);

/* 1 when stack `which` of st (or any stack, which < 0) accepts all n bytes
 * of b; the state after them is left in s->levels[n]. */
int tram_mask_accepts(const tram_gbnf *g, const tram_stackset *st, int which, const uint8_t *b, int n,
                      tram_mask_scratch *s);

#endif
