/* The grammar engine: GBNF parsing (syntax, escapes, repetition, UTF-8
 * classes, the errors), the pushdown matcher over bytes, the compilers
 * (JSON Schema, regex, choice), and the token mask checked against a
 * brute force over the whole vocabulary of the default model at every
 * step of random walks. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gbnf_text.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/stacks.h"
#include "server/cli/defaults.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- the byte matcher */

static int32_t buf[TRAM_MAX_STACK_DEPTH + 1];

/* 1 when the grammar matches all of text: the oracle the mask is checked against. */
static int run_bytes(const tram_gbnf *g, tram_stackset *st, const char *text, size_t n)
{
    tram_stackset next = {0};
    for (size_t i = 0; i < n && (st->n > 0); i++) {
        tram_stacks_advance(g, st, -1, (unsigned char)text[i], &next, buf);
        tram_stackset t = *st;
        *st = next;
        next = t;
        if (i + 1 < n && st->n == 0)
            st->has_end = 0;
    }
    tram_stackset_free(&next);
    return n == 0 || st->n > 0 || st->has_end;
}

static int matches(const char *gbnf, const char *text)
{
    tram_gbnf g;
    tram_error err = {{0}};
    cr_assert_eq(tram_gbnf_parse(gbnf, "root", &g, &err), 0, "%s: %s", gbnf, err.msg);
    tram_stackset st = {0};
    tram_stacks_start(&g, g.root, &st, buf);
    int ok = run_bytes(&g, &st, text, strlen(text)) && st.has_end;
    tram_stackset_free(&st);
    tram_gbnf_free(&g);
    return ok;
}

Test(grammar, gbnf_syntax)
{
    static const struct {
        const char *gbnf, *text;
        int ok;
    } cases[] = {
        {"root ::= \"ab\" | \"c\"", "ab", 1},
        {"root ::= \"ab\" | \"c\"", "a", 0},
        {"root ::= x+ # comment\nx ::= [a-c]", "abcab", 1},
        {"root ::= x+\nx ::= [a-c]", "", 0},
        {"root ::= [^a-z]*", "AB1_", 1},
        {"root ::= [^a-z]*", "Ab", 0},
        {"root ::= \"a\"{2,3}", "a", 0},
        {"root ::= \"a\"{2,3}", "aaa", 1},
        {"root ::= \"a\"{2,3}", "aaaa", 0},
        {"root ::= \"a\"{2,}", "aaaaaa", 1},
        {"root ::= \"a\"{,2} \"b\"", "b", 1},
        {"root ::= (\"x\" \"y\"?){3}", "xyxx", 1},
        {"root ::= \"\\x41\\u00e9\\n\\\"\"", "A\xc3\xa9\n\"", 1},
        {"root ::= [\\u0430-\\u044f]+", "\xd0\xbf\xd1\x80\xd0\xb8", 1},    /* при */
        {"root ::= [\\u0430-\\u044f]+", "\xd0\x9f", 0},                    /* П */
        {"root ::= .", "\xf0\x9f\x98\x80", 1},                             /* an emoji: 4 bytes */
        {"root ::= .", "\xed\xa0\x80", 0},                                 /* a surrogate is not UTF-8 */
        {"root ::= [^\"]", "\xe2\x82\xac", 1},                             /* € */
        {"root ::= (\n  \"a\"\n  | \"b\"\n)", "b", 1},
        {"root ::= a |\n  b\na ::= \"1\"\nb ::= \"2\"", "2", 1},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++)
        cr_assert_eq(matches(cases[i].gbnf, cases[i].text), cases[i].ok, "case %zu: %s on '%s'", i,
                     cases[i].gbnf, cases[i].text);
}

