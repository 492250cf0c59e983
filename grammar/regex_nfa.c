/* regex_nfa.c — the pieces of a Thompson NFA (regex_nfa.h), as regex.c's
 * reader puts them together.  Every function takes a NULL or full NFA and
 * then builds nothing, while the lengths are still worked out. */
#include "grammar/regex_nfa.h"

#include <stdlib.h>
#include <string.h>

/* Lengths past this are all "very long": sums and products stay in range. */
#define LEN_CAP (1LL << 40)

static long long len_add(long long a, long long b) { return a < 0 || b < 0 ? -1 : TRAM_MIN(a + b, LEN_CAP); }

static long long len_mul(long long a, long long n)
{
    return a == 0 || n == 0 ? 0 : a < 0 || n < 0 ? -1 : TRAM_MIN(a * n, LEN_CAP);
}

static int nfa_on(const tram_regex_nfa *n) { return n && !n->full; }

static int nfa_state(tram_regex_nfa *n)
{
    if (!nfa_on(n))
        return 0;
    if (n->num_states >= TRAM_NFA_MAX_STATES) {
        n->full = 1;
        return 0;
    }
    return n->num_states++;
}

static void nfa_edge(tram_regex_nfa *n, int from, int to, int label)
{
    if (!nfa_on(n))
        return;
    if (n->num_edges == n->cap_edges) {
        int cap = n->cap_edges ? 2 * n->cap_edges : 64;
        tram_nfa_edge *e = cap <= 4 * TRAM_NFA_MAX_STATES ? realloc(n->edges, (size_t)cap * sizeof(*e)) : NULL;
        if (!e) {
            n->full = 1;
            return;
        }
        n->edges = e;
        n->cap_edges = cap;
    }
    n->edges[n->num_edges++] = (tram_nfa_edge){from, to, label};
}

tram_nfa_frag tram_nfa_empty(tram_regex_nfa *n)
{
    tram_nfa_frag f = {.s0 = n ? n->num_states : 0, .e0 = n ? n->num_edges : 0};
    f.start = f.end = nfa_state(n);
    return f;
}

tram_nfa_frag tram_nfa_char(tram_regex_nfa *n, const char *label, size_t len)
{
    tram_nfa_frag f = tram_nfa_empty(n);
    f.end = nfa_state(n);
    f.min_len = f.max_len = 1;
    if (!nfa_on(n))
        return f;
    int at = (int)n->labels.len;
    tram_strbuf_add(&n->labels, label, len);
    tram_strbuf_add(&n->labels, "", 1);
    n->full |= n->labels.oom;
    nfa_edge(n, f.start, f.end, at);
    return f;
}

tram_nfa_frag tram_nfa_concat(tram_regex_nfa *n, tram_nfa_frag a, tram_nfa_frag b)
{
    nfa_edge(n, a.end, b.start, TRAM_NFA_EPSILON);
    a.end = b.end;
    a.min_len = TRAM_MIN(a.min_len + b.min_len, LEN_CAP);
    a.max_len = len_add(a.max_len, b.max_len);
    return a;
}

tram_nfa_frag tram_nfa_alt(tram_regex_nfa *n, tram_nfa_frag a, tram_nfa_frag b)
{
    int start = nfa_state(n), end = nfa_state(n);
    nfa_edge(n, start, a.start, TRAM_NFA_EPSILON);
    nfa_edge(n, start, b.start, TRAM_NFA_EPSILON);
    nfa_edge(n, a.end, end, TRAM_NFA_EPSILON);
    nfa_edge(n, b.end, end, TRAM_NFA_EPSILON);
    a.start = start;
    a.end = end;
    a.min_len = TRAM_MIN(a.min_len, b.min_len);
    a.max_len = a.max_len < 0 || b.max_len < 0 ? -1 : TRAM_MAX(a.max_len, b.max_len);
    return a;
}

/* A copy of f, the last piece made (its s1 and e1 set). */
static tram_nfa_frag frag_copy(tram_regex_nfa *n, tram_nfa_frag f)
{
    int off = n->num_states - f.s0, e0 = n->num_edges;
    n->num_states += f.s1 - f.s0;
    for (int i = f.e0; i < f.e1; i++) {
        tram_nfa_edge e = n->edges[i];
        nfa_edge(n, e.from + off, e.to + off, e.label);
    }
    return (tram_nfa_frag){f.start + off, f.end + off, f.s0 + off, e0, f.s1 + off, n->num_edges, f.min_len, f.max_len};
}

static tram_nfa_frag frag_star(tram_regex_nfa *n, tram_nfa_frag x)
{
    int s = nfa_state(n);
    nfa_edge(n, s, x.start, TRAM_NFA_EPSILON);
    nfa_edge(n, x.end, s, TRAM_NFA_EPSILON);
    x.start = x.end = s;
    return x;
}

static tram_nfa_frag frag_optional(tram_regex_nfa *n, tram_nfa_frag x)
{
    int e = nfa_state(n);
    nfa_edge(n, x.start, e, TRAM_NFA_EPSILON);
    nfa_edge(n, x.end, e, TRAM_NFA_EPSILON);
    x.end = e;
    return x;
}

/* f{m,max} as m copies of f, then a loop or max - m optional copies; an
 * NFA this would take past its size is marked full. */
tram_nfa_frag tram_nfa_repeat(tram_regex_nfa *n, tram_nfa_frag f, long m, long max)
{
    long long min_len = len_mul(f.min_len, m), max_len = max < 0 && f.max_len != 0 ? -1 : len_mul(f.max_len, max);
    long long copies = max < 0 ? m + 1 : max;
    f.s1 = n ? n->num_states : 0;
    f.e1 = n ? n->num_edges : 0;
    if (nfa_on(n) && (long long)n->num_states + (copies + 1) * (f.s1 - f.s0 + 2) > TRAM_NFA_MAX_STATES)
        n->full = 1;
    tram_nfa_frag out = f;
    if (nfa_on(n)) {
        out = tram_nfa_empty(n);
        for (long long i = 0; i < copies; i++) {
            tram_nfa_frag x = i == 0 ? f : frag_copy(n, f);
            if (i >= m)
                x = max < 0 ? frag_star(n, x) : frag_optional(n, x);
            out = tram_nfa_concat(n, out, x);
        }
        out.s0 = f.s0;
        out.e0 = f.e0;
    }
    out.min_len = min_len;
    out.max_len = max_len;
    return out;
}

void tram_regex_nfa_free(tram_regex_nfa *nfa)
{
    free(nfa->edges);
    tram_strbuf_free(&nfa->labels);
    memset(nfa, 0, sizeof(*nfa));
}
