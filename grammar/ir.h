/* ir.h — a compiled grammar as the matcher reads it (internal to grammar/).
 *
 * Everything is over BYTES: a character class of code points is compiled
 * into alternatives of UTF-8 byte ranges, so a character split across two
 * tokens needs nothing special.  Rule i is the element run that starts at
 * rule_start[i]: its alternatives, each ended by ALT, the last one by END.
 * A position is an index into elems; a pushdown stack is an array of
 * positions, its top the position to match next.
 *
 * A counted repetition x{m,n} with large counts is one REPEAT element: its
 * body is a rule of its own, and the count lives on the stack, as two
 * entries under the body's frame: the iterations done before the current
 * one, then tram_loop_marker(q) (negative, so never a position), where q
 * is the REPEAT's position.  A marker on top means "an iteration of q just
 * ended". */
#ifndef TRAM_GRAMMAR_IR_H
#define TRAM_GRAMMAR_IR_H

#include <stdint.h>

typedef enum {
    TRAM_G_END,        /* end of the rule's last alternative */
    TRAM_G_ALT,        /* end of an alternative; another follows */
    TRAM_G_REF,        /* arg: the rule matched here */
    TRAM_G_BYTES,      /* arg: the byte set (sets[arg]) one byte must be in */
    TRAM_G_REPEAT,     /* arg: the counted repetition (repeats[arg]) matched here */
} tram_gkind;

typedef struct {
    uint8_t kind;
    int32_t arg;
} tram_gelem;

typedef struct {
    uint32_t bits[8];
} tram_byteset;

/* body{min,max} (max < 0: no upper bound), ended after min..max - 1
 * iterations; after max, the loop goes on into rule tail (when >= 0), which
 * matches at most tail_max more, else it ends.  The body cannot match empty. */
typedef struct {
    int32_t body, min, max, tail, tail_max;
} tram_grepeat;

/* The count entry of a precomputed mask's walk: any count, every
 * iteration may end the loop or start another (x* semantics). */
#define TRAM_LOOP_ANY_COUNT (-1)

static inline int32_t tram_loop_marker(int32_t q) { return -q - 1; }
static inline int32_t tram_loop_of_marker(int32_t marker) { return -marker - 1; }

static inline int tram_byteset_has(const tram_byteset *s, unsigned char c)
{
    return (s->bits[c >> 5] >> (c & 31)) & 1;
}

static inline void tram_byteset_add(tram_byteset *s, unsigned lo, unsigned hi)
{
    for (unsigned c = lo; c <= hi; c++)
        s->bits[c >> 5] |= 1u << (c & 31);
}

typedef struct {
    tram_gelem *elems;
    int num_elems;
    int32_t *rule_start;       /* [num_rules] */
    char **rule_names;         /* [num_rules]; helper rules get "parent_N" */
    int num_rules;
    tram_byteset *sets;
    int num_sets;
    tram_grepeat *repeats;
    int num_repeats;
    int root;
} tram_gbnf;

static inline int tram_gelem_ends_alt(const tram_gelem *e)
{
    return e->kind == TRAM_G_END || e->kind == TRAM_G_ALT;
}

/* The rule a REF or REPEAT element matches; -1 for the others. */
static inline int tram_gelem_rule(const tram_gbnf *g, const tram_gelem *e)
{
    return e->kind == TRAM_G_REF ? e->arg : e->kind == TRAM_G_REPEAT ? g->repeats[e->arg].body : -1;
}

/* 1 when a REF or REPEAT element can match empty, given the nullable rules. */
static inline int tram_gelem_nullable(const tram_gbnf *g, const uint8_t *nullable, const tram_gelem *e)
{
    return e->kind == TRAM_G_REPEAT ? g->repeats[e->arg].min == 0 || nullable[g->repeats[e->arg].body]
                                    : nullable[e->arg];
}

#endif
