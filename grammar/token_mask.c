/* token_mask.c — per-position token sets and the run-time mask (see
 * token_mask.h). */
#include "grammar/token_mask.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"

/* The walks of every position share one lazily built automaton: a state
 * is a distinct stack set, its transitions are filled in as the walks meet
 * them.  Most trie nodes then cost a table lookup: after a character of a
 * JSON string, say, the state is the same whichever character it was.
 * There is a state per grammar position or so, so a state is small: its
 * stacks live in shared arrays, its transitions in one shared table, and
 * a byte no stack's top takes (the dead end most bytes are) is known from
 * the state's live set without a step. */
typedef struct {
    int32_t first, n;          /* its stacks: stk_*[first, first + n) */
    int has_end;
    uint64_t key;
    tram_byteset live;         /* bytes some stack's top takes */
    int32_t first_to;          /* the first transition computed (most states have one), or -1 */
    uint8_t first_byte;        /* its byte */
    int32_t dense;             /* the state's row of dense[] once it has many transitions, or -1 */
    int num_edges;             /* transitions computed */
} dfa_state;

/* A state with more transitions than this (after a character of a JSON
 * string, most bytes) gets a row of 256 for them, looked up directly;
 * most states of a long list of literals have one, kept in the state. */
#define DENSE_AFTER 2

typedef struct {
    dfa_state *states;
    int num, cap;
    int32_t *ints;             /* the stacks' entries */
    size_t num_ints, cap_ints;
    int32_t *stk_off, *stk_len;
    uint64_t *stk_hash;
    int num_stk, cap_stk;
    int32_t *table;            /* open addressing on key: state + 1, 0 empty */
    int table_cap;
    uint64_t *edge_key;        /* transitions: (state << 8 | byte) + 1, 0 empty */
    int32_t *edge_to;
    size_t num_edges, edge_cap;
    int32_t *dense;            /* rows of 256 transitions, -2: not computed (or in the table only) */
    size_t num_dense, cap_dense;
    tram_stackset tmp;
    int failed;                /* a step's set was incomplete (tmp says why), or one of these: */
    int over_steps, over_memory;
    int64_t steps;             /* work done */
    int64_t step_limit;        /* past it the walk under way fails (over_steps) */
} lazy_dfa;

/* State s as a stack set (valid until the next state is added). */
static tram_stackset dfa_view(const lazy_dfa *d, int s)
{
    const dfa_state *st = &d->states[s];
    return (tram_stackset){.pool = d->ints, .off = d->stk_off + st->first, .len = d->stk_len + st->first,
                           .hash = d->stk_hash + st->first, .n = st->n, .has_end = st->has_end};
}

static uint64_t set_key(const tram_stackset *s)
{
    uint64_t k = (uint64_t)s->has_end * 0x9e3779b97f4a7c15ULL + (uint64_t)s->n;
    for (int i = 0; i < s->n; i++)
        k += tram_mix64(s->hash[i]);   /* order-free: the same set, the same key */
    return k;
}

static int same_set(const tram_stackset *a, const tram_stackset *b)
{
    if (a->n != b->n || a->has_end != b->has_end)
        return 0;
    for (int i = 0; i < a->n; i++) {
        int found = 0;
        for (int j = 0; j < b->n && !found; j++)
            found = a->hash[i] == b->hash[j] && a->len[i] == b->len[j] &&
                    !memcmp(tram_stack_at(a, i), tram_stack_at(b, j), (size_t)a->len[i] * 4);
        if (!found)
            return 0;
    }
    return 1;
}

static int dfa_rehash(lazy_dfa *d)
{
    int cap = d->table_cap ? 2 * d->table_cap : 1024;
    int32_t *t = calloc((size_t)cap, sizeof(int32_t));
    if (!t)
        return -1;
    for (int s = 0; s < d->num; s++) {
        size_t h = (size_t)d->states[s].key & (size_t)(cap - 1);
        while (t[h])
            h = (h + 1) & (size_t)(cap - 1);
        t[h] = s + 1;
    }
    free(d->table);
    d->table = t;
    d->table_cap = cap;
    return 0;
}

static int grow_to(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = TRAM_MAX(*cap * 2, TRAM_MAX(need, (size_t)64));
    void *n = realloc(*v, c * size);
    if (!n)
        return -1;
    *v = n;
    *cap = c;
    return 0;
}

