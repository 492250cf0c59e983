/* json_schema_norm.c — a schema node in the compiler's form (see
 * json_schema_gen.h): 2020-12 keywords only, no annotations, allOf merged,
 * keywords beside $ref merged with its target, keywords beside anyOf/oneOf
 * merged into each branch, const as a one-value enum, an enum filtered by
 * its siblings, the common forms of not and if/then/else expressed.  The
 * result is a new reference; false when no value satisfies the node. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema_gen.h"

#define MAX_MERGE_DEPTH 32

/* Keywords that assert something, in any draft; the rest is annotation. */
static const char *const asserted[] = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "contains",
    "maxContains", "minContains", "maxProperties", "minProperties", "required", "dependentRequired",
    "dependentSchemas", "dependencies", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "prefixItems", "items", "additionalItems", "properties", "patternProperties", "additionalProperties",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties", "$ref", "$dynamicRef", "$recursiveRef",
    NULL,
};

/* The specification's own annotations and identifiers (kept out of the
 * output even with strict: they are not unknown). */
static const char *const annotations[] = {
    "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "$comment",
    "$defs", "definitions", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly", "contentEncoding", "contentMediaType", "contentSchema", NULL,
};

int js_read_draft(jsc *c)
{
    json_t *s = json_is_object(c->doc) ? json_object_get(c->doc, "$schema") : NULL;
    const char *u = json_is_string(s) ? json_string_value(s) : "";
    c->draft = strstr(u, "draft-04") || strstr(u, "draft-03") ? 4 : strstr(u, "draft-06") ? 6
             : strstr(u, "draft-07") ? 7 : strstr(u, "2019-09") ? 2019 : 2020;
    return 0;
}

/* ---------------------------------------------------------------- references */

static void add_anchor(jsc *c, const char *uri, json_t *node)
{
    js_anchor *a = realloc(c->anchors, (size_t)(c->num_anchors + 1) * sizeof(*a));
    if (!a)
        return;
    c->anchors = a;
    if ((a[c->num_anchors].uri = strdup(uri)))
        a[c->num_anchors++].node = node;
}

/* Every $id (draft-4 id), $anchor and $dynamicAnchor of the document's
 * schemas; instance values (enum, const, default, examples) are skipped. */
static void index_node(jsc *c, json_t *s, int depth)
{
    static const char *const values[] = {"enum", "const", "default", "examples", NULL};
    if (depth > 64)
        return;
    if (json_is_array(s)) {
        size_t i;
        json_t *v;
        json_array_foreach(s, i, v)
            index_node(c, v, depth + 1);
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        char anchor[JS_PATH_MAX];
        if (json_is_string(v) && (!strcmp(k, "$id") || (!strcmp(k, "id") && c->draft == 4)))
            add_anchor(c, json_string_value(v), s);
        if (json_is_string(v) && (!strcmp(k, "$anchor") || !strcmp(k, "$dynamicAnchor"))) {
            snprintf(anchor, sizeof(anchor), "#%s", json_string_value(v));
            add_anchor(c, anchor, s);
        }
        if ((json_is_object(v) || json_is_array(v)) && !js_in_list(values, k))
            index_node(c, v, depth + 1);
    }
}

int js_index_anchors(jsc *c)
{
    index_node(c, c->doc, 0);
    return 0;
}

void js_free_anchors(jsc *c)
{
    for (int i = 0; i < c->num_anchors; i++)
        free(c->anchors[i].uri);
    free(c->anchors);
}

static int hex(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* A JSON pointer (percent-escapes already decoded) from node. */
static json_t *follow_pointer(json_t *cur, const char *p)
{
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
            cur = *end || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = json_object_get(cur, seg);
        }
    }
    return *p ? NULL : cur;
}

static const char *last_segment(const char *u, size_t n, size_t *len)
{
    const char *slash = memrchr(u, '/', n);
    *len = slash ? n - (size_t)(slash + 1 - u) : n;
    return slash ? slash + 1 : u;
}

