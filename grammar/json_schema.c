/* json_schema.c — JSON Schema to GBNF (see json_schema.h).  gen() writes
 * one rule per schema node (through gen_into) and returns its name; the
 * shared rules (whitespace, strings, numbers, any value) are written once
 * at the end, for those that were used. */
#include "grammar/json_schema.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gbnf_text.h"
#include "grammar/regex.h"

#define NAME_MAX_LEN 160
#define MAX_DEPTH 64
#define MAX_MAGNITUDE 9999999999999999LL  /* 16 digits: every generated integer part */

enum { USE_WS = 1, USE_STRING = 2, USE_NUMBER = 4, USE_INTEGER = 8, USE_VALUE = 16 };

typedef struct {
    char *pointer;
    char name[NAME_MAX_LEN];
} ref_memo;

typedef struct {
    tram_strbuf out;
    const char *prefix;
    json_t *doc;
    int counter, depth, failed;
    unsigned used;
    ref_memo *refs;
    int num_refs, cap_refs;
    tram_error *err;
} jsc;

#define JS_FAIL(c, ...) ((c)->failed ? -1 : ((c)->failed = 1, tram_fail((c)->err, __VA_ARGS__)))

/* What a string of one character of a JSON string is, in GBNF. */
#define JSON_CHAR "( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )"

static const char *const annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "discriminator", "$defs", "definitions", NULL,
};
static const char *const keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum",
    "const", "anyOf", "oneOf", "$ref", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "nullable",
    "unevaluatedProperties", "minProperties", "maxProperties", NULL,
};

static int in_list(const char *const *list, const char *k)
{
    for (; *list; list++)
        if (!strcmp(*list, k))
            return 1;
    return 0;
}

static void shared(jsc *c, unsigned what, char *name, const char *suffix)
{
    c->used |= what;
    snprintf(name, NAME_MAX_LEN, "%s-%s", c->prefix, suffix);
}

static void new_name(jsc *c, char *name)
{
    snprintf(name, NAME_MAX_LEN, "%s-%d", c->prefix, ++c->counter);
}

static int check_keywords(jsc *c, json_t *s, const char *path)
{
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!in_list(keywords, k) && !in_list(annotations, k))
            return JS_FAIL(c, "unsupported JSON Schema keyword '%s' at %s", k, path);
    }
    json_t *u = json_object_get(s, "unevaluatedProperties");
    if (u && !json_is_false(u))
        return JS_FAIL(c, "unsupported JSON Schema keyword 'unevaluatedProperties' at %s (only false "
                          "is supported)", path);
    return 0;
}

static int gen(jsc *c, json_t *s, const char *path, char *name);
static int gen_into(jsc *c, json_t *s, const char *path, const char *name);

static void sub_path(char *out, const char *path, const char *a, const char *b)
{
    snprintf(out, 512, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
}

/* ---------------------------------------------------------------- literals */

static int literal_value(jsc *c, tram_strbuf *b, json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return JS_FAIL(c, "JSON Schema: out of memory");
    tram_gbnf_literal(b, text, strlen(text));
    free(text);
    return 0;
}

static int type_matches(const char *type, json_t *v)
{
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "integer"))
        return json_is_integer(v) || (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
    if (!strcmp(type, "number")) return json_is_number(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "null")) return json_is_null(v);
    if (!strcmp(type, "object")) return json_is_object(v);
    if (!strcmp(type, "array")) return json_is_array(v);
    return 0;
}

/* 1 when v fits the schema's "type" (absent: any) or is null under nullable. */
static int value_fits_type(json_t *s, json_t *v)
{
    json_t *t = json_object_get(s, "type");
    if (json_is_null(v) && json_is_true(json_object_get(s, "nullable")))
        return 1;
    if (json_is_string(t))
        return type_matches(json_string_value(t), v);
    if (json_is_array(t)) {
        size_t i;
        json_t *x;
        json_array_foreach(t, i, x)
            if (json_is_string(x) && type_matches(json_string_value(x), v))
                return 1;
        return 0;
    }
    return 1;
}

static int gen_enum(jsc *c, json_t *s, json_t *values, const char *path, tram_strbuf *b)
{
    size_t i;
    json_t *v;
    int n = 0;
    tram_strbuf_add(b, "(", 1);
    json_array_foreach(values, i, v) {
        if (!value_fits_type(s, v))
            continue;
        tram_strbuf_add(b, n ? " | " : " ", n ? 3 : 1);
        n++;
        if (literal_value(c, b, v))
            return -1;
    }
    tram_strbuf_add(b, " )", 2);
    return n ? 0 : JS_FAIL(c, "enum at %s: no value fits the schema's type", path);
}

/* ---------------------------------------------------------------- numbers */

static int digits_of(long long x)
{
    int d = 1;
    while (x >= 10) {
        x /= 10;
        d++;
    }
    return d;
}

static int all_char(const char *s, int n, char ch)
{
    for (int i = 0; i < n; i++)
        if (s[i] != ch)
            return 0;
    return 1;
}

