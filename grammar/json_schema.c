/* json_schema.c — JSON Schema to GBNF (see json_schema.h): the entry
 * points, the rule of a node (normalized first, json_schema_norm.c) by its
 * type, unions and $ref (one shared rule per target), and the shared rules
 * (whitespace, strings, numbers, any value), written once at the end for
 * those that were used. */
#include "grammar/json_schema.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf_text.h"
#include "grammar/json_big_bounds.h"
#include "grammar/json_schema_gen.h"

#define MAX_DEPTH 64

/* ---------------------------------------------------------------- unions */

/* The values as alternatives of literals (one value: the literal alone,
 * which the grammar compiler folds into a trie with its neighbours). */
static int gen_enum(jsc *c, json_t *values, tram_strbuf *b)
{
    size_t i, n = json_array_size(values);
    json_t *v;
    tram_strbuf_add(b, n > 1 ? "(" : "", n > 1);
    json_array_foreach(values, i, v) {
        tram_strbuf_add(b, i ? " | " : " ", i ? 3 : 1);
        if (js_literal(c, b, v))
            return -1;
    }
    tram_strbuf_add(b, n > 1 ? " )" : "", n > 1 ? 2 : 0);
    return 0;
}

/* The normalized branch, a bare $ref followed (for the oneOf check). */
static json_t *branch_of(jsc *c, json_t *s, const char *path)
{
    json_t *n = js_normalize(c, s, path);
    for (int hops = 0; hops < 8 && json_is_object(n) && json_is_string(json_object_get(n, "$ref")); hops++) {
        json_t *t = js_resolve(c, json_string_value(json_object_get(n, "$ref")));
        json_decref(n);
        n = t ? js_normalize(c, t, path) : NULL;
    }
    return n;
}

/* The types a normalized branch can have, as js_type_bits. */
static unsigned branch_types(json_t *n)
{
    if (!json_is_object(n))
        return json_is_false(n) ? 0 : 127;
    json_t *e = json_object_get(n, "enum"), *v;
    if (json_is_array(e)) {
        unsigned bits = 0;
        size_t i;
        json_array_foreach(e, i, v)
            bits |= json_is_null(v) ? 1 : json_is_boolean(v) ? 2 : json_is_object(v) ? 4 : json_is_array(v) ? 8
                  : json_is_string(v) ? 16 : 96;
        return bits;
    }
    if (json_object_get(n, "anyOf") || json_object_get(n, "oneOf"))
        return 127;
    unsigned t = js_type_bits(json_object_get(n, "type"));
    return t & 32 ? t | 64 : t & 64 ? t | 32 : t; /* integer and number overlap */
}

/* The const/enum values of a required property key of a normalized branch. */
static json_t *tag_values(jsc *c, json_t *n, const char *key, const char *path)
{
    json_t *req = json_object_get(n, "required"), *v;
    size_t i;
    int required = 0;
    json_array_foreach(req, i, v)
        required |= json_is_string(v) && !strcmp(json_string_value(v), key);
    json_t *p = required ? json_object_get(json_object_get(n, "properties"), key) : NULL;
    json_t *pn = p ? branch_of(c, p, path) : NULL;
    json_t *e = json_is_array(json_object_get(pn, "enum")) ? json_incref(json_object_get(pn, "enum")) : NULL;
    json_decref(pn);
    return e;
}

/* 1 when some required property's const/enum values tell every branch apart. */
static int tagged(jsc *c, json_t **bs, size_t n, const char *path)
{
    const char *key;
    json_t *unused;
    json_object_foreach(json_object_get(bs[0], "properties"), key, unused) {
        json_t **tags = calloc(n, sizeof(*tags));
        int ok = tags != NULL;
        for (size_t i = 0; ok && i < n; i++)
            ok = (tags[i] = tag_values(c, bs[i], key, path)) != NULL;
        for (size_t i = 0; ok && i < n; i++)
            for (size_t j = i + 1; ok && j < n; j++) {
                size_t x;
                json_t *v;
                json_array_foreach(tags[i], x, v)
                    ok &= !js_enum_has(tags[j], v);
            }
        for (size_t i = 0; tags && i < n; i++)
            json_decref(tags[i]);
        free(tags);
        if (ok)
            return 1;
    }
    return 0;
}

