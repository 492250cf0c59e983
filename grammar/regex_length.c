/* regex_length.c — a regex NFA crossed with a length range (regex_nfa.h): the
 * product of the NFA with a counter of the characters read,
 * written as one right-linear GBNF rule per (state, count) pair that can
 * still reach a match.  Without maxLength the counter stops at minLength,
 * which then means "minLength or more". */
#include "grammar/regex.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/regex_nfa.h"

/* Past these the product is not built and the caller keeps the plain rule
 * with the output validated: a grammar of thousands of rules costs more to
 * compile and to match than the validation it saves. */
#define PRODUCT_MAX_PAIRS 2048
#define PRODUCT_MAX_EDGES (1 << 16)
#define TABLE_SIZE (2 * PRODUCT_MAX_PAIRS) /* a power of two, twice the pairs */

typedef struct {
    int label, to;
} move; /* a character edge out of a state's epsilon closure */

typedef struct {
    int from, to, label;
} pair_edge;

typedef struct {
    const tram_regex_nfa *nfa;
    long long min, max, top; /* the counter's range is 0..top */
    int *by_from, *first_from;         /* the NFA's edges grouped by their source */
    int *closure_first, *closure_end;  /* per NFA state: its moves, -1 before they are found */
    uint8_t *closure_accepts;
    move *moves;
    int num_moves, cap_moves;
    int *seen, *stack; /* the closure walk's marks (an epoch each) and work stack */
    int epoch;
    uint64_t keys[TABLE_SIZE];
    int ids[TABLE_SIZE];
    int pair_state[PRODUCT_MAX_PAIRS];
    long long pair_count[PRODUCT_MAX_PAIRS];
    int pair_first_edge[PRODUCT_MAX_PAIRS + 1];
    uint8_t live[PRODUCT_MAX_PAIRS];
    int num_pairs;
    pair_edge *edges;
    int num_edges;
    int too_large;
} product;

/* The key of item i: an int at key_offset in items of size bytes. */
static int key_of(const void *items, size_t size, size_t key_offset, int i)
{
    return *(const int *)((const char *)items + (size_t)i * size + key_offset);
}

/* Items 0..n-1 grouped by their keys (0..num_keys-1), a counting sort:
 * (*order)[(*first)[k] .. (*first)[k + 1]) are key k's items, in order. */
static int group_by(const void *items, size_t size, size_t key_offset, int n, int num_keys, int **first, int **order)
{
    *first = calloc((size_t)num_keys + 1, sizeof(int));
    *order = malloc(((size_t)n + 1) * sizeof(int));
    if (!*first || !*order)
        return -1;
    for (int i = 0; i < n; i++)
        (*first)[key_of(items, size, key_offset, i)]++;
    for (int k = 0; k < num_keys; k++)
        (*first)[k + 1] += (*first)[k]; /* (*first)[k] ends k's group, until the fill below */
    for (int i = n - 1; i >= 0; i--)
        (*order)[--(*first)[key_of(items, size, key_offset, i)]] = i;
    return 0;
}

static void add_move(product *p, int label, int to)
{
    if (p->num_moves == p->cap_moves) {
        int cap = p->cap_moves ? 2 * p->cap_moves : 256;
        move *m = cap <= PRODUCT_MAX_EDGES ? realloc(p->moves, (size_t)cap * sizeof(*m)) : NULL;
        if (!m) {
            p->too_large = 1;
            return;
        }
        p->moves = m;
        p->cap_moves = cap;
    }
    p->moves[p->num_moves++] = (move){label, to};
}

/* The character edges out of the states that q reaches by epsilons, and
 * whether the accepting state is among them. */