/* Decimal strings lo..hi of the same length n, as GBNF. */
static void same_length(tram_strbuf *b, const char *lo, const char *hi, int n)
{
    if (n == 0)
        return;
    if (all_char(lo, n, '0') && all_char(hi, n, '9')) {
        tram_strbuf_addf(b, " [0-9]{%d}", n);
        return;
    }
    if (lo[0] == hi[0]) {
        tram_strbuf_addf(b, " \"%c\"", lo[0]);
        same_length(b, lo + 1, hi + 1, n - 1);
        return;
    }
    int lo_full = all_char(lo + 1, n - 1, '0'), hi_full = all_char(hi + 1, n - 1, '9');
    char first = (char)(lo_full ? lo[0] : lo[0] + 1), last = (char)(hi_full ? hi[0] : hi[0] - 1);
    const char *sep = "";
    char nines[20], zeros[20];
    memset(nines, '9', sizeof(nines));
    memset(zeros, '0', sizeof(zeros));
    tram_strbuf_add(b, " (", 2);
    if (!lo_full) {
        tram_strbuf_addf(b, " \"%c\"", lo[0]);
        same_length(b, lo + 1, nines, n - 1);
        sep = " |";
    }
    if (first <= last) {
        tram_strbuf_addf(b, "%s [%c-%c]", sep, first, last);
        if (n > 1)
            tram_strbuf_addf(b, " [0-9]{%d}", n - 1);
        sep = " |";
    }
    if (!hi_full) {
        tram_strbuf_addf(b, "%s \"%c\"", sep, hi[0]);
        same_length(b, zeros, hi + 1, n - 1);
    }
    tram_strbuf_add(b, " )", 2);
}

/* The integers a..b (0 <= a <= b <= MAX_MAGNITUDE), no leading zeros. */
static void nonneg_range(tram_strbuf *b, long long lo, long long hi)
{
    const char *sep = "";
    tram_strbuf_add(b, " (", 2);
    for (int len = digits_of(lo); len <= digits_of(hi); len++) {
        long long p = 1;
        for (int i = 1; i < len; i++)
            p *= 10;
        long long a = TRAM_MAX(lo, len == 1 ? 0 : p), z = TRAM_MIN(hi, p * 10 - 1);
        char sa[24], sz[24];
        snprintf(sa, sizeof(sa), "%lld", a);
        snprintf(sz, sizeof(sz), "%lld", z);
        tram_strbuf_addf(b, "%s", sep);
        same_length(b, sa, sz, len);
        sep = " |";
    }
    tram_strbuf_add(b, " )", 2);
}

/* The integers lo..hi (clamped to 16 digits); 0 when there are none. */
static int int_range(tram_strbuf *b, long long lo, long long hi)
{
    lo = TRAM_MAX(lo, -MAX_MAGNITUDE);
    hi = TRAM_MIN(hi, MAX_MAGNITUDE);
    if (lo > hi)
        return 0;
    tram_strbuf_add(b, " (", 2);
    if (lo < 0) {
        tram_strbuf_add(b, " \"-\"", 4);
        nonneg_range(b, hi < 0 ? -hi : 1, -lo);
    }
    if (lo < 0 && hi >= 0)
        tram_strbuf_add(b, " |", 2);
    if (hi >= 0)
        nonneg_range(b, TRAM_MAX(lo, 0), hi);
    tram_strbuf_add(b, " )", 2);
    return 1;
}

static long long clamp_ll(double x)
{
    return x < -1e17 ? -MAX_MAGNITUDE - 1 : x > 1e17 ? MAX_MAGNITUDE + 1 : (long long)x;
}

typedef struct {
    int has_min, has_max;
    double min, max;
    int excl_min, excl_max;
} bounds;

static int read_bound(jsc *c, json_t *s, const char *key, const char *path, int *has, double *v)
{
    json_t *x = json_object_get(s, key);
    if (!x)
        return 0;
    if (!json_is_number(x))
        return JS_FAIL(c, "'%s' at %s must be a number (draft-4 boolean exclusive bounds are not "
                          "supported)", key, path);
    double d = json_number_value(x);
    if (!*has || (key[0] == 'm' ? 0 : 1)) {
        *has = 1;
        *v = d;
    }
    return 0;
}

static int read_bounds(jsc *c, json_t *s, const char *path, bounds *bd)
{
    *bd = (bounds){0};
    int has_emin = 0, has_emax = 0;
    double emin = 0, emax = 0;
    if (read_bound(c, s, "minimum", path, &bd->has_min, &bd->min) ||
        read_bound(c, s, "maximum", path, &bd->has_max, &bd->max) ||
        read_bound(c, s, "exclusiveMinimum", path, &has_emin, &emin) ||
        read_bound(c, s, "exclusiveMaximum", path, &has_emax, &emax))
        return -1;
    if (has_emin && (!bd->has_min || emin >= bd->min)) {
        bd->has_min = bd->excl_min = 1;
        bd->min = emin;
    }
    if (has_emax && (!bd->has_max || emax <= bd->max)) {
        bd->has_max = bd->excl_max = 1;
        bd->max = emax;
    }
    return 0;
}

/* Smallest / largest integer inside the bounds. */
static long long int_lo(const bounds *bd)
{
    if (!bd->has_min)
        return -MAX_MAGNITUDE;
    double m = ceil(bd->min);
    return clamp_ll(bd->excl_min && m == bd->min ? m + 1 : m);
}

static long long int_hi(const bounds *bd)
{
    if (!bd->has_max)
        return MAX_MAGNITUDE;
    double m = floor(bd->max);
    return clamp_ll(bd->excl_max && m == bd->max ? m - 1 : m);
}

