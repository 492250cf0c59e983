/* stacks.c — sets of pushdown stacks and their byte steps (see stacks.h). */
#include "grammar/stacks.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"

void tram_stackset_clear(tram_stackset *s)
{
    s->pool_len = s->n = 0;
    s->has_end = s->oom = s->too_ambiguous = 0;
}

void tram_stackset_free(tram_stackset *s)
{
    free(s->pool);
    free(s->off);
    free(s->len);
    free(s->hash);
    *s = (tram_stackset){0};
}

static int reserve(tram_stackset *s, int stacks, int ints)
{
    if (s->n + stacks > s->cap) {
        int cap = TRAM_MAX(16, 2 * (s->n + stacks));
        int32_t *off = realloc(s->off, (size_t)cap * sizeof(int32_t));
        if (off)
            s->off = off;
        int32_t *len = realloc(s->len, (size_t)cap * sizeof(int32_t));
        if (len)
            s->len = len;
        uint64_t *hash = realloc(s->hash, (size_t)cap * sizeof(uint64_t));
        if (hash)
            s->hash = hash;
        if (!off || !len || !hash)
            return -1;
        s->cap = cap;
    }
    if (s->pool_len + ints > s->pool_cap) {
        int cap = TRAM_MAX(256, 2 * (s->pool_len + ints));
        int32_t *pool = realloc(s->pool, (size_t)cap * sizeof(int32_t));
        if (!pool)
            return -1;
        s->pool = pool;
        s->pool_cap = cap;
    }
    return 0;
}

static uint64_t hash_stack(const int32_t *v, int len)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)len;
    for (int i = 0; i < len; i++)
        h = tram_mix64(h ^ (uint32_t)v[i]);
    return h;
}

/* Adds a canonical stack unless the set holds it already. */
static void add_stack(tram_stackset *s, const int32_t *v, int len)
{
    if (len == 0) {
        s->has_end = 1;
        return;
    }
    uint64_t h = hash_stack(v, len);
    for (int i = 0; i < s->n; i++)
        if (s->hash[i] == h && s->len[i] == len && !memcmp(s->pool + s->off[i], v, (size_t)len * 4))
            return;
    if (s->n == TRAM_MAX_STACKS) {
        s->too_ambiguous = 1;
        return;
    }
    if (reserve(s, 1, len)) {
        s->oom = 1;
        return;
    }
    memcpy(s->pool + s->pool_len, v, (size_t)len * sizeof(int32_t));
    s->off[s->n] = s->pool_len;
    s->len[s->n] = len;
    s->hash[s->n++] = h;
    s->pool_len += len;
}

int tram_stackset_copy(tram_stackset *dst, const tram_stackset *src)
{
    tram_stackset_clear(dst);
    dst->has_end = src->has_end;
    if (src->n == 0)
        return 0;  /* (an empty set may have no arrays, which memcpy must not be handed) */
    if (reserve(dst, src->n, src->pool_len))
        return -1;
    memcpy(dst->pool, src->pool, (size_t)src->pool_len * sizeof(int32_t));
    memcpy(dst->off, src->off, (size_t)src->n * sizeof(int32_t));
    memcpy(dst->len, src->len, (size_t)src->n * sizeof(int32_t));
    memcpy(dst->hash, src->hash, (size_t)src->n * sizeof(uint64_t));
    dst->n = src->n;
    dst->pool_len = src->pool_len;
    return 0;
}

/* For each alternative of `rule`: its start pushed on buf[0..len), expanded. */
static void push_rule(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len, int rule)
{
    if (len >= TRAM_MAX_STACK_DEPTH)
        return;
    for (int32_t pos = g->rule_start[rule];; pos++) {
        buf[len] = pos;
        tram_stacks_expand(g, out, buf, len + 1);
        while (!tram_gelem_ends_alt(&g->elems[pos]))
            pos++;
        if (g->elems[pos].kind == TRAM_G_END)
            break;
    }
}