/* Room for one more state holding s. */
static int dfa_reserve(lazy_dfa *d, const tram_stackset *s)
{
    size_t cap = (size_t)d->cap, stk = (size_t)d->cap_stk, stk2 = stk, stk3 = stk;
    size_t need_stk = (size_t)d->num_stk + (size_t)s->n;
    if (grow_to((void **)&d->states, &cap, (size_t)d->num + 1, sizeof(dfa_state)) ||
        grow_to((void **)&d->stk_off, &stk, need_stk, sizeof(int32_t)) ||
        grow_to((void **)&d->stk_len, &stk2, need_stk, sizeof(int32_t)) ||
        grow_to((void **)&d->stk_hash, &stk3, need_stk, sizeof(uint64_t)) ||
        grow_to((void **)&d->ints, &d->cap_ints, d->num_ints + (size_t)s->pool_len, sizeof(int32_t)))
        return -1;
    d->cap = (int)cap;
    d->cap_stk = (int)TRAM_MIN(stk, TRAM_MIN(stk2, stk3));
    return 0;
}

/* The state of set s, added (a copy) when new; -1 when out of memory. */
static int dfa_intern(lazy_dfa *d, const tram_gbnf *g, const tram_stackset *s)
{
    if (2 * (d->num + 1) > d->table_cap && dfa_rehash(d))
        return -1;
    uint64_t k = set_key(s);
    size_t h = (size_t)k & (size_t)(d->table_cap - 1);
    for (; d->table[h]; h = (h + 1) & (size_t)(d->table_cap - 1)) {
        tram_stackset v = dfa_view(d, d->table[h] - 1);
        if (d->states[d->table[h] - 1].key == k && same_set(&v, s))
            return d->table[h] - 1;
    }
    if (dfa_reserve(d, s))
        return -1;
    dfa_state *st = &d->states[d->num];
    *st = (dfa_state){.first = d->num_stk, .n = s->n, .has_end = s->has_end, .key = k, .first_to = -1,
                        .dense = -1};
    for (int i = 0; i < s->n; i++) {
        const int32_t *v = tram_stack_at(s, i);
        d->stk_off[d->num_stk] = (int32_t)d->num_ints;
        d->stk_len[d->num_stk] = s->len[i];
        d->stk_hash[d->num_stk++] = s->hash[i];
        memcpy(d->ints + d->num_ints, v, (size_t)s->len[i] * sizeof(int32_t));
        d->num_ints += (size_t)s->len[i];
        const tram_byteset *top = &g->sets[g->elems[v[s->len[i] - 1]].arg];
        for (int w = 0; w < 8; w++)
            st->live.bits[w] |= top->bits[w];
    }
    d->table[h] = d->num + 1;
    return d->num++;
}

static int edges_rehash(lazy_dfa *d)
{
    size_t cap = d->edge_cap ? 2 * d->edge_cap : 4096;
    uint64_t *key = calloc(cap, sizeof(uint64_t));
    int32_t *to = malloc(cap * sizeof(int32_t));
    if (!key || !to) {
        free(key);
        free(to);
        return -1;
    }
    for (size_t i = 0; i < d->edge_cap; i++) {
        if (!d->edge_key[i])
            continue;
        size_t h = (size_t)tram_mix64(d->edge_key[i]) & (cap - 1);
        while (key[h])
            h = (h + 1) & (cap - 1);
        key[h] = d->edge_key[i];
        to[h] = d->edge_to[i];
    }
    free(d->edge_key);
    free(d->edge_to);
    d->edge_key = key;
    d->edge_to = to;
    d->edge_cap = cap;
    return 0;
}

/* The slot of transition (state, byte): filled, or the empty one to fill. */
static size_t edge_slot(const lazy_dfa *d, uint64_t key)
{
    size_t h = (size_t)tram_mix64(key) & (d->edge_cap - 1);
    while (d->edge_key[h] && d->edge_key[h] != key)
        h = (h + 1) & (d->edge_cap - 1);
    return h;
}

/* Gives state s a dense row (its transitions so far stay in the table). */
static int dfa_densify(lazy_dfa *d, int s)
{
    if (grow_to((void **)&d->dense, &d->cap_dense, (d->num_dense + 1) * 256, sizeof(int32_t)))
        return -1;
    for (int i = 0; i < 256; i++)
        d->dense[d->num_dense * 256 + i] = -2;
    d->states[s].dense = (int32_t)d->num_dense++;
    return 0;
}

static size_t dfa_bytes(const lazy_dfa *d)
{
    return (size_t)d->cap * sizeof(dfa_state) + d->cap_ints * 4 + (size_t)d->cap_stk * 16 +
           (size_t)d->table_cap * 4 + d->edge_cap * 12 + d->cap_dense * 4;
}

/* The state after `byte` (a live one) from `state`; -1 when the step
 * failed (d->failed says so). */
