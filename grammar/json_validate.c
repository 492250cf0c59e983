/* json_validate.c — an instance checked against a compiled schema
 * (json_validate_load.c): every keyword of the schema's draft applied in
 * turn, stopping at the first failure, which is reported with its instance
 * path and keyword.  Subschemas of anyOf, oneOf, not, if and contains are
 * tried quietly: their failures are not the instance's.  unevaluatedItems
 * and unevaluatedProperties read the annotations (which items and properties
 * some passing subschema evaluated) that the evaluation collects only when
 * the document uses them. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_equal.h"
#include "grammar/json_validate_schema.h"

enum { JV_STOP = -1, JV_FAIL = 0, JV_OK = 1 };

/* Which items / properties (in the object's iteration order) of the instance
 * at hand a passing subschema evaluated. */
typedef struct {
    uint8_t *seen;
    size_t n;
} jv_eval;

typedef struct {
    const char *key; /* NULL: idx is an array index */
    size_t key_len, idx;
} jv_segment;

typedef struct {
    const tram_jv_schema *s;
    size_t steps;
    int depth, quiet;
    tram_jv_failure *f;
    jv_segment path[TRAM_JV_MAX_DEPTH + 1];
    int npath;
    const jv_node *scope[TRAM_JV_MAX_DEPTH + 1];
    int nscope;
    pcre2_match_data *md;
    pcre2_match_context *mc;
} jv_ctx;

static void format_path(const jv_ctx *c, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < c->npath && o + 16 < cap; i++) {
        out[o++] = '/';
        if (!c->path[i].key) {
            o += (size_t)snprintf(out + o, cap - o, "%zu", c->path[i].idx);
            continue;
        }
        for (size_t k = 0; k < c->path[i].key_len && o + 3 < cap; k++) {
            char ch = c->path[i].key[k];
            if (ch == '~' || ch == '/')
                out[o++] = '~', out[o++] = ch == '~' ? '0' : '1';
            else
                out[o++] = ch;
        }
        out[o] = 0;
    }
}

__attribute__((format(printf, 3, 4))) static int fail(jv_ctx *c, const char *keyword, const char *fmt, ...)
{
    if (c->quiet || c->f->keyword[0])
        return JV_FAIL;
    format_path(c, c->f->path, sizeof(c->f->path));
    snprintf(c->f->keyword, sizeof(c->f->keyword), "%s", keyword);
    char why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    snprintf(c->f->message, sizeof(c->f->message), "at '%.200s': %.31s: %.260s", c->f->path, keyword, why);
    return JV_FAIL;
}

static int stop(jv_ctx *c, const char *why)
{
    format_path(c, c->f->path, sizeof(c->f->path));
    snprintf(c->f->keyword, sizeof(c->f->keyword), "(budget)");
    snprintf(c->f->message, sizeof(c->f->message), "at '%.200s': %.300s", c->f->path, why);
    return JV_STOP;
}

static void push_key(jv_ctx *c, const char *key, size_t len)
{
    c->path[c->npath++] = (jv_segment){key, len, 0};
}

static void push_index(jv_ctx *c, size_t i)
{
    c->path[c->npath++] = (jv_segment){NULL, 0, i};
}

static const json_t *get(const jv_node *n, const char *key)
{
    return json_object_get(n->schema, key);
}

/* ---------------------------------------------------------------- values */

/* A hash that agrees with tram_json_same (1 and 1.0 alike; members in any order). */
static uint64_t json_hash(const json_t *v)
{
    uint64_t h = (uint64_t)json_typeof(v) * 0x9e3779b97f4a7c15ULL;
    if (json_is_number(v)) {
        double d = json_number_value(v) + 0.0; /* -0.0 → 0.0 */
        uint64_t bits;
        memcpy(&bits, &d, sizeof(bits));
        return tram_mix64(bits ^ 0x1234);
    }
    if (json_is_string(v)) {
        h = tram_fnv1a_more(h, json_string_value(v), json_string_length(v));
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            h = tram_mix64(h ^ json_hash(json_array_get(v, i)));
    } else if (json_is_object(v)) {
        const char *key;
        size_t len;
        json_t *m;
        json_object_keylen_foreach((json_t *)v, key, len, m)
        {
            json_t *k = json_stringn_nocheck(key, len);
            h += tram_mix64(json_hash(k) * 31 + json_hash(m));
            json_decref(k);
        }
    }
    return tram_mix64(h);
}

