/* json_schema_object.c — object schemas (see json_schema_gen.h).
 *
 * The named properties are written in the schema's order, each required
 * one always, each optional one maybe: a chain of rules, one per (property,
 * count written so far), so the grammar grows linearly with the properties
 * and min/maxProperties are counted exactly.  A required name that
 * `properties` lacks gets the schema patternProperties or
 * additionalProperties give it.  dependentRequired is expanded: each
 * subset of its optional triggers (up to MAX_TRIGGERS of them) is an
 * alternative where those are required with their dependents and the
 * others absent; beyond that the optional triggers are left out.  An
 * object without named properties is a map: entries whose keys match a
 * patternProperties pattern or propertyNames, or are free (the
 * additionalProperties schema). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf_text.h"
#include "grammar/json_schema_gen.h"

#define MAX_PROPS 256
#define MAX_TRIGGERS 4

typedef struct {
    const char *key;
    json_t *schema; /* one reference */
    char value[JS_NAME_MAX];
    int required, absent;
} prop;

typedef struct {
    prop p[MAX_PROPS];
    int n;
    long long min, max; /* min/maxProperties; max -1: none */
} props;

static int is_required(json_t *req, const char *key)
{
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), key))
            return 1;
    return 0;
}

/* 1 when pattern (ECMA-262, read as PCRE2) finds a match in key, 0 when
 * not, -1 when PCRE2 cannot read it. */
static int pattern_matches(const char *pattern, const char *key)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
    if (!re)
        return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)key, strlen(key), 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

/* The schema a property named key must satisfy: its `properties` entry
 * and every patternProperties schema whose pattern matches it, or, when
 * none applies, additionalProperties (absent: any value). */
static json_t *schema_of(jsc *c, json_t *s, const char *key, const char *path)
{
    json_t *named = json_object_get(json_object_get(s, "properties"), key);
    json_t *all = json_array();
    if (named)
        json_array_append(all, named);
    const char *pat;
    json_t *v;
    json_object_foreach(json_object_get(s, "patternProperties"), pat, v) {
        int m = pattern_matches(pat, key);
        if (m < 0)
            js_approximate(c, "patternProperties (a pattern PCRE2 cannot read)", path);
        if (m > 0)
            json_array_append(all, v);
    }
    json_t *add = json_object_get(s, "additionalProperties");
    if (json_array_size(all) == 0)
        json_array_append(all, add ? add : json_true());
    json_t *one = json_array_size(all) == 1 ? json_incref(json_array_get(all, 0)) : json_pack("{s:O}", "allOf", all);
    json_decref(all);
    return one;
}

static int add_prop(jsc *c, props *ps, json_t *s, const char *key, int required, const char *path)
{
    if (ps->n == MAX_PROPS)
        return JS_FAIL(c, "more than %d properties at %s", MAX_PROPS, path);
    ps->p[ps->n++] = (prop){.key = key, .schema = schema_of(c, s, key, path), .required = required};
    return 0;
}

static int collect(jsc *c, json_t *s, const char *path, props *ps)
{
    json_t *properties = json_object_get(s, "properties"), *req = json_object_get(s, "required"), *v;
    if ((properties && !json_is_object(properties)) || (req && !json_is_array(req)))
        return JS_FAIL(c, "'properties' must be an object and 'required' an array at %s", path);
    const char *k;
    json_object_foreach(properties, k, v)
        if (add_prop(c, ps, s, k, is_required(req, k), path))
            return -1;
    size_t i;
    json_array_foreach(req, i, v) {
        if (!json_is_string(v))
            return JS_FAIL(c, "'required' at %s must list strings", path);
        int seen = 0;
        for (int j = 0; j < ps->n && !seen; j++)
            seen = !strcmp(ps->p[j].key, json_string_value(v));
        if (!seen && add_prop(c, ps, s, json_string_value(v), 1, path))
            return -1;
    }
    return 0;
}

static prop *find(props *ps, const char *key)
{
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].key, key))
            return &ps->p[i];
    return NULL;
}

/* ---------------------------------------------------------------- the chain */

/* "key" ws ":" ws value, for the chain of properties. */
static char *key_value(jsc *c, const prop *p)
{
    char ws[JS_NAME_MAX];
    js_shared(c, JS_USE_WS, ws, "ws");
    json_t *k = json_string(p->key);
    char *text = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
    tram_strbuf b = {0};
    if (text) {
        tram_gbnf_literal(&b, text, strlen(text));
        tram_strbuf_addf(&b, " %s \":\" %s %s", ws, ws, p->value);
    }
    free(text);
    json_decref(k);
    return tram_strbuf_take(&b);
}

