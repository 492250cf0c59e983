/* grammar.h — constrained decoding: a compiled grammar and the matcher that
 * follows one sequence through it, giving each step's allowed tokens.
 *
 * A grammar is GBNF text (llama.cpp's syntax; grammar/gbnf.h) compiled
 * against a tokenizer's vocabulary: the rules become a byte-level pushdown
 * automaton, and for each grammar position the tokens decided by that
 * position alone are computed once, on the position's first use
 * (grammar/token_mask.h), so a step's mask costs little beyond the tokens
 * whose fate depends on the whole stack.
 * JSON Schema, regular expressions and choice lists are compiled to GBNF
 * first (grammar/json_schema.h, grammar/regex.h).
 *
 * THREADS: a compiled tram_grammar is reference-counted (atomically) and
 * immutable but for the positions' token sets, filled in on first use
 * under its lock: compile it on any thread, share it among the n samples
 * of a request and across threads, release it from any thread.  A matcher
 * belongs to one sequence and one thread at a time.
 *
 * The mask is a packed bitmask, bit (id & 31) of word (id >> 5) set when
 * token id is allowed, tram_grammar_mask_words() uint32 words per row.
 * End-of-generation tokens are allowed only where the grammar can end;
 * other control tokens never are. */
#ifndef TRAM_GRAMMAR_H
#define TRAM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tram_tokenizer;
typedef struct tram_grammar tram_grammar;
typedef struct tram_matcher tram_matcher;

/* The budget of one position's token sets: the work (automaton steps,
 * references followed; 2^21 is 20 times the costliest position of
 * JSONSchemaBench's schemas, a few milliseconds, and bounds what a
 * position first met during generation costs the engine's step) and the
 * memory of the automaton they are computed with; and the memory a grammar's sets may keep (past it a position's
 * sets are computed at each use and not kept).  At compile, a walk past
 * either is an error naming it, as are the parser's bounds on the text
 * (grammar/gbnf.h: bytes, rules, elements) and the matcher's
 * (grammar/stacks.h: stacks, depth, steps per byte); later, such a
 * position allows nothing (the matcher fails closed). */
#define TRAM_GRAMMAR_MAX_STEPS ((int64_t)1 << 21)
#define TRAM_GRAMMAR_MAX_MEMORY (512 << 20)

/* Compiles GBNF text whose start rule is root_rule against tok's
 * vocabulary.  NULL and a message naming the problem (the rule, the
 * character) on failure.  The result holds one reference. */
tram_grammar *tram_grammar_compile(const char *gbnf, const char *root_rule,
                                   const struct tram_tokenizer *tok, tram_error *err);
/* As tram_grammar_compile, with `tail` (> 0) in place of the longest
 * token's length as the last iterations of a large bounded count expanded
 * into rules (grammar/gbnf.h): any tail is exact; with a short one, more
 * tokens are checked at run time near the bound (the tests reach that
 * check so). */
tram_grammar *tram_grammar_compile_tail(const char *gbnf, const char *root_rule,
                                        const struct tram_tokenizer *tok, int tail, tram_error *err);
/* Adds a reference; returns g. */
const tram_grammar *tram_grammar_retain(const tram_grammar *g);
/* Drops a reference; the last one frees it.  NULL is fine. */
void tram_grammar_release(const tram_grammar *g);

/* The memory the grammar holds (its rules and masks; the shared
 * vocabulary trie not counted): what a cache of grammars is bounded by.
 * It grows as matchers walk positions. */
size_t tram_grammar_bytes(const tram_grammar *g);

/* Computes now the token sets of every position the grammar's root
 * reaches (what its matchers would otherwise compute on first use): a
 * walk that fails is an error naming its bound.  For tests and
 * benchmarks comparing the two. */
int tram_grammar_walk_all(const tram_grammar *g, tram_error *err);

/* Token ids the mask covers: the tokenizer's vocabulary [0, vocab). */
int tram_grammar_vocab(const tram_grammar *g);
int tram_grammar_mask_words(const tram_grammar *g);

/* A matcher at the grammar's start.  It holds a reference to g. */
int tram_matcher_create(tram_matcher **out, const tram_grammar *g, tram_error *err);
void tram_matcher_free(tram_matcher *m);

/* Writes the allowed tokens of the current state into mask[words].
 * Returns 1 when it allows a token (an end-of-generation one included),
 * 0 when it allows none: tram_matcher_stuck then says why. */
int tram_matcher_fill_mask(tram_matcher *m, uint32_t *mask);
/* Why the last mask filled allowed no token, as an API error code, or
 * NULL when it allowed some:
 *   TRAM_GRAMMAR_DEAD_END  the grammar has no continuation here and cannot
 *                          end (e.g. after a character of an empty class)
 *   TRAM_GRAMMAR_BOUND     a position's walk passed a bound (its steps,
 *                          memory, stacks), or tokens were refused for
 *                          being read in too many ways: it fails closed */
const char *tram_matcher_stuck(const tram_matcher *m);
#define TRAM_GRAMMAR_DEAD_END "grammar_dead_end"
#define TRAM_GRAMMAR_BOUND "grammar_bound"

/* Advances by one token: 1 when it was allowed (the state moves on), 0
 * when not (the state is unchanged).  An end-of-generation token is
 * allowed where the grammar can end, and ends it. */
int tram_matcher_accept(tram_matcher *m, int32_t token);
/* 1 where the grammar may end (an end-of-generation token is allowed). */
int tram_matcher_can_end(const tram_matcher *m);
/* 1 once nothing but the end is left: the output is complete. */
int tram_matcher_is_done(const tram_matcher *m);

#ifdef __cplusplus
}
#endif

#endif