/* The node an $id names: the same text, or else the same last path
 * segment ("item.json" for "https://example.com/schemas/item.json"). */
static json_t *find_id(jsc *c, const char *base, size_t n)
{
    size_t blen, ulen;
    const char *b = last_segment(base, n, &blen);
    for (int i = 0; i < c->num_anchors; i++)
        if (strlen(c->anchors[i].uri) == n && !strncmp(c->anchors[i].uri, base, n))
            return c->anchors[i].node;
    for (int i = 0; base[0] != '#' && i < c->num_anchors; i++) {
        const char *u = last_segment(c->anchors[i].uri, strlen(c->anchors[i].uri), &ulen);
        if (ulen == blen && blen && !strncmp(u, b, blen))
            return c->anchors[i].node;
    }
    return NULL;
}

json_t *js_resolve(jsc *c, const char *ref)
{
    const char *hash = strchr(ref, '#');
    size_t base_len = hash ? (size_t)(hash - ref) : strlen(ref);
    json_t *root = base_len ? find_id(c, ref, base_len) : c->doc;
    if (!root || !hash || !hash[1])
        return root;
    char frag[JS_PATH_MAX];
    size_t n = 0;
    for (const char *p = hash + 1; *p && n + 1 < sizeof(frag); p++) {
        int hi = p[0] == '%' ? hex(p[1]) : -1, lo = hi >= 0 ? hex(p[2]) : -1;
        frag[n++] = lo >= 0 ? (char)(hi * 16 + lo) : *p;
        p += lo >= 0 ? 2 : 0;
    }
    frag[n] = 0;
    if (frag[0] == '/')
        return follow_pointer(root, frag);
    char anchor[JS_PATH_MAX + 2];
    snprintf(anchor, sizeof(anchor), "#%s", frag);
    return find_id(c, anchor, strlen(anchor));
}

/* ---------------------------------------------------------------- the draft's words */

static int unknown_keyword(jsc *c, const char *k, const char *path)
{
    if (!c->strict || !strncmp(k, "x-", 2))
        return 0;
    return JS_FAIL(c, "unknown JSON Schema keyword '%s' at %s (strict_schema: unknown keywords are errors)", k,
                   path);
}

/* dependencies: the array form is dependentRequired, the schema form
 * dependentSchemas. */
static void split_dependencies(json_t *out, json_t *deps)
{
    const char *k;
    json_t *v;
    json_object_foreach(deps, k, v) {
        const char *to = json_is_array(v) ? "dependentRequired" : "dependentSchemas";
        json_t *m = json_object_get(out, to);
        if (!m)
            json_object_set_new(out, to, m = json_object());
        json_object_set(m, k, v);
    }
}

/* A draft-4 boolean exclusive bound becomes 2020-12's number. */
static void exclusive_bound(json_t *out, const char *excl, const char *bound)
{
    json_t *e = json_object_get(out, excl), *b = json_object_get(out, bound);
    if (!json_is_boolean(e))
        return;
    if (json_is_true(e) && b) {
        json_object_set(out, excl, b);
        json_object_del(out, bound);
    } else {
        json_object_del(out, excl);
    }
}

/* The value an asserting keyword must have (the meta-schema's types): a
 * schema (object or boolean), a map of schemas, a list of schemas, ... */