/* One alternative of the object: the named properties as a chain. */
static int gen_chain(jsc *c, const props *ps, const char *base, const char *path, tram_strbuf *b)
{
    js_link *links = calloc((size_t)ps->n + 1, sizeof(*links));
    int rc = links ? 0 : JS_FAIL(c, "JSON Schema: out of memory");
    for (int i = 0; !rc && i < ps->n; i++) {
        links[i] = (js_link){.required = ps->p[i].required, .absent = ps->p[i].absent};
        if (!ps->p[i].absent && !(links[i].text = key_value(c, &ps->p[i])))
            rc = JS_FAIL(c, "JSON Schema: out of memory");
    }
    if (!rc)
        rc = js_gen_chain(c, links, ps->n, ps->min, ps->max, base, "{", "}", path, b);
    for (int i = 0; links && i < ps->n; i++)
        free((char *)links[i].text);
    free(links);
    return rc;
}

/* ---------------------------------------------------------------- dependentRequired */

/* Requires every dependent of a required trigger, until nothing changes. */
static int close_required(jsc *c, props *ps, json_t *s, json_t *deps, const char *path)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < ps->n; i++) {
            json_t *list = json_object_get(deps, ps->p[i].key), *d;
            size_t j;
            if (!ps->p[i].required || !json_is_array(list))
                continue;
            json_array_foreach(list, j, d) {
                if (!json_is_string(d))
                    return JS_FAIL(c, "'dependentRequired' at %s must list strings", path);
                prop *q = find(ps, json_string_value(d));
                if (q && !q->required) {
                    q->required = changed = 1;
                } else if (!q) {
                    if (add_prop(c, ps, s, json_string_value(d), 1, path))
                        return -1;
                    changed = 1;
                }
            }
        }
    }
    for (int i = 0; i < ps->n; i++)
        if (ps->p[i].required && ps->p[i].absent)
            return 1;
    return 0;
}

static int gen_values(jsc *c, props *ps, const char *path)
{
    for (int i = 0; i < ps->n; i++) {
        prop *p = &ps->p[i];
        if (p->value[0] || p->absent)
            continue;
        char sub[JS_PATH_MAX];
        js_sub_path(sub, path, "properties", p->key);
        int rc = js_gen(c, p->schema, sub, p->value);
        if (rc < 0)
            return -1;
        if (rc == JS_EMPTY) {
            p->value[0] = 0;
            p->absent = 1;
            if (p->required)
                return JS_EMPTY;
        }
    }
    return 0;
}

/* The object's alternatives: one per subset of the optional triggers. */
static int gen_named(jsc *c, json_t *s, props *ps, const char *path, const char *name, tram_strbuf *b)
{
    json_t *deps = json_object_get(s, "dependentRequired");
    int trig[MAX_PROPS], nt = 0, alts = 0;
    int rc = close_required(c, ps, s, deps, path);
    if (rc == 0)
        rc = gen_values(c, ps, path);
    if (rc)
        return rc < 0 ? -1 : JS_EMPTY;
    for (int i = 0; i < ps->n; i++)
        if (!ps->p[i].required && !ps->p[i].absent && json_object_get(deps, ps->p[i].key))
            trig[nt++] = i;
    int expand = nt <= MAX_TRIGGERS ? nt : 0;
    props *alt = malloc(sizeof(*alt));
    if (!alt)
        return JS_FAIL(c, "JSON Schema: out of memory");
    tram_strbuf_add(b, "(", 1);
    for (unsigned set = 0; set < (1u << expand) && !c->failed; set++) {
        *alt = *ps;
        for (int t = 0; t < nt; t++) {
            int on = t < expand && (set >> t & 1);
            alt->p[trig[t]].required = on;
            alt->p[trig[t]].absent = !on;
        }
        int rc = close_required(c, alt, s, deps, path);
        if (!rc && (rc = gen_values(c, alt, path)) == 0) {
            char base[JS_NAME_MAX];
            snprintf(base, sizeof(base), "%s-a%u", name, set);
            tram_strbuf b2 = {0};
            if ((rc = gen_chain(c, alt, base, path, &b2)) == 0)
                tram_strbuf_addf(b, "%s %s", alts++ ? " |" : "", b2.s);
            tram_strbuf_free(&b2);
        }
        /* schemas the expansion added are released with ps */
        for (int i = ps->n; i < alt->n; i++)
            json_decref(alt->p[i].schema);
    }
    free(alt);
    tram_strbuf_add(b, " )", 2);
    if (c->failed)
        return -1;
    return alts ? 0 : js_empty(c, path, "no combination of its properties satisfies required, "
                                        "dependentRequired and additionalProperties together");
}

/* ---------------------------------------------------------------- maps */

/* The rule of one map entry: a key of a pattern with its schema, or a key
 * of propertyNames (any string without it) with additionalProperties. */
