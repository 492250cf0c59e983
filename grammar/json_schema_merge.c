/* json_schema_merge.c — allOf by merging: two normalized schemas into one
 * whose instances are those of both (see json_schema_gen.h).  Types and
 * enums are intersected, bounds take the tighter, required and
 * dependentRequired are united, properties merged name by name (a name
 * one side lacks meets that side's additionalProperties), subschemas that
 * meet become {"allOf": [x, y]}, merged when they are generated.  Where
 * two values cannot be merged exactly (two patterns, two formats, two
 * multipleOf, two if/then/else or contains) the first is kept and the
 * compile is marked approximate. */
#include <math.h>
#include <string.h>

#include "grammar/json_equal.h"
#include "grammar/json_schema_gen.h"

#define MAX_PRODUCT 64

static const char *const lower_bounds[] = {"minimum", "exclusiveMinimum", "minLength", "minItems",
                                           "minProperties", "minContains", NULL};
static const char *const upper_bounds[] = {"maximum", "exclusiveMaximum", "maxLength", "maxItems",
                                           "maxProperties", "maxContains", NULL};

static int is_trivial(json_t *s)
{
    return json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0);
}

json_t *js_all_of(json_t *x, json_t *y)
{
    if (!x || is_trivial(x))
        return json_incref(y);
    if (!y || is_trivial(y) || x == y || json_equal(x, y))
        return json_incref(x);
    if (json_is_false(x) || json_is_false(y))
        return json_false();
    return json_pack("{s:[O,O]}", "allOf", x, y);
}

int js_enum_has(json_t *values, json_t *v)
{
    size_t i;
    json_t *x;
    json_array_foreach(values, i, x)
        if (tram_json_same(x, v))
            return 1;
    return 0;
}

/* The type names of "type" (absent: all), as bits (1 null .. 64 number;
 * number includes integer). */
static const char *const type_names[] = {"null", "boolean", "object", "array", "string", "integer", "number"};

unsigned js_type_bits(json_t *t)
{
    if (!t)
        return 127;
    unsigned bits = 0;
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
        for (unsigned j = 0; j < 7; j++)
            if (json_is_string(x) && !strcmp(json_string_value(x), type_names[j]))
                bits |= j == 6 ? 96u : 1u << j;
    }
    return bits;
}

/* "type" for bits: a name, a list, NULL when all. */
json_t *js_type_of_bits(unsigned bits)
{
    if (bits == 127)
        return NULL;
    json_t *list = json_array();
    for (unsigned j = 0; j < 7; j++) {
        if (j == 5 && (bits & 96) == 96)
            continue; /* number says it */
        if (j == 6 ? (bits & 96) == 96 : (bits >> j) & 1)
            json_array_append_new(list, json_string(type_names[j]));
    }
    if (json_array_size(list) == 1) {
        json_t *one = json_incref(json_array_get(list, 0));
        json_decref(list);
        return one;
    }
    return list;
}

static void merge_type(json_t *out, json_t *b)
{
    unsigned bits = js_type_bits(json_object_get(out, "type")) & js_type_bits(b);
    json_t *t = js_type_of_bits(bits);
    if (t)
        json_object_set_new(out, "type", t);
    if (!bits)
        json_object_set_new(out, "type", json_array());
}

static void merge_enum(json_t *out, json_t *b)
{
    json_t *a = json_object_get(out, "enum"), *both = json_array(), *v;
    size_t i;
    json_array_foreach(a, i, v)
        if (js_enum_has(b, v))
            json_array_append(both, v);
    json_object_set_new(out, "enum", both);
}

static void merge_bound(json_t *out, const char *k, json_t *b, int lower)
{
    json_t *a = json_object_get(out, k);
    if (!json_is_number(a) || !json_is_number(b))
        return;
    double x = json_number_value(a), y = json_number_value(b);
    if (lower ? y > x : y < x)
        json_object_set(out, k, b);
}

static void merge_required(json_t *out, json_t *b)
{
    json_t *a = json_object_get(out, "required"), *all = json_is_array(a) ? json_copy(a) : json_array(), *v;
    size_t i;
    json_array_foreach(b, i, v)
        if (!js_enum_has(all, v))
            json_array_append(all, v);
    json_object_set_new(out, "required", all);
}

/* Each name of either side: its schemas on both sides, a side lacking it
 * giving its additionalProperties (when it has no patternProperties; with
 * them the merge is approximate). */
static void merge_properties(jsc *c, json_t *out, json_t *a_side, json_t *b_side, const char *path)
{
    json_t *pa = json_object_get(a_side, "properties"), *pb = json_object_get(b_side, "properties");
    json_t *aa = json_object_get(a_side, "additionalProperties"), *ab = json_object_get(b_side, "additionalProperties");
    json_t *all = json_object(), *v;
    const char *k;
    if ((aa && json_object_get(b_side, "patternProperties")) || (ab && json_object_get(a_side, "patternProperties")))
        js_approximate(c, "allOf of patternProperties and additionalProperties", path);
    json_object_foreach(pa, k, v) {
        json_t *w = json_object_get(pb, k);
        json_object_set_new(all, k, js_all_of(v, w ? w : ab));
    }
    json_object_foreach(pb, k, v)
        if (!json_object_get(pa, k))
            json_object_set_new(all, k, js_all_of(aa, v));
    json_object_set_new(out, "properties", all);
}