static int gen_integer(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    bounds bd;
    if (read_bounds(c, s, path, &bd))
        return -1;
    if (!bd.has_min && !bd.has_max) {
        char n[NAME_MAX_LEN];
        shared(c, USE_INTEGER, n, "integer");
        tram_strbuf_addf(b, "%s", n);
        return 0;
    }
    return int_range(b, int_lo(&bd), int_hi(&bd)) ? 0
         : JS_FAIL(c, "integer bounds at %s admit no integer", path);
}

#define FRACTION " \".\" [0-9]{1,15}"

/* A bounded number: an integer in the bounds, or a fraction on an integer
 * part k whose whole interval (k, k + 1) lies inside them (for negative
 * parts -j: (-(j + 1), -j)); no exponent. */
static int gen_bounded_number(jsc *c, const bounds *bd, const char *path, tram_strbuf *b)
{
    int n = 0;
    tram_strbuf_add(b, " (", 2);
    tram_strbuf part = {0};
    if (int_range(&part, int_lo(bd), int_hi(bd))) {
        tram_strbuf_add(b, part.s, part.len);
        n++;
    }
    tram_strbuf_free(&part);
    long long k_lo = TRAM_MAX(0, bd->has_min ? clamp_ll(ceil(bd->min)) : 0);
    long long k_hi = bd->has_max ? clamp_ll(floor(bd->max - 1)) : MAX_MAGNITUDE;
    if (int_range(&part, k_lo, k_hi)) {
        tram_strbuf_addf(b, "%s (%.*s" FRACTION " )", n++ ? " |" : "", (int)part.len, part.s);
    }
    tram_strbuf_free(&part);
    long long j_lo = TRAM_MAX(0, bd->has_max ? clamp_ll(ceil(-bd->max)) : 0);
    long long j_hi = bd->has_min ? clamp_ll(floor(-bd->min - 1)) : MAX_MAGNITUDE;
    if (int_range(&part, j_lo, j_hi)) {
        tram_strbuf_addf(b, "%s ( \"-\" %.*s" FRACTION " )", n++ ? " |" : "", (int)part.len, part.s);
    }
    tram_strbuf_free(&part);
    tram_strbuf_add(b, " )", 2);
    return n ? 0 : JS_FAIL(c, "number bounds at %s are too narrow: no integer, and no interval "
                              "between two integers, fits inside them", path);
}

static int gen_number(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    bounds bd;
    if (read_bounds(c, s, path, &bd))
        return -1;
    if (bd.has_min || bd.has_max)
        return gen_bounded_number(c, &bd, path, b);
    char n[NAME_MAX_LEN];
    shared(c, USE_NUMBER, n, "number");
    tram_strbuf_addf(b, "%s", n);
    return 0;
}

/* ---------------------------------------------------------------- strings */

static const char *format_gbnf(const char *f)
{
#define DATE "[1-9] [0-9]{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )" \
             " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )" \
             " | \"02\" \"-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )"
#define TIME "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )?" \
             " ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"
    if (!strcmp(f, "date"))
        return DATE;
    if (!strcmp(f, "time"))
        return TIME;
    if (!strcmp(f, "date-time"))
        return DATE " \"T\" " TIME;
    if (!strcmp(f, "email"))
        return "[a-zA-Z0-9] [a-zA-Z0-9._+-]{0,30} \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,30} ( \".\" [a-zA-Z]{2,10} ){1,3}";
    if (!strcmp(f, "uuid"))
        return "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [1-5] [0-9a-f]{3} \"-\" [89ab] [0-9a-f]{3} \"-\" [0-9a-f]{12}";
    return NULL;
#undef DATE
#undef TIME
}

/* A count keyword (minLength, maxItems, ...): honoured exactly up to the
 * grammar's largest repetition count, a failure naming it above. */
static int read_count(jsc *c, json_t *s, const char *key, const char *path, long long *out)
{
    json_t *x = json_object_get(s, key);
    if (!x)
        return 0;
    if (!json_is_integer(x) || json_integer_value(x) < 0)
        return JS_FAIL(c, "'%s' at %s must be a non-negative integer", key, path);
    if (json_integer_value(x) > TRAM_GBNF_MAX_REPEAT)
        return JS_FAIL(c, "'%s' %lld at %s is over %d, the largest count tram supports", key,
                       (long long)json_integer_value(x), path, TRAM_GBNF_MAX_REPEAT);
    *out = json_integer_value(x);
    return 1;
}

static int gen_string(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    long long min = 0, max = -1;
    int has_min = read_count(c, s, "minLength", path, &min), has_max = read_count(c, s, "maxLength", path, &max);
    if (has_min < 0 || has_max < 0)
        return -1;
    if ((fmt || pat) && (has_min || has_max))
        return JS_FAIL(c, "'%s' with minLength/maxLength at %s is not supported", fmt ? "format" : "pattern", path);
    if (fmt && pat)
        return JS_FAIL(c, "'format' with 'pattern' at %s is not supported", path);
    if (fmt) {
        const char *g = json_is_string(fmt) ? format_gbnf(json_string_value(fmt)) : NULL;
        if (!g)
            return JS_FAIL(c, "unsupported JSON Schema keyword 'format' value '%s' at %s (supported: "
                              "date-time, date, time, email, uuid)",
                           json_is_string(fmt) ? json_string_value(fmt) : "?", path);
        tram_strbuf_addf(b, "\"\\\"\" %s \"\\\"\"", g);
        return 0;
    }
    if (pat) {
        char rule[NAME_MAX_LEN + 8];
        snprintf(rule, sizeof(rule), "%s-re", name);
        tram_error inner;
        if (!json_is_string(pat) || tram_regex_rule(json_string_value(pat), rule, 1, &c->out, &inner))
            return JS_FAIL(c, "'pattern' at %s: %s", path, json_is_string(pat) ? inner.msg : "must be a string");
        tram_strbuf_addf(b, "\"\\\"\" %s \"\\\"\"", rule);
        return 0;
    }
    if (!has_min && !has_max) {
        char n[NAME_MAX_LEN];
        shared(c, USE_STRING, n, "string");
        tram_strbuf_addf(b, "%s", n);
        return 0;
    }
    if (has_max && max < min)
        return JS_FAIL(c, "maxLength below minLength at %s", path);
    if (has_max)
        tram_strbuf_addf(b, "\"\\\"\" " JSON_CHAR "{%lld,%lld} \"\\\"\"", min, max);
    else
        tram_strbuf_addf(b, "\"\\\"\" " JSON_CHAR "{%lld,} \"\\\"\"", min);
    return 0;
}

