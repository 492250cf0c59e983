/* json_util.c — see json_util.h.  One lookup checks presence and type for
 * every getter. */
#include "models/json_util.h"

#include <limits.h>
#include <string.h>

int tram_json_load_object(json_t **out, const char *path, tram_error *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return tram_fail(err, "%s: line %d: %s", path, jerr.line, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return tram_fail(err, "%s: expected a JSON object at the top level", path);
    }
    *out = root;
    return 0;
}

/* A bit per jansson type, for the kinds a field may hold. */
#define KIND(type) (1u << (type))

/* The value under key, or NULL when it is absent or null (an error if
 * required); a value whose type is not among kinds is an error saying what
 * the field must be. */
static int lookup(const json_t *obj, const char *key, int required, unsigned kinds, const char *must_be,
                  json_t **value, const char *file, tram_error *err)
{
    *value = json_object_get(obj, key);
    if (*value && json_is_null(*value))
        *value = NULL;
    if (!*value)
        return required ? tram_fail(err, "%s: required field '%s' is missing", file, key) : 0;
    if (!(kinds & KIND(json_typeof(*value))))
        return tram_fail(err, "%s: field '%s' must be %s", file, key, must_be);
    return 0;
}

int tram_json_get_int(const json_t *obj, const char *key, int required, long long lo, long long hi,
                      long long *out, const char *file, tram_error *err)
{
    json_t *v;
    if (lookup(obj, key, required, KIND(JSON_INTEGER), "an integer", &v, file, err))
        return -1;
    if (!v)
        return 0;
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return tram_fail(err, "%s: field '%s' = %lld is out of range [%lld, %lld]", file, key, x, lo, hi);
    *out = x;
    return 0;
}

/* Every number is finite: jansson's parser refuses NaN, infinity and
 * overflow, and json_real refuses to make them. */
int tram_json_get_number(const json_t *obj, const char *key, int required, double *out,
                         const char *file, tram_error *err)
{
    json_t *v;
    int rc = lookup(obj, key, required, KIND(JSON_INTEGER) | KIND(JSON_REAL), "a finite number", &v, file, err);
    if (!rc && v)
        *out = json_number_value(v);
    return rc;
}

int tram_json_get_bool(const json_t *obj, const char *key, int required, int *out, const char *file,
                       tram_error *err)
{
    json_t *v;
    int rc = lookup(obj, key, required, KIND(JSON_TRUE) | KIND(JSON_FALSE), "true or false", &v, file, err);
    if (!rc && v)
        *out = json_is_true(v);
    return rc;
}

int tram_json_get_string(const json_t *obj, const char *key, int required, const char **out,
                         const char *file, tram_error *err)
{
    json_t *v;
    int rc = lookup(obj, key, required, KIND(JSON_STRING), "a string", &v, file, err);
    if (!rc && v)
        *out = json_string_value(v);
    return rc;
}

int tram_json_get_rope_scaling(const json_t *rope, const char *type, tram_model_config *c, const char *file,
                               tram_error *err)
{
    if (strcmp(type, "llama3"))
        return tram_fail(err, "%s: rope_scaling type '%s' is not supported (only llama3 is)", file, type);
    double factor = 0, low = 0, high = 0;
    long long orig = 0;
    if (tram_json_get_number(rope, "factor", 1, &factor, file, err) ||
        tram_json_get_number(rope, "low_freq_factor", 1, &low, file, err) ||
        tram_json_get_number(rope, "high_freq_factor", 1, &high, file, err) ||
        tram_json_get_int(rope, "original_max_position_embeddings", 1, 1, INT_MAX, &orig, file, err))
        return -1;
    if (!(factor > 0) || !(low > 0) || !(high > low))
        return tram_fail(err, "%s: rope_scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0", file);
    c->rope_scaling_llama3 = 1;
    c->rope_factor = (float)factor;
    c->rope_low_freq_factor = (float)low;
    c->rope_high_freq_factor = (float)high;
    c->rope_original_max_pos = (int)orig;
    return 0;
}
