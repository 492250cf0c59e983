/* token_mask.c — per-position token sets and the run-time mask (see
 * token_mask.h). */
#include "grammar/token_mask.h"

#include <stdlib.h>
#include <string.h>

/* The walks of every position share one lazily built automaton: a state
 * is a distinct stack set, its transitions are filled in as the walks meet
 * them.  Most trie nodes then cost a table lookup: after a character of a
 * JSON string, say, the state is the same whichever character it was. */
typedef struct {
    tram_stackset *sets;
    uint64_t *key;
    int32_t **next;            /* [state][256]; -2: not computed yet */
    int num, cap;
    int32_t *table;            /* open addressing on key: state + 1, 0 empty */
    int table_cap;
    tram_stackset tmp;
    int oom, too_ambiguous;    /* why a step failed */
} lazy_dfa;

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
        size_t h = (size_t)d->key[s] & (size_t)(cap - 1);
        while (t[h])
            h = (h + 1) & (size_t)(cap - 1);
        t[h] = s + 1;
    }
    free(d->table);
    d->table = t;
    d->table_cap = cap;
    return 0;
}

/* The state of set s, added (a copy) when new; -1 when out of memory. */
static int dfa_intern(lazy_dfa *d, const tram_stackset *s)
{
    if (2 * (d->num + 1) > d->table_cap && dfa_rehash(d))
        return -1;
    uint64_t k = set_key(s);
    size_t h = (size_t)k & (size_t)(d->table_cap - 1);
    for (; d->table[h]; h = (h + 1) & (size_t)(d->table_cap - 1))
        if (d->key[d->table[h] - 1] == k && same_set(&d->sets[d->table[h] - 1], s))
            return d->table[h] - 1;
    if (d->num == d->cap) {
        int cap = TRAM_MAX(64, 2 * d->cap);
        tram_stackset *sets = realloc(d->sets, (size_t)cap * sizeof(*sets));
        if (sets)
            d->sets = sets;
        uint64_t *key = realloc(d->key, (size_t)cap * sizeof(*key));
        if (key)
            d->key = key;
        int32_t **next = realloc(d->next, (size_t)cap * sizeof(*next));
        if (next)
            d->next = next;
        if (!sets || !key || !next)
            return -1;
        d->cap = cap;
    }
    d->sets[d->num] = (tram_stackset){0};
    if (tram_stackset_copy(&d->sets[d->num], s))
        return -1;
    d->key[d->num] = k;
    d->next[d->num] = NULL;
    d->table[h] = d->num + 1;
    return d->num++;
}

static int dfa_step(lazy_dfa *d, const tram_gbnf *g, int state, uint8_t byte, int32_t *buf)
{
    if (!d->next[state]) {
        if (!(d->next[state] = malloc(256 * sizeof(int32_t))))
            return d->oom = 1, -1;
        for (int i = 0; i < 256; i++)
            d->next[state][i] = -2;
    }
    if (d->next[state][byte] != -2)
        return d->next[state][byte];
    tram_stacks_advance(g, &d->sets[state], -1, byte, &d->tmp, buf);
    if (d->tmp.too_ambiguous)
        return d->too_ambiguous = 1, -1;
    int id = d->tmp.oom ? -1 : dfa_intern(d, &d->tmp);
    if (id < 0)
        return d->oom = 1, -1;
    d->next[state][byte] = id;
    return id;
}

static void dfa_free(lazy_dfa *d)
{
    for (int s = 0; s < d->num; s++) {
        tram_stackset_free(&d->sets[s]);
        free(d->next[s]);
    }
    free(d->sets);
    free(d->key);
    free(d->next);
    free(d->table);
    tram_stackset_free(&d->tmp);
}

typedef struct {
    const tram_gbnf *g;
    const tram_vocab_trie *t;
    lazy_dfa dfa;
    int32_t *buf;
    uint32_t *accepted;        /* [words] */
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
        w->num_accepted++;
    }
}

static void uncertain_range(walk *w, int lo, int hi)
{
    for (int s = lo; s < hi; s++)
        w->uncertain[w->num_uncertain++] = s;
}

/* The subtree under `node`, reached in automaton state `state`.
 * escaped: p's rule ended somewhere along the prefix, and the byte after
 * it can follow the rule.  A token that must leave p's rule on a byte
 * that never follows it is rejected here, not left for run time. */