/* ---------------------------------------------------------------- objects */

typedef struct {
    const char *key;
    char value[NAME_MAX_LEN];
    int required;
} prop;

static void key_value(jsc *c, tram_strbuf *b, const prop *p)
{
    char ws[NAME_MAX_LEN];
    shared(c, USE_WS, ws, "ws");
    json_t *k = json_string(p->key);
    char *text = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
    if (!text)
        c->failed = 1;
    else
        tram_gbnf_literal(b, text, strlen(text));
    tram_strbuf_addf(b, " %s \":\" %s %s %s", ws, ws, p->value, ws);
    free(text);
    json_decref(k);
}

/* Properties i.. after one was written: required ones in turn, optional
 * ones each maybe. */
static void props_after(jsc *c, tram_strbuf *b, const prop *p, int i, int n)
{
    char ws[NAME_MAX_LEN];
    shared(c, USE_WS, ws, "ws");
    for (; i < n; i++) {
        tram_strbuf_addf(b, p[i].required ? " \",\" %s " : " ( \",\" %s ", ws);
        key_value(c, b, &p[i]);
        if (!p[i].required)
            tram_strbuf_add(b, " )?", 3);
    }
}

/* Properties i.. when none was written yet. */
static void props_first(jsc *c, tram_strbuf *b, const prop *p, int i, int n)
{
    if (i == n)
        return;
    if (p[i].required) {
        tram_strbuf_add(b, " ", 1);
        key_value(c, b, &p[i]);
        props_after(c, b, p, i + 1, n);
        return;
    }
    tram_strbuf_add(b, " ( ", 3);
    key_value(c, b, &p[i]);
    props_after(c, b, p, i + 1, n);
    tram_strbuf_add(b, " |", 2);
    props_first(c, b, p, i + 1, n);
    tram_strbuf_add(b, " )", 2);
}

static int is_required(json_t *req, const char *key)
{
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), key))
            return 1;
    return 0;
}

#define MAX_PROPS 256

static int collect_props(jsc *c, json_t *s, const char *path, prop *p, int *n)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    if ((props && !json_is_object(props)) || (req && !json_is_array(req)))
        return JS_FAIL(c, "'properties' must be an object and 'required' an array at %s", path);
    const char *k;
    json_t *v;
    *n = 0;
    json_object_foreach(props, k, v) {
        if (*n == MAX_PROPS)
            return JS_FAIL(c, "more than %d properties at %s", MAX_PROPS, path);
        char sub[512];
        sub_path(sub, path, "properties", k);
        p[*n] = (prop){.key = k, .required = is_required(req, k)};
        if (gen(c, v, sub, p[*n].value))
            return -1;
        (*n)++;
    }
    size_t i;
    json_array_foreach(req, i, v) {
        if (!json_is_string(v))
            return JS_FAIL(c, "'required' at %s must list strings", path);
        if (props && json_object_get(props, json_string_value(v)))
            continue;
        if (*n == MAX_PROPS)
            return JS_FAIL(c, "more than %d properties at %s", MAX_PROPS, path);
        p[*n] = (prop){.key = json_string_value(v), .required = 1};
        shared(c, USE_VALUE, p[*n].value, "value");
        (*n)++;
    }
    return 0;
}

/* An object of additional properties only (a map): entries of string keys
 * and values of the schema add, minProperties..maxProperties of them. */
static int gen_map(jsc *c, json_t *s, json_t *add, const char *path, tram_strbuf *b)
{
    char ws[NAME_MAX_LEN], str[NAME_MAX_LEN], val[NAME_MAX_LEN], entry[NAME_MAX_LEN + 4], sub[512];
    long long min = 0, max = -1;
    if (read_count(c, s, "minProperties", path, &min) < 0 || read_count(c, s, "maxProperties", path, &max) < 0)
        return -1;
    if (max >= 0 && max < min)
        return JS_FAIL(c, "maxProperties below minProperties at %s", path);
    shared(c, USE_WS, ws, "ws");
    shared(c, USE_STRING, str, "string");
    sub_path(sub, path, "additionalProperties", NULL);
    if (gen(c, add, sub, val))
        return -1;
    snprintf(entry, sizeof(entry), "%s-e", val);
    tram_strbuf_addf(&c->out, "%s ::= %s %s \":\" %s %s %s\n", entry, str, ws, ws, val, ws);
    tram_strbuf_addf(b, "\"{\" %s", ws);
    if (max == 0) {
        tram_strbuf_add(b, " \"}\"", 4);
        return 0;
    }
    tram_strbuf_addf(b, min ? " %s" : " ( %s", entry);
    if (max < 0)
        tram_strbuf_addf(b, " ( \",\" %s %s ){%lld,}", ws, entry, min ? min - 1 : 0);
    else
        tram_strbuf_addf(b, " ( \",\" %s %s ){%lld,%lld}", ws, entry, min ? min - 1 : 0, max - 1);
    tram_strbuf_addf(b, "%s \"}\"", min ? "" : " )?");
    return 0;
}