Test(grammar, gbnf_errors_name_the_problem)
{
    static const struct {
        const char *gbnf, *words;
    } cases[] = {
        {"root ::= x", "'x' is used but never defined"},
        {"root ::= root \"a\"", "'root' is left-recursive"},
        {"root ::= (\"a\"?)*", "left-recursive"},
        {"root ::= a\na ::= b \"x\"\nb ::= \"\" a", "left-recursive"},
        {"root ::= \"abc", "unterminated string"},
        {"root ::= [abc", "unterminated character class"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= \"a\"{3,1}", "max below min"},
        {"rot ::= \"a\"", "no rule named 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root ::= (\"a\"", "expected ')'"},
        {"root = \"a\"", "expected '::='"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        tram_gbnf g;
        tram_error err = {{0}};
        cr_assert_eq(tram_gbnf_parse(cases[i].gbnf, "root", &g, &err), -1, "case %zu parsed", i);
        cr_assert(strstr(err.msg, cases[i].words), "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].words);
    }
}

/* ---------------------------------------------------------------- compilers */

static int schema_matches(const char *schema, const char *text)
{
    char *gbnf = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_json_schema_to_gbnf(schema, "root", &gbnf, &err), 0, "%s: %s", schema, err.msg);
    int ok = matches(gbnf, text);
    free(gbnf);
    return ok;
}

Test(grammar, json_schema_shapes)
{
    static const struct {
        const char *schema, *text;
        int ok;
    } cases[] = {
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "-5", 1},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "-6", 0},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "120", 1},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "121", 0},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "007", 0},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", "0", 0},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", "1234567", 1},
        {"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "0.25", 1},
        {"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1.5", 0},
        {"{\"type\":\"number\",\"minimum\":-2.5,\"maximum\":1}", "-1.75", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"type\":\"string\",\"maxLength\":2}", "\"\xc3\xa9\\n\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", 0},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-42d3-a456-426614174000\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", "\"AB-123\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", "\"AB-12\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"a\\\"b\"}", "\"a\\\"b\"", 1},
        {"{\"enum\":[\"a\",1,null]}", "null", 1},
        {"{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", 0},
        {"{\"const\":{\"k\":[1,2]}}", "{\"k\":[1,2]}", 1},
        {"{\"type\":[\"string\",\"null\"]}", "null", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"]}", "{\"b\": true}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"]}", "{\"a\": 1, \"b\": false}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"]}", "{\"a\": 1}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{}", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1, 2]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1,2,3]", 0},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
         "[\"x\", 3]", 1},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
         "{\"type\":\"null\"}]}},\"required\":[\"next\"]}},\"$ref\":\"#/$defs/n\"}",
         "{\"next\": {\"next\": null}}", 1},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\": 1, \"y\": 2}", 1},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\": \"1\"}", 0},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,"
         "\"maxProperties\":2}", "{\"x\": 1, \"y\": 2}", 1},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,"
         "\"maxProperties\":2}", "{}", 0},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,"
         "\"maxProperties\":2}", "{\"x\": 1, \"y\": 2, \"z\": 3}", 0},
        {"{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"]},"
         "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]}]}", "{\"k\": \"b\"}", 1},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++)
        cr_assert_eq(schema_matches(cases[i].schema, cases[i].text), cases[i].ok, "case %zu: %s on %s", i,
                     cases[i].schema, cases[i].text);
}

Test(grammar, json_schema_rejects_what_it_cannot_enforce)
{
    static const struct {
        const char *schema, *words;
    } cases[] = {
        {"{\"type\":\"integer\",\"multipleOf\":2}", "'multipleOf' at #"},
        {"{\"properties\":{\"a\":{\"not\":{}}}}", "'not' at #/properties/a"},
        {"{\"allOf\":[{}]}", "'allOf'"},
        {"{\"type\":\"string\",\"format\":\"uri\"}", "'format' value 'uri'"},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "'oneOf'"},
        {"{\"$ref\":\"http://x/y\"}", "does not point into this schema"},
        {"{\"anyOf\":[{}],\"type\":\"string\"}", "'type' beside 'anyOf'"},
        {"false", "no value satisfies it"},
        {"{\"type\":\"number\",\"minimum\":0.2,\"maximum\":0.4}", "too narrow"},
        {"{\"type\":\"integer\",\"minimum\":true}", "must be a number"},
        {"not json", "not valid JSON"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"maxProperties\":1}", "'maxProperties'"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        char *gbnf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_json_schema_to_gbnf(cases[i].schema, "root", &gbnf, &err), -1, "case %zu compiled", i);
        cr_assert(strstr(err.msg, cases[i].words), "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].words);
    }
}

