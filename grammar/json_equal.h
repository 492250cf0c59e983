/* json_equal.h — JSON Schema's equality of JSON values, the one copy that
 * enum, const, uniqueItems and the schema merger all ask. */
#ifndef TRAM_JSON_EQUAL_H
#define TRAM_JSON_EQUAL_H

#include <jansson.h>

/* -1, 0 or 1 as the number a is below, equal to or above the number b:
 * integers exactly, a real against either through long double. */
int tram_json_number_cmp(const json_t *a, const json_t *b);

/* 1 when a and b are the same JSON value: numbers by value (1 equals 1.0),
 * strings byte for byte, arrays item by item, objects by their members in
 * any order. */
int tram_json_same(const json_t *a, const json_t *b);

#endif
