/* stacks.h — the pushdown matcher's state: a set of stacks over a byte
 * grammar (ir.h), advanced one byte at a time (internal to grammar/).
 *
 * A stack in a set is canonical: its top is a BYTES position (references
 * are expanded into one stack per alternative, finished alternatives
 * popped).  The empty stack, "the grammar may end here", is a flag.  Sets
 * grow as needed and are reused, so a matcher in steady state allocates
 * nothing. */
#ifndef TRAM_GRAMMAR_STACKS_H
#define TRAM_GRAMMAR_STACKS_H

#include <stdint.h>

#include "grammar/ir.h"
#include "kernels/base.h"

/* Deepest stack kept; a deeper branch is dropped (fails closed).  While
 * compiling, a position whose expansion goes deeper (rules that each start
 * with the next, nested past this) refuses the grammar. */
#define TRAM_MAX_STACK_DEPTH 1024
/* Most stacks in one set.  A set holds one stack per way of reading the
 * text so far, so only a very ambiguous grammar (nested repetitions such as
 * (("a")+)+, which read n bytes in exponentially many ways) comes near it;
 * past it every step would cost seconds, so the grammar is refused instead.
 * Alternatives that begin alike are merged into a trie when the grammar is
 * parsed (gbnf.c), so a long list of literals does not count here. */
#define TRAM_MAX_STACKS 512
/* Most expansion steps (a reference followed, an alternative pushed, a
 * finished one popped) to build one set: a chain of rules that reference
 * the next with nothing matched in between costs a step per rule at every
 * byte, so past this the grammar is refused. */
#define TRAM_MAX_EXPAND_STEPS (1 << 15)

/* The raw stacks an expansion is still working on, as linked frames:
 * frame i holds pos[i] over frame up[i] (-1: the bottom), depth[i] frames
 * in all.  Scratch of the set being built, kept for reuse. */
typedef struct {
    int32_t *pos, *up, *depth;
    int n, cap;
    int32_t *todo;             /* frames whose stacks are still to expand; -1: the empty stack */
    int num_todo, cap_todo;
} tram_raw_stacks;

typedef struct {
    int32_t *pool;             /* stacks back to back, bottom first */
    int pool_len, pool_cap;
    int32_t *off, *len;        /* [n] */
    uint64_t *hash;            /* [n] */
    int n, cap;
    int has_end;               /* the empty stack is in the set */
    int oom;                   /* an allocation failed: the set is incomplete */
    int too_ambiguous;         /* it would have held over TRAM_MAX_STACKS: incomplete */
    int too_costly;            /* it took over TRAM_MAX_EXPAND_STEPS: incomplete */
    int too_deep;              /* a stack deeper than TRAM_MAX_STACK_DEPTH was dropped */
    int steps;                 /* expansion steps since the set was cleared */
    tram_raw_stacks raw;
} tram_stackset;

void tram_stackset_clear(tram_stackset *s);
void tram_stackset_free(tram_stackset *s);
int tram_stackset_copy(tram_stackset *dst, const tram_stackset *src);

/* 1 when the set lost stacks (memory, the grammar's ambiguity or cost);
 * a matcher then fails closed. */
static inline int tram_stackset_incomplete(const tram_stackset *s)
{
    return s->oom || s->too_ambiguous || s->too_costly;
}

/* The error that refuses a grammar whose set is incomplete or lost a stack
 * to the depth bound (each message names its bound); 0 when neither. */
int tram_stackset_refusal(const tram_stackset *s, tram_error *err);

static inline const int32_t *tram_stack_at(const tram_stackset *s, int i) { return s->pool + s->off[i]; }

/* Adds the canonical expansion of the raw stack buf[0..len) to out; buf
 * has room for TRAM_MAX_STACK_DEPTH + 1 entries and is left as it was. */
void tram_stacks_expand(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len);

/* out = the stacks of `in` (stack `only`, or all when only < 0) after
 * byte c; buf is scratch as for expand. */
void tram_stacks_advance(const tram_gbnf *g, const tram_stackset *in, int only, unsigned char c,
                         tram_stackset *out, int32_t *buf);

/* The start state of rule `rule`. */
void tram_stacks_start(const tram_gbnf *g, int rule, tram_stackset *out, int32_t *buf);

#endif