static void find_closure(product *p, int q)
{
    const tram_regex_nfa *n = p->nfa;
    p->closure_first[q] = p->num_moves;
    p->epoch++;
    int depth = 0;
    p->stack[depth++] = q;
    p->seen[q] = p->epoch;
    while (depth > 0 && !p->too_large) {
        int s = p->stack[--depth];
        if (s == n->accept)
            p->closure_accepts[q] = 1;
        for (int i = p->first_from[s]; i < p->first_from[s + 1]; i++) {
            const tram_nfa_edge *e = &n->edges[p->by_from[i]];
            if (e->label != TRAM_NFA_EPSILON)
                add_move(p, e->label, e->to);
            else if (p->seen[e->to] != p->epoch)
                p->seen[e->to] = p->epoch, p->stack[depth++] = e->to;
        }
    }
    p->closure_end[q] = p->num_moves;
}

/* The id of pair (q, k), added to the work list when new; -1 when the
 * product outgrows its bounds. */
static int pair_id(product *p, int q, long long k)
{
    uint64_t key = (uint64_t)q << 40 | (uint64_t)k, h = key * 0x9E3779B97F4A7C15ull;
    for (size_t i = h >> 50 & (TABLE_SIZE - 1);; i = (i + 1) & (TABLE_SIZE - 1)) {
        if (p->ids[i] >= 0 && p->keys[i] == key)
            return p->ids[i];
        if (p->ids[i] < 0) {
            if (p->num_pairs == PRODUCT_MAX_PAIRS) {
                p->too_large = 1;
                return -1;
            }
            p->keys[i] = key;
            p->pair_state[p->num_pairs] = q;
            p->pair_count[p->num_pairs] = k;
            return p->ids[i] = p->num_pairs++;
        }
    }
}

static int accepting(const product *p, int id)
{
    return p->closure_accepts[p->pair_state[id]] && p->pair_count[id] >= p->min;
}

/* Every pair reachable from (start, 0), with its edges, in id order. */
static void explore(product *p)
{
    pair_id(p, p->nfa->start, 0);
    for (int id = 0; id < p->num_pairs && !p->too_large; id++) {
        int q = p->pair_state[id];
        long long next = p->pair_count[id] + 1;
        p->pair_first_edge[id] = p->num_edges;
        if (p->closure_first[q] < 0)
            find_closure(p, q);
        if (p->max >= 0 && next > p->max)
            continue;
        next = TRAM_MIN(next, p->top);
        for (int m = p->closure_first[q]; m < p->closure_end[q] && !p->too_large; m++) {
            int to = pair_id(p, p->moves[m].to, next);
            if (to < 0 || p->num_edges == PRODUCT_MAX_EDGES) {
                p->too_large = 1;
                break;
            }
            p->edges[p->num_edges++] = (pair_edge){id, to, p->moves[m].label};
        }
    }
    p->pair_first_edge[p->num_pairs] = p->num_edges;
}

/* Marks the pairs from which an accepting pair can be reached: a walk back
 * along the edges, grouped by their target. */
static int mark_live(product *p)
{
    int *first = NULL, *by_to = NULL, *work = malloc((size_t)p->num_pairs * sizeof(int)), depth = 0;
    if (!work || group_by(p->edges, sizeof(pair_edge), offsetof(pair_edge, to), p->num_edges, p->num_pairs, &first,
                          &by_to)) {
        free(first), free(by_to), free(work);
        return -1;
    }
    for (int id = 0; id < p->num_pairs; id++)
        if ((p->live[id] = (uint8_t)accepting(p, id)))
            work[depth++] = id;
    while (depth > 0) {
        int to = work[--depth];
        for (int i = first[to]; i < first[to + 1]; i++) {
            int from = p->edges[by_to[i]].from;
            if (!p->live[from])
                p->live[from] = 1, work[depth++] = from;
        }
    }
    free(first), free(by_to), free(work);
    return 0;
}

static void pair_name(tram_strbuf *out, const char *rule, int id)
{
    if (id == 0)
        tram_strbuf_addf(out, "%s", rule);
    else
        tram_strbuf_addf(out, "%s-l%d", rule, id);
}