static int gen_object(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    json_t *add = json_object_get(s, "additionalProperties");
    prop *p = calloc(MAX_PROPS, sizeof(*p));
    int n = 0, rc = -1;
    if (!p)
        return JS_FAIL(c, "JSON Schema: out of memory");
    if (collect_props(c, s, path, p, &n))
        goto out;
    char ws[NAME_MAX_LEN];
    shared(c, USE_WS, ws, "ws");
    if ((json_object_get(s, "minProperties") || json_object_get(s, "maxProperties")) &&
        (n > 0 || !json_is_object(add))) {
        rc = JS_FAIL(c, "'minProperties'/'maxProperties' at %s are supported only on an object whose "
                        "properties are all additionalProperties of one schema", path);
    } else if (n == 0 && json_is_false(add)) {
        tram_strbuf_addf(b, "\"{\" %s \"}\"", ws);
        rc = 0;
    } else if (n == 0 && json_is_object(add)) {
        rc = gen_map(c, s, add, path, b);
    } else if (n == 0) {
        char any[NAME_MAX_LEN];
        shared(c, USE_VALUE, any, "object");
        tram_strbuf_addf(b, "%s", any);
        rc = 0;
    } else {
        tram_strbuf_addf(b, "\"{\" %s", ws);
        props_first(c, b, p, 0, n);
        tram_strbuf_add(b, " \"}\"", 4);
        rc = c->failed ? -1 : 0;
    }
out:
    free(p);
    return rc;
}

/* ---------------------------------------------------------------- arrays */

static void items_tail(jsc *c, tram_strbuf *b, const char *item, long long min, long long max)
{
    char ws[NAME_MAX_LEN];
    shared(c, USE_WS, ws, "ws");
    if (max < 0)
        tram_strbuf_addf(b, " ( \",\" %s %s %s ){%lld,}", ws, item, ws, min);
    else if (max > 0)
        tram_strbuf_addf(b, " ( \",\" %s %s %s ){%lld,%lld}", ws, item, ws, min, max);
}

static int gen_array(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long long min = 0, max = -1;
    if (read_count(c, s, "minItems", path, &min) < 0 || read_count(c, s, "maxItems", path, &max) < 0)
        return -1;
    if (json_is_array(items))
        return JS_FAIL(c, "'items' as an array at %s is not supported (use 'prefixItems')", path);
    if (prefix && !json_is_array(prefix))
        return JS_FAIL(c, "'prefixItems' at %s must be an array", path);
    if (max >= 0 && max < min)
        return JS_FAIL(c, "maxItems below minItems at %s", path);
    char ws[NAME_MAX_LEN], item[NAME_MAX_LEN], sub[512];
    shared(c, USE_WS, ws, "ws");
    long long k = prefix ? TRAM_MIN((long long)json_array_size(prefix), max < 0 ? (long long)1 << 40 : max) : 0;
    tram_strbuf_addf(b, "\"[\" %s", ws);
    for (long long i = 0; i < k; i++) {
        char elem[NAME_MAX_LEN], idx[24];
        snprintf(idx, sizeof(idx), "%lld", i);
        sub_path(sub, path, "prefixItems", idx);
        if (gen(c, json_array_get(prefix, (size_t)i), sub, elem))
            return -1;
        tram_strbuf_addf(b, "%s %s %s", i ? " \",\" " : "", i ? ws : "", elem);
        tram_strbuf_addf(b, " %s", ws);
    }
    long long need = TRAM_MAX(0, min - k), room = max < 0 ? -1 : max - k;
    if (json_is_false(items) && need > 0)
        return JS_FAIL(c, "minItems at %s needs more items than prefixItems has, and items is false", path);
    if (json_is_false(items) || (!items && prefix))
        room = need;  /* beyond prefixItems, generate only what minItems needs */
    if (room != 0) {
        sub_path(sub, path, "items", NULL);
        if (items ? gen(c, items, sub, item) : (shared(c, USE_VALUE, item, "value"), 0))
            return -1;
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
    }
    tram_strbuf_add(b, " \"]\"", 4);
    return 0;
}

/* ---------------------------------------------------------------- unions */

/* Types a branch can have, as bits (1 null, 2 boolean, 4 object, 8 array,
 * 16 string, 32 integer, 64 non-integer number), looked at shallowly. */
static unsigned branch_types(jsc *c, json_t *s, int depth);

static unsigned type_bits(const char *t)
{
    static const char *const names[] = {"null", "boolean", "object", "array", "string", "integer", "number"};
    for (unsigned i = 0; i < 7; i++)
        if (!strcmp(t, names[i]))
            return i == 6 ? 96u : 1u << i;
    return 127;
}

static unsigned value_bits(json_t *v)
{
    return json_is_null(v) ? 1 : json_is_boolean(v) ? 2 : json_is_object(v) ? 4 : json_is_array(v) ? 8
         : json_is_string(v) ? 16 : json_is_integer(v) ? 32 : 64;
}

static json_t *resolve(jsc *c, const char *ref);

