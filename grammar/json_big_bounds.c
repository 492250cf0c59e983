/* json_big_bounds.c — see json_big_bounds.h.  The scan follows the text's
 * structure only as far as it needs to know each number's key and its
 * object's draft-4 booleans; jansson checks the syntax afterwards. */
#include "grammar/json_big_bounds.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"
#include "kernels/strbuf.h"

#define MAX_LEVELS 512    /* deeper values are never taken for bounds */
#define MAX_DIGITS 330    /* past a double's range: left to jansson */

enum { K_NONE, K_MIN, K_MAX, K_XMIN, K_XMAX };

typedef struct {
    size_t at, len;       /* the integer's text */
    int kw, object;       /* its keyword, and its object's serial number */
    int done;             /* resolved at its object's end: d is its double */
    double d;
} big;

typedef struct {
    int is_object, expect_key, key, serial;
    int xmin_true, xmax_true;   /* draft 4: exclusiveMinimum / exclusiveMaximum: true */
    int rooted;                 /* inside a value of one of the roots */
    int root_key;               /* the top level: the key being read is a root */
} level;

typedef struct {
    const char *s;
    size_t len, pos;
    const char *const *roots;   /* NULL: everywhere */
    level levels[MAX_LEVELS];
    int depth, serials;
    big *bigs;
    int num_bigs, cap_bigs, oom;
} scan;

int tram_json_int_past_64_bits(const char *text, size_t n)
{
    int neg = n > 0 && text[0] == '-';
    size_t digits = n - (size_t)neg;
    const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
    return digits > 19 || (digits == 19 && memcmp(text + neg, limit, 19) > 0);
}

static level *top(scan *sc)
{
    return sc->depth > 0 && sc->depth <= MAX_LEVELS ? &sc->levels[sc->depth - 1] : NULL;
}

static int keyword_of(const char *k, size_t n)
{
    static const char *const names[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], k, n))
            return K_MIN + i;
    return K_NONE;
}

static void string(scan *sc)
{
    size_t from = ++sc->pos;
    while (sc->pos < sc->len && sc->s[sc->pos] != '"')
        sc->pos += sc->s[sc->pos] == '\\' ? 2 : 1;
    size_t n = TRAM_MIN(sc->pos, sc->len) - from;
    sc->pos++;
    level *l = top(sc);
    if (l && l->is_object && l->expect_key) {
        l->key = keyword_of(sc->s + from, n);  /* an escaped name is no keyword: left to jansson */
        l->expect_key = 0;
        l->root_key = 0;
        for (int i = 0; sc->depth == 1 && sc->roots && sc->roots[i]; i++)
            l->root_key |= strlen(sc->roots[i]) == n && !memcmp(sc->roots[i], sc->s + from, n);
    }
}

static void add_big(scan *sc, size_t at, size_t len, int kw, int object)
{
    if (tram_grow((void **)&sc->bigs, &sc->cap_bigs, sc->num_bigs + 1, sizeof(*sc->bigs))) {
        sc->oom = 1;
        return;
    }
    sc->bigs[sc->num_bigs++] = (big){.at = at, .len = len, .kw = kw, .object = object};
}

static void number(scan *sc)
{
    size_t from = sc->pos;
    while (sc->pos < sc->len && sc->s[sc->pos] && strchr("+-0123456789.eE", sc->s[sc->pos]))
        sc->pos++;
    size_t n = sc->pos - from;
    const char *t = sc->s + from;
    int integer = !memchr(t, '.', n) && !memchr(t, 'e', n) && !memchr(t, 'E', n);
    level *l = top(sc);
    if (integer && l && l->is_object && l->rooted && l->key != K_NONE && tram_json_int_past_64_bits(sc->s + from, n))
        add_big(sc, from, n, l->key, l->serial);
}

/* The sign of d - b, for an integer-valued d (|d| >= 2^63 here) and the
 * integer text b of the same sign. */
static int compare(double d, const char *b)
{
    char ds[MAX_DIGITS + 8];
    snprintf(ds, sizeof(ds), "%.0f", fabs(d));  /* exact: d is an integer */
    int neg = b[0] == '-';
    size_t lx = strlen(ds), ly = strlen(b + neg);
    int mag = lx != ly ? (lx > ly ? 1 : -1) : strcmp(ds, b + neg);
    mag = (mag > 0) - (mag < 0);
    return neg ? -mag : mag;
}

/* The integer text s[0..n) as the nearest double on one side of it (up:
 * not below it); 0, or -1 past a double's range. */
static int directed(const char *s, size_t n, int up, double *out)
{
    char b[MAX_DIGITS + 2];
    if (n > MAX_DIGITS)
        return -1;
    memcpy(b, s, n);
    b[n] = 0;
    double d = strtod(b, NULL);
    int c = isinf(d) ? 0 : compare(d, b);
    if (up && c < 0)
        d = nextafter(d, INFINITY);
    else if (!up && c > 0)
        d = nextafter(d, -INFINITY);
    *out = d;
    return isinf(d) ? -1 : 0;
}