static int check_value(jsc *c, const char *k, json_t *v, const char *path)
{
    static const char *const schema_kw[] = {"not", "if", "then", "else", "additionalItems", "additionalProperties",
                                            "propertyNames", "contains", "unevaluatedItems",
                                            "unevaluatedProperties", NULL};
    static const char *const map_kw[] = {"properties", "patternProperties", "dependentSchemas",
                                         "dependentRequired", "dependencies", NULL};
    static const char *const list_kw[] = {"allOf", "anyOf", "oneOf", "prefixItems", NULL};
    static const char *const number_kw[] = {"multipleOf", "maximum", "minimum", "maxLength", "minLength",
                                            "maxItems", "minItems", "maxContains", "minContains",
                                            "maxProperties", "minProperties", NULL};
    int is_schema = json_is_object(v) || json_is_boolean(v);
    const char *want = NULL;
    if (js_in_list(schema_kw, k) && !is_schema)
        want = "a schema (an object or a boolean)";
    else if (!strcmp(k, "items") && !is_schema && !json_is_array(v))
        want = "a schema or an array of schemas";
    else if (js_in_list(map_kw, k) && !json_is_object(v))
        want = "an object";
    else if (js_in_list(list_kw, k) && (!json_is_array(v) || json_array_size(v) == 0))
        want = "a non-empty array";
    else if ((!strcmp(k, "required") || !strcmp(k, "enum")) && !json_is_array(v))
        want = "an array";
    else if (js_in_list(number_kw, k) && !json_is_number(v))
        want = "a number";
    else if ((!strcmp(k, "exclusiveMinimum") || !strcmp(k, "exclusiveMaximum")) && !json_is_number(v) &&
             !json_is_boolean(v))
        want = "a number (or, in draft 4, a boolean)";
    else if (!strcmp(k, "uniqueItems") && !json_is_boolean(v))
        want = "a boolean";
    else if ((!strcmp(k, "pattern") || !strcmp(k, "$ref") || !strcmp(k, "$dynamicRef") ||
              !strcmp(k, "$recursiveRef") || !strcmp(k, "format")) && !json_is_string(v))
        want = "a string";
    else if (!strcmp(k, "type") && !json_is_string(v) && !json_is_array(v))
        want = "a string or an array";
    return want ? JS_FAIL(c, "'%s' at %s must be %s", k, path, want) : 0;
}

/* The node's asserting keywords, in 2020-12's words. */
static json_t *translate(jsc *c, json_t *s, const char *path)
{
    json_t *out = json_object(), *v;
    const char *k;
    json_t *items = json_object_get(s, "items");
    json_object_foreach(s, k, v) {
        if (!js_in_list(asserted, k)) {
            if (!js_in_list(annotations, k) && unknown_keyword(c, k, path)) {
                json_decref(out);
                return NULL;
            }
        } else if (check_value(c, k, v, path)) {
            json_decref(out);
            return NULL;
        } else if (!strcmp(k, "items") && json_is_array(v)) {
            json_object_set(out, "prefixItems", v);
        } else if (!strcmp(k, "additionalItems")) {
            if (json_is_array(items))
                json_object_set(out, "items", v);
        } else if (!strcmp(k, "dependencies")) {
            split_dependencies(out, v);
        } else if (!strcmp(k, "const")) {
            json_object_set_new(out, "enum", json_pack("[O]", v));
        } else if (!strcmp(k, "$dynamicRef") || !strcmp(k, "$recursiveRef")) {
            js_approximate(c, k, path); /* its static target; the dynamic scope is not followed */
            json_object_set(out, "$ref", v);
        } else if (strcmp(k, "items") || !json_object_get(out, "items")) {
            json_object_set(out, k, v);
        }
    }
    exclusive_bound(out, "exclusiveMinimum", "minimum");
    exclusive_bound(out, "exclusiveMaximum", "maximum");
    return out;
}

/* ---------------------------------------------------------------- enums */

static int string_fits(json_t *s, json_t *v)
{
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *)json_string_value(v); *p; p++)
        len += (*p & 0xC0) != 0x80;
    json_t *min = json_object_get(s, "minLength"), *max = json_object_get(s, "maxLength");
    json_t *pat = json_object_get(s, "pattern");
    if ((min && (double)len < json_number_value(min)) || (max && (double)len > json_number_value(max)))
        return 0;
    if (!json_is_string(pat))
        return 1;
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)json_string_value(pat), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code,
                                   &off, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)json_string_value(v), json_string_length(v), 0, 0, md, NULL) : 0;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static int number_fits(json_t *s, json_t *v)
{
    double x = json_number_value(v);
    json_t *b;
    return !((b = json_object_get(s, "minimum")) && x < json_number_value(b)) &&
           !((b = json_object_get(s, "maximum")) && x > json_number_value(b)) &&
           !((b = json_object_get(s, "exclusiveMinimum")) && x <= json_number_value(b)) &&
           !((b = json_object_get(s, "exclusiveMaximum")) && x >= json_number_value(b));
}

