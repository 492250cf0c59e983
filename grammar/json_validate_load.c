/* json_validate_load.c — a JSON Schema document compiled for checking: its
 * draft read from `$schema`, every schema object reached from the root
 * walked once (through the keywords that hold subschemas), each `$id`
 * resolved to an absolute URI (RFC 3986) and indexed with the anchors under
 * it, every reference resolved to its target node, every pattern compiled.
 * Whatever cannot be resolved or read is an error here, so a check never
 * meets it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_big_bounds.h"
#include "grammar/json_validate_schema.h"

#define JV_MAX_SCHEMA_DEPTH 512

/* ---------------------------------------------------------------- tables */

static uint64_t hash_str(const char *s)
{
    return tram_mix64(tram_fnv1a(s, strlen(s)));
}

static jv_slot *map_find(const jv_map *m, uint64_t key, const char *str)
{
    if (!m->cap)
        return NULL;
    for (size_t i = key & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        jv_slot *e = &m->slots[i];
        if (!e->val || (e->key == key && (!str || !strcmp(e->str, str))))
            return e;
    }
}

static int map_put(jv_map *m, uint64_t key, const char *str, void *val, tram_error *err)
{
    if ((m->n + 1) * 2 > m->cap) {
        jv_map bigger = {tram_calloc(m->cap ? m->cap * 2 : 64, sizeof(jv_slot), err), m->cap ? m->cap * 2 : 64, 0};
        if (!bigger.slots)
            return -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].val)
                *map_find(&bigger, m->slots[i].key, m->slots[i].str) = m->slots[i], bigger.n++;
        free(m->slots);
        *m = bigger;
    }
    jv_slot *e = map_find(m, key, str);
    if (!e->val)
        m->n++;
    *e = (jv_slot){key, str, val};
    return 0;
}

void *jv_map_get_ptr(const jv_map *m, const void *p)
{
    jv_slot *e = map_find(m, (uint64_t)(uintptr_t)p, NULL);
    return e ? e->val : NULL;
}

void *jv_map_get_str(const jv_map *m, const char *s)
{
    jv_slot *e = map_find(m, hash_str(s), s);
    return e ? e->val : NULL;
}

/* ---------------------------------------------------------------- URIs */

typedef struct {
    const char *p;
    size_t n;
    int has;
} uri_part;

typedef struct {
    uri_part scheme, auth, path, query, frag;
} uri_parts;

