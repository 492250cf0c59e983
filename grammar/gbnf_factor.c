/* gbnf_factor.c — alternatives that begin alike merged into a trie (see
 * tram_gbnf_factor in gbnf.h).
 *
 * Why: the matcher holds one stack per alternative still alive, so a list
 * of 100,000 literals ("AD" | "AE" | ... , a JSON Schema enum, an anyOf of
 * consts, a choice list) would be 100,000 stacks after its first byte,
 * past TRAM_MAX_STACKS, and every step would cost as much.  Left-factored,
 *     x ::= "ab" | "ac" | "b"   becomes   x ::= "a" x_1 | "b"   x_1 ::= "b" | "c"
 * which matches the same strings with one stack per distinct prefix: the
 * alternatives of a rule then begin with different elements, and a step
 * costs the same for 10 values or 100,000.
 *
 * Each alternative is a slice [a, b) of the parsed elements; a rule's
 * alternatives are grouped by their first element (a byte set or a
 * reference), a group's longest common prefix is written once followed by
 * a reference to a helper rule holding what is left of each, and the
 * helper is factored in its turn.  An alternative that is one reference to
 * a rule of literals (an anyOf branch's const) is replaced by that rule's
 * alternatives first, so that they join the trie.  A counted loop's body
 * is left alone: its positions are tied to its loop (ir.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"

/* A rule of literals is inlined into a parent's list when it has at most
 * this many elements. */
#define MAX_INLINED 256

typedef struct {
    int32_t a, b;
} slice;

typedef struct {
    const tram_gbnf *in;
    uint8_t *is_body;          /* [in->num_rules]: a counted loop's body */
    tram_gelem *out;
    int num_out, cap_out;
    int32_t *rule_start;
    char **names;
    int num_rules, cap_rules;
    slice *pending;            /* helpers' alternatives, helper h's from pending_at[h] */
    int num_pending, cap_pending;
    int32_t *pending_at, *pending_n;  /* [rule]: for helpers (rules past in->num_rules) */
    tram_error *err;
} factor;

static int emit(factor *f, tram_gkind kind, int32_t arg)
{
    if (f->num_out >= TRAM_GBNF_MAX_ELEMS)
        return tram_fail(f->err, "grammar: more than %d elements once its alternatives are merged, the most "
                                 "tram compiles", TRAM_GBNF_MAX_ELEMS);
    if (tram_grow((void **)&f->out, &f->cap_out, f->num_out + 1, sizeof(tram_gelem)))
        return tram_fail(f->err, "grammar: out of memory");
    f->out[f->num_out++] = (tram_gelem){.kind = (uint8_t)kind, .arg = arg};
    return 0;
}

/* A new helper rule of `parent` whose alternatives are s[0..n). */
static int new_helper(factor *f, int parent, const slice *s, int n)
{
    int id = f->num_rules, c1 = f->cap_rules, c2 = c1, c3 = c1, c4 = c1;
    if (id >= TRAM_GBNF_MAX_RULES)
        return tram_fail(f->err, "grammar: more than %d rules once its alternatives are merged, the most "
                                 "tram compiles", TRAM_GBNF_MAX_RULES);
    if (tram_grow((void **)&f->names, &c1, id + 1, sizeof(char *)) ||
        tram_grow((void **)&f->rule_start, &c2, id + 1, sizeof(int32_t)) ||
        tram_grow((void **)&f->pending_at, &c3, id + 1, sizeof(int32_t)) ||
        tram_grow((void **)&f->pending_n, &c4, id + 1, sizeof(int32_t)) ||
        tram_grow((void **)&f->pending, &f->cap_pending, f->num_pending + n, sizeof(slice)))
        return tram_fail(f->err, "grammar: out of memory");
    f->cap_rules = c1;
    char name[300];
    snprintf(name, sizeof(name), "%.200s_%d", f->names[parent], id);
    if (!(f->names[id] = strdup(name)))
        return tram_fail(f->err, "grammar: out of memory");
    f->pending_at[id] = f->num_pending;
    f->pending_n[id] = n;
    memcpy(f->pending + f->num_pending, s, (size_t)n * sizeof(slice));
    f->num_pending += n;
    f->num_rules++;
    return id;
}