/* rule-ID ::= (labels) rule-TO | ... | "" — the edges to one live target
 * grouped into one alternative. */
static void write_pair(const product *p, int id, const char *rule, tram_strbuf *out, int *done)
{
    const char *labels = p->nfa->labels.s;
    pair_name(out, rule, id);
    tram_strbuf_add(out, " ::=", 4);
    int first = 1;
    for (int i = p->pair_first_edge[id]; i < p->pair_first_edge[id + 1]; i++) {
        int to = p->edges[i].to;
        if (!p->live[to] || done[to] == id + 1)
            continue;
        done[to] = id + 1;
        tram_strbuf_addf(out, "%s (", first ? "" : " |");
        for (int j = i, sep = 0; j < p->pair_first_edge[id + 1]; j++)
            if (p->edges[j].to == to)
                tram_strbuf_addf(out, "%s %s", sep++ ? " |" : "", labels + p->edges[j].label);
        tram_strbuf_add(out, " ) ", 3);
        pair_name(out, rule, to);
        first = 0;
    }
    if (accepting(p, id))
        tram_strbuf_addf(out, "%s \"\"", first ? "" : " |");
    tram_strbuf_add(out, "\n", 1);
}

static int write_rules(const product *p, const char *rule, tram_strbuf *out)
{
    int *done = calloc((size_t)p->num_pairs, sizeof(int));
    if (!done)
        return -1;
    for (int id = 0; id < p->num_pairs; id++)
        if (p->live[id])
            write_pair(p, id, rule, out, done);
    free(done);
    return 0;
}

static int product_init(product *p, const tram_regex_nfa *nfa, long long min, long long max)
{
    size_t n = (size_t)nfa->num_states;
    p->nfa = nfa;
    p->min = min;
    p->max = max;
    p->top = max >= 0 ? max : min;
    memset(p->ids, 0xff, sizeof(p->ids));
    p->closure_first = malloc(n * sizeof(int));
    p->closure_end = malloc(n * sizeof(int));
    p->closure_accepts = calloc(n, 1);
    p->seen = calloc(n, sizeof(int));
    p->stack = malloc(n * sizeof(int));
    p->edges = malloc(PRODUCT_MAX_EDGES * sizeof(pair_edge));
    if (!p->closure_first || !p->closure_end || !p->closure_accepts || !p->seen || !p->stack || !p->edges)
        return -1;
    memset(p->closure_first, 0xff, n * sizeof(int));
    return group_by(nfa->edges, sizeof(tram_nfa_edge), offsetof(tram_nfa_edge, from), nfa->num_edges,
                    nfa->num_states, &p->first_from, &p->by_from);
}

static void product_free(product *p)
{
    free(p->by_from);
    free(p->first_from);
    free(p->closure_first);
    free(p->closure_end);
    free(p->closure_accepts);
    free(p->moves);
    free(p->seen);
    free(p->stack);
    free(p->edges);
    free(p);
}

int tram_regex_nfa_rules(const tram_regex_nfa *nfa, const char *rule, long long min, long long max, int *pairs_left,
                         tram_strbuf *out, tram_error *err)
{
    product *p = calloc(1, sizeof(*p));
    if (!p || product_init(p, nfa, min, max)) {
        if (p)
            product_free(p);
        return tram_fail(err, "regex: out of memory");
    }
    explore(p);
    int rc = p->too_large || p->num_pairs > *pairs_left ? TRAM_REGEX_TOO_LARGE : 0;
    if (!rc) {
        *pairs_left -= p->num_pairs;
        rc = mark_live(p) ? tram_fail(err, "regex: out of memory")
             : !p->live[0] ? TRAM_REGEX_NO_LENGTH
             : write_rules(p, rule, out) ? tram_fail(err, "regex: out of memory") : 0;
    }
    product_free(p);
    return rc;
}