static void uri_split(const char *u, uri_parts *o)
{
    memset(o, 0, sizeof(*o));
    const char *s = u;
    while (*s && strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.", *s))
        s++;
    if (*s == ':' && s > u && strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", *u)) {
        o->scheme = (uri_part){u, (size_t)(s - u), 1};
        u = s + 1;
    }
    if (u[0] == '/' && u[1] == '/') {
        size_t n = strcspn(u + 2, "/?#");
        o->auth = (uri_part){u + 2, n, 1};
        u += 2 + n;
    }
    size_t n = strcspn(u, "?#");
    o->path = (uri_part){u, n, 1};
    u += n;
    if (*u == '?') {
        n = strcspn(u + 1, "#");
        o->query = (uri_part){u + 1, n, 1};
        u += 1 + n;
    }
    if (*u == '#')
        o->frag = (uri_part){u + 1, strlen(u + 1), 1};
}

/* RFC 3986 5.2.4, in place on a NUL-terminated path. */
static void remove_dot_segments(char *path)
{
    char *in = path, *out = path;
    while (*in) {
        if (!strncmp(in, "../", 3))
            in += 3;
        else if (!strncmp(in, "./", 2))
            in += 2;
        else if (!strncmp(in, "/./", 3))
            in += 2;
        else if (!strcmp(in, "/."))
            in[1] = 0;
        else if (!strncmp(in, "/../", 4) || !strcmp(in, "/..")) {
            in += 3;
            if (!*in)
                *--in = '/';
            while (out > path && *--out != '/')
                ;
            *out = 0;
        } else if (!strcmp(in, ".") || !strcmp(in, ".."))
            break;
        else {
            do
                *out++ = *in++;
            while (*in && *in != '/');
        }
    }
    *out = 0;
}

static void put(char **o, const char *p, size_t n)
{
    memcpy(*o, p, n);
    *o += n;
}

/* RFC 3986 5.2.2: ref resolved against base (absolute), malloc'd. */
static char *uri_resolve(const char *base, const char *ref, tram_error *err)
{
    uri_parts b, r, t;
    uri_split(base, &b);
    uri_split(ref, &r);
    size_t cap = strlen(base) + strlen(ref) + 8;
    char *merged = tram_calloc(cap, 1, err), *out = tram_calloc(cap, 1, err);
    if (!merged || !out) {
        free(merged);
        free(out);
        return NULL;
    }
    t.frag = r.frag;
    if (r.scheme.has) {
        t = r;
    } else if (r.auth.has) {
        t = r, t.scheme = b.scheme;
    } else {
        t.scheme = b.scheme, t.auth = b.auth;
        if (!r.path.n) {
            t.path = b.path, t.query = r.query.has ? r.query : b.query;
        } else {
            char *m = merged;
            if (r.path.p[0] != '/') {
                if (b.auth.has && !b.path.n)
                    put(&m, "/", 1);
                else {
                    const char *slash = NULL;
                    for (size_t i = 0; i < b.path.n; i++)
                        if (b.path.p[i] == '/')
                            slash = b.path.p + i;
                    if (slash)
                        put(&m, b.path.p, (size_t)(slash - b.path.p) + 1);
                }
            }
            put(&m, r.path.p, r.path.n);
            t.path = (uri_part){merged, (size_t)(m - merged), 1};
            t.query = r.query;
        }
    }
    char *o = out;
    if (t.scheme.has)
        put(&o, t.scheme.p, t.scheme.n), put(&o, ":", 1);
    if (t.auth.has)
        put(&o, "//", 2), put(&o, t.auth.p, t.auth.n);
    char *path = o;
    put(&o, t.path.p, t.path.n);
    *o = 0;
    remove_dot_segments(path);
    o = path + strlen(path);
    if (t.query.has)
        put(&o, "?", 1), put(&o, t.query.p, t.query.n);
    if (t.frag.has)
        put(&o, "#", 1), put(&o, t.frag.p, t.frag.n);
    *o = 0;
    free(merged);
    return out;
}

/* ---------------------------------------------------------------- loading */

typedef struct {
    tram_jv_schema *s;
    char **strings; /* every URI and key made here, freed with the schema */
    size_t nstrings, capstrings;
    tram_error *err;
} jv_loader;

static char *keep(jv_loader *l, char *str)
{
    if (!str)
        return NULL;
    if (l->nstrings == l->capstrings) {
        size_t cap = l->capstrings ? l->capstrings * 2 : 64;
        char **grown = realloc(l->strings, cap * sizeof(char *));
        if (!grown) {
            free(str);
            tram_fail(l->err, "out of memory");
            return NULL;
        }
        l->strings = grown, l->capstrings = cap;
    }
    return l->strings[l->nstrings++] = str;
}

static char *strip_fragment(jv_loader *l, const char *uri)
{
    size_t n = strcspn(uri, "#");
    char *s = tram_calloc(n + 1, 1, l->err);
    if (s)
        memcpy(s, uri, n);
    return keep(l, s);
}

static char *anchor_key(jv_loader *l, const char *base, const char *name)
{
    size_t n = strlen(base) + strlen(name) + 2;
    char *s = tram_calloc(n, 1, l->err);
    if (s)
        snprintf(s, n, "%s#%s", base, name);
    return keep(l, s);
}

static int add_str(jv_loader *l, jv_map *m, const char *key, void *val)
{
    return map_put(m, hash_str(key), key, val, l->err);
}

static int schema_draft(const json_t *root, int *draft, tram_error *err)
{
    const char *uri = json_is_object(root) ? json_string_value(json_object_get(root, "$schema")) : NULL;
    *draft = JV_DRAFT2020;
    if (!uri)
        return 0;
    if (strstr(uri, "draft-03"))
        return tram_fail(err, "$schema: draft 3 is not supported (drafts 4, 6, 7, 2019-09, 2020-12 are)");
    if (strstr(uri, "draft-04") || strstr(uri, "snowplowanalytics.self-desc")) /* Snowplow's is draft 4's */
        *draft = JV_DRAFT4;
    else if (strstr(uri, "draft-06"))
        *draft = JV_DRAFT6;
    else if (strstr(uri, "draft-07"))
        *draft = JV_DRAFT7;
    else if (strstr(uri, "2019-09"))
        *draft = JV_DRAFT2019;
    return 0;
}

static pcre2_code *compile_regex(const char *pattern, const char *where, tram_error *err)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, JV_PCRE2_OPTIONS, &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof(msg));
        tram_fail(err, "%s: bad regex at offset %zu: %s", where, (size_t)off, (char *)msg);
    }
    return re;
}

