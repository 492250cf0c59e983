/* json_schema_chain.c — a sequence of elements, each required or optional,
 * in a fixed order, separated by commas, min..max of them in all: the
 * properties of an object, the distinct values of a uniqueItems array.
 * One rule per (element, count written so far), only for the states from
 * which the sequence can still end within min..max, so the grammar grows
 * linearly with the elements (times the count, when one is bounded).
 * A state's live flag is bit 0 (the end can be reached from it), its
 * reached flag bit 1 (it can be reached from the start). */
#include <stdio.h>
#include <stdlib.h>

#include "grammar/json_schema_gen.h"

#define MAX_STATES 4096

/* live[i * w + k]: from element i with k written (capped at cap when
 * there is no max), the sequence can still end within min..max. */
static void liveness(const js_link *e, int n, long long min, long long max, int cap, unsigned char *live)
{
    int w = cap + 1;
    for (int k = 0; k <= cap; k++)
        live[n * w + k] = k >= TRAM_MIN(min, cap);
    for (int i = n - 1; i >= 0; i--)
        for (int k = 0; k <= cap; k++) {
            int next = max < 0 ? TRAM_MIN(k + 1, cap) : k + 1;
            int take = !e[i].absent && next <= cap && live[(i + 1) * w + next];
            int skip = !e[i].required && live[(i + 1) * w + k];
            live[i * w + k] = (unsigned char)(take || skip);
        }
}

/* live[i * w + k] |= 2 where (i, k) is reached from (0, 0). */
static void reach(const js_link *e, int n, long long max, int cap, unsigned char *live)
{
    int w = cap + 1;
    live[0] |= 2;
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= cap; k++) {
            if (live[i * w + k] != 3)
                continue;
            int nk = max < 0 ? TRAM_MIN(k + 1, cap) : k + 1;
            if (!e[i].absent && nk <= cap && live[(i + 1) * w + nk])
                live[(i + 1) * w + nk] |= 2;
            if (!e[i].required && live[(i + 1) * w + k])
                live[(i + 1) * w + k] |= 2;
        }
}

static void state_name(char *out, const char *base, int i, int k)
{
    snprintf(out, JS_NAME_MAX, "%s-%d-%d", base, i, k);
}

static void write_states(jsc *c, const js_link *e, int n, long long max, int cap, const unsigned char *live,
                         const char *base)
{
    int w = cap + 1;
    char ws[JS_NAME_MAX], name[JS_NAME_MAX], next[JS_NAME_MAX];
    js_shared(c, JS_USE_WS, ws, "ws");
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= cap; k++) {
            if (live[i * w + k] != 3)
                continue;
            int nk = max < 0 ? TRAM_MIN(k + 1, cap) : k + 1;
            int take = !e[i].absent && nk <= cap && live[(i + 1) * w + nk];
            int skip = !e[i].required && live[(i + 1) * w + k];
            state_name(name, base, i, k);
            tram_strbuf_addf(&c->out, "%s ::=", name);
            if (take) {
                tram_strbuf_addf(&c->out, "%s%s %s %s", k > 0 ? " \",\" " : "", k > 0 ? ws : "", e[i].text, ws);
                if (i + 1 < n) {
                    state_name(next, base, i + 1, nk);
                    tram_strbuf_addf(&c->out, " %s", next);
                }
            }
            if (skip) {
                state_name(next, base, i + 1, k);
                tram_strbuf_addf(&c->out, "%s %s", take ? " |" : "", i + 1 < n ? next : "\"\"");
            }
            tram_strbuf_add(&c->out, "\n", 1);
        }
}

int js_gen_chain(jsc *c, const js_link *e, int n, long long min, long long max, const char *base,
                 const char *open, const char *close, const char *path, tram_strbuf *b)
{
    if (max >= 0 && max < min)
        return js_empty(c, path, "its maximum count is below its minimum");
    long long cap = max >= 0 ? max : TRAM_MAX(min, 1);
    if ((long long)(n + 1) * (cap + 1) > MAX_STATES)
        return JS_FAIL(c, "the counts at %s over %d elements: more states than tram writes (%d)", path, n,
                       MAX_STATES);
    unsigned char *live = calloc((size_t)(n + 1) * (size_t)(cap + 1), 1);
    if (!live)
        return JS_FAIL(c, "JSON Schema: out of memory");
    liveness(e, n, min, max, (int)cap, live);
    int ok = live[0];
    if (ok) {
        reach(e, n, max, (int)cap, live);
        char ws[JS_NAME_MAX], first[JS_NAME_MAX];
        js_shared(c, JS_USE_WS, ws, "ws");
        write_states(c, e, n, max, (int)cap, live, base);
        state_name(first, base, 0, 0);
        tram_strbuf_addf(b, "\"%s\" %s %s \"%s\"", open, ws, n ? first : "", close);
    }
    free(live);
    return ok ? 0 : js_empty(c, path, "its required elements and counts cannot all be met");
}