/* The bigs of the object closing: which way each rounds is its keyword's
 * comparison, draft 4's boolean beside a maximum/minimum included. */
static void resolve(scan *sc, const level *l)
{
    for (int i = sc->num_bigs - 1; i >= 0 && !sc->oom; i--) {
        big *g = &sc->bigs[i];
        if (g->object != l->serial)
            continue;
        int up = g->kw == K_MAX ? l->xmax_true : g->kw == K_MIN ? !l->xmin_true : g->kw == K_XMAX;
        g->done = !directed(sc->s + g->at, g->len, up, &g->d);
    }
}

static void push(scan *sc, int is_object)
{
    const level *up = top(sc);
    int rooted = !sc->roots || (up && (up->rooted || up->root_key));
    if (sc->depth < MAX_LEVELS)
        sc->levels[sc->depth] = (level){.is_object = is_object, .expect_key = is_object, .serial = ++sc->serials,
                                        .rooted = rooted};
    sc->depth++;
}

static void pop(scan *sc)
{
    level *l = top(sc);
    if (l && l->is_object)
        resolve(sc, l);
    sc->depth--;
}

/* true after a key: draft 4's exclusive bounds */
static void literal(scan *sc)
{
    level *l = top(sc);
    if (l && l->is_object && sc->len - sc->pos >= 4 && !memcmp(sc->s + sc->pos, "true", 4)) {
        l->xmin_true |= l->key == K_XMIN;
        l->xmax_true |= l->key == K_XMAX;
    }
    sc->pos++;
}

static void scan_text(scan *sc)
{
    while (sc->pos < sc->len && !sc->oom) {
        char c = sc->s[sc->pos];
        if (c == '"') {
            string(sc);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            number(sc);
        } else if (c == 't') {
            literal(sc);
        } else {
            if (c == '{' || c == '[')
                push(sc, c == '{');
            else if ((c == '}' || c == ']') && sc->depth > 0)
                pop(sc);
            else if (c == ',' && top(sc) && top(sc)->is_object)
                top(sc)->expect_key = 1;
            sc->pos++;
        }
    }
}

/* The text with the resolved bigs written as their doubles. */
static char *rewritten(const scan *sc, size_t *n)
{
    tram_strbuf b = {0};
    size_t at = 0;
    for (int i = 0; i < sc->num_bigs; i++) {
        const big *g = &sc->bigs[i];
        if (!g->done)
            continue;
        tram_strbuf_add(&b, sc->s + at, g->at - at);
        tram_strbuf_addf(&b, "%.17g", g->d);  /* exponent form: a real for jansson, read back exactly */
        at = g->at + g->len;
    }
    tram_strbuf_add(&b, sc->s + at, sc->len - at);
    *n = b.len;
    if (b.oom)
        tram_strbuf_free(&b);
    return b.oom ? NULL : tram_strbuf_take(&b);
}

int tram_json_big_bounds_rewrite(const char *text, size_t len, const char *const *roots, char **out,
                                 size_t *out_len)
{
    scan *sc = calloc(1, sizeof(*sc));
    *out = NULL;
    if (!sc)
        return -1;
    sc->s = text;
    sc->len = len;
    sc->roots = roots;
    scan_text(sc);
    int any = 0;
    for (int i = 0; i < sc->num_bigs; i++)
        any |= sc->bigs[i].done;
    int rc = sc->oom ? -1 : any ? 1 : 0;
    if (rc == 1 && !(*out = rewritten(sc, out_len)))
        rc = -1;
    free(sc->bigs);
    free(sc);
    return rc;
}

json_t *tram_json_schema_loadb(const char *text, size_t len, size_t flags, json_error_t *je)
{
    json_t *doc = json_loadb(text, len, flags, je);
    char *fixed;
    size_t n;
    if (doc || !strstr(je->text, "too big") || tram_json_big_bounds_rewrite(text, len, NULL, &fixed, &n) <= 0)
        return doc;
    doc = json_loadb(fixed, n, flags, je);
    free(fixed);
    return doc;
}

json_t *tram_json_schema_load_file(const char *path, size_t flags, json_error_t *je)
{
    json_t *doc = json_load_file(path, flags, je);
    FILE *f = doc || !strstr(je->text, "too big") ? NULL : fopen(path, "rb");
    if (!f)
        return doc;
    tram_strbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        tram_strbuf_add(&b, chunk, n);
    fclose(f);
    doc = b.oom ? NULL : tram_json_schema_loadb(b.s ? b.s : "", b.len, flags, je);
    tram_strbuf_free(&b);
    return doc;
}