/* The kinds of value each assertion keyword takes; a wrong one is an
 * invalid schema, refused here rather than met at every check. */
typedef struct {
    const char *name;
    int kinds; /* bits of JSON types accepted */
} jv_keyword_kind;

#define K_NUM (1 << JSON_INTEGER | 1 << JSON_REAL)
#define K_INTEGRAL (1 << 12) /* a number that must be a non-negative integer */
#define K_INT (K_NUM | K_INTEGRAL)
#define K_STR (1 << JSON_STRING)
#define K_ARR (1 << JSON_ARRAY)
#define K_OBJ (1 << JSON_OBJECT)
#define K_BOOL (1 << JSON_TRUE | 1 << JSON_FALSE)

static const jv_keyword_kind keyword_kinds[] = {
    {"multipleOf", K_NUM}, {"maximum", K_NUM}, {"minimum", K_NUM},
    {"maxLength", K_INT}, {"minLength", K_INT}, {"pattern", K_STR},
    {"maxItems", K_INT}, {"minItems", K_INT}, {"uniqueItems", K_BOOL},
    {"maxContains", K_INT}, {"minContains", K_INT}, {"maxProperties", K_INT},
    {"minProperties", K_INT}, {"required", K_ARR}, {"dependentRequired", K_OBJ},
    {"enum", K_ARR}, {"type", K_STR | K_ARR}, {"properties", K_OBJ},
    {"patternProperties", K_OBJ}, {"dependentSchemas", K_OBJ}, {"dependencies", K_OBJ},
    {"allOf", K_ARR}, {"anyOf", K_ARR}, {"oneOf", K_ARR},
    {"prefixItems", K_ARR}, {"$ref", K_STR}, {"$dynamicRef", K_STR}, {"$recursiveRef", K_STR},
};

static int check_type_names(const json_t *type, const char *ptr, tram_error *err)
{
    static const char *names[] = {"null", "boolean", "object", "array", "number", "string", "integer"};
    size_t n = json_is_array(type) ? json_array_size(type) : 1;
    for (size_t i = 0; i < n; i++) {
        const char *t = json_string_value(json_is_array(type) ? json_array_get(type, i) : type);
        size_t k = 0;
        while (t && k < TRAM_ARRAY_LEN(names) && strcmp(t, names[k]))
            k++;
        if (!t || k == TRAM_ARRAY_LEN(names))
            return tram_fail(err, "invalid schema at %s: unknown type %s", ptr, t ? t : "(not a string)");
    }
    return 0;
}

/* A boolean exclusiveMinimum/Maximum keeps its draft-04 meaning in any draft
 * (json_validate.c reads it so). */
static int check_keywords(const json_t *node, int draft, const char *ptr, tram_error *err)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(keyword_kinds); i++) {
        const json_t *v = json_object_get(node, keyword_kinds[i].name);
        if (!v)
            continue;
        if (!(keyword_kinds[i].kinds & (1 << json_typeof(v))))
            return tram_fail(err, "invalid schema at %s: %s has the wrong type", ptr, keyword_kinds[i].name);
        double d = json_number_value(v);
        if ((keyword_kinds[i].kinds & K_INTEGRAL) && (d < 0 || d != floor(d)))
            return tram_fail(err, "invalid schema at %s: %s must be a non-negative integer", ptr, keyword_kinds[i].name);
    }
    const json_t *m = json_object_get(node, "multipleOf");
    if (m && json_number_value(m) <= 0)
        return tram_fail(err, "invalid schema at %s: multipleOf must be greater than 0", ptr);
    static const char *bounds[] = {"exclusiveMinimum", "exclusiveMaximum"};
    for (int b = 0; b < 2; b++) {
        const json_t *v = json_object_get(node, bounds[b]);
        if (v && !json_is_boolean(v) && !(draft > JV_DRAFT4 && json_is_number(v)))
            return tram_fail(err, "invalid schema at %s: %s must be %s in this draft", ptr, bounds[b],
                             draft == JV_DRAFT4 ? "a boolean" : "a number (or draft 4's boolean)");
    }
    const json_t *type = json_object_get(node, "type");
    return type ? check_type_names(type, ptr, err) : 0;
}

