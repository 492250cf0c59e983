/* ir.h — a compiled grammar as the matcher reads it (internal to grammar/).
 *
 * Everything is over BYTES: a character class of code points is compiled
 * into alternatives of UTF-8 byte ranges, so a character split across two
 * tokens needs nothing special.  Rule i is the element run that starts at
 * rule_start[i]: its alternatives, each ended by ALT, the last one by END.
 * A position is an index into elems; a pushdown stack is an array of
 * positions, its top the position to match next. */
#ifndef TRAM_GRAMMAR_IR_H
#define TRAM_GRAMMAR_IR_H

#include <stdint.h>

typedef enum {
    TRAM_G_END,        /* end of the rule's last alternative */
    TRAM_G_ALT,        /* end of an alternative; another follows */
    TRAM_G_REF,        /* arg: the rule matched here */
    TRAM_G_BYTES,      /* arg: the byte set (sets[arg]) one byte must be in */
} tram_gkind;

typedef struct {
    uint8_t kind;
    int32_t arg;
} tram_gelem;

typedef struct {
    uint32_t bits[8];
} tram_byteset;

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
    int root;
} tram_gbnf;

static inline int tram_gelem_ends_alt(const tram_gelem *e)
{
    return e->kind == TRAM_G_END || e->kind == TRAM_G_ALT;
}

#endif