static int dfa_step(lazy_dfa *d, const tram_gbnf *g, int state, uint8_t byte, int32_t *buf)
{
    dfa_state *st = &d->states[state];
    int32_t *row = st->dense >= 0 ? d->dense + (size_t)st->dense * 256 : NULL;
    if (row && row[byte] >= 0)
        return row[byte];
    if (st->first_to >= 0 && st->first_byte == byte)
        return st->first_to;
    if (2 * (d->num_edges + 1) > d->edge_cap && edges_rehash(d))
        return d->failed = 1, -1;
    uint64_t key = ((uint64_t)state << 8 | byte) + 1;
    size_t h = edge_slot(d, key);
    if (d->edge_key[h])
        return row ? (row[byte] = d->edge_to[h]) : d->edge_to[h];
    tram_stackset from = dfa_view(d, state);
    tram_stacks_advance(g, &from, -1, byte, &d->tmp, buf);
    d->steps += d->tmp.steps + 1;
    if (tram_stackset_incomplete(&d->tmp) || d->tmp.too_deep)
        return d->failed = 1, -1;
    if (d->steps > d->step_limit)
        return d->failed = d->over_steps = 1, -1;
    if (dfa_bytes(d) > TRAM_GRAMMAR_MAX_MEMORY)
        return d->failed = d->over_memory = 1, -1;
    int id = dfa_intern(d, g, &d->tmp);
    if (id < 0)
        return d->failed = d->tmp.oom = 1, -1;
    st = &d->states[state];  /* (interning may have moved the states) */
    if (st->first_to < 0) {
        st->first_to = id;
        st->first_byte = byte;
    } else if (st->dense >= 0) {
        d->dense[(size_t)st->dense * 256 + byte] = id;
    } else {
        d->edge_key[h] = key;
        d->edge_to[h] = id;
        d->num_edges++;
    }
    if (++st->num_edges > DENSE_AFTER && st->dense < 0 && dfa_densify(d, state))
        return d->failed = d->tmp.oom = 1, -1;
    return id;
}

static void dfa_free(lazy_dfa *d)
{
    TRAM_FREE_ALL(d->states, d->ints, d->stk_off, d->stk_len, d->stk_hash, d->table, d->edge_key, d->edge_to,
                  d->dense);
    tram_stackset_free(&d->tmp);
    *d = (lazy_dfa){0};
}

/* ---------------------------------------------------------------- one position's walk */

typedef struct {
    const tram_gbnf *g;
    const tram_vocab_trie *t;
    lazy_dfa dfa;
    int32_t *buf;
    uint32_t *accepted;        /* [words] */
    int32_t *accepted_ids;     /* [num_tokens]: the ids set in accepted */
    int num_accepted;
    int32_t *uncertain;        /* [num_tokens] */
    int num_uncertain;
    const tram_byteset *follow;/* bytes that can come right after p's rule */
} walk;

static void accept_token(walk *w, int sorted)
{
    int32_t id = w->t->sorted_ids[sorted];
    uint32_t bit = 1u << (id & 31);
    if (!(w->accepted[id >> 5] & bit)) {
        w->accepted[id >> 5] |= bit;
        w->accepted_ids[w->num_accepted++] = id;
    }
}

static void uncertain_range(walk *w, int lo, int hi)
{
    for (int s = lo; s < hi; s++)
        w->uncertain[w->num_uncertain++] = s;
}

static void walk_node(walk *w, int node, int state, int escaped);

/* Child c of a node reached in `state`; esc as in walk_node. */
static void walk_child(walk *w, int c, int state, int esc)
{
    const tram_trie_node *ch = &w->t->nodes[c];
    w->dfa.steps++;
    if (!tram_byteset_has(&w->dfa.states[state].live, ch->byte)) {  /* a dead end */
        if (esc)
            uncertain_range(w, ch->lo, ch->hi);
        return;
    }
    int next = dfa_step(&w->dfa, w->g, state, ch->byte, w->buf);
    if (next < 0)
        return;
    int alive = w->dfa.states[next].n > 0, ended = w->dfa.states[next].has_end;
    for (int s = ch->lo; s < ch->mid; s++) {
        if (alive || ended)
            accept_token(w, s);
        else if (esc)
            w->uncertain[w->num_uncertain++] = s;
    }
    if (alive) {
        walk_node(w, c, next, esc);
    } else if (esc) {
        uncertain_range(w, ch->mid, ch->hi);
    } else if (ended) {
        for (int k = ch->child0; k < ch->child0 + ch->num_children; k++)
            if (tram_byteset_has(w->follow, w->t->nodes[k].byte))
                uncertain_range(w, w->t->nodes[k].lo, w->t->nodes[k].hi);
    }
}

