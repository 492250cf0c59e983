/* The JSON Schema compiler (grammar/json_schema*.c): for each shape, the
 * compiled grammar accepts instances the schema accepts and rejects ones it
 * does not (the fail-open shapes of issue 29 among them), the schemas no
 * value satisfies are errors saying so, unknown keywords are annotations
 * (errors with strict), and what the grammar approximates is marked. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema.h"
#include "kernels/base.h"
#include "kernels/strbuf.h"

int test_gbnf_matches(const char *gbnf, const char *text); /* test_grammar.c */

typedef struct {
    const char *schema, *text;
    int ok;
} schema_case;

static void check_cases(const schema_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *gbnf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_json_schema_to_gbnf(cases[i].schema, "root", &gbnf, &err), 0, "case %zu: %s: %s", i,
                     cases[i].schema, err.msg);
        cr_expect_eq(test_gbnf_matches(gbnf, cases[i].text), cases[i].ok, "case %zu: %s on %s", i, cases[i].schema,
                     cases[i].text);
        free(gbnf);
    }
}

/* Compiles schema; returns 0 or -1, err and the result filled. */
static int compile(const char *schema, int strict, tram_json_schema_result *r, tram_error *err)
{
    tram_json_schema_opts opts = {.strict = strict};
    int rc = tram_json_schema_compile(schema, "root", &opts, r, err);
    free(r->gbnf);
    r->gbnf = NULL;
    return rc;
}

Test(json_schema, required_names_get_additional_properties)
{
    static const schema_case cases[] = {
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"required\":[\"n\"]}", "{\"n\": true}", 0},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"required\":[\"n\"]}", "{\"n\": 1}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":{\"type\":\"integer\"},\"required\":[\"a\",\"n\"]}", "{\"a\": \"x\", \"n\": true}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":{\"type\":\"integer\"},\"required\":[\"a\",\"n\"]}", "{\"a\": \"x\", \"n\": 3}", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"object\",\"additionalProperties\":{\"allOf\":[{\"type\":\"object\"}]},\"required\":[\"modified\"]}", "{\"modified\": \"2023-01-01T00:00:00Z\"}", 0},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"object\",\"additionalProperties\":{\"allOf\":[{\"type\":\"object\"}]},\"required\":[\"modified\"]}", "{\"modified\": {}}", 1},
        {"{\"type\":\"object\",\"patternProperties\":{\"^na\":{\"type\":\"string\"}},\"required\":[\"name\"]}", "{\"name\": 1}", 0},
        {"{\"type\":\"object\",\"patternProperties\":{\"^na\":{\"type\":\"string\"}},\"required\":[\"name\"]}", "{\"name\": \"x\"}", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, nullable_is_an_annotation)
{
    static const schema_case cases[] = {
        {"{\"type\":\"string\",\"nullable\":true}", "null", 0},
        {"{\"type\":\"string\",\"nullable\":true}", "\"a\"", 1},
        {"{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"boolean\",\"nullable\":true}},\"required\":[\"b\"]}", "{\"b\": null}", 0},
        {"{\"type\":[\"string\",\"null\"]}", "null", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, required_names_additional_properties_forbid)
{
    static const schema_case cases[] = {
        {"{\"type\":[\"object\",\"null\"],\"required\":[\"a\"],\"additionalProperties\":false}", "null", 1},
        {"{\"type\":[\"object\",\"null\"],\"required\":[\"a\"],\"additionalProperties\":false}", "{\"a\": 1}", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"a\"],\"additionalProperties\":false}}", "[]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"a\"],\"additionalProperties\":false}}", "[{\"a\": 1}]", 0},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, exclusive_bounds_of_numbers)
{
    static const schema_case cases[] = {
        {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "0.000", 0},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "0", 0},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "0.5", 1},
        {"{\"type\":\"number\",\"exclusiveMaximum\":0}", "-0.000", 0},
        {"{\"type\":\"number\",\"exclusiveMaximum\":0}", "-0", 0},
        {"{\"type\":\"number\",\"exclusiveMaximum\":0}", "-0.25", 1},
        {"{\"type\":\"number\",\"minimum\":1,\"maximum\":2}", "1.50", 0},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"number\",\"minimum\":0,\"exclusiveMinimum\":true}", "0", 0},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"number\",\"minimum\":0,\"exclusiveMinimum\":true}", "0.5", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\",\"maximum\":5,\"exclusiveMaximum\":false}", "5", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

/* Bounds past 64 bits load (grammar/json_big_bounds.h) and are honoured:
 * no integer tram writes (16 digits at most) passes one; a lower bound
 * past what tram writes leaves no integer, said so. */
Test(json_schema, integer_bounds_past_64_bits)
{
    static const schema_case cases[] = {
        {"{\"type\":\"integer\",\"minimum\":0,\"maximum\":18446744073709551615}", "9999999999999999", 1},
        {"{\"type\":\"integer\",\"minimum\":0,\"maximum\":18446744073709551615}", "-1", 0},
        {"{\"type\":\"integer\",\"maximum\":9223372036854776000}", "-42", 1},
        {"{\"type\":\"integer\",\"minimum\":-9223372036854775809,\"maximum\":5}", "6", 0},
        {"{\"type\":\"integer\",\"minimum\":-9223372036854775809,\"maximum\":5}", "-9999999999999999", 1},
        {"{\"type\":\"number\",\"exclusiveMinimum\":-100000000000000000000,\"exclusiveMaximum\":100000000000000000000}", "1.5", 1},
        {"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":-9223372036854775809}}}", "{\"n\": -1}", 0},
        {"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":-9223372036854775809}}}", "{}", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
    tram_json_schema_result r;
    tram_error err = {{0}};
    cr_assert_eq(compile("{\"type\":\"integer\",\"minimum\":9223372036854775808}", 0, &r, &err), -1);
    cr_expect(strstr(err.msg, "16 digits"), "%s", err.msg);
    cr_assert_eq(compile("{\"const\":12345678901234567890123}", 0, &r, &err), -1);
    cr_expect(strstr(err.msg, "too big integer"), "%s", err.msg);
}