static void walk_node(walk *w, int node, int state, int escaped)
{
    const tram_trie_node *n = &w->t->nodes[node];
    int cur_end = w->dfa.sets[state].has_end;
    for (int c = n->child0; c < n->child0 + n->num_children && !w->dfa.oom && !w->dfa.too_ambiguous; c++) {
        const tram_trie_node *ch = &w->t->nodes[c];
        int esc = escaped || (cur_end && tram_byteset_has(w->follow, ch->byte));
        int next = dfa_step(&w->dfa, w->g, state, ch->byte, w->buf);
        if (next < 0)
            return;
        int alive = w->dfa.sets[next].n > 0, ended = w->dfa.sets[next].has_end;
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
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Keeps the accepted set as a bitmask when it has more ids than the mask
 * has words (then ORing words beats setting bits), else as a list. */
static int store(walk *w, tram_pos_mask *pm, int words, tram_error *err)
{
    if (w->num_accepted > words) {
        pm->bits = tram_calloc((size_t)words, sizeof(uint32_t), err);
        if (!pm->bits)
            return -1;
        memcpy(pm->bits, w->accepted, (size_t)words * sizeof(uint32_t));
    } else {
        pm->ids = tram_calloc((size_t)w->num_accepted + 1, sizeof(int32_t), err);
        if (!pm->ids)
            return -1;
        for (int i = 0; i < words; i++)
            for (uint32_t b = w->accepted[i]; b; b &= b - 1)
                pm->ids[pm->num_ids++] = i * 32 + __builtin_ctz(b);
    }
    qsort(w->uncertain, (size_t)w->num_uncertain, sizeof(int32_t), cmp_i32);
    pm->uncertain = tram_calloc((size_t)w->num_uncertain + 1, sizeof(int32_t), err);
    if (!pm->uncertain)
        return -1;
    memcpy(pm->uncertain, w->uncertain, (size_t)w->num_uncertain * sizeof(int32_t));
    pm->num_uncertain = w->num_uncertain;
    return 0;
}

/* A position in the body of counted loop `loop` (-1: none) is walked with
 * the loop under it at any count: a token may run on into the next
 * iteration, as in x*, and stays decided by its position alone. */
static int build_position(walk *w, int32_t p, int32_t loop, tram_pos_mask *pm, int words, tram_error *err)
{
    memset(w->accepted, 0, (size_t)words * sizeof(uint32_t));
    w->num_accepted = w->num_uncertain = 0;
    tram_stackset_clear(&w->dfa.tmp);
    int len = 0;
    if (loop >= 0) {
        w->buf[len++] = TRAM_LOOP_ANY_COUNT;
        w->buf[len++] = tram_loop_marker(loop);
    }
    w->buf[len++] = p;
    pm->loop = loop;
    tram_stacks_expand(w->g, &w->dfa.tmp, w->buf, len);
    w->dfa.too_ambiguous |= w->dfa.tmp.too_ambiguous;
    int start = tram_stackset_incomplete(&w->dfa.tmp) ? -1 : dfa_intern(&w->dfa, &w->dfa.tmp);
    if (start >= 0)
        walk_node(w, 0, start, 0);
    if (w->dfa.too_ambiguous)
        return tram_fail(err, TRAM_GRAMMAR_TOO_AMBIGUOUS, TRAM_MAX_STACKS);
    if (start < 0 || w->dfa.oom)
        return tram_fail(err, "grammar: out of memory computing token masks");
    return store(w, pm, words, err);
}

/* FIRST of the sequence at elems[pos..] into out; 1 when it can be empty. */
static int first_of(const tram_gbnf *g, int32_t pos, const tram_byteset *first, const uint8_t *nul,
                    tram_byteset *out)
{
    for (const tram_gelem *e = g->elems + pos; !tram_gelem_ends_alt(e); e++) {
        const tram_byteset *add = e->kind == TRAM_G_BYTES ? &g->sets[e->arg] : &first[tram_gelem_rule(g, e)];
        for (int i = 0; i < 8; i++)
            out->bits[i] |= add->bits[i];
        if (e->kind == TRAM_G_BYTES || !tram_gelem_nullable(g, nul, e))
            return 0;
    }
    return 1;
}

static int merge(tram_byteset *dst, const tram_byteset *src)
{
    int changed = 0;
    for (int i = 0; i < 8; i++) {
        changed |= (src->bits[i] & ~dst->bits[i]) != 0;
        dst->bits[i] |= src->bits[i];
    }
    return changed;
}

/* LL(1) FIRST and FOLLOW sets over bytes, by fixpoint: follow[r] holds
 * every byte that can come right after rule r ends. */
static int follow_sets(const tram_gbnf *g, tram_byteset *follow, tram_error *err)
{
    int n = g->num_rules;
    tram_byteset *first = tram_calloc((size_t)n, sizeof(*first), err);
    uint8_t *nul = tram_calloc((size_t)n, 1, err);
    if (!first || !nul) {
        free(first);
        free(nul);
        return -1;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < n; r++)
            for (int32_t a = g->rule_start[r];; a++) {
                tram_byteset f = {{0}};
                int empty = first_of(g, a, first, nul, &f);
                changed |= merge(&first[r], &f) | (empty && !nul[r]);
                nul[r] |= (uint8_t)empty;
                while (!tram_gelem_ends_alt(&g->elems[a]))
                    a++;
                if (g->elems[a].kind == TRAM_G_END)
                    break;
            }
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < n; r++)
            for (int32_t p = g->rule_start[r];; p++) {
                const tram_gelem *e = &g->elems[p];
                if (e->kind == TRAM_G_END)
                    break;
                int sub = tram_gelem_rule(g, e);
                if (sub < 0)
                    continue;
                tram_byteset f = {{0}};
                if (first_of(g, p + 1, first, nul, &f))
                    merge(&f, &follow[r]);
                if (e->kind == TRAM_G_REPEAT && g->repeats[e->arg].tail >= 0)
                    changed |= merge(&follow[g->repeats[e->arg].tail], &f);
                if (e->kind == TRAM_G_REPEAT) {  /* the body: then the next iteration, or the tail */
                    merge(&f, &first[sub]);
                    if (g->repeats[e->arg].tail >= 0)
                        merge(&f, &first[g->repeats[e->arg].tail]);
                }
                changed |= merge(&follow[sub], &f);
            }
    }
    free(first);
    free(nul);
    return 0;
}