typedef struct {
    uint64_t hash;
    size_t index;
} jv_hashed;

static int by_hash(const void *a, const void *b)
{
    uint64_t x = ((const jv_hashed *)a)->hash, y = ((const jv_hashed *)b)->hash;
    return (x > y) - (x < y);
}

/* uniqueItems: items sorted by hash, only equal hashes compared. */
static int unique_items(jv_ctx *c, const json_t *arr)
{
    size_t n = json_array_size(arr);
    jv_hashed *h = malloc((n ? n : 1) * sizeof(*h));
    if (!h)
        return stop(c, "out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = (jv_hashed){json_hash(json_array_get(arr, i)), i};
    qsort(h, n, sizeof(*h), by_hash);
    c->steps += n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && h[j].hash == h[i].hash; j++) {
            if (++c->steps > TRAM_JV_MAX_STEPS) {
                free(h);
                return stop(c, "validation ran past its step budget");
            }
            if (tram_json_same(json_array_get(arr, h[i].index), json_array_get(arr, h[j].index))) {
                size_t a = TRAM_MIN(h[i].index, h[j].index), b = TRAM_MAX(h[i].index, h[j].index);
                free(h);
                return fail(c, "uniqueItems", "items %zu and %zu are equal", a, b);
            }
        }
    free(h);
    return JV_OK;
}

/* ---------------------------------------------------------------- annotations */

static int eval_init(jv_ctx *c, jv_eval *e, const json_t *inst)
{
    e->n = json_is_array(inst) ? json_array_size(inst) : json_object_size(inst);
    e->seen = calloc(e->n ? e->n : 1, 1);
    return e->seen ? JV_OK : stop(c, "out of memory");
}

static void mark(jv_eval *e, size_t i)
{
    if (e && i < e->n)
        e->seen[i] = 1;
}

static void merge(jv_eval *into, const jv_eval *from)
{
    for (size_t i = 0; into && i < into->n && i < from->n; i++)
        into->seen[i] |= from->seen[i];
}

/* ---------------------------------------------------------------- keywords */

static int eval(jv_ctx *c, const json_t *schema, json_t *inst, jv_eval *ev);

static int eval_child(jv_ctx *c, const json_t *schema, json_t *inst, const char *key, size_t len, size_t idx)
{
    if (key)
        push_key(c, key, len);
    else
        push_index(c, idx);
    int r = eval(c, schema, inst, NULL);
    c->npath--;
    return r;
}

/* A subschema on a member or item; `false` there fails as the keyword that
 * holds it (additionalProperties, items, ...) rather than as "false". */
static int eval_at(jv_ctx *c, const json_t *schema, json_t *inst, const char *key, size_t len, size_t idx,
                   const char *kw)
{
    if (!json_is_false(schema))
        return eval_child(c, schema, inst, key, len, idx);
    if (key)
        push_key(c, key, len);
    else
        push_index(c, idx);
    int r = fail(c, kw, "not allowed here");
    c->npath--;
    return r;
}

static int type_is(const jv_ctx *c, const json_t *inst, const char *t)
{
    if (!strcmp(t, "integer"))
        return json_is_integer(inst) || (c->s->draft > JV_DRAFT4 && json_is_real(inst) &&
                                         json_real_value(inst) == floor(json_real_value(inst)));
    static const struct {
        const char *name;
        int type;
    } names[] = {{"null", JSON_NULL}, {"object", JSON_OBJECT}, {"array", JSON_ARRAY}, {"string", JSON_STRING}};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(names); i++)
        if (!strcmp(t, names[i].name))
            return (int)json_typeof(inst) == names[i].type;
    return !strcmp(t, "boolean") ? json_is_boolean(inst) : !strcmp(t, "number") && json_is_number(inst);
}

