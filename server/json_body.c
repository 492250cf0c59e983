/* json_body.c — see json_body.h.  The scan follows the text's structure
 * only as far as it needs to name a path (jansson checks the syntax after
 * it), so on text that is not JSON it never reads past the end and never
 * fails: jansson's error is the answer then. */
#include "server/json_body.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_big_bounds.h"
#include "kernels/base.h"

#define MAX_LEVELS 32   /* the levels a path names; deeper ones are left out */

typedef struct {
    int is_object;
    int expect_key;     /* objects: the next string is a key */
    long index;         /* arrays: the item being read */
    char key[48];       /* objects: the key being read, as written (cut) */
} level;

typedef struct {
    size_t at, len;     /* a number to write as 0 for jansson */
} rewrite;

typedef struct {
    const char *s;
    size_t len, pos;
    level levels[MAX_LEVELS];
    int depth;
    char path[sizeof(((tram_api_error *)0)->param)];  /* the first value refused */
    char why[160];
    rewrite *rewrites;
    int num_rewrites, cap_rewrites;
    int oom;
} scan;

static level *top(scan *sc)
{
    return sc->depth > 0 && sc->depth <= MAX_LEVELS ? &sc->levels[sc->depth - 1] : NULL;
}

static void path_of(const scan *sc, const char *prefix, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "%s", prefix);
    for (int i = 0; i < sc->depth && i < MAX_LEVELS && n < cap; i++) {
        const level *l = &sc->levels[i];
        n += l->is_object ? (size_t)snprintf(out + n, cap - n, "%s%s", n ? "." : "", l->key)
                          : (size_t)snprintf(out + n, cap - n, "[%ld]", l->index);
    }
}

/* The innermost key of the path, arrays' indexes skipped ("examples[2]"). */
static const char *last_key(const scan *sc)
{
    for (int i = TRAM_MIN(sc->depth, MAX_LEVELS) - 1; i >= 0; i--)
        if (sc->levels[i].is_object)
            return sc->levels[i].key;
    return "";
}

/* The request fields that hold schemas (NULL-terminated). */
static const char *const schema_fields[] = {"tools", "response_format", "structured_outputs", "guided_json", NULL};

/* A schema's "default" and "examples" under a field that holds schemas. */
static int in_annotation(const scan *sc, const char *prefix)
{
    if (prefix[0] || sc->depth < 2 || !sc->levels[0].is_object)
        return 0;
    const char *k = last_key(sc);
    if (strcmp(k, "default") && strcmp(k, "examples"))
        return 0;
    for (size_t i = 0; schema_fields[i]; i++)
        if (!strcmp(sc->levels[0].key, schema_fields[i]))
            return 1;
    return 0;
}

static void refuse(scan *sc, const char *prefix, const char *why, const char *literal, size_t n)
{
    if (sc->why[0])
        return;  /* the first one is named */
    path_of(sc, prefix, sc->path, sizeof(sc->path));
    snprintf(sc->why, sizeof(sc->why), why, (int)TRAM_MIN(n, 40), literal, n > 40 ? "..." : "");
}

static void push(scan *sc, int is_object)
{
    if (sc->depth < MAX_LEVELS)
        sc->levels[sc->depth] = (level){.is_object = is_object, .expect_key = is_object};
    sc->depth++;
}

static void next_item(scan *sc)
{
    level *l = top(sc);
    if (l && l->is_object)
        l->expect_key = 1;
    else if (l)
        l->index++;
}

static void string(scan *sc, const char *prefix)
{
    size_t from = ++sc->pos;
    int nul = 0;
    while (sc->pos < sc->len && sc->s[sc->pos] != '"') {
        if (sc->s[sc->pos] == '\\' && sc->pos + 1 < sc->len) {
            nul |= sc->pos + 5 < sc->len && !memcmp(sc->s + sc->pos + 1, "u0000", 5);
            sc->pos++;
        }
        sc->pos++;
    }
    size_t n = sc->pos - from;
    sc->pos++;  /* the closing quote */
    level *l = top(sc);
    if (l && l->is_object && l->expect_key) {
        snprintf(l->key, sizeof(l->key), "%.*s", (int)TRAM_MIN(n, sizeof(l->key) - 1), sc->s + from);
        l->expect_key = 0;
        if (nul)
            refuse(sc, prefix, "the key '%.*s%s' holds a NUL character (\\u0000), which tram does "
                   "not take", sc->s + from, n);
        return;
    }
    if (nul)
        refuse(sc, prefix, "the string \"%.*s%s\" holds a NUL character (\\u0000), which tram does "
               "not take", sc->s + from, n);
}