static int map_entry(jsc *c, json_t *s, const char *path, const char *entry)
{
    char ws[JS_NAME_MAX], key[JS_NAME_MAX], val[JS_NAME_MAX], sub[JS_PATH_MAX];
    js_shared(c, JS_USE_WS, ws, "ws");
    json_t *pats = json_object_get(s, "patternProperties"), *add = json_object_get(s, "additionalProperties");
    json_t *names = json_object_get(s, "propertyNames"), *v;
    const char *pat;
    tram_strbuf body = {0};
    int n = 0, rc = 0;
    if (json_object_size(pats) > 1)
        js_approximate(c, "patternProperties (a key may match several patterns)", path);
    json_object_foreach(pats, pat, v) {
        json_t *ks = json_pack("{s:s, s:s}", "type", "string", "pattern", pat);
        json_t *ks_all = names ? json_pack("{s:[O,O]}", "allOf", ks, names) : json_incref(ks);
        js_sub_path(sub, path, "patternProperties", pat);
        int rk = js_gen(c, ks_all, sub, key), rv = rk ? rk : js_gen(c, v, sub, val);
        json_decref(ks);
        json_decref(ks_all);
        if ((rc = rk < 0 || rv < 0 ? -1 : 0))
            break;
        if (!rk && !rv)
            tram_strbuf_addf(&body, "%s %s %s \":\" %s %s %s", n++ ? " |" : "", key, ws, ws, val, ws);
    }
    int free_keys = !rc && !json_is_false(add) && (add || json_object_size(pats) == 0);
    if (free_keys) {
        if (json_object_size(pats))
            js_approximate(c, "additionalProperties beside patternProperties", path);
        json_t *ks = names ? json_pack("{s:[{s:s},O]}", "allOf", "type", "string", names)
                           : json_pack("{s:s}", "type", "string");
        js_sub_path(sub, path, "additionalProperties", NULL);
        int rk = js_gen(c, ks, sub, key), rv = rk ? rk : js_gen(c, add ? add : json_true(), sub, val);
        json_decref(ks);
        rc = rk < 0 || rv < 0 ? -1 : 0;
        if (!rk && !rv)
            tram_strbuf_addf(&body, "%s %s %s \":\" %s %s %s", n++ ? " |" : "", key, ws, ws, val, ws);
    }
    if (!rc && n)
        tram_strbuf_addf(&c->out, "%s ::=%s\n", entry, body.s);
    tram_strbuf_free(&body);
    return rc < 0 ? -1 : n ? 0 : JS_EMPTY;
}

/* An object of entries only: min..max of them. */
static int gen_map(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    char ws[JS_NAME_MAX], entry[JS_NAME_MAX + 4];
    long long min = 0, max = -1;
    if (js_read_count(c, s, "minProperties", path, &min) < 0 || js_read_count(c, s, "maxProperties", path, &max) < 0)
        return -1;
    if (max >= 0 && max < min)
        return js_empty(c, path, "maxProperties is below minProperties");
    js_shared(c, JS_USE_WS, ws, "ws");
    snprintf(entry, sizeof(entry), "%s-e", name);
    int rc = max == 0 ? JS_EMPTY : map_entry(c, s, path, entry);
    if (rc < 0)
        return -1;
    tram_strbuf_addf(b, "\"{\" %s", ws);
    if (rc == JS_EMPTY || max == 0) {
        tram_strbuf_add(b, " \"}\"", 4);
        return min > 0 ? js_empty(c, path, "minProperties needs entries that no key can have") : 0;
    }
    tram_strbuf_addf(b, min ? " %s" : " ( %s", entry);
    if (max < 0)
        tram_strbuf_addf(b, " ( \",\" %s %s ){%lld,}", ws, entry, min ? min - 1 : 0);
    else
        tram_strbuf_addf(b, " ( \",\" %s %s ){%lld,%lld}", ws, entry, min ? min - 1 : 0, max - 1);
    tram_strbuf_addf(b, "%s \"}\"", min ? "" : " )?");
    return 0;
}

int js_gen_object(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    json_t *add = json_object_get(s, "additionalProperties");
    props *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return JS_FAIL(c, "JSON Schema: out of memory");
    ps->max = -1;
    int rc = collect(c, s, path, ps);
    if (!rc && (js_read_count(c, s, "minProperties", path, &ps->min) < 0 ||
                js_read_count(c, s, "maxProperties", path, &ps->max) < 0))
        rc = -1;
    if (!rc && ps->n && json_object_get(s, "propertyNames"))
        js_approximate(c, "propertyNames beside properties", path);
    if (!rc && ps->n == 0 && json_is_false(add) && !json_object_get(s, "patternProperties"))
        rc = js_gen_chain(c, NULL, 0, ps->min, ps->max, name, "{", "}", path, b);
    else if (!rc && ps->n == 0)
        rc = gen_map(c, s, path, name, b);
    else if (!rc)
        rc = gen_named(c, s, ps, path, name, b);
    for (int i = 0; i < ps->n; i++)
        json_decref(ps->p[i].schema);
    free(ps);
    return rc;
}