Test(grammar, regex_and_choice)
{
    static const struct {
        const char *re, *text;
        int ok;
    } cases[] = {
        {"^\\d{3}-\\d{4}$", "555-1234", 1},
        {"\\d{3}-\\d{4}", "555-123", 0},
        {"(cat|dog)s?", "dogs", 1},
        {"(?:ab)+c", "ababc", 1},
        {"[^a-c]x", "dx", 1},
        {"[^a-c]x", "bx", 0},
        {"a.c", "a\xc3\xa9" "c", 1},
        {"a.c", "a\nc", 0},
        {"\\w+@\\w+\\.com", "me@host.com", 1},
        {"(?P<y>\\d{4})", "2024", 1},
        {"[\\-+]?1", "-1", 1},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        char *gbnf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_regex_to_gbnf(cases[i].re, "root", &gbnf, &err), 0, "%s: %s", cases[i].re, err.msg);
        cr_assert_eq(matches(gbnf, cases[i].text), cases[i].ok, "case %zu: %s on '%s' (%s)", i, cases[i].re,
                     cases[i].text, gbnf);
        free(gbnf);
    }
    static const char *const bad[] = {"(?=a)", "a\\1", "\\bword", "a{2", "a++", "(a", "a)"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bad); i++) {
        char *gbnf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_regex_to_gbnf(bad[i], "root", &gbnf, &err), -1, "'%s' compiled", bad[i]);
        cr_assert(strstr(err.msg, "regex:"), "%s", err.msg);
    }
    const char *choices[] = {"yes", "no", "a \"quoted\" one"};
    char *gbnf = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_choice_to_gbnf(choices, 3, "root", &gbnf, &err), 0, "%s", err.msg);
    cr_assert(matches(gbnf, "a \"quoted\" one") && matches(gbnf, "no") && !matches(gbnf, "yesno"));
    free(gbnf);
}

/* ---------------------------------------------------------------- the token mask */

/* At each step of a random walk through the grammar, the matcher's mask
 * equals, token by token over the whole vocabulary, what the byte matcher
 * says of the token's bytes from the same state. */
static void check_mask(const tram_tokenizer *tok, const char *gbnf, int steps, unsigned seed)
{
    tram_error err = {{0}};
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
    cr_assert(g, "%s", err.msg);
    tram_gbnf ir;
    cr_assert_eq(tram_gbnf_parse(gbnf, "root", &ir, &err), 0);
    tram_matcher *m;
    cr_assert_eq(tram_matcher_create(&m, g, &err), 0);
    tram_stackset state = {0}, probe = {0};
    tram_stacks_start(&ir, ir.root, &state, buf);
    int vocab = tram_grammar_vocab(g);
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    int32_t *allowed = calloc((size_t)vocab, sizeof(int32_t));
    srand(seed);
    for (int step = 0; step < steps && !tram_matcher_is_done(m); step++) {
        tram_matcher_fill_mask(m, mask);
        int n = 0;
        for (int32_t id = 0; id < vocab; id++) {
            size_t len;
            const char *b = tram_tokenizer_token_bytes(tok, id, &len);
            int want;
            if (tram_tokenizer_is_eog(tok, id))
                want = state.has_end;
            else if (tram_tokenizer_is_special(tok, id) || len == 0)
                want = 0;
            else {
                cr_assert_eq(tram_stackset_copy(&probe, &state), 0);
                want = run_bytes(&ir, &probe, b, len);
            }
            int got = (mask[id >> 5] >> (id & 31)) & 1;
            cr_assert_eq(got, want, "step %d token %d ('%.*s'): mask %d, brute force %d", step, id, (int)len, b,
                         got, want);
            if (got && !tram_tokenizer_is_eog(tok, id))
                allowed[n++] = id;
        }
        if (n == 0)
            break;
        int32_t pick = allowed[rand() % n];
        size_t len;
        const char *b = tram_tokenizer_token_bytes(tok, pick, &len);
        cr_assert_eq(tram_matcher_accept(m, pick), 1);
        cr_assert(run_bytes(&ir, &state, b, len));
    }
    free(mask);
    free(allowed);
    tram_stackset_free(&state);
    tram_stackset_free(&probe);
    tram_matcher_free(m);
    tram_grammar_release(g);
    tram_gbnf_free(&ir);
}

Test(grammar, mask_equals_brute_force, .timeout = 120)
{
    tram_tokenizer *tok;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    char *schema = NULL, *object = NULL, *re = NULL;
    cr_assert_eq(tram_json_schema_to_gbnf(
                     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
                     "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"\xc3\xa9t\xc3\xa9\",\"x y\"]}},"
                     "\"n\":{\"type\":\"integer\",\"minimum\":-3,\"maximum\":250}},\"required\":[\"name\",\"n\"]}",
                     "root", &schema, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_json_object_gbnf("root", &object, &err), 0);
    cr_assert_eq(tram_regex_to_gbnf("[\\u03b1-\\u03c9]{2,5} (yes|no)\\.?", "root", &re, &err), 0, "%s", err.msg);
    const char *grammars[] = {schema, object, re, "root ::= ( [^a-z\\n] | \"ab\" ){1,6} \"\\n\"?"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(grammars); i++)
        check_mask(tok, grammars[i], 10, (unsigned)(7 + i));
    free(schema);
    free(object);
    free(re);
    tram_tokenizer_free(tok);
}