/* The child of `node` reached by byte b, or -1 (children are in byte order). */
static int child_by_byte(const tram_vocab_trie *t, const tram_trie_node *n, unsigned b)
{
    int lo = n->child0, hi = n->child0 + n->num_children;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (t->nodes[mid].byte < b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n->child0 + n->num_children && t->nodes[lo].byte == b ? lo : -1;
}

static int byteset_count(const tram_byteset *s)
{
    int n = 0;
    for (int i = 0; i < 8; i++)
        n += __builtin_popcount(s->bits[i]);
    return n;
}

/* The subtree under `node`, reached in automaton state `state`.
 * escaped: p's rule ended somewhere along the prefix, and the byte after
 * it can follow the rule.  A token that must leave p's rule on a byte
 * that never follows it is rejected here, not left for run time. */
static void walk_node(walk *w, int node, int state, int escaped)
{
    const tram_trie_node *n = &w->t->nodes[node];
    int cur_end = w->dfa.states[state].has_end;
    tram_byteset live = w->dfa.states[state].live;  /* (states move as the walk adds some) */
    if (!escaped && !cur_end && byteset_count(&live) * 4 < n->num_children) {
        /* only live bytes can keep a token: look them up, not every child */
        for (int i = 0; i < 8; i++)
            for (uint32_t bits = live.bits[i]; bits && !w->dfa.failed; bits &= bits - 1) {
                int c = child_by_byte(w->t, n, (unsigned)(i * 32 + __builtin_ctz(bits)));
                if (c >= 0)
                    walk_child(w, c, state, 0);
            }
        return;
    }
    for (int c = n->child0; c < n->child0 + n->num_children && !w->dfa.failed; c++)
        walk_child(w, c, state, escaped || (cur_end && tram_byteset_has(w->follow, w->t->nodes[c].byte)));
}

/* ---------------------------------------------------------------- one position's sets */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* The lists a walk fills, allocated for the walk alone (a grammar kept in
 * a cache then holds none). */
static int walk_lists_alloc(walk *w, tram_error *err)
{
    w->num_accepted = w->num_uncertain = 0;
    w->accepted = tram_calloc((size_t)(w->t->vocab + 31) / 32, sizeof(uint32_t), err);
    w->accepted_ids = tram_calloc((size_t)w->t->num_tokens + 1, sizeof(int32_t), err);
    w->uncertain = tram_calloc((size_t)w->t->num_tokens + 1, sizeof(int32_t), err);
    return w->accepted && w->accepted_ids && w->uncertain ? 0 : -1;
}

static void walk_lists_free(walk *w)
{
    TRAM_FREE_ALL(w->accepted, w->accepted_ids, w->uncertain);
    w->accepted = NULL;
    w->accepted_ids = w->uncertain = NULL;
}

/* The walk's sets as they stand, for one use before walk_lists_free. */
static tram_pos_mask walk_view(const walk *w, int32_t loop)
{
    return (tram_pos_mask){.bits = w->accepted, .uncertain = w->uncertain, .num_uncertain = w->num_uncertain,
                           .loop = loop};
}

static size_t stored_bytes(const walk *w, int words)
{
    size_t accepted = w->num_accepted > words ? (size_t)words : (size_t)w->num_accepted;
    return (accepted + (size_t)w->num_uncertain) * sizeof(int32_t);
}

/* Copies the walk's sets into pm: the accepted set as a bitmask when it
 * has more ids than the mask has words (then ORing words beats setting
 * bits), else as a list. */
static int store(const walk *w, tram_pos_mask *pm, int words)
{
    if (w->num_accepted > words) {
        if (!(pm->bits = malloc((size_t)words * sizeof(uint32_t))))
            return -1;
        memcpy(pm->bits, w->accepted, (size_t)words * sizeof(uint32_t));
    } else if (w->num_accepted) {
        if (!(pm->ids = malloc((size_t)w->num_accepted * sizeof(int32_t))))
            return -1;
        memcpy(pm->ids, w->accepted_ids, (size_t)w->num_accepted * sizeof(int32_t));
        pm->num_ids = w->num_accepted;
    }
    if (w->num_uncertain) {
        if (!(pm->uncertain = malloc((size_t)w->num_uncertain * sizeof(int32_t))))
            return -1;
        memcpy(pm->uncertain, w->uncertain, (size_t)w->num_uncertain * sizeof(int32_t));
        pm->num_uncertain = w->num_uncertain;
    }
    return 0;
}

static void pos_mask_free(tram_pos_mask *pm)
{
    TRAM_FREE_ALL(pm->bits, pm->ids, pm->uncertain);
}

/* Why the walk under way failed. */
static int walk_refusal(const walk *w, tram_error *err)
{
    if (w->dfa.over_steps)
        return tram_fail(err, "grammar: the token mask of one of its positions takes over %lld steps to compute "
                              "(the budget of a position); make it smaller", (long long)TRAM_GRAMMAR_MAX_STEPS);
    if (w->dfa.over_memory)
        return tram_fail(err, "grammar: its token masks need over %d MiB (the compile budget); make it smaller",
                         TRAM_GRAMMAR_MAX_MEMORY >> 20);
    if (w->dfa.tmp.oom)
        return tram_fail(err, "grammar: out of memory computing token masks");
    return tram_stackset_refusal(&w->dfa.tmp, err);
}

/* Walks position p (in the body of counted loop `loop`, or -1) over the
 * trie into the walk's lists.  A body position is walked with the loop
 * under it at any count: a token may run on into the next iteration, as
 * in x*, and stays decided by its position alone. */
static int walk_position(walk *w, int32_t p, int32_t loop, tram_error *err)
{
    tram_stackset_clear(&w->dfa.tmp);
    int len = 0;
    if (loop >= 0) {
        w->buf[len++] = TRAM_LOOP_ANY_COUNT;
        w->buf[len++] = tram_loop_marker(loop);
    }
    w->buf[len++] = p;
    tram_stacks_expand(w->g, &w->dfa.tmp, w->buf, len);
    w->dfa.steps += w->dfa.tmp.steps;
    if (tram_stackset_incomplete(&w->dfa.tmp) || w->dfa.tmp.too_deep)
        return tram_stackset_refusal(&w->dfa.tmp, err);
    int start = dfa_intern(&w->dfa, w->g, &w->dfa.tmp);
    if (start < 0)
        return tram_fail(err, "grammar: out of memory computing token masks");
    walk_node(w, 0, start, 0);
    if (w->dfa.failed)
        return walk_refusal(w, err);
    qsort(w->uncertain, (size_t)w->num_uncertain, sizeof(int32_t), cmp_i32);
    return 0;
}

/* Rules reachable from the root: only their positions can be on a stack. */
static uint8_t *reachable_rules(const tram_gbnf *g, tram_error *err)
{
    uint8_t *seen = tram_calloc((size_t)g->num_rules + 1, 1, err);
    int32_t *todo = tram_calloc((size_t)g->num_rules + 1, sizeof(int32_t), err);
    if (!seen || !todo) {
        free(seen);
        free(todo);
        return NULL;
    }
    int n = 0;
    seen[g->root] = 1;
    todo[n++] = g->root;
    while (n > 0) {
        int r = todo[--n];
        for (const tram_gelem *e = g->elems + g->rule_start[r]; e->kind != TRAM_G_END; e++) {
            int sub[2] = {tram_gelem_rule(g, e), e->kind == TRAM_G_REPEAT ? g->repeats[e->arg].tail : -1};
            for (int k = 0; k < 2; k++)
                if (sub[k] >= 0 && !seen[sub[k]]) {
                    seen[sub[k]] = 1;
                    todo[n++] = sub[k];
                }
        }
    }
    free(todo);
    return seen;
}

/* The counted loop each rule is the body of (-1: none): a body belongs to
 * its loop alone. */
static int32_t *loops_of(const tram_gbnf *g, tram_error *err)
{
    int32_t *loop_of = tram_calloc((size_t)g->num_rules + 1, sizeof(int32_t), err);
    for (int r = 0; loop_of && r < g->num_rules; r++)
        loop_of[r] = -1;
    for (int32_t q = 0; loop_of && q < g->num_elems; q++)
        if (g->elems[q].kind == TRAM_G_REPEAT)
            loop_of[g->repeats[g->elems[q].arg].body] = q;
    return loop_of;
}

/* The rule position p belongs to (rules' elements are laid out in order). */
static int32_t rule_of(const tram_gbnf *g, int32_t p)
{
    int32_t lo = 0, hi = g->num_rules - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (g->rule_start[mid] <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---------------------------------------------------------------- the table */

/* A position's entry in walked[]. */
enum { POS_UNWALKED, POS_READY, POS_FAILED };

/* What the walks of one grammar share, behind its lock.  The automaton
 * is kept from walk to walk (later walks mostly look its transitions up)
 * until it passes KEEP_DFA_BYTES. */
struct tram_mask_walker {
    pthread_mutex_t lock;
    walk w;
    tram_byteset *follow;      /* [num_rules] */
    int32_t *loop_of;          /* [num_rules] */
    size_t stored;             /* the positions' sets */
    size_t fixed;              /* the table's arrays and the walker's own */
    _Atomic size_t bytes;      /* all of it and the automaton, for tram_mask_table_bytes */
};

#define KEEP_DFA_BYTES (TRAM_GRAMMAR_MAX_MEMORY / 8)

/* Walks position p (the lock held): POS_READY with its sets in the
 * table, POS_FAILED (err says why), or POS_UNWALKED when the table's sets
 * would pass TRAM_GRAMMAR_MAX_MEMORY: then the sets are left in the walk
 * (*view) for the caller to use once and free (walk_lists_free). */
static int walk_locked(const tram_mask_table *mt, int32_t p, tram_pos_mask *view, tram_error *err)
{
    struct tram_mask_walker *k = mt->walker;
    walk *w = &k->w;
    int32_t r = rule_of(w->g, p);
    w->follow = &k->follow[r];
    w->dfa.step_limit = w->dfa.steps + TRAM_GRAMMAR_MAX_STEPS;
    int rc = walk_lists_alloc(w, err) || walk_position(w, p, k->loop_of[r], err) ? POS_FAILED : POS_READY;
    if (rc == POS_READY && k->stored + stored_bytes(w, mt->words) > TRAM_GRAMMAR_MAX_MEMORY) {
        *view = walk_view(w, k->loop_of[r]);
        rc = POS_UNWALKED;
    } else if (rc == POS_READY) {
        tram_pos_mask pm = {.loop = k->loop_of[r]};
        if (store(w, &pm, mt->words)) {
            pos_mask_free(&pm);
            tram_fail(err, "grammar: out of memory computing token masks");
            rc = POS_FAILED;
        } else {
            mt->pos[p] = pm;
            k->stored += stored_bytes(w, mt->words);
        }
    }
    if (rc != POS_UNWALKED)
        walk_lists_free(w);
    if (rc == POS_FAILED || dfa_bytes(&w->dfa) > KEEP_DFA_BYTES)
        dfa_free(&w->dfa);  /* (a failed walk may have left it midway) */
    if (rc != POS_UNWALKED)
        atomic_store_explicit(&mt->walked[p], (uint8_t)rc, memory_order_release);
    atomic_store(&k->bytes, k->fixed + k->stored + dfa_bytes(&w->dfa));
    return rc;
}

/* Walks position p now, if it has not been: a walk that fails is an error. */
static int walk_now(const tram_mask_table *mt, int32_t p, tram_error *err)
{
    if (atomic_load_explicit(&mt->walked[p], memory_order_acquire) != POS_UNWALKED)
        return atomic_load(&mt->walked[p]) == POS_READY ? 0 : tram_fail(err, "grammar: a position's walk failed");
    pthread_mutex_lock(&mt->walker->lock);
    tram_pos_mask view;
    int rc = atomic_load(&mt->walked[p]);
    if (rc == POS_UNWALKED && (rc = walk_locked(mt, p, &view, err)) == POS_UNWALKED) {
        walk_lists_free(&mt->walker->w);
        tram_fail(err, "grammar: its token masks need over %d MiB (the compile budget); make it smaller",
                  TRAM_GRAMMAR_MAX_MEMORY >> 20);
    }
    pthread_mutex_unlock(&mt->walker->lock);
    return rc == POS_READY ? 0 : -1;
}

static int walker_init(struct tram_mask_walker *k, const tram_gbnf *g, const tram_vocab_trie *t, tram_error *err)
{
    k->w = (walk){.g = g, .t = t, .buf = tram_calloc(TRAM_MAX_STACK_DEPTH + 1, sizeof(int32_t), err)};
    k->follow = tram_calloc((size_t)g->num_rules + 1, sizeof(tram_byteset), err);
    k->loop_of = loops_of(g, err);
    if (!k->w.buf || !k->follow || !k->loop_of || tram_gbnf_follow_sets(g, k->follow, err))
        return -1;
    k->fixed = (TRAM_MAX_STACK_DEPTH + 1) * sizeof(int32_t) + ((size_t)g->num_rules + 1) * (sizeof(tram_byteset) + 4);
    return pthread_mutex_init(&k->lock, NULL) ? tram_fail(err, "grammar: cannot create a lock") : 0;
}

int tram_mask_table_build(tram_mask_table *mt, const tram_gbnf *g, const tram_vocab_trie *t,
                          const tram_stackset *start, tram_error *err)
{
    *mt = (tram_mask_table){.words = (t->vocab + 31) / 32, .num_pos = g->num_elems};
    mt->pos = tram_calloc((size_t)g->num_elems + 1, sizeof(tram_pos_mask), err);
    mt->walked = tram_calloc((size_t)g->num_elems + 1, sizeof(*mt->walked), err);
    mt->walker = tram_calloc(1, sizeof(*mt->walker), err);
    if (!mt->pos || !mt->walked || !mt->walker || walker_init(mt->walker, g, t, err)) {
        tram_mask_table_free(mt);
        return -1;
    }
    mt->walker->fixed += ((size_t)g->num_elems + 1) * (sizeof(tram_pos_mask) + 1);
    int rc = 0;
    for (int i = 0; !rc && i < start->n; i++)
        rc = walk_now(mt, tram_stack_at(start, i)[start->len[i] - 1], err);
    return rc;
}

int tram_mask_table_walk_all(const tram_mask_table *mt, const tram_gbnf *g, tram_error *err)
{
    uint8_t *reached = reachable_rules(g, err);
    int rc = reached ? 0 : -1;
    for (int r = 0; !rc && r < g->num_rules; r++) {
        int32_t end = r + 1 < g->num_rules ? g->rule_start[r + 1] : g->num_elems;
        for (int32_t p = g->rule_start[r]; reached[r] && !rc && p < end; p++)
            if (g->elems[p].kind == TRAM_G_BYTES)
                rc = walk_now(mt, p, err);
    }
    free(reached);
    return rc;
}

size_t tram_mask_table_bytes(const tram_mask_table *mt)
{
    return atomic_load(&mt->walker->bytes);
}

void tram_mask_table_free(tram_mask_table *mt)
{
    for (int p = 0; mt->pos && p < mt->num_pos; p++)
        pos_mask_free(&mt->pos[p]);
    struct tram_mask_walker *k = mt->walker;
    if (k && k->w.buf)
        pthread_mutex_destroy(&k->lock);
    if (k) {
        dfa_free(&k->w.dfa);
        TRAM_FREE_ALL(k->w.buf, k->follow, k->loop_of, k);
    }
    free(mt->pos);
    free((void *)mt->walked);
    *mt = (tram_mask_table){0};
}

/* ---------------------------------------------------------------- run time */

int tram_mask_scratch_init(tram_mask_scratch *s, const tram_vocab_trie *t, tram_error *err)
{
    s->num_levels = t->max_len + 2;
    s->words = (t->vocab + 31) / 32;
    s->levels = tram_calloc((size_t)s->num_levels, sizeof(tram_stackset), err);
    s->buf = tram_calloc(TRAM_MAX_STACK_DEPTH + 1, sizeof(int32_t), err);
    s->accepted = tram_calloc((size_t)s->words, sizeof(uint32_t), err);
    return s->levels && s->buf && s->accepted ? 0 : -1;
}

void tram_mask_scratch_free(tram_mask_scratch *s)
{
    for (int d = 0; s->levels && d < s->num_levels; d++)
        tram_stackset_free(&s->levels[d]);
    TRAM_FREE_ALL(s->levels, s->buf, s->accepted);
    *s = (tram_mask_scratch){0};
}

/* Computes levels[from + 1 .. ] for the bytes b[from..n) (levels[0] is st,
 * stack `which` only); *reached: the deepest level computed.  Returns 1
 * when something survives all n bytes. */
static int run_bytes(const tram_gbnf *g, const tram_stackset *st, int which, const uint8_t *b,
                     int from, int n, tram_mask_scratch *s, int *reached)
{
    *reached = from;
    for (int d = from; d < n; d++) {
        tram_stackset *next = &s->levels[d + 1];
        tram_stacks_advance(g, d == 0 ? st : &s->levels[d], d == 0 ? which : -1, b[d], next, s->buf);
        *reached = d + 1;
        if (tram_stackset_incomplete(next)) {
            s->refused_incomplete = 1;
            return 0;  /* fails closed: a token read in too many ways is refused */
        }
        if (next->n == 0)
            return d + 1 == n && next->has_end;
    }
    return s->levels[n].n > 0 || s->levels[n].has_end;
}

int tram_mask_accepts(const tram_gbnf *g, const tram_stackset *st, int which, const uint8_t *b, int n,
                      tram_mask_scratch *s)
{
    int reached;
    return n > 0 && n < s->num_levels && run_bytes(g, st, which, b, 0, n, s, &reached);
}

/* Tokens checked against one stack in trie order: each token starts from
 * the state of the prefix it shares with the one checked before. */
typedef struct {
    const uint8_t *prev;
    int prev_len, reached;
} trie_run;

static void check_token(trie_run *r, const tram_gbnf *g, const tram_vocab_trie *t, const tram_stackset *st,
                        int which, int32_t id, uint32_t *mask, tram_mask_scratch *s)
{
    int len;
    const uint8_t *b = tram_trie_token(t, id, &len);
    int common = 0, limit = TRAM_MIN(TRAM_MIN(len, r->prev_len), r->reached);
    while (r->prev && common < limit && b[common] == r->prev[common])
        common++;
    if (len < s->num_levels && run_bytes(g, st, which, b, common, len, s, &r->reached))
        mask[id >> 5] |= 1u << (id & 31);
    r->prev = b;
    r->prev_len = len;
}

/* The uncertain tokens of stack `which`'s top. */
static void fill_uncertain(const tram_pos_mask *pm, const tram_gbnf *g, const tram_vocab_trie *t,
                           const tram_stackset *st, int which, uint32_t *mask, tram_mask_scratch *s)
{
    trie_run r = {0};
    for (int i = 0; i < pm->num_uncertain; i++)
        check_token(&r, g, t, st, which, t->sorted_ids[pm->uncertain[i]], mask, s);
}

/* The iterations stack `which` may still start in the counted loop its top
 * is the body of, or INT32_MAX when no token can reach the loop's max. */
static int32_t loop_room(const tram_gbnf *g, const tram_vocab_trie *t, const tram_stackset *st, int which,
                         int32_t loop)
{
    const tram_grepeat *rep = &g->repeats[g->elems[loop].arg];
    if (rep->max < 0)
        return INT32_MAX;
    /* under the body's frame: the iterations done, then the loop's marker */
    int32_t room = rep->max + (rep->tail >= 0 ? rep->tail_max : 0) - tram_stack_at(st, which)[st->len[which] - 3];
    return room >= t->max_len ? INT32_MAX : room;
}

/* The accepted tokens of a body position near its loop's max.  Each
 * iteration takes a byte at least, so a token of len bytes starts at most
 * len - 1 new ones: one no longer than room is accepted as precomputed,
 * a longer one is checked against the whole stack. */
static void fill_near_max(const tram_pos_mask *pm, int32_t room, const tram_gbnf *g, const tram_vocab_trie *t,
                          const tram_stackset *st, int which, uint32_t *mask, tram_mask_scratch *s)
{
    const uint32_t *accepted = pm->bits;
    if (!accepted) {
        memset(s->accepted, 0, (size_t)s->words * sizeof(uint32_t));
        for (int k = 0; k < pm->num_ids; k++)
            s->accepted[pm->ids[k] >> 5] |= 1u << (pm->ids[k] & 31);
        accepted = s->accepted;
    }
    trie_run r = {0};
    for (int i = 0; i < t->num_tokens; i++) {
        int32_t id = t->sorted_ids[i];
        if (!((accepted[id >> 5] >> (id & 31)) & 1))
            continue;
        if ((int32_t)t->tok_len[id] <= room)
            mask[id >> 5] |= 1u << (id & 31);
        else
            check_token(&r, g, t, st, which, id, mask, s);
    }
}

/* Stack `which`'s tokens, from its top's sets pm. */
static void fill_stack(const tram_pos_mask *pm, int words, const tram_gbnf *g, const tram_vocab_trie *t,
                       const tram_stackset *st, int which, uint32_t *mask, tram_mask_scratch *s)
{
    int32_t room = pm->loop < 0 ? INT32_MAX : loop_room(g, t, st, which, pm->loop);
    if (room != INT32_MAX) {
        fill_near_max(pm, room, g, t, st, which, mask, s);
    } else {
        if (pm->bits)
            for (int w = 0; w < words; w++)
                mask[w] |= pm->bits[w];
        for (int k = 0; k < pm->num_ids; k++)
            mask[pm->ids[k] >> 5] |= 1u << (pm->ids[k] & 31);
    }
    fill_uncertain(pm, g, t, st, which, mask, s);
}

/* Stack `which`, whose top p has not been walked yet: walked now, under
 * the lock (another matcher of the grammar may be walking it).  A walk
 * that fails (a bound of its own, which a walk at compile time would have
 * refused the grammar for) leaves p allowing nothing: the matcher fails
 * closed there: returns 1. */
static int fill_unwalked(const tram_mask_table *mt, int32_t p, const tram_gbnf *g, const tram_vocab_trie *t,
                          const tram_stackset *st, int which, uint32_t *mask, tram_mask_scratch *s)
{
    tram_error err = {{0}};
    tram_pos_mask view;
    pthread_mutex_lock(&mt->walker->lock);
    int walked = atomic_load(&mt->walked[p]);
    if (walked == POS_UNWALKED && (walked = walk_locked(mt, p, &view, &err)) == POS_UNWALKED) {
        fill_stack(&view, mt->words, g, t, st, which, mask, s);  /* over the table's memory: used once */
        walk_lists_free(&mt->walker->w);
    }
    pthread_mutex_unlock(&mt->walker->lock);
    if (walked == POS_READY)
        fill_stack(&mt->pos[p], mt->words, g, t, st, which, mask, s);
    return walked == POS_FAILED;
}

int tram_mask_fill(const tram_mask_table *mt, const tram_gbnf *g, const tram_vocab_trie *t,
                   const tram_stackset *st, uint32_t *mask, tram_mask_scratch *s)
{
    int failed = 0;
    for (int i = 0; i < st->n; i++) {
        int32_t p = tram_stack_at(st, i)[st->len[i] - 1];
        if (atomic_load_explicit(&mt->walked[p], memory_order_acquire) == POS_READY)
            fill_stack(&mt->pos[p], mt->words, g, t, st, i, mask, s);
        else
            failed |= fill_unwalked(mt, p, g, t, st, i, mask, s);
    }
    return failed;
}