/* 1 when the number text[0..n) is past what jansson holds. */
static int out_of_range(const char *text, size_t n)
{
    if (!memchr(text, '.', n) && !memchr(text, 'e', n) && !memchr(text, 'E', n))
        return tram_json_int_past_64_bits(text, n);
    char *copy = strndup(text, n);
    int over = copy && isinf(strtod(copy, NULL));
    free(copy);
    return over;
}

static void number(scan *sc, const char *prefix)
{
    size_t from = sc->pos;
    while (sc->pos < sc->len && strchr("+-0123456789.eE", sc->s[sc->pos]) && sc->s[sc->pos])
        sc->pos++;
    size_t n = sc->pos - from;
    if (!out_of_range(sc->s + from, n))
        return;
    if (tram_grow((void **)&sc->rewrites, &sc->cap_rewrites, sc->num_rewrites + 1, sizeof(*sc->rewrites))) {
        sc->oom = 1;
        return;
    }
    sc->rewrites[sc->num_rewrites++] = (rewrite){from, n};
    if (!in_annotation(sc, prefix))
        refuse(sc, prefix, "the number %.*s%s is out of range (integers are 64-bit, decimals "
               "doubles)", sc->s + from, n);
}

static void scan_text(scan *sc, const char *prefix)
{
    while (sc->pos < sc->len && !sc->oom) {
        char c = sc->s[sc->pos];
        if (c == '"') {
            string(sc, prefix);
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            number(sc, prefix);
            continue;
        }
        if (c == '{' || c == '[')
            push(sc, c == '{');
        else if ((c == '}' || c == ']') && sc->depth > 0)
            sc->depth--;
        else if (c == ',')
            next_item(sc);
        sc->pos++;
    }
}

/* The text with every out-of-range number written as 0, *n bytes; NULL
 * when out of memory. */
static char *rewritten(const scan *sc, size_t *n)
{
    char *out = malloc(sc->len + 1), *o = out;
    size_t at = 0;
    for (int i = 0; out && i < sc->num_rewrites; i++) {
        memcpy(o, sc->s + at, sc->rewrites[i].at - at);
        o += sc->rewrites[i].at - at;
        *o++ = '0';
        at = sc->rewrites[i].at + sc->rewrites[i].len;
    }
    if (out) {
        memcpy(o, sc->s + at, sc->len - at);
        *n = (size_t)(o - out) + sc->len - at;
    }
    return out;
}

static json_t *parse(const char *text, size_t len, size_t flags, const char *path, tram_api_error *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, flags, &jerr);
    if (root)
        return root;
    /* jansson quotes the input "near '...'": bytes that need not be UTF-8 */
    char *near = strstr(jerr.text, " near '");
    if (near)
        *near = 0;
    if (path[0])
        tram_api_fail(e, 400, path, "invalid_value", "Invalid '%s': not valid JSON: %s.", path, jerr.text);
    else
        tram_api_fail(e, 400, NULL, NULL,
                      "We could not parse the JSON body of your request: %s (line %d, column %d).",
                      jerr.text, jerr.line, jerr.column);
    return NULL;
}

json_t *tram_json_body_load(const char *text, size_t len, size_t flags, const char *path,
                            tram_api_error *e)
{
    char *bounded = NULL;  /* a body's schemas' bounds past 64 bits, as doubles that keep them exact */
    if (!path[0] && tram_json_big_bounds_rewrite(text, len, schema_fields, &bounded, &len) < 0) {
        tram_api_out_of_memory(e);
        return NULL;
    }
    text = bounded ? bounded : text;
    scan sc = {.s = text, .len = len};
    scan_text(&sc, path);
    size_t n = len;
    /* a value refused is named first: jansson refuses a NUL in a key as
     * a syntax error */
    char *copy = sc.num_rewrites && !sc.oom && !sc.why[0] ? rewritten(&sc, &n) : NULL;
    json_t *root = NULL;
    if (sc.why[0])
        tram_api_fail(e, 400, sc.path, "invalid_value", "Invalid value for '%s': %s.", sc.path, sc.why);
    else if (sc.oom || (sc.num_rewrites && !copy))
        tram_api_out_of_memory(e);
    else
        root = parse(copy ? copy : text, n, flags, path, e);
    TRAM_FREE_ALL(copy, sc.rewrites, bounded);
    return root;
}