/* The alternatives of original rule r as slices, appended to *v. */
static int rule_slices(const tram_gbnf *g, int r, slice **v, int *n, int *cap)
{
    for (int32_t a = g->rule_start[r], p = a;; p++) {
        if (!tram_gelem_ends_alt(&g->elems[p]))
            continue;
        if (tram_grow((void **)v, cap, *n + 1, sizeof(slice)))
            return -1;
        (*v)[(*n)++] = (slice){a, p};
        if (g->elems[p].kind == TRAM_G_END)
            return 0;
        a = p + 1;
    }
}

/* 1 when rule x can stand in for a reference to it: literals only. */
static int inlinable(const factor *f, int x)
{
    const tram_gbnf *g = f->in;
    int32_t end = x + 1 < g->num_rules ? g->rule_start[x + 1] : g->num_elems;
    if (f->is_body[x] || end - g->rule_start[x] > MAX_INLINED)
        return 0;
    for (int32_t p = g->rule_start[x]; p < end; p++)
        if (g->elems[p].kind == TRAM_G_REF || g->elems[p].kind == TRAM_G_REPEAT)
            return 0;
    return 1;
}

/* Rule r's alternatives, with lone references to rules of literals
 * replaced by those rules' alternatives. */
static int gather(factor *f, int r, slice **v, int *n, int *cap)
{
    const tram_gbnf *g = f->in;
    slice *own = NULL;
    int num = 0, cap_own = 0, rc = 0;
    if (r < g->num_rules)
        rc = rule_slices(g, r, &own, &num, &cap_own);
    else if (!(own = malloc(((size_t)f->pending_n[r] + 1) * sizeof(slice))))
        rc = -1;
    else
        memcpy(own, f->pending + f->pending_at[r], (size_t)(num = f->pending_n[r]) * sizeof(slice));
    for (int i = 0; !rc && i < num; i++) {
        const tram_gelem *e = &g->elems[own[i].a];
        if (num > 1 && own[i].b == own[i].a + 1 && e->kind == TRAM_G_REF && e->arg != r && inlinable(f, e->arg))
            rc = rule_slices(g, e->arg, v, n, cap);
        else if (!(rc = tram_grow((void **)v, cap, *n + 1, sizeof(slice))))
            (*v)[(*n)++] = own[i];
    }
    free(own);
    return rc ? tram_fail(f->err, "grammar: out of memory") : 0;
}

static int same_elem(const tram_gelem *x, const tram_gelem *y) { return x->kind == y->kind && x->arg == y->arg; }

/* Alternatives group by their first element when it is a byte set or a
 * reference; others (empty, a counted loop) stand alone. */
static int groupable(const tram_gbnf *g, const slice *s)
{
    return s->b > s->a && (g->elems[s->a].kind == TRAM_G_BYTES || g->elems[s->a].kind == TRAM_G_REF);
}

/* An alternative by its first element, then its place in the list. */
typedef struct {
    int32_t kind, arg, index;
} first_key;

static int cmp_first(const void *x, const void *y)
{
    const first_key *a = x, *b = y;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->arg != b->arg)
        return a->arg < b->arg ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The longest prefix the alternatives s[k[0..m)] share (at least 1). */
static int common_prefix(const tram_gbnf *g, const slice *s, const first_key *k, int m)
{
    const slice *s0 = &s[k[0].index];
    int len = s0->b - s0->a;
    for (int j = 1; j < m && len > 1; j++) {
        const slice *sj = &s[k[j].index];
        int l = 1;
        while (l < len && sj->a + l < sj->b && same_elem(&g->elems[s0->a + l], &g->elems[sj->a + l]))
            l++;
        len = l;
    }
    return len;
}

/* Writes one alternative: the slice's elements. */
static int emit_slice(factor *f, const slice *s)
{
    for (int32_t p = s->a; p < s->b; p++)
        if (emit(f, (tram_gkind)f->in->elems[p].kind, f->in->elems[p].arg))
            return -1;
    return 0;
}

/* Writes the group k[0..m) (sharing a first element): its common prefix
 * and a reference to a helper holding the rest of each. */
static int emit_group(factor *f, int r, const slice *s, const first_key *k, int m)
{
    if (m == 1)
        return emit_slice(f, &s[k[0].index]);
    int len = common_prefix(f->in, s, k, m);
    slice *rest = malloc((size_t)m * sizeof(slice));
    if (!rest)
        return tram_fail(f->err, "grammar: out of memory");
    for (int j = 0; j < m; j++)
        rest[j] = (slice){s[k[j].index].a + len, s[k[j].index].b};
    int h = new_helper(f, r, rest, m);
    free(rest);
    slice prefix = {s[k[0].index].a, s[k[0].index].a + len};
    return h < 0 || emit_slice(f, &prefix) || emit(f, TRAM_G_REF, h) ? -1 : 0;
}