static int walk(jv_loader *l, json_t *node, const char *base, const char *ptr, int depth);

static int walk_child(jv_loader *l, json_t *v, const char *base, const char *ptr, const char *key, size_t idx, int indexed, int depth)
{
    char sub[512];
    if (indexed)
        snprintf(sub, sizeof(sub), "%.300s/%.150s/%zu", ptr, key, idx);
    else
        snprintf(sub, sizeof(sub), "%.300s/%.150s", ptr, key);
    return walk(l, v, base, sub, depth + 1);
}

/* Subschema keywords: one schema, an array of them, or an object of them. */
static const char *single_keys[] = {"additionalProperties", "additionalItems", "contains", "propertyNames", "not",
                                    "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "items",
                                    "contentSchema"};
static const char *array_keys[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
static const char *object_keys[] = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                                    "dependencies"};

static int walk_children(jv_loader *l, json_t *node, const char *base, const char *ptr, int depth)
{
    for (size_t k = 0; k < TRAM_ARRAY_LEN(single_keys); k++) {
        json_t *v = json_object_get(node, single_keys[k]);
        if ((json_is_object(v) || json_is_boolean(v)) && walk_child(l, v, base, ptr, single_keys[k], 0, 0, depth))
            return -1;
    }
    for (size_t k = 0; k < TRAM_ARRAY_LEN(array_keys); k++) {
        json_t *arr = json_object_get(node, array_keys[k]), *v;
        size_t i;
        if (json_is_array(arr))
            json_array_foreach(arr, i, v) if (walk_child(l, v, base, ptr, array_keys[k], i, 1, depth)) return -1;
    }
    for (size_t k = 0; k < TRAM_ARRAY_LEN(object_keys); k++) {
        json_t *obj = json_object_get(node, object_keys[k]), *v;
        const char *name;
        json_object_foreach(obj, name, v)
        {
            if (json_is_array(v) && !strcmp(object_keys[k], "dependencies"))
                continue; /* a list of required names */
            char sub[512];
            snprintf(sub, sizeof(sub), "%.40s/%.200s", object_keys[k], name);
            if (!strcmp(object_keys[k], "patternProperties") && !jv_regex(l->s, name)) {
                pcre2_code *re = compile_regex(name, "patternProperties", l->err);
                char *key = keep(l, strdup(name));
                if (!re || !key || add_str(l, &l->s->regexes, key, re))
                    return -1;
            }
            if (walk_child(l, v, base, ptr, sub, 0, 0, depth))
                return -1;
        }
    }
    return 0;
}

/* $id (draft 4: id): a new base URI, and the node a resource; in drafts 6
 * and 7 an id of the form "#name" is a plain-name anchor instead. */
static int read_id(jv_loader *l, jv_node *n, const char **base)
{
    json_t *node = n->schema;
    int legacy = l->s->draft <= JV_DRAFT7;
    const char *id = json_string_value(json_object_get(node, l->s->draft == JV_DRAFT4 ? "id" : "$id"));
    if (!id || (legacy && json_object_get(node, "$ref")))
        return 0; /* beside a $ref, drafts up to 7 ignore every keyword */
    char *abs = keep(l, uri_resolve(*base, id, l->err));
    if (!abs)
        return -1;
    if (legacy && id[0] == '#')
        return add_str(l, &l->s->anchors, abs, node);
    char *res = strip_fragment(l, abs);
    if (!res || add_str(l, &l->s->resources, res, node))
        return -1;
    const char *frag = strchr(abs, '#');
    if (legacy && frag && frag[1] && add_str(l, &l->s->anchors, abs, node))
        return -1;
    n->is_resource = 1;
    *base = res;
    return 0;
}

static int read_anchors(jv_loader *l, jv_node *n, const char *base)
{
    if (l->s->draft < JV_DRAFT2019)
        return 0;
    const char *a = json_string_value(json_object_get(n->schema, "$anchor"));
    const char *d = json_string_value(json_object_get(n->schema, "$dynamicAnchor"));
    char *key;
    if (a && (!(key = anchor_key(l, base, a)) || add_str(l, &l->s->anchors, key, n->schema)))
        return -1;
    if (d && l->s->draft == JV_DRAFT2020 &&
        (!(key = anchor_key(l, base, d)) || add_str(l, &l->s->anchors, key, n->schema) ||
         add_str(l, &l->s->dyn_anchors, key, n->schema)))
        return -1;
    n->recursive_anchor = l->s->draft == JV_DRAFT2019 && json_is_true(json_object_get(n->schema, "$recursiveAnchor"));
    return 0;
}