/* 1 when no value can satisfy two branches: then oneOf is anyOf. */
static int disjoint(jsc *c, json_t *branches, const char *path)
{
    size_t n = json_array_size(branches);
    json_t **bs = calloc(n, sizeof(*bs));
    unsigned seen = 0;
    int apart = bs != NULL;
    for (size_t i = 0; bs && i < n; i++) {
        bs[i] = branch_of(c, json_array_get(branches, i), path);
        unsigned t = branch_types(bs[i]);
        apart &= !(t & seen);
        seen |= t;
    }
    if (bs && !apart && bs[0] && !c->failed)
        apart = 1, apart = tagged(c, bs, n, path);
    for (size_t i = 0; bs && i < n; i++)
        json_decref(bs[i]);
    free(bs);
    return apart;
}

static int gen_union(jsc *c, json_t *s, const char *key, const char *path, tram_strbuf *b)
{
    json_t *branches = json_object_get(s, key), *v;
    if (!json_is_array(branches) || json_array_size(branches) == 0)
        return JS_FAIL(c, "'%s' at %s must be a non-empty array", key, path);
    if (!strcmp(key, "oneOf") && !disjoint(c, branches, path))
        js_approximate(c, "oneOf (branches that may overlap)", path);
    size_t i;
    int n = 0;
    tram_strbuf_add(b, "(", 1);
    json_array_foreach(branches, i, v) {
        char sub[JS_PATH_MAX], idx[24], name[JS_NAME_MAX];
        snprintf(idx, sizeof(idx), "%zu", i);
        js_sub_path(sub, path, key, idx);
        int rc = js_gen(c, v, sub, name);
        if (rc < 0)
            return -1;
        if (rc == 0)
            tram_strbuf_addf(b, "%s %s", n++ ? " |" : "", name);
    }
    tram_strbuf_add(b, " )", 2);
    return n ? 0 : JS_EMPTY;
}

/* ---------------------------------------------------------------- $ref */

static js_ref_memo *memo_of(jsc *c, json_t *target)
{
    for (int i = 0; i < c->num_refs; i++)
        if (c->refs[i].target == target)
            return &c->refs[i];
    if (c->num_refs == c->cap_refs) {
        int cap = TRAM_MAX(8, 2 * c->cap_refs);
        js_ref_memo *r = realloc(c->refs, (size_t)cap * sizeof(*r));
        if (!r)
            return NULL;
        c->refs = r;
        c->cap_refs = cap;
    }
    js_ref_memo *m = &c->refs[c->num_refs++];
    *m = (js_ref_memo){.target = target, .state = -1};
    return m;
}

static int gen_into(jsc *c, json_t *s, const char *path, char *name, int fixed);

/* A bare $ref: one rule per target, however many places use it. */
static int gen_ref(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    const char *target = json_string_value(json_object_get(s, "$ref"));
    if (!target)
        return JS_FAIL(c, "'$ref' at %s must be a string", path);
    json_t *to = js_resolve(c, target);
    if (!to)
        return JS_FAIL(c, "'$ref' '%s' at %s does not point into this schema", target, path);
    js_ref_memo *m = memo_of(c, to);
    if (!m)
        return JS_FAIL(c, "JSON Schema: out of memory");
    if (m->state == JS_EMPTY)
        return JS_EMPTY;
    if (m->state >= 0) {
        m->used_while_written |= m->state == 0;
        tram_strbuf_addf(b, "%s", m->name);
        return 0;
    }
    js_new_name(c, m->name);
    m->state = 0;
    char name[JS_NAME_MAX];
    memcpy(name, m->name, sizeof(name));
    int rc = gen_into(c, to, target, name, 1);
    m = memo_of(c, to); /* the array may have moved */
    m->state = rc == 0 ? 2 : JS_EMPTY;
    if (rc == JS_EMPTY && m->used_while_written)
        return JS_FAIL(c, "the recursive schema '%s' has no valid value (%s)", target, c->empty_why);
    if (rc == 0)
        tram_strbuf_addf(b, "%s", name);
    return rc;
}

/* ---------------------------------------------------------------- by type */

/* The type a schema without "type" is generated as, from its keywords (a
 * subset of what it accepts); NULL: any value. */
static const char *infer_type(json_t *s)
{
    static const char *const object_kw[] = {"properties", "required", "additionalProperties", "patternProperties",
                                            "minProperties", "maxProperties", "dependentRequired",
                                            "propertyNames", NULL};
    static const char *const array_kw[] = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems",
                                           "contains", NULL};
    static const char *const string_kw[] = {"minLength", "maxLength", "pattern", NULL};
    static const char *const number_kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                            "multipleOf", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (js_in_list(object_kw, k)) return "object";
        if (js_in_list(array_kw, k)) return "array";
        if (js_in_list(string_kw, k)) return "string";
        if (js_in_list(number_kw, k)) return "number";
    }
    return NULL;
}