static unsigned branch_types(jsc *c, json_t *s, int depth)
{
    if (!json_is_object(s) || depth > 8)
        return 127;
    json_t *t = json_object_get(s, "type"), *v, *ref = json_object_get(s, "$ref");
    size_t i;
    unsigned bits = 0;
    if (json_is_string(ref)) {
        json_t *target = resolve(c, json_string_value(ref));
        return target ? branch_types(c, target, depth + 1) : 127;
    }
    if ((v = json_object_get(s, "const")))
        return value_bits(v);
    if (json_is_array(v = json_object_get(s, "enum"))) {
        json_array_foreach(v, i, t)
            bits |= value_bits(t);
        return bits;
    }
    if (json_is_string(t))
        bits = type_bits(json_string_value(t));
    else if (json_is_array(t))
        json_array_foreach(t, i, v)
            bits |= json_is_string(v) ? type_bits(json_string_value(v)) : 127;
    else
        return 127;
    return bits | (json_is_true(json_object_get(s, "nullable")) ? 1u : 0u);
}

/* The const/enum values of a required property `key` of object branch s. */
static json_t *tag_values(jsc *c, json_t *s, const char *key)
{
    json_t *ref = json_object_get(s, "$ref");
    if (json_is_string(ref))
        s = resolve(c, json_string_value(ref));
    if (!json_is_object(s) || !is_required(json_object_get(s, "required"), key))
        return NULL;
    json_t *p = json_object_get(json_object_get(s, "properties"), key);
    if (json_is_object(p) && json_is_string(json_object_get(p, "$ref")))
        p = resolve(c, json_string_value(json_object_get(p, "$ref")));
    json_t *v = json_object_get(p, "const");
    if (v)
        return json_pack("[O]", v);
    v = json_object_get(p, "enum");
    return json_is_array(v) ? json_incref(v) : NULL;
}

static int values_overlap(json_t *a, json_t *b)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x)
        json_array_foreach(b, j, y)
            if (json_equal(x, y))
                return 1;
    return 0;
}

/* 1 when some required property's const/enum values tell every branch apart. */
static int tagged(jsc *c, json_t *branches)
{
    json_t *first = json_array_get(branches, 0);
    json_t *ref = json_object_get(first, "$ref");
    if (json_is_string(ref))
        first = resolve(c, json_string_value(ref));
    const char *key;
    json_t *unused;
    json_object_foreach(json_object_get(first, "properties"), key, unused) {
        size_t n = json_array_size(branches);
        json_t **tags = calloc(n, sizeof(*tags));
        int ok = tags != NULL;
        for (size_t i = 0; ok && i < n; i++)
            ok = (tags[i] = tag_values(c, json_array_get(branches, i), key)) != NULL;
        for (size_t i = 0; ok && i < n; i++)
            for (size_t j = i + 1; ok && j < n; j++)
                ok = !values_overlap(tags[i], tags[j]);
        for (size_t i = 0; tags && i < n; i++)
            json_decref(tags[i]);
        free(tags);
        if (ok)
            return 1;
    }
    return 0;
}

static int check_one_of(jsc *c, json_t *branches, const char *path)
{
    size_t n = json_array_size(branches);
    unsigned seen = 0;
    int disjoint = 1;
    for (size_t i = 0; i < n && disjoint; i++) {
        unsigned t = branch_types(c, json_array_get(branches, i), 0);
        disjoint = !(t & seen) && !((t & 32) && (seen & 64)) && !((t & 64) && (seen & 32));
        seen |= t;
    }
    if (disjoint || tagged(c, branches))
        return 0;
    return JS_FAIL(c, "'oneOf' at %s: its branches may overlap, and tram cannot enforce 'exactly "
                      "one' then; use 'anyOf', or make the branches differ in type or in the "
                      "const/enum of a required property", path);
}

static int gen_union(jsc *c, json_t *s, const char *key, const char *path, tram_strbuf *b)
{
    json_t *branches = json_object_get(s, key), *v;
    if (!json_is_array(branches) || json_array_size(branches) == 0)
        return JS_FAIL(c, "'%s' at %s must be a non-empty array", key, path);
    if (!strcmp(key, "oneOf") && check_one_of(c, branches, path))
        return -1;
    size_t i;
    tram_strbuf_add(b, "(", 1);
    json_array_foreach(branches, i, v) {
        char sub[512], idx[24], name[NAME_MAX_LEN];
        snprintf(idx, sizeof(idx), "%zu", i);
        sub_path(sub, path, key, idx);
        if (gen(c, v, sub, name))
            return -1;
        tram_strbuf_addf(b, "%s %s", i ? " |" : "", name);
    }
    if (json_is_true(json_object_get(s, "nullable")))
        tram_strbuf_add(b, " | \"null\"", 9);
    tram_strbuf_add(b, " )", 2);
    return 0;
}

/* ---------------------------------------------------------------- $ref */

static json_t *resolve(jsc *c, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    json_t *cur = c->doc;
    const char *p = ref + 1;
    while (*p == '/' && cur) {
        p++;
        char seg[256];
        size_t n = 0;
        for (; *p && *p != '/' && n + 1 < sizeof(seg); p++) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1'))
                seg[n++] = *++p == '0' ? '~' : '/';
            else
                seg[n++] = *p;
        }
        seg[n] = 0;
        if (json_is_array(cur)) {
            char *end;
            long i = strtol(seg, &end, 10);
            cur = *end ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = json_object_get(cur, seg);
        }
    }
    return *p ? NULL : cur;
}

