/* regex_nfa.h — the Thompson NFA of a regex (internal to grammar/): what
 * regex.c builds beside the GBNF it writes, for regex_length.c to cross
 * with a length counter (JSON Schema's pattern beside minLength/maxLength).
 *
 * An edge reads one character, named by the GBNF text of the literal or
 * class that matches it (as the plain rule would write it), or nothing (an
 * epsilon).  Anchors and lookarounds left out of the rule are epsilons here
 * too, so the NFA matches exactly what the rule matches. */
#ifndef TRAM_GRAMMAR_REGEX_NFA_H
#define TRAM_GRAMMAR_REGEX_NFA_H

#include "kernels/base.h"
#include "kernels/strbuf.h"

/* States beyond this leave the NFA marked full: a counted repetition such
 * as \d{1,1000} copies its atom per count, and the caller then keeps the
 * plain rule (with the output validated) rather than a product this big. */
#define TRAM_NFA_MAX_STATES 8192

#define TRAM_NFA_EPSILON (-1)

typedef struct {
    int from, to;
    int label; /* offset of its NUL-terminated GBNF text in labels, or TRAM_NFA_EPSILON */
} tram_nfa_edge;

typedef struct {
    tram_nfa_edge *edges;
    int num_edges, cap_edges;
    int num_states;
    int start, accept;
    long long min_len, max_len; /* of its matches (max_len -1: no bound), known even when it is full */
    tram_strbuf labels;
    int full; /* over TRAM_NFA_MAX_STATES (or out of memory): the NFA is incomplete */
} tram_regex_nfa;

/* A piece of an NFA: entered at start, left at end, matching strings of
 * min_len..max_len characters (max_len -1: no bound).  Its states and
 * edges were made in order, [s0, s1) and [e0, e1), and join only each
 * other, so that it copies by an offset (s1 and e1 are set then). */
typedef struct {
    int start, end;
    int s0, e0, s1, e1;
    long long min_len, max_len;
} tram_nfa_frag;

/* The pieces (regex_nfa.c), each made after those it is given: the empty
 * string; one character, named by its GBNF text; a then b; a or b; f
 * repeated m..max times (max -1: no bound).  On a NULL or full NFA they
 * build nothing, and the lengths are still right. */
tram_nfa_frag tram_nfa_empty(tram_regex_nfa *n);
tram_nfa_frag tram_nfa_char(tram_regex_nfa *n, const char *label, size_t len);
tram_nfa_frag tram_nfa_concat(tram_regex_nfa *n, tram_nfa_frag a, tram_nfa_frag b);
tram_nfa_frag tram_nfa_alt(tram_regex_nfa *n, tram_nfa_frag a, tram_nfa_frag b);
tram_nfa_frag tram_nfa_repeat(tram_regex_nfa *n, tram_nfa_frag f, long m, long max);

/* Builds the NFA of regex, read as tram_regex_rule reads it (the same
 * errors, json_string and approx).  Returns 0 (check nfa->full) or -1. */
int tram_regex_nfa_build(const char *regex, int json_string, int *approx, tram_regex_nfa *nfa, tram_error *err);
void tram_regex_nfa_free(tram_regex_nfa *nfa);

/* Appends the rule `rule` and its helpers: the NFA (complete) crossed
 * with a counter of the characters read, for its matches whose length
 * lies in [min, max] (max < 0: no bound; with min 0 too, the NFA alone as
 * right-linear rules), one rule per pair taken from *pairs_left
 * (regex_length.c).  Returns 0, TRAM_REGEX_TOO_LARGE, TRAM_REGEX_NO_LENGTH
 * or -1. */
int tram_regex_nfa_rules(const tram_regex_nfa *nfa, const char *rule, long long min, long long max, int *pairs_left,
                         tram_strbuf *out, tram_error *err);

#endif