static int check_type(jv_ctx *c, const jv_node *n, const json_t *inst)
{
    const json_t *type = get(n, "type");
    if (!type)
        return JV_OK;
    if (json_is_string(type))
        return type_is(c, inst, json_string_value(type)) ? JV_OK
                                                         : fail(c, "type", "not of type %s", json_string_value(type));
    for (size_t i = 0; i < json_array_size(type); i++)
        if (type_is(c, inst, json_string_value(json_array_get(type, i))))
            return JV_OK;
    return fail(c, "type", "not of any of the listed types");
}

static int check_enum_const(jv_ctx *c, const jv_node *n, const json_t *inst)
{
    const json_t *en = get(n, "enum"), *cn = c->s->draft >= JV_DRAFT6 ? get(n, "const") : NULL;
    c->steps += json_array_size(en);
    if (cn && !tram_json_same(cn, inst))
        return fail(c, "const", "not equal to the constant");
    if (!en)
        return JV_OK;
    for (size_t i = 0; i < json_array_size(en); i++)
        if (tram_json_same(json_array_get(en, i), inst))
            return JV_OK;
    return fail(c, "enum", "not one of the %zu allowed values", json_array_size(en));
}

static int multiple_of(const json_t *x, const json_t *m)
{
    if (json_is_integer(x) && json_is_integer(m))
        return json_integer_value(x) % json_integer_value(m) == 0;
    if (json_is_real(m)) {
        double q = json_number_value(x) / json_real_value(m);
        return isfinite(q) && q == floor(q);
    }
    return fmod(json_number_value(x), json_number_value(m)) == 0;
}

/* bound: the keyword's value; sign: +1 for a maximum; exclusive: equality fails too. */
static int check_bound(jv_ctx *c, const json_t *inst, const json_t *bound, int sign, int exclusive, const char *kw)
{
    if (!bound)
        return JV_OK;
    int cmp = tram_json_number_cmp(inst, bound) * sign;
    if (cmp > 0 || (exclusive && cmp == 0))
        return fail(c, kw, "%g is %s %g", json_number_value(inst),
                    sign > 0 ? (exclusive ? "not below" : "above") : (exclusive ? "not above" : "below"),
                    json_number_value(bound));
    return JV_OK;
}

static int check_number(jv_ctx *c, const jv_node *n, const json_t *inst)
{
    const json_t *m = get(n, "multipleOf");
    if (m && !multiple_of(inst, m))
        return fail(c, "multipleOf", "%g is not a multiple of %g", json_number_value(inst), json_number_value(m));
    const json_t *xmax = get(n, "exclusiveMaximum"), *xmin = get(n, "exclusiveMinimum");
    if (json_is_boolean(xmax) || json_is_boolean(xmin) || c->s->draft == JV_DRAFT4) /* draft 4's form */
        return check_bound(c, inst, get(n, "maximum"), 1, json_is_true(xmax), "maximum") &&
               check_bound(c, inst, get(n, "minimum"), -1, json_is_true(xmin), "minimum") &&
               (json_is_boolean(xmax) || check_bound(c, inst, xmax, 1, 1, "exclusiveMaximum")) &&
               (json_is_boolean(xmin) || check_bound(c, inst, xmin, -1, 1, "exclusiveMinimum"));
    return check_bound(c, inst, get(n, "maximum"), 1, 0, "maximum") &&
           check_bound(c, inst, get(n, "minimum"), -1, 0, "minimum") &&
           check_bound(c, inst, xmax, 1, 1, "exclusiveMaximum") && check_bound(c, inst, xmin, -1, 1, "exclusiveMinimum");
}

/* A regex search (not anchored, as JSON Schema's pattern is). */
static int regex_search(jv_ctx *c, const pcre2_code *re, const char *s, size_t len)
{
    c->steps++;
    int rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, PCRE2_NO_UTF_CHECK, c->md, c->mc);
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH)
        return rc >= 0 ? JV_OK : JV_FAIL;
    return stop(c, "a pattern ran past its match limit");
}