/* Writes rule r, its alternatives grouped by first element; groups keep
 * the place of their first member. */
static int emit_rule(factor *f, int r)
{
    slice *s = NULL;
    int n = 0, cap = 0;
    if (gather(f, r, &s, &n, &cap))
        return -1;
    first_key *k = malloc(((size_t)n + 1) * sizeof(first_key));
    int32_t *group_of = malloc(((size_t)n + 1) * sizeof(int32_t)), *group_at = malloc(((size_t)n + 1) * sizeof(int32_t));
    int rc = k && group_of && group_at ? 0 : tram_fail(f->err, "grammar: out of memory"), m = 0;
    for (int i = 0; !rc && i < n; i++)
        if (groupable(f->in, &s[i]) && !(r < f->in->num_rules && f->is_body[r]))
            k[m++] = (first_key){f->in->elems[s[i].a].kind, f->in->elems[s[i].a].arg, i};
    if (!rc)
        qsort(k, (size_t)m, sizeof(*k), cmp_first);
    for (int i = 0; !rc && i < n; i++)
        group_of[i] = -1;
    for (int j = 0; !rc && j < m; j++) {  /* a group is a run of k; group_of: its first member's run start */
        int start = j > 0 && k[j].kind == k[j - 1].kind && k[j].arg == k[j - 1].arg ? group_at[k[j - 1].index] : j;
        group_at[k[j].index] = start;
        group_of[k[j].index] = start;
    }
    f->rule_start[r] = f->num_out;
    for (int i = 0, first = 1; !rc && i < n; i++) {
        if (group_of[i] >= 0 && k[group_of[i]].index != i)
            continue;  /* written with its group */
        if (!first)
            rc = emit(f, TRAM_G_ALT, 0);
        first = 0;
        if (!rc && group_of[i] < 0) {
            rc = emit_slice(f, &s[i]);
        } else if (!rc) {
            int g0 = group_of[i], end = g0;
            while (end < m && group_at[k[end].index] == g0)
                end++;
            rc = emit_group(f, r, s, k + g0, end - g0);
        }
    }
    rc = rc || emit(f, TRAM_G_END, 0);
    TRAM_FREE_ALL(s, k, group_of, group_at);
    return rc;
}

int tram_gbnf_factor(tram_gbnf *g, tram_error *err)
{
    factor f = {.in = g, .err = err, .num_rules = g->num_rules, .cap_rules = g->num_rules};
    f.is_body = calloc((size_t)g->num_rules + 1, 1);
    f.names = malloc(((size_t)g->num_rules + 1) * sizeof(char *));
    f.rule_start = malloc(((size_t)g->num_rules + 1) * sizeof(int32_t));
    f.pending_at = malloc(((size_t)g->num_rules + 1) * sizeof(int32_t));
    f.pending_n = malloc(((size_t)g->num_rules + 1) * sizeof(int32_t));
    int rc = f.is_body && f.names && f.rule_start && f.pending_at && f.pending_n ? 0
           : tram_fail(err, "grammar: out of memory");
    if (!rc) {
        memcpy(f.names, g->rule_names, (size_t)g->num_rules * sizeof(char *));
        for (int i = 0; i < g->num_repeats; i++)
            f.is_body[g->repeats[i].body] = 1;
    }
    for (int r = 0; !rc && r < f.num_rules; r++)  /* helpers are added past the end as it goes */
        rc = emit_rule(&f, r);
    TRAM_FREE_ALL(f.is_body, f.pending, f.pending_at, f.pending_n);
    if (rc) {
        for (int r = g->num_rules; r < f.num_rules; r++)
            free(f.names[r]);
        TRAM_FREE_ALL(f.names, f.rule_start, f.out);
        return -1;
    }
    TRAM_FREE_ALL(g->elems, g->rule_start, g->rule_names);
    g->elems = f.out;
    g->num_elems = f.num_out;
    g->rule_start = f.rule_start;
    g->rule_names = f.names;
    g->num_rules = f.num_rules;
    return 0;
}