int tram_mask_table_build(tram_mask_table *mt, const tram_gbnf *g, const tram_vocab_trie *t,
                          tram_error *err)
{
    *mt = (tram_mask_table){.words = (t->vocab + 31) / 32, .num_pos = g->num_elems};
    mt->pos = tram_calloc((size_t)g->num_elems + 1, sizeof(tram_pos_mask), err);
    tram_byteset *follow = tram_calloc((size_t)g->num_rules, sizeof(*follow), err);
    walk w = {
        .g = g,
        .t = t,
        .buf = tram_calloc(TRAM_MAX_STACK_DEPTH + 1, sizeof(int32_t), err),
        .accepted = tram_calloc((size_t)mt->words, sizeof(uint32_t), err),
        .uncertain = tram_calloc((size_t)t->num_tokens + 1, sizeof(int32_t), err),
    };
    int32_t *loop_of = tram_calloc((size_t)g->num_rules + 1, sizeof(int32_t), err);
    int rc = mt->pos && follow && w.buf && w.accepted && w.uncertain && loop_of ? 0 : -1;
    if (!rc)
        rc = follow_sets(g, follow, err);
    for (int r = 0; !rc && r < g->num_rules; r++)
        loop_of[r] = -1;
    for (int32_t q = 0; !rc && q < g->num_elems; q++)
        if (g->elems[q].kind == TRAM_G_REPEAT)
            loop_of[g->repeats[g->elems[q].arg].body] = q;  /* a body belongs to its loop alone */
    for (int r = 0; !rc && r < g->num_rules; r++) {
        w.follow = &follow[r];
        for (int32_t p = g->rule_start[r]; !rc && p < (r + 1 < g->num_rules ? g->rule_start[r + 1]
                                                                             : g->num_elems); p++)
            if (g->elems[p].kind == TRAM_G_BYTES)
                rc = build_position(&w, p, loop_of[r], &mt->pos[p], mt->words, err);
    }
    free(loop_of);
    dfa_free(&w.dfa);
    free(w.buf);
    free(w.accepted);
    free(w.uncertain);
    free(follow);
    return rc;
}

void tram_mask_table_free(tram_mask_table *mt)
{
    for (int p = 0; mt->pos && p < mt->num_pos; p++) {
        free(mt->pos[p].bits);
        free(mt->pos[p].ids);
        free(mt->pos[p].uncertain);
    }
    free(mt->pos);
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
    free(s->levels);
    free(s->buf);
    free(s->accepted);
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
        if (tram_stackset_incomplete(next))
            return 0;  /* fails closed: a token read in too many ways is refused */
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

void tram_mask_fill(const tram_mask_table *mt, const tram_gbnf *g, const tram_vocab_trie *t,
                    const tram_stackset *st, uint32_t *mask, tram_mask_scratch *s)
{
    for (int i = 0; i < st->n; i++) {
        const tram_pos_mask *pm = &mt->pos[tram_stack_at(st, i)[st->len[i] - 1]];
        int32_t room = pm->loop < 0 ? INT32_MAX : loop_room(g, t, st, i, pm->loop);
        if (room != INT32_MAX) {
            fill_near_max(pm, room, g, t, st, i, mask, s);
        } else {
            if (pm->bits)
                for (int w = 0; w < mt->words; w++)
                    mask[w] |= pm->bits[w];
            for (int k = 0; k < pm->num_ids; k++)
                mask[pm->ids[k] >> 5] |= 1u << (pm->ids[k] & 31);
        }
        fill_uncertain(pm, g, t, st, i, mask, s);
    }
}