static int check_string(jv_ctx *c, const jv_node *n, const json_t *inst)
{
    const char *s = json_string_value(inst);
    size_t bytes = json_string_length(inst), chars = 0;
    for (size_t i = 0; i < bytes; i++)
        chars += ((uint8_t)s[i] & 0xC0) != 0x80;
    const json_t *lo = get(n, "minLength"), *hi = get(n, "maxLength");
    if (lo && chars < json_number_value(lo))
        return fail(c, "minLength", "%zu characters, fewer than %g", chars, json_number_value(lo));
    if (hi && chars > json_number_value(hi))
        return fail(c, "maxLength", "%zu characters, more than %g", chars, json_number_value(hi));
    if (n->pattern) {
        int r = regex_search(c, n->pattern, s, bytes);
        if (r != JV_OK)
            return r == JV_STOP ? r : fail(c, "pattern", "does not match %s", json_string_value(get(n, "pattern")));
    }
    const char *format = json_string_value(get(n, "format"));
    int known;
    if (format && c->s->assert_formats && !jv_format_ok(format, s, bytes, &known))
        return fail(c, "format", "not a valid %s", format);
    return JV_OK;
}

static int check_contains(jv_ctx *c, const jv_node *n, json_t *arr, jv_eval *ev)
{
    const json_t *contains = get(n, "contains");
    if (!contains)
        return JV_OK;
    int counted = c->s->draft >= JV_DRAFT2019;
    const json_t *lo = counted ? get(n, "minContains") : NULL, *hi = counted ? get(n, "maxContains") : NULL;
    double min = lo ? json_number_value(lo) : 1;
    size_t found = 0;
    c->quiet++;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        int r = eval(c, contains, json_array_get(arr, i), NULL);
        if (r == JV_STOP)
            return c->quiet--, r;
        if (r == JV_OK) {
            found++;
            if (c->s->draft == JV_DRAFT2020)
                mark(ev, i);
            else if (!hi && found >= min)
                break;
        }
    }
    c->quiet--;
    if (found < min)
        return fail(c, lo ? "minContains" : "contains", "%zu items match contains, fewer than %g", found, min);
    if (hi && found > json_number_value(hi))
        return fail(c, "maxContains", "%zu items match contains, more than %g", found, json_number_value(hi));
    return JV_OK;
}

static int check_items(jv_ctx *c, const jv_node *n, json_t *arr, jv_eval *ev)
{
    const json_t *items = get(n, "items"), *prefix = NULL, *rest = items;
    if (json_is_array(items))
        prefix = items, rest = get(n, "additionalItems");
    else if (c->s->draft == JV_DRAFT2020)
        prefix = get(n, "prefixItems");
    size_t len = json_array_size(arr), np = json_array_size(prefix);
    for (size_t i = 0; i < len; i++) {
        const json_t *sub = i < np ? json_array_get(prefix, i) : rest;
        if (!sub)
            break;
        int r = eval_at(c, sub, json_array_get(arr, i), NULL, 0, i, i < np ? "prefixItems" : json_is_array(items) ? "additionalItems" : "items");
        if (r != JV_OK)
            return r;
        mark(ev, i);
    }
    return JV_OK;
}

/* minItems/maxItems and minProperties/maxProperties: the same bounds on a
 * count of what (items, properties). */
static int check_count(jv_ctx *c, const jv_node *n, size_t count, const char *min_key, const char *max_key,
                       const char *what)
{
    const json_t *lo = get(n, min_key), *hi = get(n, max_key);
    if (lo && count < json_number_value(lo))
        return fail(c, min_key, "%zu %s, fewer than %g", count, what, json_number_value(lo));
    if (hi && count > json_number_value(hi))
        return fail(c, max_key, "%zu %s, more than %g", count, what, json_number_value(hi));
    return JV_OK;
}

static int check_array(jv_ctx *c, const jv_node *n, json_t *arr, jv_eval *ev)
{
    int r = check_count(c, n, json_array_size(arr), "minItems", "maxItems", "items");
    if (r != JV_OK)
        return r;
    if (json_is_true(get(n, "uniqueItems")) && (r = unique_items(c, arr)) != JV_OK)
        return r;
    if ((r = check_items(c, n, arr, ev)) != JV_OK)
        return r;
    return c->s->draft >= JV_DRAFT6 ? check_contains(c, n, arr, ev) : JV_OK;
}

static int check_required(jv_ctx *c, const json_t *names, const json_t *obj, const char *kw)
{
    for (size_t i = 0; i < json_array_size(names); i++) {
        const json_t *name = json_array_get(names, i);
        if (json_is_string(name) && !json_object_getn(obj, json_string_value(name), json_string_length(name)))
            return fail(c, kw, "property '%s' is missing", json_string_value(name));
    }
    return JV_OK;
}