static void merge_subschema_maps(json_t *out, const char *key, json_t *b)
{
    json_t *a = json_object_get(out, key), *all = json_is_object(a) ? json_copy(a) : json_object(), *v;
    const char *k;
    json_object_foreach(b, k, v)
        json_object_set_new(all, k, js_all_of(json_object_get(all, k), v));
    json_object_set_new(out, key, all);
}

static void merge_dependent_required(json_t *out, json_t *b)
{
    json_t *a = json_object_get(out, "dependentRequired"), *all = json_is_object(a) ? json_copy(a) : json_object();
    json_t *v;
    const char *k;
    json_object_foreach(b, k, v) {
        json_t *list = json_object_get(all, k), *u = json_array(), *x;
        size_t i;
        json_array_extend(u, list);
        json_array_foreach(v, i, x)
            if (!js_enum_has(u, x))
                json_array_append(u, x);
        json_object_set_new(all, k, u);
    }
    json_object_set_new(out, "dependentRequired", all);
}

/* prefixItems pairwise, a side's items standing for its missing ones. */
static void merge_items(json_t *out, json_t *a_side, json_t *b_side)
{
    json_t *pa = json_object_get(a_side, "prefixItems"), *pb = json_object_get(b_side, "prefixItems");
    json_t *ia = json_object_get(a_side, "items"), *ib = json_object_get(b_side, "items");
    size_t n = TRAM_MAX(json_array_size(pa), json_array_size(pb));
    if (n) {
        json_t *all = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *x = i < json_array_size(pa) ? json_array_get(pa, i) : ia;
            json_t *y = i < json_array_size(pb) ? json_array_get(pb, i) : ib;
            json_array_append_new(all, js_all_of(x, y));
        }
        json_object_set_new(out, "prefixItems", all);
    }
    json_t *items = js_all_of(ia, ib);
    if (items)
        json_object_set_new(out, "items", items);
}

/* Two anyOf (or two oneOf) lists: their pairwise allOf, as one list. */
static int merge_product(jsc *c, json_t *out, const char *key, json_t *b, const char *path)
{
    json_t *a = json_object_get(out, key), *all = json_array(), *x, *y;
    size_t i, j;
    if (json_array_size(a) * json_array_size(b) > MAX_PRODUCT) {
        json_decref(all);
        return JS_FAIL(c, "'allOf' at %s of two '%s' of %zu and %zu branches: more than %d combinations", path,
                       key, json_array_size(a), json_array_size(b), MAX_PRODUCT);
    }
    json_array_foreach(a, i, x)
        json_array_foreach(b, j, y)
            json_array_append_new(all, js_all_of(x, y));
    json_object_set_new(out, key, all);
    return 0;
}

static int merge_key(jsc *c, json_t *out, json_t *a_side, json_t *b_side, const char *k, json_t *v, const char *path)
{
    json_t *a = json_object_get(out, k);
    if (!strcmp(k, "properties") || !strcmp(k, "additionalProperties") || !strcmp(k, "prefixItems") ||
        !strcmp(k, "items"))
        return 0; /* merged from both sides at once */
    if (!a) {
        json_object_set(out, k, v);
    } else if (!strcmp(k, "type")) {
        merge_type(out, v);
    } else if (!strcmp(k, "enum")) {
        merge_enum(out, v);
    } else if (js_in_list(lower_bounds, k) || js_in_list(upper_bounds, k)) {
        merge_bound(out, k, v, js_in_list(lower_bounds, k));
    } else if (!strcmp(k, "required")) {
        merge_required(out, v);
    } else if (!strcmp(k, "patternProperties") || !strcmp(k, "dependentSchemas")) {
        merge_subschema_maps(out, k, v);
    } else if (!strcmp(k, "dependentRequired")) {
        merge_dependent_required(out, v);
    } else if (!strcmp(k, "uniqueItems")) {
        json_object_set_new(out, k, json_boolean(json_is_true(a) || json_is_true(v)));
    } else if (!strcmp(k, "propertyNames") || !strcmp(k, "unevaluatedProperties") ||
               !strcmp(k, "unevaluatedItems")) {
        json_object_set_new(out, k, js_all_of(a, v));
    } else if (!strcmp(k, "not")) {
        json_object_set_new(out, k, json_pack("{s:[O,O]}", "anyOf", a, v));
    } else if (!strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
        return merge_product(c, out, k, v, path);
    } else if (!tram_json_same(a, v)) {
        js_approximate(c, k, path); /* pattern, format, multipleOf, if, contains, ... */
    }
    (void)a_side;
    (void)b_side;
    return 0;
}

json_t *js_merge(jsc *c, json_t *a, json_t *b, const char *path)
{
    if (json_is_false(a) || json_is_false(b))
        return json_false();
    if (is_trivial(a))
        return json_incref(b);
    if (is_trivial(b))
        return json_incref(a);
    json_t *out = json_copy(a), *v;
    const char *k;
    json_object_foreach(b, k, v)
        if (merge_key(c, out, a, b, k, v, path)) {
            json_decref(out);
            return NULL;
        }
    if (json_object_get(a, "properties") || json_object_get(b, "properties"))
        merge_properties(c, out, a, b, path);
    json_t *add = js_all_of(json_object_get(a, "additionalProperties"), json_object_get(b, "additionalProperties"));
    if (add)
        json_object_set_new(out, "additionalProperties", add);
    merge_items(out, a, b);
    return out;
}
