/* gbnf.h — llama.cpp's GBNF grammar text parsed into the byte grammar of
 * ir.h (internal to grammar/).
 *
 * Syntax: rules `name ::= alternatives`, one per line (a rule continues onto
 * the next line inside parentheses or after `|`); sequences of "literals"
 * (escapes \n \r \t \\ \" \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH), [classes]
 * ([^...] negated, a-z ranges), `.` (any character), rule names and
 * (groups); postfix * + ? {m} {m,} {m,n} {,n}; `#` comments to the end of
 * the line.  Characters are code points, matched as their UTF-8 bytes.
 * Left recursion (direct, indirect, or a repetition of something that can
 * be empty) is an error naming the rule, as is an undefined rule. */
#ifndef TRAM_GRAMMAR_GBNF_H
#define TRAM_GRAMMAR_GBNF_H

#include "grammar/ir.h"
#include "kernels/base.h"

/* The largest count of a repetition {m,n}, here and in the regex and JSON
 * Schema compilers (minLength, maxItems, ...).  A counted repetition costs
 * the same at any count (see counted_repeat in gbnf.c). */
#define TRAM_GBNF_MAX_REPEAT 1000000

/* Bounds on the text, each an error naming it: its bytes, its rules
 * (helper rules for groups and repetitions included), its elements (a
 * byte matched, a reference, an alternative's end). */
#define TRAM_GBNF_MAX_TEXT (8 << 20)
#define TRAM_GBNF_MAX_RULES (1 << 17)
#define TRAM_GBNF_MAX_ELEMS (1 << 22)

/* Parses text; root names the start rule.  tail: how many of the last
 * iterations of a large bounded count are expanded into rules (the
 * longest token's length in bytes keeps every mask precomputed; see
 * counted_repeat in gbnf.c); at least 1. */
int tram_gbnf_parse(const char *text, const char *root, int tail, tram_gbnf *out, tram_error *err);
void tram_gbnf_free(tram_gbnf *g);

/* Merges alternatives that begin alike into a trie (gbnf_factor.c): the
 * same language, one stack per distinct prefix.  tram_gbnf_parse does it
 * last; rules keep their ids, helper rules are added after them. */
int tram_gbnf_factor(tram_gbnf *g, tram_error *err);

/* nullable[r] (malloc'd, NULL when out of memory): 1 when rule r can match
 * the empty string. */
uint8_t *tram_gbnf_nullable(const tram_gbnf *g);

/* follow[r] (num_rules sets, zeroed by the caller) gets every byte that
 * can come right after rule r ends (gbnf_follow.c). */
int tram_gbnf_follow_sets(const tram_gbnf *g, tram_byteset *follow, tram_error *err);

#endif
