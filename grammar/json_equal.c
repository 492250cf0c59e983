/* json_equal.c — JSON Schema's equality of values (see json_equal.h). */
#include "grammar/json_equal.h"

#include <string.h>

int tram_json_number_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    long double x = json_is_integer(a) ? (long double)json_integer_value(a) : json_real_value(a);
    long double y = json_is_integer(b) ? (long double)json_integer_value(b) : json_real_value(b);
    return (x > y) - (x < y);
}

int tram_json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return tram_json_number_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!tram_json_same(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        const char *key;
        size_t len;
        json_t *v;
        json_object_keylen_foreach((json_t *)a, key, len, v)
        {
            const json_t *w = json_object_getn(b, key, len);
            if (!w || !tram_json_same(v, w))
                return 0;
        }
        return 1;
    }
    default:
        return 1;
    }
}