/* dependencies (any draft), dependentRequired and dependentSchemas (2019-09
 * on): what a present property brings with it. */
static int check_dependencies(jv_ctx *c, const jv_node *n, json_t *obj, jv_eval *ev)
{
    static const char *keys[] = {"dependencies", "dependentRequired", "dependentSchemas"};
    for (int k = 0; k < 3; k++) {
        const json_t *deps = (k == 0 || c->s->draft >= JV_DRAFT2019) ? get(n, keys[k]) : NULL;
        const char *name;
        json_t *dep;
        json_object_foreach((json_t *)deps, name, dep)
        {
            if (!json_object_get(obj, name))
                continue;
            int r = json_is_array(dep) ? check_required(c, dep, obj, keys[k]) : eval(c, dep, obj, ev);
            if (r != JV_OK)
                return r;
        }
    }
    return JV_OK;
}

static int check_property_names(jv_ctx *c, const jv_node *n, json_t *obj)
{
    const json_t *names = c->s->draft >= JV_DRAFT6 ? get(n, "propertyNames") : NULL;
    const char *key;
    size_t len;
    json_t *v;
    if (names)
        json_object_keylen_foreach(obj, key, len, v)
        {
            json_t *k = json_stringn_nocheck(key, len);
            int r = k ? eval_child(c, names, k, key, len, 0) : stop(c, "out of memory");
            json_decref(k);
            if (r != JV_OK)
                return r;
        }
    return JV_OK;
}

/* properties, patternProperties, additionalProperties, member by member. */
static int check_members(jv_ctx *c, const jv_node *n, json_t *obj, jv_eval *ev)
{
    const json_t *props = get(n, "properties"), *patterns = get(n, "patternProperties");
    const json_t *extra = get(n, "additionalProperties");
    const char *key;
    size_t len, i = 0;
    json_t *v;
    json_object_keylen_foreach(obj, key, len, v)
    {
        const json_t *sub = props ? json_object_getn(props, key, len) : NULL;
        int r, matched = sub != NULL;
        if (sub && (r = eval_child(c, sub, v, key, len, 0)) != JV_OK)
            return r;
        const char *pattern;
        json_t *psub;
        json_object_foreach((json_t *)patterns, pattern, psub)
        {
            if ((r = regex_search(c, jv_regex(c->s, pattern), key, len)) == JV_STOP)
                return r;
            if (r == JV_OK && (matched = 1) && (r = eval_child(c, psub, v, key, len, 0)) != JV_OK)
                return r;
        }
        if (!matched && extra && (r = eval_at(c, extra, v, key, len, 0, "additionalProperties")) != JV_OK)
            return r;
        if (matched || extra)
            mark(ev, i);
        i++;
    }
    return JV_OK;
}

static int check_object(jv_ctx *c, const jv_node *n, json_t *obj, jv_eval *ev)
{
    int r = check_count(c, n, json_object_size(obj), "minProperties", "maxProperties", "properties");
    if (r == JV_OK)
        r = check_required(c, get(n, "required"), obj, "required");
    if (r == JV_OK)
        r = check_members(c, n, obj, ev);
    if (r == JV_OK)
        r = check_property_names(c, n, obj);
    return r == JV_OK ? check_dependencies(c, n, obj, ev) : r;
}

