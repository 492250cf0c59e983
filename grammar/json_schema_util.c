/* json_schema_util.c — what every part of the JSON Schema compiler uses
 * (see json_schema_gen.h): rule names, the empty and approximate marks,
 * literals and counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gbnf_text.h"
#include "grammar/json_schema_gen.h"

int js_in_list(const char *const *list, const char *k)
{
    for (; *list; list++)
        if (!strcmp(*list, k))
            return 1;
    return 0;
}

void js_shared(jsc *c, unsigned what, char *name, const char *suffix)
{
    c->used |= what;
    snprintf(name, JS_NAME_MAX, "%s-%s", c->prefix, suffix);
}

void js_new_name(jsc *c, char *name)
{
    snprintf(name, JS_NAME_MAX, "%s-%d", c->prefix, ++c->counter);
}

void js_sub_path(char *out, const char *path, const char *a, const char *b)
{
    snprintf(out, JS_PATH_MAX, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
}

int js_empty(jsc *c, const char *path, const char *why)
{
    if (!c->empty_why[0])
        snprintf(c->empty_why, sizeof(c->empty_why), "the schema at %s has no valid value: %s", path, why);
    return JS_EMPTY;
}

void js_approximate(jsc *c, const char *keyword, const char *path)
{
    if (c->exact)
        snprintf(c->approximated, sizeof(c->approximated), "'%s' at %s", keyword, path);
    c->exact = 0;
}

/* A value as a GBNF literal; a number with no fraction is written as an
 * integer (1.0 as 1): equal under every draft, and an integer under
 * draft-4 too, which does not count 1.0 as one. */
int js_literal(jsc *c, tram_strbuf *b, json_t *v)
{
    double d = json_is_real(v) ? json_real_value(v) : 0;
    json_t *as_int = json_is_real(v) && d == floor(d) && fabs(d) < 9e15 ? json_integer((json_int_t)d) : NULL;
    char *text = json_dumps(as_int ? as_int : v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(as_int);
    if (!text)
        return JS_FAIL(c, "JSON Schema: out of memory");
    tram_gbnf_literal(b, text, strlen(text));
    free(text);
    return 0;
}

/* A count keyword: honoured exactly up to the grammar's largest count. */
int js_read_count(jsc *c, json_t *s, const char *key, const char *path, long long *out)
{
    json_t *x = json_object_get(s, key);
    if (!x)
        return 0;
    double v = json_number_value(x);
    if (!json_is_number(x) || v < 0 || v != floor(v))
        return JS_FAIL(c, "'%s' at %s must be a non-negative integer", key, path);
    if (v > TRAM_GBNF_MAX_REPEAT) {
        char *text = json_dumps(x, JSON_ENCODE_ANY);
        JS_FAIL(c, "'%s' %s at %s is over %d, the largest count tram supports", key, text ? text : "", path,
                TRAM_GBNF_MAX_REPEAT);
        free(text);
        return -1;
    }
    *out = (long long)v;
    return 1;
}