/* A reference is replaced by what follows it (left out when that is the
 * end of the alternative: the tail call keeps repetitions shallow), with
 * one of the rule's alternatives pushed on top. */
static void expand_ref(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len)
{
    int32_t top = buf[len - 1], cont = top + 1;
    int keep = !tram_gelem_ends_alt(&g->elems[cont]);
    buf[len - 1] = cont;
    push_rule(g, out, buf, keep ? len : len - 1, g->elems[top].arg);
    buf[len - 1] = top;
}

/* buf[0..base) is what lies under the loop at q, `done` its iterations
 * so far (TRAM_LOOP_ANY_COUNT: any number, for the precomputed masks). */
static void loop_iterate(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int base, int32_t q,
                         int32_t done)
{
    const tram_grepeat *rep = &g->repeats[g->elems[q].arg];
    int any = done == TRAM_LOOP_ANY_COUNT, at_max = !any && rep->max >= 0 && done >= rep->max;
    if (any || (done >= rep->min && !(at_max && rep->tail >= 0)))
        tram_stacks_expand(g, out, buf, base);  /* the loop ends */
    if (at_max && rep->tail >= 0)
        push_rule(g, out, buf, base, rep->tail);
    if (at_max || base + 2 >= TRAM_MAX_STACK_DEPTH)
        return;
    buf[base] = done;
    buf[base + 1] = tram_loop_marker(q);
    push_rule(g, out, buf, base + 2, rep->body);
}

/* A REPEAT on top: replaced by what follows it (as for a reference), the
 * loop entered with no iterations done. */
static void enter_loop(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len)
{
    int32_t q = buf[len - 1];
    int keep = !tram_gelem_ends_alt(&g->elems[q + 1]);
    buf[len - 1] = q + 1;
    loop_iterate(g, out, buf, keep ? len : len - 1, q, 0);
    buf[len - 1] = q;
}

/* A marker on top: one more iteration of its loop is done. */
static void end_iteration(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len)
{
    int32_t marker = buf[len - 1], done = buf[len - 2];
    loop_iterate(g, out, buf, len - 2, tram_loop_of_marker(marker),
                 done == TRAM_LOOP_ANY_COUNT ? done : done + 1);
    buf[len - 2] = done;
    buf[len - 1] = marker;
}

void tram_stacks_expand(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len)
{
    if (len == 0) {
        out->has_end = 1;
        return;
    }
    if (buf[len - 1] < 0) {
        end_iteration(g, out, buf, len);
        return;
    }
    const tram_gelem *e = &g->elems[buf[len - 1]];
    if (e->kind == TRAM_G_BYTES)
        add_stack(out, buf, len);
    else if (e->kind == TRAM_G_REF)
        expand_ref(g, out, buf, len);
    else if (e->kind == TRAM_G_REPEAT)
        enter_loop(g, out, buf, len);
    else
        tram_stacks_expand(g, out, buf, len - 1);
}

void tram_stacks_advance(const tram_gbnf *g, const tram_stackset *in, int only, unsigned char c,
                         tram_stackset *out, int32_t *buf)
{
    tram_stackset_clear(out);
    int lo = only < 0 ? 0 : only, hi = only < 0 ? in->n : only + 1;
    for (int i = lo; i < hi; i++) {
        const int32_t *st = tram_stack_at(in, i);
        int len = in->len[i];
        const tram_gelem *e = &g->elems[st[len - 1]];
        if (!tram_byteset_has(&g->sets[e->arg], c))
            continue;
        memcpy(buf, st, (size_t)len * sizeof(int32_t));
        buf[len - 1]++;
        tram_stacks_expand(g, out, buf, len);
    }
}

void tram_stacks_start(const tram_gbnf *g, int rule, tram_stackset *out, int32_t *buf)
{
    tram_stackset_clear(out);
    push_rule(g, out, buf, 0, rule);
}