/* allOf, anyOf, oneOf, not, if/then/else: subschemas on the same instance. */
static int check_combinators(jv_ctx *c, const jv_node *n, json_t *inst, jv_eval *ev)
{
    const json_t *all = get(n, "allOf"), *any = get(n, "anyOf"), *one = get(n, "oneOf"), *not = get(n, "not");
    int r;
    for (size_t i = 0; i < json_array_size(all); i++)
        if ((r = eval(c, json_array_get(all, i), inst, ev)) != JV_OK)
            return r;
    if (any) {
        size_t passed = 0;
        c->quiet++;
        for (size_t i = 0; i < json_array_size(any) && !(passed && !ev); i++) {
            if ((r = eval(c, json_array_get(any, i), inst, ev)) == JV_STOP)
                return c->quiet--, r;
            passed += r == JV_OK; /* with annotations wanted, every passing branch adds its own */
        }
        c->quiet--;
        if (!passed)
            return fail(c, "anyOf", "matches none of the %zu subschemas", json_array_size(any));
    }
    if (one) {
        size_t passed = 0;
        c->quiet++;
        for (size_t i = 0; i < json_array_size(one) && passed < 2; i++) {
            if ((r = eval(c, json_array_get(one, i), inst, ev)) == JV_STOP)
                return c->quiet--, r;
            passed += r == JV_OK;
        }
        c->quiet--;
        if (passed != 1)
            return fail(c, "oneOf", passed ? "matches more than one subschema" : "matches none of the subschemas");
    }
    if (not) {
        c->quiet++;
        r = eval(c, not, inst, NULL);
        c->quiet--;
        if (r != JV_FAIL)
            return r == JV_STOP ? r : fail(c, "not", "matches the schema it must not");
    }
    const json_t *cond = c->s->draft >= JV_DRAFT7 ? get(n, "if") : NULL;
    if (!cond)
        return JV_OK;
    c->quiet++;
    r = eval(c, cond, inst, ev);
    c->quiet--;
    if (r == JV_STOP)
        return r;
    const json_t *branch = get(n, r == JV_OK ? "then" : "else");
    return branch ? eval(c, branch, inst, ev) : JV_OK;
}

static int check_unevaluated(jv_ctx *c, const jv_node *n, json_t *inst, jv_eval *ev)
{
    const json_t *items = get(n, "unevaluatedItems"), *props = get(n, "unevaluatedProperties");
    int r;
    if (items && json_is_array(inst))
        for (size_t i = 0; i < json_array_size(inst); i++) {
            if (ev->seen[i])
                continue;
            if ((r = eval_at(c, items, json_array_get(inst, i), NULL, 0, i, "unevaluatedItems")) != JV_OK)
                return r;
            ev->seen[i] = 1;
        }
    const char *key;
    size_t len, i = 0;
    json_t *v;
    if (props && json_is_object(inst))
        json_object_keylen_foreach(inst, key, len, v)
        {
            if (!ev->seen[i] && (r = eval_at(c, props, v, key, len, 0, "unevaluatedProperties")) != JV_OK)
                return r;
            ev->seen[i++] = 1;
        }
    return JV_OK;
}

/* The target of $recursiveRef / $dynamicRef: the static one, or the
 * outermost schema in the dynamic scope that re-anchors it. */
static const json_t *dynamic_target(const jv_ctx *c, const jv_node *n, int recursive)
{
    const jv_ref *ref = recursive ? &n->recursive_ref : &n->dynamic_ref;
    const jv_node *t = jv_map_get_ptr(&c->s->nodes, ref->target);
    if (recursive && !(t && t->recursive_anchor))
        return ref->target;
    if (!recursive && !ref->dyn_anchor)
        return ref->target;
    for (int i = 0; i < c->nscope; i++) {
        if (recursive && c->scope[i]->recursive_anchor)
            return c->scope[i]->schema;
        char key[1024];
        if (!recursive && snprintf(key, sizeof(key), "%s#%s", c->scope[i]->base, ref->dyn_anchor) < (int)sizeof(key)) {
            const json_t *found = jv_map_get_str(&c->s->dyn_anchors, key);
            if (found)
                return found;
        }
    }
    return ref->target;
}

static int check_refs(jv_ctx *c, const jv_node *n, json_t *inst, jv_eval *ev)
{
    int r = JV_OK;
    if (n->ref.target)
        r = eval(c, n->ref.target, inst, ev);
    if (r == JV_OK && n->recursive_ref.target)
        r = eval(c, dynamic_target(c, n, 1), inst, ev);
    if (r == JV_OK && n->dynamic_ref.target)
        r = eval(c, dynamic_target(c, n, 0), inst, ev);
    return r;
}