static int gen_type(jsc *c, json_t *s, const char *type, const char *path, const char *name, tram_strbuf *b)
{
    if (!strcmp(type, "string")) return js_gen_string(c, s, path, name, b);
    if (!strcmp(type, "integer")) return js_gen_integer(c, s, path, b);
    if (!strcmp(type, "number")) return js_gen_number(c, s, path, b);
    if (!strcmp(type, "object")) return js_gen_object(c, s, path, name, b);
    if (!strcmp(type, "array")) return js_gen_array(c, s, path, name, b);
    if (!strcmp(type, "boolean")) return tram_strbuf_addf(b, "( \"true\" | \"false\" )"), 0;
    if (!strcmp(type, "null")) return tram_strbuf_addf(b, "\"null\""), 0;
    return JS_FAIL(c, "unknown JSON Schema type '%s' at %s", type, path);
}

/* Each type of the list as an alternative; a type no value of which
 * satisfies the schema is left out. */
static int gen_types(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    json_t *t = json_object_get(s, "type");
    const char *inferred = t ? NULL : infer_type(s);
    if (!t && !inferred) {
        char any[JS_NAME_MAX];
        js_shared(c, JS_USE_VALUE, any, "value");
        tram_strbuf_addf(b, "%s", any);
        return 0;
    }
    if (t && !json_is_string(t) && !(json_is_array(t) && json_array_size(t) > 0))
        return JS_FAIL(c, "'type' at %s must be a string or a non-empty array", path);
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    int alts = 0;
    tram_strbuf_add(b, "(", 1);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
        if (x && !json_is_string(x))
            return JS_FAIL(c, "'type' at %s must list strings", path);
        tram_strbuf one = {0};
        int rc = gen_type(c, s, x ? json_string_value(x) : inferred, path, name, &one);
        if (rc == 0)
            tram_strbuf_addf(b, "%s %s", alts++ ? " |" : "", one.s);
        tram_strbuf_free(&one);
        if (rc < 0)
            return -1;
    }
    tram_strbuf_add(b, " )", 2);
    return alts ? 0 : JS_EMPTY;
}

static int gen_body(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
        char any[JS_NAME_MAX];
        js_shared(c, JS_USE_VALUE, any, "value");
        tram_strbuf_addf(b, "%s", any);
        return 0;
    }
    if (json_is_false(s))
        return js_empty(c, path, "it is false");
    if (json_object_get(s, "not"))
        js_approximate(c, "not", path); /* a form normalization could not express */
    if (json_object_get(s, "$ref"))
        return gen_ref(c, s, path, b);
    json_t *e = json_object_get(s, "enum");
    if (e)
        return gen_enum(c, e, b);
    if (json_object_get(s, "anyOf"))
        return gen_union(c, s, "anyOf", path, b);
    if (json_object_get(s, "oneOf"))
        return gen_union(c, s, "oneOf", path, b);
    return gen_types(c, s, path, name, b);
}

/* ---------------------------------------------------------------- rules */

/* The rule already written with this body, or NULL (then it is recorded
 * under name).  Identical bodies (a string of one maxLength, a range of
 * integers) share one rule, so their token masks are computed once. */
static const char *same_body(jsc *c, const char *body, const char *name)
{
    if (c->num_bodies * 2 >= c->cap_bodies) {
        int cap = TRAM_MAX(64, c->cap_bodies * 2);
        js_body *t = calloc((size_t)cap, sizeof(*t));
        if (!t)
            return NULL;
        for (int i = 0; i < c->cap_bodies; i++)
            for (uint64_t j = c->bodies[i].hash; c->bodies[i].text; j++)
                if (!t[j & (uint64_t)(cap - 1)].text) {
                    t[j & (uint64_t)(cap - 1)] = c->bodies[i];
                    break;
                }
        free(c->bodies);
        c->bodies = t;
        c->cap_bodies = cap;
    }
    uint64_t h = tram_fnv1a(body, strlen(body)), j = h;
    for (;; j++) {
        js_body *e = &c->bodies[j & (uint64_t)(c->cap_bodies - 1)];
        if (!e->text) {
            if ((e->text = strdup(body))) {
                e->hash = h;
                snprintf(e->name, sizeof(e->name), "%s", name);
                c->num_bodies++;
            }
            return NULL;
        }
        if (e->hash == h && !strcmp(e->text, body))
            return e->name;
    }
}

/* Writes the rule for s.  name is set by the caller when fixed (a $ref's
 * rule, already used); else it becomes the name of an identical rule
 * written before, when there is one. */
