/* json_schema_array.c — array schemas (see json_schema_gen.h): prefixItems
 * in turn, then items, minItems..maxItems in all.  uniqueItems of items
 * with finitely many values (an enum, a const, booleans) is exact by
 * construction: the distinct values in the enum's order, each once at
 * most.  Otherwise uniqueItems, contains and minContains/maxContains are
 * left to the end validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema_gen.h"

#define MAX_UNIQUE_VALUES 64

static void items_tail(jsc *c, tram_strbuf *b, const char *item, long long min, long long max)
{
    char ws[JS_NAME_MAX];
    js_shared(c, JS_USE_WS, ws, "ws");
    if (max < 0)
        tram_strbuf_addf(b, " ( \",\" %s %s %s ){%lld,}", ws, item, ws, min);
    else if (max > 0)
        tram_strbuf_addf(b, " ( \",\" %s %s %s ){%lld,%lld}", ws, item, ws, min, max);
}

/* The finite values of an items schema (normalized: an enum, or the
 * booleans), NULL for any other. */
static json_t *finite_values(jsc *c, json_t *items, const char *path)
{
    if (!json_is_object(items) || json_is_string(json_object_get(items, "$ref")))
        return NULL;
    json_t *n = js_normalize(c, items, path), *values = NULL, *t;
    if (!n)
        return NULL;
    if (json_is_array(json_object_get(n, "enum")) && json_object_size(n) == 1)
        values = json_incref(json_object_get(n, "enum"));
    else if (json_object_size(n) == 1 && json_is_string(t = json_object_get(n, "type")) &&
             !strcmp(json_string_value(t), "boolean"))
        values = json_pack("[b,b]", 1, 0);
    json_decref(n);
    return values;
}

/* uniqueItems of finitely many values: each value once at most, in order. */
static int gen_unique(jsc *c, json_t *values, long long min, long long max, const char *path,
                      const char *name, tram_strbuf *b)
{
    size_t n = json_array_size(values);
    if (n > MAX_UNIQUE_VALUES)
        return JS_FAIL(c, "uniqueItems at %s over %zu values: more than tram writes (%d)", path, n,
                       MAX_UNIQUE_VALUES);
    js_link links[MAX_UNIQUE_VALUES];
    tram_strbuf texts[MAX_UNIQUE_VALUES] = {{0}};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = js_literal(c, &texts[i], json_array_get(values, i));
        links[i] = (js_link){.text = texts[i].s};
    }
    char base[JS_NAME_MAX];
    snprintf(base, sizeof(base), "%s-u", name);
    if (!rc)
        rc = js_gen_chain(c, links, (int)n, min, max, base, "[", "]", path, b);
    for (size_t i = 0; i < n; i++)
        tram_strbuf_free(&texts[i]);
    return rc;
}

/* The items after prefixItems: k written, need more at least, room at
 * most (-1: no bound). */
static int gen_rest(jsc *c, json_t *items, long long k, long long need, long long room, const char *path,
                    tram_strbuf *b)
{
    char ws[JS_NAME_MAX], item[JS_NAME_MAX], sub[JS_PATH_MAX];
    js_shared(c, JS_USE_WS, ws, "ws");
    js_sub_path(sub, path, "items", NULL);
    int rc = items ? js_gen(c, items, sub, item) : (js_shared(c, JS_USE_VALUE, item, "value"), 0);
    if (rc < 0)
        return -1;
    if (rc == JS_EMPTY)
        return need > 0 ? JS_EMPTY : 0;
    if (k > 0) {
        items_tail(c, b, item, need, room);
    } else if (need > 0) {
        tram_strbuf_addf(b, " %s %s", item, ws);
        items_tail(c, b, item, need - 1, room < 0 ? -1 : room - 1);
    } else {
        tram_strbuf_addf(b, " ( %s %s", item, ws);
        items_tail(c, b, item, 0, room < 0 ? -1 : room - 1);
        tram_strbuf_add(b, " )?", 3);
    }
    return 0;
}

int js_gen_array(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long long min = 0, max = -1;
    if (js_read_count(c, s, "minItems", path, &min) < 0 || js_read_count(c, s, "maxItems", path, &max) < 0)
        return -1;
    if (prefix && !json_is_array(prefix))
        return JS_FAIL(c, "'prefixItems' at %s must be an array", path);
    if (max >= 0 && max < min)
        return js_empty(c, path, "maxItems is below minItems");
    if (json_object_get(s, "contains"))
        js_approximate(c, "contains", path);
    if (json_is_true(json_object_get(s, "uniqueItems"))) {
        json_t *values = prefix ? NULL : finite_values(c, items, path);
        if (values) {
            int rc = gen_unique(c, values, min, max, path, name, b);
            json_decref(values);
            return rc;
        }
        js_approximate(c, "uniqueItems", path);
    }
    char ws[JS_NAME_MAX], sub[JS_PATH_MAX];
    js_shared(c, JS_USE_WS, ws, "ws");
    long long k = prefix ? TRAM_MIN((long long)json_array_size(prefix), max < 0 ? (long long)1 << 40 : max) : 0;
    tram_strbuf_addf(b, "\"[\" %s", ws);
    for (long long i = 0; i < k; i++) {
        char elem[JS_NAME_MAX], idx[24];
        snprintf(idx, sizeof(idx), "%lld", i);
        js_sub_path(sub, path, "prefixItems", idx);
        int rc = js_gen(c, json_array_get(prefix, (size_t)i), sub, elem);
        if (rc < 0)
            return -1;
        if (rc == JS_EMPTY) {
            if (i < min)
                return JS_EMPTY;
            k = i; /* the array ends before the item no value satisfies */
            max = i;
            break;
        }
        tram_strbuf_addf(b, "%s %s %s", i ? " \",\" " : "", i ? ws : "", elem);
        tram_strbuf_addf(b, " %s", ws);
    }
    long long need = TRAM_MAX(0, min - k), room = max < 0 ? -1 : max - k;
    if (json_is_false(items) && need > 0)
        return js_empty(c, path, "minItems needs more items than prefixItems has, and items is false");
    if (json_is_false(items) || (!items && prefix))
        room = need; /* beyond prefixItems, generate only what minItems needs */
    if (k < min && k < (long long)json_array_size(prefix))
        return js_empty(c, path, "minItems needs items that prefixItems cannot have");
    if (room != 0) {
        int rc = gen_rest(c, json_is_false(items) ? NULL : items, k, need, room, path, b);
        if (rc)
            return rc == JS_EMPTY ? js_empty(c, path, "minItems needs items no value satisfies") : -1;
    }
    tram_strbuf_add(b, " \"]\"", 4);
    return 0;
}
