#include "models/json_util.h"

#include <math.h>

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

/* The value under key, or NULL when it is absent or null (an error if required). */
static int lookup(const json_t *obj, const char *key, int required, json_t **value, const char *file,
                  tram_error *err)
{
    *value = json_object_get(obj, key);
    if (*value && json_is_null(*value))
        *value = NULL;
    if (!*value && required)
        return tram_fail(err, "%s: required field '%s' is missing", file, key);
    return 0;
}

int tram_json_get_int(const json_t *obj, const char *key, int required, long long lo, long long hi,
                      long long *out, const char *file, tram_error *err)
{
    json_t *v;
    if (lookup(obj, key, required, &v, file, err))
        return -1;
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return tram_fail(err, "%s: field '%s' must be an integer", file, key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return tram_fail(err, "%s: field '%s' = %lld is out of range [%lld, %lld]", file, key, x, lo, hi);
    *out = x;
    return 0;
}

int tram_json_get_number(const json_t *obj, const char *key, int required, double *out,
                         const char *file, tram_error *err)
{
    json_t *v;
    if (lookup(obj, key, required, &v, file, err))
        return -1;
    if (!v)
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return tram_fail(err, "%s: field '%s' must be a finite number", file, key);
    *out = json_number_value(v);
    return 0;
}

int tram_json_get_bool(const json_t *obj, const char *key, int required, int *out, const char *file,
                       tram_error *err)
{
    json_t *v;
    if (lookup(obj, key, required, &v, file, err))
        return -1;
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return tram_fail(err, "%s: field '%s' must be true or false", file, key);
    *out = json_is_true(v);
    return 0;
}

int tram_json_get_string(const json_t *obj, const char *key, int required, const char **out,
                         const char *file, tram_error *err)
{
    json_t *v;
    if (lookup(obj, key, required, &v, file, err))
        return -1;
    if (!v)
        return 0;
    if (!json_is_string(v))
        return tram_fail(err, "%s: field '%s' must be a string", file, key);
    *out = json_string_value(v);
    return 0;
}