static int check_keywords(jv_ctx *c, const jv_node *n, json_t *inst, jv_eval *ev)
{
    if (n->ref.target && c->s->draft <= JV_DRAFT7)
        return eval(c, n->ref.target, inst, ev); /* its siblings are ignored */
    int r = check_refs(c, n, inst, ev);
    if (r == JV_OK)
        r = check_type(c, n, inst);
    if (r == JV_OK)
        r = check_enum_const(c, n, inst);
    if (r == JV_OK && json_is_number(inst))
        r = check_number(c, n, inst);
    if (r == JV_OK && json_is_string(inst))
        r = check_string(c, n, inst);
    if (r == JV_OK && json_is_array(inst))
        r = check_array(c, n, inst, ev);
    if (r == JV_OK && json_is_object(inst))
        r = check_object(c, n, inst, ev);
    if (r == JV_OK)
        r = check_combinators(c, n, inst, ev);
    if (r == JV_OK && ev && c->s->draft >= JV_DRAFT2019)
        r = check_unevaluated(c, n, inst, ev);
    return r;
}

static int eval(jv_ctx *c, const json_t *schema, json_t *inst, jv_eval *ev)
{
    if (++c->steps > TRAM_JV_MAX_STEPS)
        return stop(c, "validation ran past its step budget");
    if (json_is_boolean(schema))
        return json_is_true(schema) ? JV_OK : fail(c, "false", "the schema false allows nothing");
    const jv_node *n = jv_map_get_ptr(&c->s->nodes, schema);
    if (!n)
        return stop(c, "a subschema the loader did not reach"); /* cannot happen: load walks every one */
    if (c->depth >= TRAM_JV_MAX_DEPTH || c->npath >= TRAM_JV_MAX_DEPTH)
        return stop(c, "validation nested too deep (a schema that refers to itself without progress?)");
    c->depth++;
    if (n->is_resource)
        c->scope[c->nscope++] = n;
    jv_eval own = {NULL, 0};
    int collect = c->s->uses_unevaluated && (json_is_array(inst) || json_is_object(inst));
    int r = collect ? eval_init(c, &own, inst) : JV_OK;
    if (r == JV_OK)
        r = check_keywords(c, n, inst, collect ? &own : NULL);
    if (r == JV_OK && ev)
        merge(ev, &own);
    free(own.seen);
    if (n->is_resource)
        c->nscope--;
    c->depth--;
    return r;
}

/* ---------------------------------------------------------------- public */

static json_t *load_instance(const char *text, size_t len, tram_jv_failure *f)
{
    json_error_t je;
    size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES;
    json_t *v = json_loadb(text, len, flags, &je);
    if (!v && strstr(je.text, "too big"))
        v = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, &je); /* integers past 64 bits */
    if (!v)
        snprintf(f->message, sizeof(f->message), "the instance is not JSON: %s (line %d)", je.text, je.line);
    return v;
}

int tram_jv_check(const tram_jv_schema *s, const char *instance, size_t len, tram_jv_failure *f)
{
    memset(f, 0, sizeof(*f));
    json_t *inst = load_instance(instance, len, f);
    if (!inst)
        return -1;
    jv_ctx *c = calloc(1, sizeof(*c));
    if (c) {
        c->md = pcre2_match_data_create(1, NULL);
        c->mc = pcre2_match_context_create(NULL);
    }
    int r = JV_STOP;
    if (!c || !c->md || !c->mc)
        snprintf(f->message, sizeof(f->message), "out of memory");
    else {
        pcre2_set_match_limit(c->mc, 1000000);
        pcre2_set_depth_limit(c->mc, 10000);
        c->s = s, c->f = f;
        r = eval(c, s->doc, inst, NULL);
    }
    if (c) {
        pcre2_match_data_free(c->md);
        pcre2_match_context_free(c->mc);
    }
    free(c);
    json_decref(inst);
    return r == JV_OK ? 0 : r == JV_FAIL ? 1 : -1;
}

int tram_json_validate(const char *schema_json, const char *instance_json, char *err, size_t errlen)
{
    tram_jv_schema *s;
    tram_error e = {{0}};
    if (tram_jv_compile(schema_json, strlen(schema_json), &s, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    tram_jv_failure f;
    int r = tram_jv_check(s, instance_json, strlen(instance_json), &f);
    snprintf(err, errlen, "%s", r ? f.message : "");
    tram_jv_free(s);
    return r;
}