static int walk(jv_loader *l, json_t *node, const char *base, const char *ptr, int depth)
{
    if (json_is_boolean(node) || jv_map_get_ptr(&l->s->nodes, node))
        return 0;
    if (!json_is_object(node))
        return tram_fail(l->err, "invalid schema at %s: a schema is an object or a boolean", ptr[0] ? ptr : "#");
    if (depth > JV_MAX_SCHEMA_DEPTH)
        return tram_fail(l->err, "schema nested deeper than %d at %.200s", JV_MAX_SCHEMA_DEPTH, ptr);
    jv_node *n = tram_calloc(1, sizeof(*n), l->err);
    if (!n)
        return -1;
    n->schema = node;
    if (map_put(&l->s->nodes, (uint64_t)(uintptr_t)node, NULL, n, l->err))
        return free(n), -1;
    if (depth == 0)
        n->is_resource = 1;
    if (read_id(l, n, &base) || read_anchors(l, n, base) || check_keywords(node, l->s->draft, ptr, l->err))
        return -1;
    n->base = (char *)base;
    const char *pattern = json_string_value(json_object_get(node, "pattern"));
    if (pattern && !(n->pattern = compile_regex(pattern, "pattern", l->err)))
        return -1;
    static const char *unevaluated[] = {"unevaluatedItems", "unevaluatedProperties"};
    for (int i = 0; i < 2; i++)
        if (l->s->draft >= JV_DRAFT2019 && json_object_get(node, unevaluated[i]))
            l->s->uses_unevaluated = 1;
    return walk_children(l, node, base, ptr, depth);
}

/* ---------------------------------------------------------------- references */

/* A JSON pointer (already percent-decoded) from node. */
static json_t *follow_pointer(json_t *node, const char *ptr)
{
    while (node && *ptr == '/') {
        ptr++;
        char tok[512];
        size_t n = 0;
        for (; *ptr && *ptr != '/' && n + 1 < sizeof(tok); ptr++) {
            if (*ptr == '~' && (ptr[1] == '0' || ptr[1] == '1'))
                tok[n++] = ptr[1] == '0' ? '~' : '/', ptr++;
            else
                tok[n++] = *ptr;
        }
        tok[n] = 0;
        if (json_is_object(node))
            node = json_object_get(node, tok);
        else if (json_is_array(node)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            node = *tok && !*end ? json_array_get(node, i) : NULL;
        } else
            node = NULL;
    }
    return *ptr ? NULL : node;
}

static void percent_decode(char *s)
{
    char *o = s;
    for (; *s; s++) {
        unsigned v;
        if (*s == '%' && sscanf(s + 1, "%2x", &v) == 1 && s[1] && s[2])
            *o++ = (char)v, s += 2;
        else
            *o++ = *s;
    }
    *o = 0;
}

static int resolve(jv_loader *l, const jv_node *from, const char *ref, const char *kw, json_t **target)
{
    char *abs = keep(l, uri_resolve(from->base, ref, l->err));
    char *res = abs ? strip_fragment(l, abs) : NULL;
    if (!res)
        return -1;
    json_t *root = jv_map_get_str(&l->s->resources, res);
    const char *frag = strchr(abs, '#');
    frag = frag ? frag + 1 : "";
    if (!root)
        *target = NULL;
    else if (!*frag)
        *target = root;
    else if (*frag == '/') {
        char *decoded = keep(l, strdup(frag));
        if (!decoded)
            return -1;
        percent_decode(decoded);
        *target = follow_pointer(root, decoded);
    } else
        *target = jv_map_get_str(&l->s->anchors, abs);
    if (!*target || !(json_is_object(*target) || json_is_boolean(*target)))
        return tram_fail(l->err, "%s '%.200s': no schema in this document at %.200s (references reach only the "
                         "schema's own document)", kw, ref, abs);
    return walk(l, *target, res, frag, 1);
}

/* $dynamicRef: a dynamic search happens only when the static target is
 * itself a $dynamicAnchor of that name (2020-12's "bookending"). */