static int gen_into(jsc *c, json_t *s, const char *path, char *name, int fixed)
{
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return JS_FAIL(c, "the schema is nested more than %d deep (at %s)", MAX_DEPTH, path);
    }
    json_t *n = js_normalize(c, s, path);
    tram_strbuf body = {0};
    int rc = n ? gen_body(c, n, path, name, &body) : -1;
    if (!rc && !c->failed) {
        const char *same = same_body(c, body.s ? body.s : "", name);
        if (same && fixed)
            tram_strbuf_addf(&c->out, "%s ::= %s\n", name, same);
        else if (same)
            snprintf(name, JS_NAME_MAX, "%s", same);
        else
            tram_strbuf_addf(&c->out, "%s ::= %s\n", name, body.s ? body.s : "");
    }
    tram_strbuf_free(&body);
    json_decref(n);
    c->depth--;
    return rc < 0 || c->failed ? -1 : rc;
}

/* The writers reach this through c->gen (json_schema_gen.h). */
static int gen_node(jsc *c, json_t *s, const char *path, char *name)
{
    js_new_name(c, name);
    return gen_into(c, s, path, name, 0);
}

/* ---------------------------------------------------------------- shared rules */

static void shared_rules(jsc *c)
{
    const char *p = c->prefix;
    if (c->used & JS_USE_VALUE)
        c->used |= JS_USE_WS | JS_USE_STRING | JS_USE_NUMBER;
    if (c->used & JS_USE_WS)
        tram_strbuf_addf(&c->out, "%s-ws ::= \" \"?\n", p);
    if (c->used & JS_USE_STRING)
        tram_strbuf_addf(&c->out, "%s-string ::= \"\\\"\" " JS_JSON_CHAR "* \"\\\"\"\n", p);
    if (c->used & (JS_USE_NUMBER | JS_USE_INTEGER))
        tram_strbuf_addf(&c->out, "%s-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n", p);
    if (c->used & JS_USE_NUMBER)
        tram_strbuf_addf(&c->out, "%s-number ::= %s-integer ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?\n", p, p);
    if (c->used & JS_USE_VALUE) {
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
    free(c->refs);
    for (int i = 0; i < c->cap_bodies; i++)
        free(c->bodies[i].text);
    free(c->bodies);
    js_free_anchors(c);
    if (c->failed) {
        tram_strbuf_free(&all);
        return -1;
    }
    *gbnf_out = tram_strbuf_take(&all);
    return *gbnf_out ? 0 : tram_fail(err, "JSON Schema: out of memory");
}

int tram_json_schema_compile(const char *schema_json, const char *rule_prefix,
                             const tram_json_schema_opts *opts, tram_json_schema_result *out,
                             tram_error *err)
{
    *out = (tram_json_schema_result){.exact = 1};
    if (check_prefix(rule_prefix, err))
        return -1;
    json_error_t je;
    json_t *doc = tram_json_schema_loadb(schema_json, strlen(schema_json), JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!doc)
        return tram_fail(err, "the JSON Schema is not valid JSON: %s (line %d)", je.text, je.line);
    jsc c = {.prefix = rule_prefix, .doc = doc, .err = err, .exact = 1, .strict = opts && opts->strict,
             .pattern_pairs = JS_PATTERN_PAIRS, .gen = gen_node};
    js_read_draft(&c);
    js_index_anchors(&c);
    char root[JS_NAME_MAX];
    int rc = js_gen(&c, doc, "#", root);
    if (rc == JS_EMPTY)
        JS_FAIL(&c, "%s", c.empty_why[0] ? c.empty_why : "no value satisfies the schema");
    if (!c.exact && opts && opts->exact_only)
        JS_FAIL(&c, "%s cannot be enforced exactly by the grammar, and this output is not validated "
                    "after generation", c.approximated);
    rc = finish(&c, root, &out->gbnf, err);
    out->exact = c.exact;
    snprintf(out->approximated, sizeof(out->approximated), "%.250s", c.approximated);
    json_decref(doc);
    return rc;
}

int tram_json_schema_to_gbnf(const char *schema_json, const char *rule_prefix, char **gbnf_out,
                             tram_error *err)
{
    tram_json_schema_result r;
    int rc = tram_json_schema_compile(schema_json, rule_prefix, NULL, &r, err);
    *gbnf_out = r.gbnf;
    return rc;
}

int tram_json_object_gbnf(const char *rule_prefix, char **gbnf_out, tram_error *err)
{
    *gbnf_out = NULL;
    if (check_prefix(rule_prefix, err))
        return -1;
    jsc c = {.prefix = rule_prefix, .err = err, .used = JS_USE_VALUE};
    char root[JS_NAME_MAX];
    snprintf(root, sizeof(root), "%s-object", rule_prefix);
    return finish(&c, root, gbnf_out, err);
}