static unsigned value_type(json_t *v)
{
    return json_is_null(v) ? 1 : json_is_boolean(v) ? 2 : json_is_object(v) ? 4 : json_is_array(v) ? 8
         : json_is_string(v) ? 16 : json_is_integer(v) || json_number_value(v) == (double)(long long)json_number_value(v) ? 32
         : 64;
}

/* Keywords an enum's values are checked against here; beside any other,
 * the values stay and the end validation decides. */
static const char *const enum_checked[] = {"enum", "type", "minLength", "maxLength", "pattern", "minimum",
                                           "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};

/* {"enum": the values that satisfy the node}, or false. */
static json_t *filter_enum(jsc *c, json_t *s, const char *path)
{
    json_t *values = json_object_get(s, "enum"), *kept = json_array(), *v;
    unsigned types = js_type_bits(json_object_get(s, "type"));
    const char *k;
    size_t i;
    if (!json_is_array(values)) {
        json_decref(kept);
        JS_FAIL(c, "'enum' at %s must be an array", path);
        return NULL;
    }
    json_object_foreach(s, k, v)
        if (!js_in_list(enum_checked, k))
            js_approximate(c, k, path);
    json_array_foreach(values, i, v) {
        unsigned t = value_type(v);
        if (!(types & t) || (t == 16 && !string_fits(s, v)) || ((t & 96) && !number_fits(s, v)))
            continue;
        json_array_append(kept, v);
    }
    if (json_array_size(kept) == 0) {
        json_decref(kept);
        js_empty(c, path, "no value of its enum (or const) satisfies its other keywords");
        return json_false();
    }
    json_t *out = json_pack("{s:o}", "enum", kept);
    return out;
}

/* ---------------------------------------------------------------- not, if */

/* not, in its common forms: of a type (those types are removed), of an
 * enum (its values are removed from a sibling enum), of required names
 * (the first one not required is left out: a subset).  Any other not is
 * kept, to meet a sibling enum in a merge; the generator approximates it. */
static json_t *apply_not(json_t *s, json_t *not)
{
    if (json_is_false(not))
        return json_incref(s);
    if (json_is_true(not) || (json_is_object(not) && json_object_size(not) == 0))
        return json_false();
    json_t *t = json_object_get(not, "type"), *e = json_object_get(not, "enum");
    json_t *req = json_object_get(not, "required"), *out = json_copy(s);
    size_t n = json_object_size(not);
    if (t && n == 1) {
        json_t *rest = js_type_of_bits(js_type_bits(json_object_get(s, "type")) & ~js_type_bits(t));
        json_object_set_new(out, "type", rest ? rest : json_array());
    } else if (e && n == 1 && json_is_array(json_object_get(s, "enum"))) {
        json_t *kept = json_array(), *v;
        size_t i;
        json_array_foreach(json_object_get(s, "enum"), i, v)
            if (!js_enum_has(e, v))
                json_array_append(kept, v);
        json_object_set_new(out, "enum", kept);
    } else if (json_is_array(req) && n == 1 && json_array_size(req) > 0) {
        json_t *mine = json_object_get(s, "required"), *name = NULL, *v;
        size_t i;
        json_array_foreach(req, i, v)
            if (!name && !js_enum_has(mine, v))
                name = v;
        if (!name || !json_is_string(name)) {
            json_decref(out);
            return json_false();
        }
        json_t *props = json_object_get(out, "properties");
        props = props ? json_copy(props) : json_object();
        json_object_set_new(props, json_string_value(name), json_false());
        json_object_set_new(out, "properties", props);
    } else {
        json_object_set(out, "not", not);
    }
    return out;
}

/* The values that fail an `if` of one property's const/enum V,
 * {properties: {k: {const/enum V}}, required: [k]}: k present and not in
 * V, or (with required) k absent; exact where "not in V" is (a sibling
 * enum of k).  For any other `if`: any value, approximated. */
static json_t *if_fails(jsc *c, json_t *cond, const char *path)
{
    json_t *n = js_normalize(c, cond, path);
    json_t *props = json_object_get(n, "properties"), *req = json_object_get(n, "required");
    const char *key = json_object_size(props) == 1 ? json_object_iter_key(json_object_iter(props)) : NULL;
    json_t *p = key ? js_normalize(c, json_object_get(props, key), path) : NULL;
    json_t *vals = json_object_size(p) == 1 ? json_object_get(p, "enum") : NULL, *out;
    int req_ok = !req || (json_array_size(req) == 1 && json_is_string(json_array_get(req, 0)) &&
                          !strcmp(json_string_value(json_array_get(req, 0)), key));
    if (!json_is_array(vals) || json_object_size(n) != 1 + (req != NULL) || !req_ok) {
        js_approximate(c, "if/then/else", path);
        out = json_true();
    } else {
        out = json_pack("{s:{s:{s:{s:O}}}, s:[s]}", "properties", key, "not", "enum", vals, "required", key);
        if (req)
            out = json_pack("{s:[o,{s:{s:b}}]}", "anyOf", out, "properties", key, 0);
    }
    json_decref(p);
    json_decref(n);
    return out;
}

/* if/then/else as anyOf [if + then, else + (if fails)]. */
static json_t *apply_if(jsc *c, json_t *s, const char *path)
{
    json_t *cond = json_object_get(s, "if"), *t = json_object_get(s, "then"), *e = json_object_get(s, "else");
    json_t *rest = json_copy(s);
    json_object_del(rest, "if");
    json_object_del(rest, "then");
    json_object_del(rest, "else");
    if (!cond || (!t && !e))
        return rest;
    json_t *fails = if_fails(c, cond, path);
    json_t *yes = js_all_of(cond, t ? t : json_true()), *no = js_all_of(e ? e : json_true(), fails);
    json_t *either = json_pack("{s:[o,o]}", "anyOf", yes, no);
    json_t *out = js_all_of(rest, either);
    json_decref(fails);
    json_decref(rest);
    json_decref(either);
    return out;
}

/* ---------------------------------------------------------------- the node */

static json_t *normalize(jsc *c, json_t *s, const char *path, int depth);

/* n with the target of its $ref merged in: $ref beside other keywords. */
static json_t *merge_ref(jsc *c, json_t *n, const char *path, int depth)
{
    json_t *ref = json_object_get(n, "$ref");
    if (!json_is_string(ref)) {
        JS_FAIL(c, "'$ref' at %s must be a string", path);
        return NULL;
    }
    json_t *target = js_resolve(c, json_string_value(ref));
    if (!target) {
        JS_FAIL(c, "'$ref' '%s' at %s does not point into this schema", json_string_value(ref), path);
        return NULL;
    }
    json_t *t = normalize(c, target, json_string_value(ref), depth + 1), *rest = json_copy(n);
    json_object_del(rest, "$ref");
    json_t *out = t ? js_merge(c, t, rest, path) : NULL;
    json_decref(t);
    json_decref(rest);
    return out;
}

/* n with its allOf merged in, and any $ref beside other keywords. */
static json_t *merge_all(jsc *c, json_t *n, const char *path, int depth)
{
    json_t *all = json_incref(json_object_get(n, "allOf")), *b;
    size_t i;
    json_object_del(n, "allOf");
    if (all && (!json_is_array(all) || json_array_size(all) == 0)) {
        JS_FAIL(c, "'allOf' at %s must be a non-empty array", path);
        json_decref(n);
        n = NULL;
    }
    json_array_foreach(all, i, b) {
        json_t *nb = n ? normalize(c, b, path, depth + 1) : NULL;
        json_t *m = nb ? js_merge(c, n, nb, path) : NULL;
        json_decref(nb);
        json_decref(n);
        n = m;
    }
    json_decref(all);
    while (json_is_object(n) && json_object_get(n, "$ref") && json_object_size(n) > 1) {
        json_t *m = merge_ref(c, n, path, depth);
        json_decref(n);
        n = m;
    }
    return n;
}

/* Keywords beside anyOf/oneOf go into each branch. */
static json_t *distribute(json_t *n)
{
    const char *key = json_object_get(n, "anyOf") ? "anyOf" : json_object_get(n, "oneOf") ? "oneOf" : NULL;
    if (!key || json_object_size(n) == 1 || !json_is_array(json_object_get(n, key)))
        return n;
    json_t *branches = json_object_get(n, key), *rest = json_copy(n), *all = json_array(), *b;
    size_t i;
    json_object_del(rest, key);
    json_array_foreach(branches, i, b)
        json_array_append_new(all, js_all_of(rest, b));
    json_t *out = json_pack("{s:o}", key, all);
    json_decref(rest);
    json_decref(n);
    return out;
}

static int unsatisfiable(json_t *n)
{
    json_t *t = json_object_get(n, "type");
    return json_is_object(n) && t && (js_type_bits(t) == 0 || (json_is_array(t) && json_array_size(t) == 0));
}

static json_t *normalize(jsc *c, json_t *s, const char *path, int depth)
{
    if (json_is_boolean(s))
        return json_incref(s);
    if (!json_is_object(s)) {
        JS_FAIL(c, "the schema at %s must be an object or a boolean", path);
        return NULL;
    }
    if (depth > MAX_MERGE_DEPTH || ++c->work > JS_MAX_WORK) {
        JS_FAIL(c, "the schema at %s merges allOf and $ref more than tram allows (%s)", path,
                depth > MAX_MERGE_DEPTH ? "nested too deep: a recursive allOf or $ref beside other keywords?"
                                        : "too much work");
        return NULL;
    }
    json_t *n = translate(c, s, path);
    if (n && json_object_get(n, "allOf"))
        n = merge_all(c, n, path, depth);
    else if (n && json_object_get(n, "$ref") && json_object_size(n) > 1)
        n = merge_all(c, n, path, depth);
    if (json_is_object(n) && (json_object_get(n, "if") || json_object_get(n, "then") || json_object_get(n, "else"))) {
        json_t *m = apply_if(c, n, path);
        json_decref(n);
        n = m ? normalize(c, m, path, depth + 1) : NULL;
        json_decref(m);
        return n;
    }
    json_t *not = json_is_object(n) ? json_incref(json_object_get(n, "not")) : NULL;
    if (not) {
        json_object_del(n, "not");
        json_t *m = apply_not(n, not);
        if (json_is_false(m))
            js_empty(c, path, "its 'not' leaves no value");
        json_decref(n);
        json_decref(not);
        n = m;
    }
    if (json_is_object(n) && json_object_get(n, "unevaluatedProperties") && !json_object_get(n, "additionalProperties"))
        json_object_set(n, "additionalProperties", json_object_get(n, "unevaluatedProperties"));
    if (json_is_object(n) && json_object_get(n, "unevaluatedItems") && !json_object_get(n, "items"))
        json_object_set(n, "items", json_object_get(n, "unevaluatedItems"));
    if (json_is_object(n)) {
        json_object_del(n, "unevaluatedProperties");
        json_object_del(n, "unevaluatedItems");
    }
    if (json_is_object(n))
        n = distribute(n);
    if (json_is_object(n) && json_object_get(n, "enum") && !json_object_get(n, "anyOf") && !json_object_get(n, "oneOf")) {
        json_t *m = filter_enum(c, n, path);
        json_decref(n);
        n = m;
    }
    if (unsatisfiable(n)) {
        json_decref(n);
        js_empty(c, path, "no type is left to it");
        return json_false();
    }
    return n;
}

json_t *js_normalize(jsc *c, json_t *s, const char *path)
{
    return normalize(c, s, path, 0);
}