static int resolve_dynamic(jv_loader *l, jv_node *n, const char *ref)
{
    if (resolve(l, n, ref, "$dynamicRef", &n->dynamic_ref.target))
        return -1;
    const char *hash = strchr(ref, '#');
    if (!hash || !hash[1] || hash[1] == '/')
        return 0;
    const jv_node *t = jv_map_get_ptr(&l->s->nodes, n->dynamic_ref.target);
    const char *d = t ? json_string_value(json_object_get(t->schema, "$dynamicAnchor")) : NULL;
    if (d && !strcmp(d, hash + 1))
        n->dynamic_ref.dyn_anchor = d;
    return 0;
}

/* Resolves every node's references; a target walked for the first time adds
 * nodes, so the table is scanned until a pass adds none. */
static int resolve_all(jv_loader *l)
{
    tram_jv_schema *s = l->s;
    for (size_t done = 0; done != s->nodes.n;) {
        done = s->nodes.n;
        for (size_t i = 0; i < s->nodes.cap; i++) {
            jv_node *n = s->nodes.slots[i].val;
            if (!n || n->ref.target || n->recursive_ref.target || n->dynamic_ref.target)
                continue;
            const char *ref = json_string_value(json_object_get(n->schema, "$ref"));
            const char *rec = s->draft == JV_DRAFT2019 ? json_string_value(json_object_get(n->schema, "$recursiveRef")) : NULL;
            const char *dyn = s->draft == JV_DRAFT2020 ? json_string_value(json_object_get(n->schema, "$dynamicRef")) : NULL;
            if ((ref && resolve(l, n, ref, "$ref", &n->ref.target)) ||
                (rec && resolve(l, n, rec, "$recursiveRef", &n->recursive_ref.target)) ||
                (dyn && resolve_dynamic(l, n, dyn)))
                return -1;
            if (s->nodes.n != done)
                break; /* the table grew: rescan it from the start */
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- public */

static void free_nodes(tram_jv_schema *s)
{
    for (size_t i = 0; i < s->nodes.cap; i++) {
        jv_node *n = s->nodes.slots[i].val;
        if (n)
            pcre2_code_free(n->pattern), free(n);
    }
    for (size_t i = 0; i < s->regexes.cap; i++)
        if (s->regexes.slots[i].val)
            pcre2_code_free(s->regexes.slots[i].val);
    TRAM_FREE_ALL(s->nodes.slots, s->resources.slots, s->anchors.slots, s->dyn_anchors.slots,
                  s->regexes.slots);
}

/* The strings a schema owns ride after it: a count, then the pointers. */
typedef struct {
    tram_jv_schema s;
    char **strings;
    size_t nstrings;
} jv_owned;

tram_jv_schema *tram_jv_retain(tram_jv_schema *s)
{
    if (s)
        __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    return s;
}

void tram_jv_free(tram_jv_schema *s)
{
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    jv_owned *o = (jv_owned *)s;
    free_nodes(s);
    for (size_t i = 0; i < o->nstrings; i++)
        free(o->strings[i]);
    free(o->strings);
    json_decref(s->doc);
    free(o);
}

int tram_jv_compile(const char *schema_json, size_t len, tram_jv_schema **out, tram_error *err)
{
    *out = NULL;
    jv_owned *o = tram_calloc(1, sizeof(*o), err);
    if (!o)
        return -1;
    json_error_t je;
    o->s.doc = tram_json_schema_loadb(schema_json, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    o->s.assert_formats = 1;
    o->s.refs = 1;
    jv_loader l = {&o->s, NULL, 0, 0, err};
    int rc = -1;
    if (!o->s.doc)
        tram_fail(err, "schema is not JSON: %s (line %d)", je.text, je.line);
    else if (!schema_draft(o->s.doc, &o->s.draft, err)) {
        char *root = keep(&l, strdup("tram:///schema.json"));
        rc = !root || add_str(&l, &o->s.resources, root, o->s.doc) || walk(&l, o->s.doc, root, "#", 0) ||
                     resolve_all(&l) ? -1 : 0;
    }
    o->strings = l.strings, o->nstrings = l.nstrings;
    if (rc) {
        tram_jv_free(&o->s);
        return -1;
    }
    *out = &o->s;
    return 0;
}

void tram_jv_set_format_assertion(tram_jv_schema *s, int on)
{
    s->assert_formats = on;
}

int tram_jv_draft(const tram_jv_schema *s)
{
    return s->draft;
}
