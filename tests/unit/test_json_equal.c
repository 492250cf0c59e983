/* JSON Schema's equality of values (grammar/json_equal.h), which enum,
 * const, uniqueItems and the schema merger share. */
#include <criterion/criterion.h>
#include <jansson.h>

#include "grammar/json_equal.h"

static int same_text(const char *a, const char *b)
{
    json_t *x = json_loads(a, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL),
           *y = json_loads(b, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    cr_assert(x && y, "not JSON: %s or %s", a, b);
    int same = tram_json_same(x, y);
    cr_assert_eq(same, tram_json_same(y, x), "%s and %s: the answer depends on the order", a, b);
    json_decref(x);
    json_decref(y);
    return same;
}

Test(json_equal, numbers_compare_by_value_and_members_in_any_order)
{
    cr_assert(same_text("1", "1.0"));
    cr_assert(same_text("{\"a\": 1, \"b\": [1, \"x\"]}", "{\"b\": [1.0, \"x\"], \"a\": 1}"));
    cr_assert(same_text("null", "null"));
    cr_assert(!same_text("[1, 2]", "[2, 1]"), "arrays are ordered");
    cr_assert(!same_text("{\"a\": 1}", "{\"a\": 1, \"b\": 2}"));
    cr_assert(!same_text("\"1\"", "1"));
    cr_assert(!same_text("true", "1"));
    cr_assert(!same_text("\"a\\u0000b\"", "\"a\\u0000c\""), "strings compare past a NUL");
}

/* Two integers a double cannot tell apart are still two values. */
Test(json_equal, integers_compare_exactly)
{
    cr_assert(!same_text("9007199254740993", "9007199254740992"));
    json_t *big = json_integer(9007199254740993LL), *less = json_integer(9007199254740992LL);
    cr_assert_eq(tram_json_number_cmp(big, less), 1);
    cr_assert_eq(tram_json_number_cmp(less, big), -1);
    json_t *half = json_real(0.5), *zero = json_integer(0);
    cr_assert_eq(tram_json_number_cmp(half, zero), 1);
    cr_assert_eq(tram_json_number_cmp(zero, zero), 0);
    json_decref(big);
    json_decref(less);
    json_decref(half);
    json_decref(zero);
}