Test(json_schema, draft4_integer_enum)
{
    static const schema_case cases[] = {
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\",\"enum\":[1.0,2.5]}", "1", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\",\"enum\":[1.0,2.5]}", "1.0", 0},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\",\"enum\":[1.0,2.5]}", "2.5", 0},
        {"{\"const\":3.0}", "3", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, annotations_and_unknown_keywords_are_ignored)
{
    static const schema_case cases[] = {
        {"{\"type\":\"string\",\"self\":{\"vendor\":\"x\"},\"x-kubernetes-int-or-string\":true,\"readonly\":true,\"decription\":\"d\",\"_format\":\"f\",\"title\":\"t\",\"examples\":[\"a\"],\"$comment\":\"c\",\"deprecated\":true,\"readOnly\":true,\"writeOnly\":false,\"default\":\"z\",\"strict\":true,\"discriminator\":{\"propertyName\":\"k\"}}", "\"a\"", 1},
        {"{\"type\":\"string\",\"self\":{\"vendor\":\"x\"}}", "5", 0},
        {"{\"type\":\"integer\",\"format\":\"int32\"}", "7", 1},
        {"{\"type\":\"string\",\"format\":\"byte\"}", "\"anything\"", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, drafts_refs_and_ids)
{
    static const schema_case cases[] = {
        {"{\"definitions\":{\"a/b\":{\"type\":\"integer\"}},\"$ref\":\"#/definitions/a~1b\"}", "1", 1},
        {"{\"definitions\":{\"a/b\":{\"type\":\"integer\"}},\"$ref\":\"#/definitions/a~1b\"}", "\"1\"", 0},
        {"{\"definitions\":{\"a b\":{\"type\":\"boolean\"}},\"$ref\":\"#/definitions/a%20b\"}", "true", 1},
        {"{\"$defs\":{\"x\":{\"$anchor\":\"pos\",\"type\":\"integer\",\"minimum\":0}},\"$ref\":\"#pos\"}", "-1", 0},
        {"{\"$defs\":{\"x\":{\"$anchor\":\"pos\",\"type\":\"integer\",\"minimum\":0}},\"$ref\":\"#pos\"}", "3", 1},
        {"{\"$id\":\"https://example.com/root.json\",\"$defs\":{\"x\":{\"$id\":\"item.json\",\"type\":\"boolean\"}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"item.json\"}},\"required\":[\"a\"]}", "{\"a\": true}", 1},
        {"{\"$id\":\"https://example.com/root.json\",\"$defs\":{\"x\":{\"$id\":\"item.json\",\"type\":\"boolean\"}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"https://example.com/item.json\"}},\"required\":[\"a\"]}", "{\"a\": 1}", 0},
        {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"definitions\":{\"x\":{\"id\":\"#foo\",\"type\":\"null\"}},\"$ref\":\"#foo\"}", "null", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"additionalItems\":false}", "[\"a\", 1]", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"additionalItems\":false}", "[\"a\", 1, 2]", 0},
        {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"integer\"},\"minItems\":2}", "[\"a\", 2, 3]", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"integer\"},\"minItems\":2}", "[\"a\", \"b\"]", 0},
        {"{\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"integer\"},\"minItems\":2}", "[\"a\", 2]", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, all_of_is_merged)
{
    static const schema_case cases[] = {
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}", "{\"a\": 1, \"b\": \"x\"}", 1},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}", "{\"a\": 1}", 0},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":{\"a\":{\"minimum\":5}}}]}", "{\"a\": 4}", 0},
        {"{\"allOf\":[{\"type\":\"integer\",\"minimum\":0},{\"maximum\":5}]}", "6", 0},
        {"{\"allOf\":[{\"type\":\"integer\",\"minimum\":0},{\"maximum\":5}]}", "5", 1},
        {"{\"allOf\":[{\"type\":[\"string\",\"integer\"]},{\"type\":[\"integer\",\"null\"]}]}", "\"s\"", 0},
        {"{\"allOf\":[{\"enum\":[\"a\",\"b\",\"c\"]},{\"enum\":[\"b\",\"c\",\"d\"]}]}", "\"a\"", 0},
        {"{\"allOf\":[{\"enum\":[\"a\",\"b\",\"c\"]},{\"enum\":[\"b\",\"c\",\"d\"]}]}", "\"c\"", 1},
        {"{\"$defs\":{\"s\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/s\",\"maxLength\":2}", "\"abc\"", 0},
        {"{\"$defs\":{\"s\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/s\",\"maxLength\":2}", "\"ab\"", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, keywords_beside_any_of)
{
    static const schema_case cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"anyOf\":[{\"properties\":{\"b\":{\"const\":1}},\"required\":[\"b\"]},{\"properties\":{\"c\":{\"const\":2}},\"required\":[\"c\"]}]}", "{\"a\": 1, \"b\": 1}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"anyOf\":[{\"properties\":{\"b\":{\"const\":1}},\"required\":[\"b\"]},{\"properties\":{\"c\":{\"const\":2}},\"required\":[\"c\"]}]}", "{\"b\": 1}", 0},
        {"{\"type\":\"string\",\"anyOf\":[{\"maxLength\":1},{\"enum\":[\"long one\"]}]}", "\"ab\"", 0},
        {"{\"type\":\"string\",\"anyOf\":[{\"maxLength\":1},{\"enum\":[\"long one\"]}]}", "\"long one\"", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, pattern_properties)
{
    static const schema_case cases[] = {
        {"{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{\"x-a\": 1}", 1},
        {"{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{\"x-a\": \"s\"}", 0},
        {"{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{\"y\": 1}", 0},
        {"{\"type\":\"object\",\"propertyNames\":{\"maxLength\":2},\"additionalProperties\":{\"type\":\"integer\"}}", "{\"abc\": 1}", 0},
        {"{\"type\":\"object\",\"propertyNames\":{\"maxLength\":2},\"additionalProperties\":{\"type\":\"integer\"}}", "{\"ab\": 1}", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, dependent_required)
{
    static const schema_case cases[] = {
        {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\": 1}", 0},
        {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\": 1, \"b\": 2}", 1},
        {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"b\": 2}", 1},
        {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"dependentRequired\":{\"a\":[\"b\"]}}", "{}", 1},
        {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"dependencies\":{\"a\":[\"b\"]}}", "{\"a\": 1}", 0},
        {"{\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"dependentRequired\":{\"a\":[\"c\"]},\"additionalProperties\":{\"type\":\"boolean\"}}", "{\"a\": 1, \"c\": true}", 1},
        {"{\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"dependentRequired\":{\"a\":[\"c\"]},\"additionalProperties\":{\"type\":\"boolean\"}}", "{\"a\": 1}", 0},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, pattern_with_lengths)
{
    static const schema_case cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":3}", "\"abc\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":3}", "\"\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\d{2,8}$\",\"minLength\":4}", "\"123\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\d{2,8}$\",\"minLength\":4}", "\"1234\"", 1},
        /* any other pattern: its NFA crossed with a character counter */
        {"{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"maxLength\":4}", "\"abab\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"maxLength\":5}", "\"ababab\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"maxLength\":5}", "\"aba\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3,\"maxLength\":6}", "\"a-b\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3,\"maxLength\":6}", "\"ab\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3,\"maxLength\":6}", "\"abc-def\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3,\"maxLength\":6}", "\"ab-\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3}", "\"abc-defghijk\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3}", "\"a-\"", 0},
        /* a pattern anchored at its start only: what it begins, up to the length */
        {"{\"type\":\"string\",\"pattern\":\"^ab\",\"maxLength\":3}", "\"abz\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^ab\",\"maxLength\":3}", "\"abzz\"", 0},
        /* unanchored: whole matches where one has an allowed length, else any string holding a match */
        {"{\"type\":\"string\",\"pattern\":\"ab\",\"maxLength\":3}", "\"ab\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"ab\",\"minLength\":5}", "\"xabyz\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"ab\",\"minLength\":5}", "\"xaxyz\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^a|b$\",\"minLength\":3}", "\"xxb\"", 1},
        /* lengths count characters, not bytes, and an escaped quote is one */
        {"{\"type\":\"string\",\"pattern\":\"^(é|x)+$\",\"maxLength\":2}", "\"éé\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^(é|x)+$\",\"maxLength\":2}", "\"ééx\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(\\\"|a)+$\",\"minLength\":2,\"maxLength\":2}", "\"\\\"a\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^(\\\"|a)+$\",\"minLength\":2,\"maxLength\":2}", "\"\\\"\"", 0},
        /* a backreference: any match of its group (the validator asks for the same one) */
        {"{\"type\":\"string\",\"pattern\":\"^(a|b)\\\\1$\"}", "\"ab\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^(a|b)\\\\1$\"}", "\"a\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(a|b)\\\\1(c)*$\",\"maxLength\":3}", "\"abcc\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(a|b)\\\\1(c)*$\",\"maxLength\":3}", "\"aac\"", 1},
        /* a lookaround is left out (and validated), the lengths still hold */
        {"{\"type\":\"string\",\"pattern\":\"^(?!x)([a-z]|-)+$\",\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(?!x)([a-z]|-)+$\",\"maxLength\":3}", "\"a-c\"", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
    /* exact: nothing is left to the validator */
    static const char *exact[] = {
        "{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"maxLength\":4}",
        "{\"type\":\"string\",\"pattern\":\"^[a-z0-9]+([.-][a-z0-9]+)*@[a-z]+\\\\.[a-z]{2,}$\",\"maxLength\":40}",
        "{\"type\":\"string\",\"pattern\":\"^ab\",\"minLength\":5}",
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(exact); i++) {
        tram_json_schema_opts exact_only = {.exact_only = 1};
        tram_json_schema_result r;
        tram_error err = {{0}};
        cr_expect_eq(tram_json_schema_compile(exact[i], "root", &exact_only, &r, &err), 0, "case %zu: %s", i, err.msg);
        free(r.gbnf);
    }
}

/* Products past their bounds fall back to the pattern alone (validated),
 * quickly: a counted group copied thousands of times, a wide counter. */
Test(json_schema, pattern_length_products_stay_bounded)
{
    static const char *large[] = {
        "{\"type\":\"string\",\"pattern\":\"^([a-z]|[0-9]|_){1,1000}$\",\"maxLength\":999}",
        "{\"type\":\"string\",\"pattern\":\"^[a-z]{1,64}(\\\\.[a-z]{1,64}){0,10}$\",\"maxLength\":255}",
        "{\"type\":\"string\",\"pattern\":\"^((a|b)(c|d)(e|f)(g|h))+$\",\"maxLength\":1000000}",
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(large); i++) {
        tram_json_schema_result r;
        tram_error err = {{0}};
        cr_assert_eq(compile(large[i], 0, &r, &err), 0, "case %zu: %s", i, err.msg);
        cr_expect_eq(r.exact, 0, "case %zu is marked exact", i);
        cr_expect(strstr(r.approximated, "minLength/maxLength beside pattern"), "case %zu: %s", i, r.approximated);
    }
    /* backreferences that would read a 100 KB group again 20 times: refused */
    tram_strbuf refs = {0};
    tram_strbuf_addf(&refs, "{\"type\":\"string\",\"pattern\":\"^(");
    for (int i = 0; i < 100000; i++)
        tram_strbuf_add(&refs, "a", 1);
    tram_strbuf_addf(&refs, ")");
    for (int i = 0; i < 20; i++)
        tram_strbuf_addf(&refs, "\\\\1");
    tram_strbuf_addf(&refs, "$\"}");
    tram_json_schema_result refs_r;
    tram_error refs_err = {{0}};
    cr_expect_eq(compile(refs.s, 0, &refs_r, &refs_err), -1);
    cr_expect(strstr(refs_err.msg, "backreferences repeat more than"), "%s", refs_err.msg);
    tram_strbuf_free(&refs);
    /* a megabyte pattern of 250,000 alternatives (each may be empty, and
     * repeated): past the NFA's bound, so the plain rule, lengths validated;
     * compiled or refused with a reason in bounded time, never a hang */
    tram_strbuf big = {0};
    tram_strbuf_addf(&big, "{\"type\":\"string\",\"maxLength\":5,\"pattern\":\"^(");
    for (int i = 0; i < 250000; i++)
        tram_strbuf_addf(&big, "%sa?", i ? "|" : "");
    tram_strbuf_addf(&big, ")*$\"}");
    tram_json_schema_result r;
    tram_error err = {{0}};
    int rc = tram_json_schema_compile(big.s, "root", NULL, &r, &err);
    cr_expect(rc == 0 || err.msg[0], "a megabyte pattern failed without saying why");
    if (rc == 0)
        free(r.gbnf);
    tram_strbuf_free(&big);
}

Test(json_schema, unique_items_of_finite_values)
{
    static const schema_case cases[] = {
        {"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"uniqueItems\":true}", "[\"a\", \"a\"]", 0},
        {"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"uniqueItems\":true}", "[\"a\", \"b\"]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true}", "[true, true]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true,\"minItems\":2}", "[true]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true,\"minItems\":2}", "[true, false]", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, property_counts_beside_properties)
{
    static const schema_case cases[] = {
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2,\"maxProperties\":2}", "{\"a\": 1}", 0},
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2,\"maxProperties\":2}", "{\"a\": 1, \"c\": 2}", 1},
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2,\"maxProperties\":2}", "{\"a\": 1, \"b\": 2, \"c\": 3}", 0},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, if_then_else_on_a_tag)
{
    static const schema_case cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"string\"}},\"required\":[\"kind\"],\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}},\"required\":[\"kind\"]},\"then\":{\"required\":[\"x\"]},\"else\":{\"required\":[\"y\"]}}", "{\"kind\": \"a\", \"x\": 1}", 1},
        {"{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"string\"}},\"required\":[\"kind\"],\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}},\"required\":[\"kind\"]},\"then\":{\"required\":[\"x\"]},\"else\":{\"required\":[\"y\"]}}", "{\"kind\": \"a\", \"y\": \"s\"}", 0},
        {"{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"string\"}},\"required\":[\"kind\"],\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}},\"required\":[\"kind\"]},\"then\":{\"required\":[\"x\"]},\"else\":{\"required\":[\"y\"]}}", "{\"kind\": \"b\", \"y\": \"s\"}", 1},
        {"{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"string\"}},\"required\":[\"kind\"],\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}},\"required\":[\"kind\"]},\"then\":{\"required\":[\"x\"]},\"else\":{\"required\":[\"y\"]}}", "{\"kind\": \"b\", \"x\": 1}", 0},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, not_in_its_common_forms)
{
    static const schema_case cases[] = {
        {"{\"type\":[\"string\",\"null\"],\"not\":{\"type\":\"null\"}}", "null", 0},
        {"{\"type\":[\"string\",\"null\"],\"not\":{\"type\":\"null\"}}", "\"s\"", 1},
        {"{\"enum\":[\"a\",\"b\",\"c\"],\"not\":{\"enum\":[\"b\"]}}", "\"b\"", 0},
        {"{\"enum\":[\"a\",\"b\",\"c\"],\"not\":{\"enum\":[\"b\"]}}", "\"c\"", 1},
        {"{\"properties\":{\"a\":{},\"b\":{}},\"not\":{\"required\":[\"a\"]}}", "{\"a\": 1}", 0},
        {"{\"properties\":{\"a\":{},\"b\":{}},\"not\":{\"required\":[\"a\"]}}", "{\"b\": 1}", 1},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}

Test(json_schema, formats)
{
    static const schema_case cases[] = {
        {"{\"type\":\"string\",\"format\":\"uri\"}", "\"https://example.com/a/b\"", 1},
        {"{\"type\":\"string\",\"format\":\"uri\"}", "\"not a uri\"", 0},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"10.0.0.1\"", 1},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"256.1.1.1\"", 0},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"01.1.1.1\"", 0},
        {"{\"type\":\"string\",\"format\":\"ipv6\"}", "\"2001:db8:0:0:0:0:2:1\"", 1},
        {"{\"type\":\"string\",\"format\":\"hostname\"}", "\"api.example.com\"", 1},
        {"{\"type\":\"string\",\"format\":\"hostname\"}", "\"-bad\"", 0},
        {"{\"type\":\"string\",\"format\":\"duration\"}", "\"P1DT2H\"", 1},
        {"{\"type\":\"string\",\"format\":\"duration\"}", "\"P\"", 0},
        {"{\"type\":\"string\",\"format\":\"duration\"}", "\"PT\"", 0},
        {"{\"type\":\"string\",\"format\":\"json-pointer\"}", "\"/a/b~1c\"", 1},
        {"{\"type\":\"string\",\"format\":\"json-pointer\"}", "\"a\"", 0},
        {"{\"type\":\"string\",\"format\":\"relative-json-pointer\"}", "\"1/a\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", 0},
    };
    check_cases(cases, TRAM_ARRAY_LEN(cases));
}
Test(json_schema, schemas_no_value_satisfies_are_errors_saying_why)
{
    static const struct {
        const char *schema, *words;
    } cases[] = {
        {"{\"type\":\"object\",\"required\":[\"a\"],\"additionalProperties\":false}", "no valid value"},
        {"{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},{\"required\":[\"b\"]}],"
         "\"type\":\"object\"}", "no valid value"},
        {"{\"type\":\"integer\",\"enum\":[1.5,\"a\"]}", "enum"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "no type"},
        {"{\"type\":\"integer\",\"minimum\":3,\"maximum\":2}", "admit no integer"},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\d{5}$\",\"maxLength\":3}", "leave no length"},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\d{4}$\",\"minLength\":9}", "no string the pattern matches"},
        {"{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"minLength\":3,\"maxLength\":3}", "no string the pattern matches"},
        {"{\"type\":\"string\",\"pattern\":\"^(a|b)\\\\1$\",\"maxLength\":1}", "no string the pattern matches"},
        /* an anchor after a character: nothing matches (JSON Schema Store's "/^[0-9]{4}$/") */
        {"{\"type\":\"string\",\"pattern\":\"/^[0-9]{4}$/\",\"minLength\":4,\"maxLength\":4}", "no string the pattern matches"},
        {"{\"properties\":{\"a\":{\"type\":\"object\",\"required\":[\"x\"],\"additionalProperties\":false}},"
         "\"required\":[\"a\"],\"type\":\"object\"}", "#/properties/a"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        tram_json_schema_result r;
        tram_error err = {{0}};
        cr_assert_eq(compile(cases[i].schema, 0, &r, &err), -1, "case %zu compiled", i);
        cr_expect(strstr(err.msg, cases[i].words), "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].words);
    }
}

Test(json_schema, strict_makes_unknown_keywords_errors)
{
    tram_json_schema_result r;
    tram_error err = {{0}};
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"decription\":\"x\"}}}";
    cr_assert_eq(compile(schema, 0, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(compile(schema, 1, &r, &err), -1);
    cr_expect(strstr(err.msg, "'decription' at #/properties/a"), "%s", err.msg);
    cr_expect_eq(compile("{\"type\":\"string\",\"nullable\":true}", 1, &r, &err), -1);
    /* the specification's annotations and vendor x- keys stay fine */
    cr_expect_eq(compile("{\"type\":\"string\",\"title\":\"t\",\"description\":\"d\",\"x-order\":1,\"$comment\":\"c\","
                         "\"examples\":[\"e\"],\"default\":\"z\",\"deprecated\":false}", 1, &r, &err), 0, "%s", err.msg);
}

Test(json_schema, approximations_are_marked)
{
    static const struct {
        const char *schema, *keyword;
    } inexact[] = {
        {"{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf' at #"},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "oneOf"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}", "uniqueItems"},
        {"{\"type\":\"array\",\"contains\":{\"const\":1}}", "contains"},
        /* a product over its bounds (3000 copies of the group): the lengths are validated */
        {"{\"type\":\"string\",\"pattern\":\"^(ab){1,3000}$\",\"maxLength\":4000}", "minLength/maxLength beside pattern"},
        {"{\"if\":{\"type\":\"string\"},\"then\":{\"maxLength\":2},\"else\":{\"type\":\"integer\"}}", "if/then/else"},
        {"{\"properties\":{\"a\":{\"not\":{\"pattern\":\"x\"}}}}", "'not' at #/properties/a"},
        {"{\"type\":\"string\",\"pattern\":\"^(?!.*--)[a-z-]+$\"}", "'pattern (its lookaround, backreferences or inner anchors)' at #"},
        /* a '$' that more may follow: left out, the output validated */
        {"{\"type\":\"string\",\"pattern\":\"^([^,]+(,|$)){3,}$\"}", "'pattern (its lookaround, backreferences or inner anchors)' at #"},
        {"{\"type\":\"string\",\"pattern\":\"^(foo|bar$)\"}", "'pattern (its lookaround, backreferences or inner anchors)' at #"},
        /* a backreference: any match of its group, the same one left to the validator */
        {"{\"type\":\"string\",\"pattern\":\"^(['\\\"])[a-z]+\\\\1$\"}", "'pattern (its lookaround, backreferences or inner anchors)' at #"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(inexact); i++) {
        tram_json_schema_result r;
        tram_error err = {{0}};
        cr_assert_eq(compile(inexact[i].schema, 0, &r, &err), 0, "case %zu: %s", i, err.msg);
        cr_expect_eq(r.exact, 0, "case %zu is marked exact", i);
        cr_expect(strstr(r.approximated, inexact[i].keyword), "case %zu: '%s' lacks '%s'", i, r.approximated,
                  inexact[i].keyword);
        /* where nothing validates the output, an approximation is an error naming it */
        tram_json_schema_opts exact_only = {.exact_only = 1};
        cr_expect_eq(tram_json_schema_compile(inexact[i].schema, "root", &exact_only, &r, &err), -1, "case %zu", i);
        cr_expect(strstr(err.msg, inexact[i].keyword) && strstr(err.msg, "cannot be enforced exactly"),
                  "case %zu: %s", i, err.msg);
    }
    static const char *const exact[] = {
        "{\"allOf\":[{\"type\":\"integer\",\"minimum\":0},{\"maximum\":5}]}",
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"]},"
        "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]}]}",
        "{\"type\":\"array\",\"items\":{\"enum\":[1,2,3]},\"uniqueItems\":true}",
        "{\"type\":\"string\",\"pattern\":\"^[a-z]*$\",\"maxLength\":4}",
        "{\"type\":\"integer\",\"multipleOf\":1}",
        "{\"type\":\"string\",\"pattern\":\"^$|^[A-Z][a-z0-9A-Z]*$\"}",
        "{\"type\":\"string\",\"pattern\":\"(^[a-zA-Z0-9_.()-]+$)\"}",  /* a '$' ending its group, the group the pattern */
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(exact); i++) {
        tram_json_schema_result r;
        tram_error err = {{0}};
        cr_assert_eq(compile(exact[i], 0, &r, &err), 0, "exact case %zu: %s", i, err.msg);
        cr_expect_eq(r.exact, 1, "exact case %zu is marked approximate: %s", i, r.approximated);
    }
}

/* n optional properties, each a $ref (with a description beside it) to
 * one of 20 definitions that refer to each other. */
static char *many_properties(int n)
{
    tram_strbuf s = {0};
    tram_strbuf_addf(&s, "{\"$defs\":{");
    for (int i = 0; i < 20; i++)
        tram_strbuf_addf(&s, "%s\"d%d\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"},"
                             "\"y\":{\"anyOf\":[{\"type\":\"integer\"},{\"$ref\":\"#/$defs/d%d\"}]}}}", i ? "," : "", i,
                         (i + 1) % 20);
    tram_strbuf_addf(&s, "},\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < n; i++)
        tram_strbuf_addf(&s, "%s\"p%d\":{\"$ref\":\"#/$defs/d%d\",\"description\":\"property %d\"}", i ? "," : "", i,
                         i % 20, i);
    tram_strbuf_addf(&s, "}}");
    return tram_strbuf_take(&s);
}

/* Shared rules per $ref and a chain of rules for optional properties keep
 * the grammar linear in the schema: twice the properties, at most about
 * twice the GBNF. */
Test(json_schema, the_grammar_grows_linearly_with_the_schema)
{
    char *gbnf[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        char *schema = many_properties(100 * (i + 1));
        tram_error err = {{0}};
        cr_assert_eq(tram_json_schema_to_gbnf(schema, "root", &gbnf[i], &err), 0, "%s", err.msg);
        free(schema);
    }
    cr_expect_lt(strlen(gbnf[1]), 2.2 * strlen(gbnf[0]), "GBNF of %zu bytes for 200 properties, %zu for 100",
                 strlen(gbnf[1]), strlen(gbnf[0]));
    cr_expect(test_gbnf_matches(gbnf[1], "{\"p3\": {\"x\": \"a\", \"y\": {\"y\": 2}}, \"p150\": {}}"));
    cr_expect(!test_gbnf_matches(gbnf[1], "{\"p150\": {}, \"p3\": {\"x\": 1}}"));
    free(gbnf[0]);
    free(gbnf[1]);
}
