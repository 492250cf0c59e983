/* stacks.c — sets of pushdown stacks and their byte steps (see stacks.h). */
#include "grammar/stacks.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"

void tram_stackset_clear(tram_stackset *s)
{
    s->pool_len = s->n = s->steps = s->raw.n = s->raw.num_todo = 0;
    s->has_end = s->oom = s->too_ambiguous = s->too_costly = s->too_deep = 0;
}

void tram_stackset_free(tram_stackset *s)
{
    TRAM_FREE_ALL(s->pool, s->off, s->len, s->hash, s->raw.pos, s->raw.up, s->raw.depth, s->raw.todo);
    *s = (tram_stackset){0};
}

static int reserve(tram_stackset *s, int stacks, int ints)
{
    if (s->n + stacks > s->cap) {
        int cap = TRAM_MAX(16, 2 * (s->n + stacks));
        if (tram_resize((void **)&s->off, (size_t)cap, sizeof(*s->off)) ||
            tram_resize((void **)&s->len, (size_t)cap, sizeof(*s->len)) ||
            tram_resize((void **)&s->hash, (size_t)cap, sizeof(*s->hash)))
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

/* Adds the canonical stack v[0..len), written at the pool's end, unless
 * the set holds it already. */
static void commit_stack(tram_stackset *s, const int32_t *v, int len)
{
    uint64_t h = hash_stack(v, len);
    for (int i = 0; i < s->n; i++)
        if (s->hash[i] == h && s->len[i] == len && !memcmp(s->pool + s->off[i], v, (size_t)len * 4))
            return;
    if (s->n == TRAM_MAX_STACKS) {
        s->too_ambiguous = 1;
        return;
    }
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

/* ---------------------------------------------------------------- expansion
 *
 * Expanding a raw stack follows references until each stack's top is a
 * byte set.  A tail reference replaces its frame, so a chain of rules
 * that reference the next never grows the stack: the work is kept on an
 * explicit list (raw frames, shared by the stacks that have them in
 * common), never on the C stack, and counted against TRAM_MAX_EXPAND_STEPS.
 *
 * A reference to a raw stack is a frame (>= 0) or, negative, a prefix of
 * the stack being expanded, left in its buffer: -k - 1 is buf[0..k), -1
 * the empty stack.  So the part of the stack an expansion does not touch
 * is never copied into frames. */

static int32_t ref_pos(const tram_stackset *s, const int32_t *buf, int32_t ref)
{
    return ref >= 0 ? s->raw.pos[ref] : buf[-ref - 2];
}

static int32_t ref_up(const tram_stackset *s, int32_t ref) { return ref >= 0 ? s->raw.up[ref] : ref + 1; }

static int raw_depth(const tram_stackset *s, int32_t ref) { return ref >= 0 ? s->raw.depth[ref] : -ref - 1; }

static int raw_frame(tram_stackset *s, int32_t pos, int32_t up)
{
    tram_raw_stacks *r = &s->raw;
    if (r->n == r->cap) {
        int cap = TRAM_MAX(64, 2 * r->cap);
        if (tram_resize((void **)&r->pos, (size_t)cap, sizeof(*r->pos)) ||
            tram_resize((void **)&r->up, (size_t)cap, sizeof(*r->up)) ||
            tram_resize((void **)&r->depth, (size_t)cap, sizeof(*r->depth)))
            return s->oom = 1, -1;
        r->cap = cap;
    }
    r->pos[r->n] = pos;
    r->up[r->n] = up;
    r->depth[r->n] = 1 + raw_depth(s, up);
    return r->n++;
}

/* Queues the raw stack `ref` for expansion. */
static void todo(tram_stackset *s, int32_t ref)
{
    tram_raw_stacks *r = &s->raw;
    if (r->num_todo == r->cap_todo) {
        int cap = TRAM_MAX(64, 2 * r->cap_todo);
        int32_t *t = realloc(r->todo, (size_t)cap * sizeof(int32_t));
        if (!t) {
            s->oom = 1;
            return;
        }
        r->todo = t;
        r->cap_todo = cap;
    }
    r->todo[r->num_todo++] = ref;
}

/* Queues frame `pos` over `up`. */
static void todo_push(tram_stackset *s, int32_t pos, int32_t up)
{
    int32_t f = raw_frame(s, pos, up);
    if (f >= 0)
        todo(s, f);
}

/* Each alternative of `rule` pushed on the raw stack `up`. */
static void push_rule(const tram_gbnf *g, tram_stackset *s, int32_t up, int rule)
{
    if (raw_depth(s, up) >= TRAM_MAX_STACK_DEPTH) {
        s->too_deep = 1;
        return;
    }
    int32_t first = s->raw.num_todo;
    for (int32_t pos = g->rule_start[rule];; pos++) {
        todo_push(s, pos, up);
        s->steps++;
        while (!tram_gelem_ends_alt(&g->elems[pos]))
            pos++;
        if (g->elems[pos].kind == TRAM_G_END)
            break;
    }
    for (int32_t a = first, b = s->raw.num_todo - 1; a < b; a++, b--) {  /* the first alternative first */
        int32_t t = s->raw.todo[a];
        s->raw.todo[a] = s->raw.todo[b];
        s->raw.todo[b] = t;
    }
}

/* What follows the element at the top frame: a new top over the same
 * frames, or those frames alone when the alternative ends there (the tail
 * call that keeps repetitions shallow). */
static int32_t continuation(const tram_gbnf *g, tram_stackset *s, const int32_t *buf, int32_t frame)
{
    int32_t cont = ref_pos(s, buf, frame) + 1, up = ref_up(s, frame);
    return tram_gelem_ends_alt(&g->elems[cont]) ? up : raw_frame(s, cont, up);
}

/* `under` is what lies under the loop at q, `done` its iterations so far
 * (TRAM_LOOP_ANY_COUNT: any number, for the precomputed masks). */
static void loop_iterate(const tram_gbnf *g, tram_stackset *s, int32_t under, int32_t q, int32_t done)
{
    const tram_grepeat *rep = &g->repeats[g->elems[q].arg];
    int any = done == TRAM_LOOP_ANY_COUNT, at_max = !any && rep->max >= 0 && done >= rep->max;
    if (any || (done >= rep->min && !(at_max && rep->tail >= 0)))
        todo(s, under);  /* the loop ends */
    if (at_max && rep->tail >= 0)
        push_rule(g, s, under, rep->tail);
    if (at_max)
        return;
    if (raw_depth(s, under) + 2 >= TRAM_MAX_STACK_DEPTH) {
        s->too_deep = 1;
        return;
    }
    int32_t count = raw_frame(s, done, under), marker = count < 0 ? -1 : raw_frame(s, tram_loop_marker(q), count);
    if (marker >= 0)
        push_rule(g, s, marker, rep->body);
}

/* The raw stack `ref`, as an array, added to the set. */
static void add_raw(tram_stackset *s, int32_t ref, const int32_t *buf)
{
    int len = raw_depth(s, ref);
    if (len == 0) {
        s->has_end = 1;
        return;
    }
    if (reserve(s, 1, len)) {
        s->oom = 1;
        return;
    }
    int32_t *v = s->pool + s->pool_len;
    int i = len;
    for (; ref >= 0; ref = s->raw.up[ref])
        v[--i] = s->raw.pos[ref];
    memcpy(v, buf, (size_t)i * sizeof(int32_t));  /* the prefix left in buf */
    commit_stack(s, v, len);
}

/* One raw stack: its top decides the step. */
static void expand_one(const tram_gbnf *g, tram_stackset *s, int32_t ref, const int32_t *buf)
{
    if (ref == -1) {
        s->has_end = 1;
        return;
    }
    int32_t top = ref_pos(s, buf, ref);
    if (top < 0) {  /* a marker: one more iteration of its loop is done */
        int32_t count = ref_up(s, ref), done = ref_pos(s, buf, count);
        loop_iterate(g, s, ref_up(s, count), tram_loop_of_marker(top), done == TRAM_LOOP_ANY_COUNT ? done : done + 1);
        return;
    }
    const tram_gelem *e = &g->elems[top];
    if (e->kind == TRAM_G_BYTES)
        add_raw(s, ref, buf);
    else if (e->kind == TRAM_G_REF || e->kind == TRAM_G_REPEAT) {
        int32_t under = continuation(g, s, buf, ref);
        if (s->oom)
            return;
        if (e->kind == TRAM_G_REF)
            push_rule(g, s, under, e->arg);
        else
            loop_iterate(g, s, under, top, 0);
    } else {
        todo(s, ref_up(s, ref));  /* the alternative is finished */
    }
}

/* Expands the queued raw stacks into the set. */
static void drain(const tram_gbnf *g, tram_stackset *out, const int32_t *buf)
{
    while (out->raw.num_todo > 0 && !out->oom && !out->too_ambiguous) {
        if (++out->steps > TRAM_MAX_EXPAND_STEPS) {
            out->too_costly = 1;
            break;
        }
        expand_one(g, out, out->raw.todo[--out->raw.num_todo], buf);
    }
    out->raw.n = out->raw.num_todo = 0;
}

void tram_stacks_expand(const tram_gbnf *g, tram_stackset *out, int32_t *buf, int len)
{
    todo(out, -len - 1);  /* all of buf, as a prefix */
    drain(g, out, buf);
}

int tram_stackset_refusal(const tram_stackset *s, tram_error *err)
{
    if (s->oom)
        return tram_fail(err, "grammar: out of memory");
    if (s->too_ambiguous)
        return tram_fail(err, "grammar: too ambiguous: the text can be read in over %d ways at once (nested "
                              "repetitions such as ((x)+)+ do that); write it with fewer", TRAM_MAX_STACKS);
    if (s->too_costly)
        return tram_fail(err, "grammar: one step follows over %d rule references (a chain of rules that "
                              "reference the next with nothing matched in between?); shorten it",
                         TRAM_MAX_EXPAND_STEPS);
    if (s->too_deep)
        return tram_fail(err, "grammar: rules nest over %d deep before matching a character (a chain of "
                              "rules that each begin with the next?); shorten it", TRAM_MAX_STACK_DEPTH);
    return 0;
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
    push_rule(g, out, -1, rule);
    drain(g, out, buf);
}