static int gen_ref(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    json_t *ref = json_object_get(s, "$ref");
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
        if (strcmp(k, "$ref") && !in_list(annotations, k))
            return JS_FAIL(c, "'%s' beside '$ref' at %s is not supported", k, path);
    if (!json_is_string(ref))
        return JS_FAIL(c, "'$ref' at %s must be a string", path);
    const char *target = json_string_value(ref);
    for (int i = 0; i < c->num_refs; i++)
        if (!strcmp(c->refs[i].pointer, target)) {
            tram_strbuf_addf(b, "%s", c->refs[i].name);
            return 0;
        }
    json_t *to = resolve(c, target);
    if (!to)
        return JS_FAIL(c, "'$ref' '%s' at %s does not point into this schema (only '#...' "
                          "references are supported)", target, path);
    if (c->num_refs == c->cap_refs) {
        int cap = TRAM_MAX(8, 2 * c->cap_refs);
        ref_memo *r = realloc(c->refs, (size_t)cap * sizeof(*r));
        if (!r)
            return JS_FAIL(c, "JSON Schema: out of memory");
        c->refs = r;
        c->cap_refs = cap;
    }
    ref_memo *m = &c->refs[c->num_refs++];
    m->pointer = strdup(target);
    new_name(c, m->name);
    char name[NAME_MAX_LEN];
    memcpy(name, m->name, sizeof(name));
    tram_strbuf_addf(b, "%s", name);
    return m->pointer ? gen_into(c, to, target, name) : JS_FAIL(c, "JSON Schema: out of memory");
}

/* ---------------------------------------------------------------- dispatch */

static const char *infer_type(json_t *s)
{
    static const char *const object_kw[] = {"properties", "required", "additionalProperties", NULL};
    static const char *const array_kw[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
    static const char *const string_kw[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *const number_kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (in_list(object_kw, k)) return "object";
        if (in_list(array_kw, k)) return "array";
        if (in_list(string_kw, k)) return "string";
        if (in_list(number_kw, k)) return "number";
    }
    return NULL;
}

static int gen_type(jsc *c, json_t *s, const char *type, const char *path, const char *name, tram_strbuf *b)
{
    if (!strcmp(type, "string")) return gen_string(c, s, path, name, b);
    if (!strcmp(type, "integer")) return gen_integer(c, s, path, b);
    if (!strcmp(type, "number")) return gen_number(c, s, path, b);
    if (!strcmp(type, "object")) return gen_object(c, s, path, b);
    if (!strcmp(type, "array")) return gen_array(c, s, path, b);
    if (!strcmp(type, "boolean")) return tram_strbuf_addf(b, "( \"true\" | \"false\" )"), 0;
    if (!strcmp(type, "null")) return tram_strbuf_addf(b, "\"null\""), 0;
    return JS_FAIL(c, "unsupported JSON Schema type '%s' at %s", type, path);
}

static int gen_types(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    json_t *t = json_object_get(s, "type");
    int nullable = json_is_true(json_object_get(s, "nullable"));
    if (!t) {
        const char *inferred = infer_type(s);
        if (!inferred) {
            char any[NAME_MAX_LEN];
            shared(c, USE_VALUE, any, "value");
            tram_strbuf_addf(b, "%s", any);
            return 0;
        }
        tram_strbuf_add(b, "( ", 2);
        int rc = gen_type(c, s, inferred, path, name, b);
        tram_strbuf_addf(b, "%s )", nullable ? " | \"null\"" : "");
        return rc;
    }
    if (!json_is_string(t) && !(json_is_array(t) && json_array_size(t) > 0))
        return JS_FAIL(c, "'type' at %s must be a string or a non-empty array", path);
    tram_strbuf_add(b, "(", 1);
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
        if (!json_is_string(x))
            return JS_FAIL(c, "'type' at %s must list strings", path);
        tram_strbuf_add(b, i ? " | " : " ", i ? 3 : 1);
        if (gen_type(c, s, json_string_value(x), path, name, b))
            return -1;
    }
    tram_strbuf_addf(b, "%s )", nullable ? " | \"null\"" : "");
    return 0;
}

/* Keywords that may stand beside const, enum, anyOf and oneOf. */
static int check_alone(jsc *c, json_t *s, const char *key, const char *path)
{
    const char *k;
    json_t *v;
    int enum_like = !strcmp(key, "enum") || !strcmp(key, "const");
    json_object_foreach(s, k, v) {
        if (!strcmp(k, key) || in_list(annotations, k) || !strcmp(k, "nullable") ||
            (enum_like && !strcmp(k, "type")))
            continue;
        return JS_FAIL(c, "'%s' beside '%s' at %s is not supported", k, key, path);
    }
    return 0;
}

static int gen_body(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
        char any[NAME_MAX_LEN];
        shared(c, USE_VALUE, any, "value");
        tram_strbuf_addf(b, "%s", any);
        return 0;
    }
    if (json_is_false(s))
        return JS_FAIL(c, "the schema at %s is false: no value satisfies it", path);
    if (!json_is_object(s))
        return JS_FAIL(c, "the schema at %s must be an object or a boolean", path);
    if (check_keywords(c, s, path))
        return -1;
    if (json_object_get(s, "$ref"))
        return gen_ref(c, s, path, b);
    static const char *const alone[] = {"const", "enum", "anyOf", "oneOf"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(alone); i++) {
        json_t *v = json_object_get(s, alone[i]);
        if (!v)
            continue;
        if (check_alone(c, s, alone[i], path))
            return -1;
        if (i == 0) {
            if (!value_fits_type(s, v))
                return JS_FAIL(c, "'const' at %s does not fit the schema's type", path);
            return literal_value(c, b, v);
        }
        if (i == 1)
            return json_is_array(v) ? gen_enum(c, s, v, path, b)
                                    : JS_FAIL(c, "'enum' at %s must be an array", path);
        return gen_union(c, s, alone[i], path, b);
    }
    return gen_types(c, s, path, name, b);
}

