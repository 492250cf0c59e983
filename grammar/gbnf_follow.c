/* gbnf_follow.c — FIRST and FOLLOW sets of a grammar's rules over bytes
 * (see tram_gbnf_follow_sets in gbnf.h). */
#include <stdlib.h>

#include "grammar/gbnf.h"

/* ---------------------------------------------------------------- FIRST and FOLLOW
 *
 * LL(1) FIRST and FOLLOW sets over bytes.  Each is a set given directly
 * (the bytes that open what follows a reference) grown along edges
 * "x's set is in y's" to a fixpoint by a worklist: a set changes at most
 * 256 times, so the work is linear in the grammar, whatever the order of
 * its rules (a round-robin fixpoint is quadratic on a long chain). */

typedef struct {
    int32_t *from, *to;
    int n, cap;
} edge_list;

static int add_edge(edge_list *e, int32_t from, int32_t to)
{
    int c1 = e->cap, c2 = e->cap;
    if (tram_grow((void **)&e->from, &c1, e->n + 1, sizeof(int32_t)) ||
        tram_grow((void **)&e->to, &c2, e->n + 1, sizeof(int32_t)))
        return -1;
    e->cap = TRAM_MIN(c1, c2);
    e->from[e->n] = from;
    e->to[e->n++] = to;
    return 0;
}

/* sets[to] |= sets[from] along every edge, until nothing changes. */
static int propagate(tram_byteset *sets, int n, const edge_list *e)
{
    int32_t *start = calloc((size_t)n + 2, sizeof(int32_t)), *out = malloc(((size_t)e->n + 1) * sizeof(int32_t));
    int32_t *queue = malloc(((size_t)n + 1) * sizeof(int32_t));
    uint8_t *queued = calloc((size_t)n + 1, 1);
    int rc = start && out && queue && queued ? 0 : -1;
    for (int i = 0; !rc && i < e->n; i++)
        start[e->from[i] + 2]++;
    for (int r = 0; !rc && r < n; r++)
        start[r + 2] += start[r + 1];
    for (int i = 0; !rc && i < e->n; i++)
        out[start[e->from[i] + 1]++] = e->to[i];
    /* start[x]..start[x + 1]: x's edges; the queue is a ring of distinct rules */
    int head = 0, count = 0;
    for (int r = 0; !rc && r < n; r++)
        if (start[r + 1] > start[r]) {
            queue[count++] = r;
            queued[r] = 1;
        }
    while (!rc && count > 0) {
        int x = queue[head];
        head = (head + 1) % n;
        count--;
        queued[x] = 0;
        for (int32_t k = start[x]; k < start[x + 1]; k++) {
            int32_t y = out[k];
            int changed = 0;
            for (int i = 0; i < 8; i++) {
                changed |= (sets[x].bits[i] & ~sets[y].bits[i]) != 0;
                sets[y].bits[i] |= sets[x].bits[i];
            }
            if (changed && !queued[y] && start[y + 1] > start[y]) {
                queue[(head + count++) % n] = y;
                queued[y] = 1;
            }
        }
    }
    TRAM_FREE_ALL(start, out, queue, queued);
    return rc;
}

static void byteset_or(tram_byteset *dst, const tram_byteset *src)
{
    for (int i = 0; i < 8; i++)
        dst->bits[i] |= src->bits[i];
}

/* first[r]: the bytes r can begin with. */
static int first_sets(const tram_gbnf *g, const uint8_t *nul, tram_byteset *first)
{
    edge_list e = {0};
    int rc = 0;
    for (int r = 0; !rc && r < g->num_rules; r++)
        for (int32_t p = g->rule_start[r], at_start = 1;; p++) {
            const tram_gelem *el = &g->elems[p];
            if (tram_gelem_ends_alt(el)) {
                if (el->kind == TRAM_G_END)
                    break;
                at_start = 1;
            } else if (at_start && el->kind == TRAM_G_BYTES) {
                byteset_or(&first[r], &g->sets[el->arg]);
                at_start = 0;
            } else if (at_start) {
                rc = add_edge(&e, tram_gelem_rule(g, el), r);
                at_start = tram_gelem_nullable(g, nul, el);
            }
        }
    rc = rc || propagate(first, g->num_rules, &e);
    free(e.from);
    free(e.to);
    return rc;
}

/* The follow sets the alternative elems[a..b) gives, walked backward:
 * `after` is FIRST of what follows the element, `open` 1 when that can be
 * empty (then the rule's own follow set is in the element's). */
static int alt_follows(const tram_gbnf *g, const uint8_t *nul, const tram_byteset *first, int r, int32_t a,
                       int32_t b, tram_byteset *follow, edge_list *e)
{
    tram_byteset after = {{0}};
    int open = 1;
    for (int32_t p = b - 1; p >= a; p--) {
        const tram_gelem *el = &g->elems[p];
        if (el->kind == TRAM_G_BYTES) {
            after = g->sets[el->arg];
            open = 0;
            continue;
        }
        int sub = tram_gelem_rule(g, el), tail = el->kind == TRAM_G_REPEAT ? g->repeats[el->arg].tail : -1;
        if (tail >= 0) {
            byteset_or(&follow[tail], &after);
            if (open && add_edge(e, r, tail))
                return -1;
        }
        byteset_or(&follow[sub], &after);
        if (open && add_edge(e, r, sub))
            return -1;
        if (el->kind == TRAM_G_REPEAT) {  /* the body: then the next iteration, or the tail */
            byteset_or(&follow[sub], &first[sub]);
            if (tail >= 0)
                byteset_or(&follow[sub], &first[tail]);
        }
        int empty = tram_gelem_nullable(g, nul, el);
        if (!empty)
            after = (tram_byteset){{0}};
        byteset_or(&after, &first[sub]);
        open &= empty;
    }
    return 0;
}

/* follow[r] holds every byte that can come right after rule r ends. */
int tram_gbnf_follow_sets(const tram_gbnf *g, tram_byteset *follow, tram_error *err)
{
    int n = g->num_rules;
    tram_byteset *first = tram_calloc((size_t)n + 1, sizeof(*first), err);
    uint8_t *nul = tram_gbnf_nullable(g);
    edge_list e = {0};
    int rc = first && nul ? first_sets(g, nul, first) : -1;
    for (int r = 0; !rc && r < n; r++)
        for (int32_t a = g->rule_start[r], p = a; !rc; p++) {
            if (!tram_gelem_ends_alt(&g->elems[p]))
                continue;
            rc = alt_follows(g, nul, first, r, a, p, follow, &e);
            if (g->elems[p].kind == TRAM_G_END)
                break;
            a = p + 1;
        }
    rc = rc || propagate(follow, n, &e);
    TRAM_FREE_ALL(e.from, e.to, first, nul);
    return rc ? tram_fail(err, "grammar: out of memory computing follow sets") : 0;
}