static int gen_into(jsc *c, json_t *s, const char *path, const char *name)
{
    if (++c->depth > MAX_DEPTH)
        return JS_FAIL(c, "the schema is nested more than %d deep (at %s)", MAX_DEPTH, path);
    tram_strbuf body = {0};
    int rc = gen_body(c, s, path, name, &body);
    if (!rc && !c->failed)
        tram_strbuf_addf(&c->out, "%s ::= %s\n", name, body.s ? body.s : "");
    tram_strbuf_free(&body);
    c->depth--;
    return rc || c->failed ? -1 : 0;
}

static int gen(jsc *c, json_t *s, const char *path, char *name)
{
    new_name(c, name);
    return gen_into(c, s, path, name);
}

/* ---------------------------------------------------------------- shared rules */

static void shared_rules(jsc *c)
{
    const char *p = c->prefix;
    if (c->used & USE_VALUE)
        c->used |= USE_WS | USE_STRING | USE_NUMBER;
    if (c->used & USE_WS)
        tram_strbuf_addf(&c->out, "%s-ws ::= \" \"?\n", p);
    if (c->used & USE_STRING)
        tram_strbuf_addf(&c->out, "%s-string ::= \"\\\"\" " JSON_CHAR "* \"\\\"\"\n", p);
    if (c->used & (USE_NUMBER | USE_INTEGER))
        tram_strbuf_addf(&c->out, "%s-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n", p);
    if (c->used & USE_NUMBER)
        tram_strbuf_addf(&c->out, "%s-number ::= %s-integer ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?\n", p, p);
    if (c->used & USE_VALUE) {
        tram_strbuf_addf(&c->out, "%1$s-value ::= %1$s-object | %1$s-array | %1$s-string | %1$s-number | "
                                "\"true\" | \"false\" | \"null\"\n", p);
        tram_strbuf_addf(&c->out, "%1$s-object ::= \"{\" %1$s-ws ( %1$s-string %1$s-ws \":\" %1$s-ws %1$s-value "
                                "%1$s-ws ( \",\" %1$s-ws %1$s-string %1$s-ws \":\" %1$s-ws %1$s-value %1$s-ws )* )? "
                                "\"}\"\n", p);
        tram_strbuf_addf(&c->out, "%1$s-array ::= \"[\" %1$s-ws ( %1$s-value %1$s-ws ( \",\" %1$s-ws %1$s-value "
                                "%1$s-ws )* )? \"]\"\n", p);
    }
}

static int check_prefix(const char *prefix, tram_error *err)
{
    size_t n = strlen(prefix);
    if (n == 0 || n > 64)
        return tram_fail(err, "grammar rule prefix must have 1 to 64 characters");
    for (size_t i = 0; i < n; i++) {
        char ch = prefix[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return tram_fail(err, "grammar rule prefix '%s': only letters, digits, '-' and '_'", prefix);
    }
    return 0;
}

static int finish(jsc *c, const char *root, char **gbnf_out, tram_error *err)
{
    tram_strbuf all = {0};
    if (!c->failed) {
        shared_rules(c);
        tram_strbuf_addf(&all, "%s ::= %s\n", c->prefix, root);
        tram_strbuf_add(&all, c->out.s ? c->out.s : "", c->out.len);
    }
    tram_strbuf_free(&c->out);
    for (int i = 0; i < c->num_refs; i++)
        free(c->refs[i].pointer);
    free(c->refs);
    if (c->failed) {
        tram_strbuf_free(&all);
        return -1;
    }
    *gbnf_out = tram_strbuf_take(&all);
    return *gbnf_out ? 0 : tram_fail(err, "JSON Schema: out of memory");
}

int tram_json_schema_to_gbnf(const char *schema_json, const char *rule_prefix, char **gbnf_out,
                             tram_error *err)
{
    *gbnf_out = NULL;
    if (check_prefix(rule_prefix, err))
        return -1;
    json_error_t je;
    json_t *doc = json_loads(schema_json, JSON_DECODE_ANY, &je);
    if (!doc)
        return tram_fail(err, "the JSON Schema is not valid JSON: %s (line %d)", je.text, je.line);
    jsc c = {.prefix = rule_prefix, .doc = doc, .err = err};
    char root[NAME_MAX_LEN];
    gen(&c, doc, "#", root);
    int rc = finish(&c, root, gbnf_out, err);
    json_decref(doc);
    return rc;
}

int tram_json_object_gbnf(const char *rule_prefix, char **gbnf_out, tram_error *err)
{
    *gbnf_out = NULL;
    if (check_prefix(rule_prefix, err))
        return -1;
    jsc c = {.prefix = rule_prefix, .err = err, .used = USE_VALUE};
    char root[NAME_MAX_LEN];
    snprintf(root, sizeof(root), "%s-object", rule_prefix);
    return finish(&c, root, gbnf_out, err);
}
