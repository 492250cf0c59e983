/* The grammar engine: GBNF parsing (syntax, escapes, repetition, UTF-8
 * classes, the errors), the pushdown matcher over bytes, the compilers
 * (JSON Schema, regex, choice), and the token mask checked against a
 * brute force over the whole vocabulary of the default model at every
 * step of random walks. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gbnf_text.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/stacks.h"
#include "kernels/strbuf.h"
#include "cli/defaults.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- the byte matcher */

static int32_t buf[TRAM_MAX_STACK_DEPTH + 1];

/* The expanded tail of large bounded counts where no vocabulary is in play:
 * short, so that the byte matcher's tests cross from the counted loop into
 * the tail (any tail gives the same language). */
#define BYTE_TAIL 8

/* 1 when the grammar matches all of text: the oracle the mask is checked against. */
static int run_bytes(const tram_gbnf *g, tram_stackset *st, const char *text, size_t n)
{
    tram_stackset next = {0};
    for (size_t i = 0; i < n; i++) {
        if (st->n == 0) {  /* no stack left (or none ever: root ::= ""): no byte is accepted */
            st->has_end = 0;
            break;
        }
        tram_stacks_advance(g, st, -1, (unsigned char)text[i], &next, buf);
        tram_stackset t = *st;
        *st = next;
        next = t;
    }
    tram_stackset_free(&next);
    return n == 0 || st->n > 0 || st->has_end;
}

static int matches(const char *gbnf, const char *text)
{
    tram_gbnf g;
    tram_error err = {{0}};
    cr_assert_eq(tram_gbnf_parse(gbnf, "root", BYTE_TAIL, &g, &err), 0, "%s: %s", gbnf, err.msg);
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
        cr_assert_eq(tram_gbnf_parse(cases[i].gbnf, "root", BYTE_TAIL, &g, &err), -1, "case %zu parsed", i);
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
        {"{\"$ref\":\"http://x/y\"}", "does not point into this schema"},
        {"false", "no valid value"},
        {"{\"type\":\"number\",\"minimum\":0.2,\"maximum\":0.4}", "too narrow"},
        {"{\"type\":\"integer\",\"minimum\":\"1\"}", "must be a number"},
        {"not json", "not valid JSON"},
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
        /* anchors that begin or end a top-level alternative; negated shorthands in a class */
        {"^$|^[A-Z][a-z]*$", "", 1},
        {"^$|^[A-Z][a-z]*$", "Abc", 1},
        {"^$|^[A-Z][a-z]*$", "abc", 0},
        {"^\\*$|^x$", "*", 1},
        {"(^a|^b)c", "bc", 1},
        {"^[\\S]+$", "a\xc3\xa9!", 1},
        {"^[\\S]+$", "a b", 0},
        {"[\\s\\S]*", "a b\n", 1},
        {"[^\\D]+", "123", 1},
        {"[^\\D]+", "12a", 0},
        {"[\\Wa]", "a", 1},
        {"[\\Wa]", "b", 0},
        {"[\\Wa]", "-", 1},
        /* a '$' inside groups, where nothing can follow it */
        {"(a$|b)", "a", 1},
        {"(a$|b)", "b", 1},
        {"(a$|b)", "ab", 0},
        {"^(foo|bar$)", "bar", 1},
        {"^(foo|bar$)", "foo", 1},
        {"^(foo|bar$)", "foobar", 0},
        {"(^[a-z)]+$)", "a)b", 1},
        {"(^[a-z)]+$)", "a(b", 0},
        {"((x|y$)|z)?", "y", 1},
        {"((x|y$)|z)?", "", 1},
        {"(a$)??", "a", 1},
        {"(a$|b)$", "a", 1},
        {"a(b$|c)|d$", "ab", 1},
        {"a(b$|c)|d$", "ac", 1},
        {"a(b$|c)|d$", "d", 1},
        {"(\\)$|b)", ")", 1},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        char *gbnf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_regex_to_gbnf(cases[i].re, "root", &gbnf, &err), 0, "%s: %s", cases[i].re, err.msg);
        cr_assert_eq(matches(gbnf, cases[i].text), cases[i].ok, "case %zu: %s on '%s' (%s)", i, cases[i].re,
                     cases[i].text, gbnf);
        free(gbnf);
    }
    static const char *const bad[] = {"(?=a)", "a\\1", "\\bword", "a{2", "a++", "(a", "a)",
                                      "a^b", "a$b", "(a$|b)c", "(a$)+", "(a$){2}", "(a$|b)(c)", "[$]$x", "^*", "x(?!y)*"};
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

/* ---------------------------------------------------------------- counted repetition */

/* Bounds on both sides of the unrolling limit (32), of the old caps (128,
 * 100) and far past them: each is honoured exactly. */
static const int bounds[] = {0, 1, 31, 32, 33, 100, 101, 127, 128, 129, 1000, 100000};

/* open, then n units (cycling through units[], sep between them), then close. */
static char *counted_text(const char *open, const char *const *units, int num_units, const char *sep, int n,
                          const char *close)
{
    tram_strbuf b = {0};
    tram_strbuf_add(&b, open, strlen(open));
    for (int i = 0; i < n; i++) {
        if (i)
            tram_strbuf_add(&b, sep, strlen(sep));
        tram_strbuf_add(&b, units[i % num_units], strlen(units[i % num_units]));
    }
    tram_strbuf_add(&b, close, strlen(close));
    char *text = tram_strbuf_take(&b);
    cr_assert(text);
    return text;
}

typedef int (*text_matcher)(const char *grammar, const char *text);

/* grammar (a printf format of min and max; max < 0 prints as nothing)
 * accepts exactly lo..hi units: lo - 1 and hi + 1 are refused. */
static void check_counts(text_matcher match, const char *fmt, int lo, int hi, const char *open,
                         const char *const *units, int num_units, const char *sep, const char *close)
{
    char grammar[512], max[16] = "";
    if (hi >= 0)
        snprintf(max, sizeof(max), "%d", hi);
    snprintf(grammar, sizeof(grammar), fmt, lo, max);
    int tries[] = {lo - 1, lo, hi < 0 ? lo + 40 : hi, hi < 0 ? -1 : hi + 1};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(tries); i++) {
        if (tries[i] < 0)
            continue;
        char *text = counted_text(open, units, num_units, sep, tries[i], close);
        int want = tries[i] >= lo && (hi < 0 || tries[i] <= hi);
        cr_assert_eq(match(grammar, text), want, "%s on %d units: %s", grammar, tries[i], want ? "refused" : "accepted");
        free(text);
    }
}

static int regex_matches(const char *re, const char *text)
{
    char *gbnf = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_regex_to_gbnf(re, "root", &gbnf, &err), 0, "%s: %s", re, err.msg);
    int ok = matches(gbnf, text);
    free(gbnf);
    return ok;
}

Test(grammar_counts, string_length_bounds_are_exact)
{
    /* characters of 1, 2 and 3 bytes, and an escape: each is one character */
    static const char *const chars[] = {"a", "\xc3\xa9", "\\n", "\xe2\x82\xac", " "};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bounds); i++) {
        int b = bounds[i];
        check_counts(schema_matches, "{\"type\":\"string\",\"minLength\":%d%.0s}", b, -1, "\"", chars, 5, "", "\"");
        check_counts(schema_matches, "{\"type\":\"string\",\"maxLength\":%.0d%s}", 0, b, "\"", chars, 5, "", "\"");
        check_counts(schema_matches, "{\"type\":\"string\",\"minLength\":%d,\"maxLength\":%s}", b, b, "\"", chars, 5,
                     "", "\"");
        check_counts(schema_matches, "{\"type\":\"string\",\"minLength\":%d,\"maxLength\":%s}", b / 2, b, "\"", chars,
                     5, "", "\"");
    }
}

Test(grammar_counts, array_and_map_bounds_are_exact)
{
    static const char *const items[] = {"0", "[1, \"x\"]", "-7"};
    static const char *const entries[] = {"\"k\": 1", "\"\": 22"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bounds); i++) {
        int b = bounds[i];
        check_counts(schema_matches, "{\"type\":\"array\",\"minItems\":%d%.0s}", b, -1, "[", items, 3, ", ", "]");
        check_counts(schema_matches, "{\"type\":\"array\",\"minItems\":%d,\"maxItems\":%s}", b, b, "[", items, 3,
                     ",", "]");
        check_counts(schema_matches, "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":%d,"
                                     "\"maxItems\":%s}", b / 3, b, "[", items, 1, ", ", "]");
        if (b <= 1000)   /* one more object per bound keeps the run short; the loop is the same */
            check_counts(schema_matches, "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},"
                                         "\"minProperties\":%d,\"maxProperties\":%s}", b / 2, b, "{", entries, 2,
                         ", ", "}");
    }
}

Test(grammar_counts, gbnf_and_regex_counts_are_exact)
{
    static const char *const units[] = {"ab", "c", "\xd0\xbf", "ab"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bounds); i++) {
        int b = bounds[i];
        check_counts(matches, "root ::= \"<\" ( \"ab\" | [c\\u0430-\\u044f] ){%d,%s} \">\"", b, b, "<", units, 4, "",
                     ">");
        check_counts(matches, "root ::= \"<\" x{%d,%s} \">\"\nx ::= \"ab\" | [c\\u0430-\\u044f]", b / 2, b, "<",
                     units, 4, "", ">");
        check_counts(matches, "root ::= \"<\" ( \"ab\" | [c\\u0430-\\u044f] ){%d,%s} \">\"", b, -1, "<", units, 4,
                     "", ">");
        check_counts(regex_matches, "<(ab|[c\\u0430-\\u044f]){%d,%s}>", b, b, "<", units, 4, "", ">");
        check_counts(regex_matches, "<(ab|[c\\u0430-\\u044f]){%d,%s}>", b, -1, "<", units, 4, "", ">");
    }
    /* nested: lines of at most 40 letters, at most 300 lines */
    static const char *const lines[] = {"[abcdefghijklmnopqrstuvwxyzabcdefghijklmn]", "[]", "[x]"};
    check_counts(matches, "root ::= ( \"[\" [a-z]{0,40} \"]\" ){%d,%s}", 50, 300, "", lines, 3, "", "");
    cr_assert(!matches("root ::= ( \"[\" [a-z]{0,40} \"]\" ){1,300}", "[abcdefghijklmnopqrstuvwxyzabcdefghijklmno]"));
}

/* A count of 100000 makes the grammar of a count of 200, and the matcher
 * follows it with as many stacks, each as short, as it follows x* with. */
Test(grammar_counts, a_long_count_keeps_the_matcher_small)
{
    static const char *const gbnf[] = {"root ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [nt] ){0,100000} \"\\\"\"",
                                       "root ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [nt] )* \"\\\"\"",
                                       "root ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [nt] ){0,200} \"\\\"\""};
    tram_gbnf g[3];
    tram_stackset st[2] = {{0}}, next = {0};
    for (int k = 0; k < 3; k++) {
        tram_error err = {{0}};
        cr_assert_eq(tram_gbnf_parse(gbnf[k], "root", BYTE_TAIL, &g[k], &err), 0, "%s", err.msg);
        if (k < 2)
            tram_stacks_start(&g[k], g[k].root, &st[k], buf);
    }
    cr_assert_eq(g[0].num_elems, g[2].num_elems, "a count of 100000: %d grammar positions, of 200: %d",
                 g[0].num_elems, g[2].num_elems);
    tram_gbnf_free(&g[2]);
    const char text[] = "a\\n\xc3\xa9 ";  /* 4 characters in 6 bytes */
    for (int i = 0; i <= 100000 / 4 * 6; i++) {
        unsigned char c = (unsigned char)(i == 0 ? '"' : text[(i - 1) % 6]);
        for (int k = 0; k < 2; k++) {
            tram_stacks_advance(&g[k], &st[k], -1, c, &next, buf);
            tram_stackset t = st[k];
            st[k] = next;
            next = t;
        }
        cr_assert(st[0].n > 0 && !st[0].oom, "byte %d: no stack", i);
        /* after the 100000th character only the closing quote is left */
        cr_assert_eq(st[0].n, i < 100000 / 4 * 6 ? st[1].n : 1, "byte %d: %d stacks, x* has %d", i, st[0].n,
                     st[1].n);
        for (int j = 0; j < st[0].n; j++)
            cr_assert_leq(st[0].len[j], 6, "byte %d: a stack %d deep", i, st[0].len[j]);
    }
    tram_stacks_advance(&g[0], &st[0], -1, '"', &next, buf);
    cr_assert(next.has_end && next.n == 0);
    for (int k = 0; k < 2; k++) {
        tram_stackset_free(&st[k]);
        tram_gbnf_free(&g[k]);
    }
    tram_stackset_free(&next);
}

Test(grammar_counts, counts_past_the_limit_are_errors_naming_it)
{
    static const struct {
        const char *schema, *words;
    } schemas[] = {
        {"{\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":1000001}}}",
         "'maxLength' 1000001 at #/properties/s is over 1000000"},
        {"{\"type\":\"string\",\"minLength\":9223372036854775807}", "'minLength' 9223372036854775807 at # is over"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"minItems\":2000000}}", "'minItems' 2000000 at #/items"},
        {"{\"type\":\"object\",\"additionalProperties\":{},\"maxProperties\":5000000}", "'maxProperties' 5000000"},
        {"{\"type\":\"string\",\"pattern\":\"a{0,1000001}\"}", "'pattern' at #: regex: repetition count over 1000000"},
        {"{\"type\":\"string\",\"minLength\":10,\"maxLength\":9}", "maxLength is below minLength"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(schemas); i++) {
        char *gbnf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_json_schema_to_gbnf(schemas[i].schema, "root", &gbnf, &err), -1, "case %zu compiled", i);
        cr_assert(strstr(err.msg, schemas[i].words), "case %zu: '%s' lacks '%s'", i, err.msg, schemas[i].words);
    }
    /* a repeated term that can be empty: 2^120 ways through (""|""){120} */
    static const char *const gbnf[] = {"root ::= \"a\"{1000001}", "root ::= \"a\"{2,99999999999}",
                                       "root ::= (\"a\"?){1000}", "root ::= (\"a\" | \"\"){0,500}",
                                       "root ::= (\"\" | \"\"){120}", "root ::= x{2,}\nx ::= \"b\"?"};
    static const char *const words[] = {"count over 1000000", "count over 1000000", "'root' repeats something that can be empty",
                                        "can be empty", "can be empty", "can be empty"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(gbnf); i++) {
        tram_gbnf g;
        tram_error err = {{0}};
        cr_assert_eq(tram_gbnf_parse(gbnf[i], "root", BYTE_TAIL, &g, &err), -1, "'%s' parsed", gbnf[i]);
        cr_assert(strstr(err.msg, words[i]), "'%s': '%s' lacks '%s'", gbnf[i], err.msg, words[i]);
    }
    char *out = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_regex_to_gbnf("x{1000001}", "root", &out, &err), -1);
    cr_assert(strstr(err.msg, "over 1000000"), "%s", err.msg);
    /* a backreference where nothing validates the output: an error naming it */
    cr_assert_eq(tram_regex_to_gbnf("(a)\\1", "root", &out, &err), -1);
    cr_assert(strstr(err.msg, "'\\1' is not supported (backreferences are only where"), "%s", err.msg);
    /* as a regex, a repeated empty is no error: its NFA's right-linear rules take the GBNF's place */
    cr_expect(regex_matches("(|){120}", ""));
    cr_expect(!regex_matches("(|){120}", "a"));
}

/* Patterns of real schemas that repeat what can match empty (JSONSchemaBench
 * has these; GBNF refuses the repetition, so they are written from the NFA). */
Test(grammar, regex_repeated_empties_compile_from_the_nfa)
{
    static const struct {
        const char *re, *text;
        int ok;
    } cases[] = {
        {"^\\w+(|\\.[\\w,]+)*$", "ab.c,d", 1},
        {"^\\w+(|\\.[\\w,]+)*$", "ab.", 0},
        {"^,?(((C-CLOSED|O-OPEN|O-PENDING),?)*)+$", "C-CLOSED,O-OPEN", 1},
        {"^,?(((C-CLOSED|O-OPEN|O-PENDING),?)*)+$", "C-CLOSED;", 0},
        {"^(https?:\\/\\/)?([\\da-z\\.-]+)\\.([a-z\\.]{2,6})([\\/\\w \\.-]*)*\\/?$", "http://example.com/a/b", 1},
        {"^(https?:\\/\\/)?([\\da-z\\.-]+)\\.([a-z\\.]{2,6})([\\/\\w \\.-]*)*\\/?$", "http://example", 0},
        {"(a*)*b", "aaab", 1},
        {"(a*)*b", "aaa", 0},
        {"(a?){3}", "aa", 1},
        {"(a?){3}", "aaaa", 0},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++)
        cr_expect_eq(regex_matches(cases[i].re, cases[i].text), cases[i].ok, "%s on %s", cases[i].re, cases[i].text);
}

/* ---------------------------------------------------------------- the token mask */

/* At each step of a random walk through the grammar, the matcher's mask
 * equals, token by token over the whole vocabulary, what the byte matcher
 * says of the token's bytes from the same state.  tail: of large bounded
 * counts (0: the default, the longest token). */
static void check_mask(const tram_tokenizer *tok, const char *gbnf, int tail, int steps, unsigned seed)
{
    tram_error err = {{0}};
    tram_grammar *g = tram_grammar_compile_tail(gbnf, "root", tok, tail, &err);
    cr_assert(g, "%s", err.msg);
    tram_gbnf ir;
    cr_assert_eq(tram_gbnf_parse(gbnf, "root", BYTE_TAIL, &ir, &err), 0);
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

/* (240 s: under make test-asan on a shared 2-core machine it takes over 120) */
Test(grammar, mask_equals_brute_force, .timeout = 240)
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
    /* counted repetitions, walked up to their max: with the default tail,
     * and with a tail of 3 so that near the bound the tokens longer than
     * it are checked at run time */
    char *counted = NULL;
    cr_assert_eq(tram_json_schema_to_gbnf("{\"type\":\"string\",\"minLength\":135,\"maxLength\":140}", "root",
                                          &counted, &err), 0, "%s", err.msg);
    /* alternatives sharing prefixes, merged into a trie when parsed (gbnf_factor.c), with a lone
     * reference to a rule of literals inlined into it */
    const char *trie = "root ::= ( \"one\" | \"once\" | \"only\" | \"on\" [a-z] | x | \"o\" y ) \" \"?\n"
                       "x ::= \"onyx\" | \"o\"\ny ::= \"n\"+";
    const char *grammars[] = {schema, object, re, "root ::= ( [^a-z\\n] | \"ab\" ){1,6} \"\\n\"?",
                              "root ::= \"<\" ( [a-z ] | \"\\\\n\" ){130,140} \">\"", counted, counted, trie};
    const int tails[] = {0, 0, 0, 0, 3, 3, 0, 0}, steps[] = {10, 10, 10, 10, 24, 24, 24, 6};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(grammars); i++)
        check_mask(tok, grammars[i], tails[i], steps[i], (unsigned)(7 + i));
    free(counted);
    free(schema);
    free(object);
    free(re);
    tram_tokenizer_free(tok);
}

/* ---------------------------------------------------------------- lazy masks */

/* A walk through a grammar whose every position was walked at compile
 * (tram_grammar_walk_all): its tokens and the mask before each. */
typedef struct {
    const tram_grammar *lazy;
    int32_t *tokens;
    uint32_t *masks;           /* [steps][words] */
    int steps, words;
    int mismatches;            /* found by a replay */
} eager_walk;

static void record_eager(eager_walk *e, const tram_tokenizer *tok, const char *gbnf, int tail, int steps,
                         unsigned seed)
{
    tram_error err = {{0}};
    tram_grammar *g = tram_grammar_compile_tail(gbnf, "root", tok, tail, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_eq(tram_grammar_walk_all(g, &err), 0, "%s", err.msg);
    e->words = tram_grammar_mask_words(g);
    e->tokens = calloc((size_t)steps, sizeof(int32_t));
    e->masks = calloc((size_t)steps * (size_t)e->words, sizeof(uint32_t));
    int32_t *allowed = calloc((size_t)tram_grammar_vocab(g), sizeof(int32_t));
    tram_matcher *m;
    cr_assert_eq(tram_matcher_create(&m, g, &err), 0);
    srand(seed);
    for (e->steps = 0; e->steps < steps && !tram_matcher_is_done(m); e->steps++) {
        uint32_t *mask = e->masks + (size_t)e->steps * (size_t)e->words;
        tram_matcher_fill_mask(m, mask);
        int n = 0;
        for (int32_t id = 0; id < tram_grammar_vocab(g); id++)
            if ((mask[id >> 5] >> (id & 31)) & 1 && !tram_tokenizer_is_eog(tok, id))
                allowed[n++] = id;
        if (n == 0)
            break;
        e->tokens[e->steps] = allowed[rand() % n];
        cr_assert_eq(tram_matcher_accept(m, e->tokens[e->steps]), 1);
    }
    free(allowed);
    tram_matcher_free(m);
    tram_grammar_release(g);
}

/* Replays the walk on the lazily compiled grammar, counting the steps
 * whose mask differs (a thread of its own: two run at once). */
static void *replay_lazy(void *arg)
{
    eager_walk *e = arg;
    tram_error err = {{0}};
    tram_matcher *m;
    if (tram_matcher_create(&m, e->lazy, &err))
        return e->mismatches = -1, NULL;
    uint32_t *mask = calloc((size_t)e->words, sizeof(uint32_t));
    for (int step = 0; step < e->steps; step++) {
        tram_matcher_fill_mask(m, mask);
        e->mismatches += memcmp(mask, e->masks + (size_t)step * (size_t)e->words,
                                (size_t)e->words * sizeof(uint32_t)) != 0;
        if (!tram_matcher_accept(m, e->tokens[step]))
            e->mismatches++;
    }
    free(mask);
    tram_matcher_free(m);
    return NULL;
}

/* Positions walked on first use (grammar/token_mask.h) give the masks of
 * positions all walked at compile, step for step, with two matchers of
 * one lazily compiled grammar walking at once; and the lazy compile keeps
 * less than the eager one until its positions are used. */
Test(grammar, lazy_masks_equal_eager_ones, .timeout = 240)
{
    tram_tokenizer *tok;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    char *schema = NULL, *counted = NULL, *re = NULL;
    cr_assert_eq(tram_json_schema_to_gbnf(
                     "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"maxLength\":12},"
                     "\"kind\":{\"enum\":[\"alpha\",\"beta\",\"gamma ray\"]},\"n\":{\"type\":\"integer\","
                     "\"maximum\":999},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":5},"
                     "\"maxItems\":3},\"note\":{\"type\":\"string\"}},\"required\":[\"id\",\"kind\",\"tags\"]}",
                     "root", &schema, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_json_schema_to_gbnf("{\"type\":\"string\",\"minLength\":135,\"maxLength\":140}", "root",
                                          &counted, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_regex_to_gbnf("([a-f0-9]{2}:){3}[a-f0-9]{2}( [A-Z][a-z]+)*", "root", &re, &err), 0, "%s",
                 err.msg);
    const char *grammars[] = {schema, counted, re,
                              "root ::= ( \"one\" | \"once\" | \"only\" | \"on\" [a-z] | \"o\" \"n\"+ ) \" \"? x\n"
                              "x ::= \"[\" [0-9]* \"]\""};
    const int tails[] = {0, 3, 0, 0}, steps[] = {40, 40, 24, 12};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(grammars); i++) {
        eager_walk e = {0};
        record_eager(&e, tok, grammars[i], tails[i], steps[i], (unsigned)(11 + i));
        tram_grammar *lazy = tram_grammar_compile_tail(grammars[i], "root", tok, tails[i], &err);
        cr_assert(lazy, "%s", err.msg);
        size_t at_compile = tram_grammar_bytes(lazy);
        eager_walk a = e, b = e;
        a.lazy = b.lazy = lazy;
        pthread_t ta, tb;
        cr_assert_eq(pthread_create(&ta, NULL, replay_lazy, &a), 0);
        cr_assert_eq(pthread_create(&tb, NULL, replay_lazy, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        cr_assert_eq(a.mismatches, 0, "grammar %zu: %d of %d steps differ", i, a.mismatches, e.steps);
        cr_assert_eq(b.mismatches, 0, "grammar %zu: %d of %d steps differ", i, b.mismatches, e.steps);
        cr_assert_gt(e.steps, 3, "grammar %zu: a walk of %d steps", i, e.steps);
        cr_assert_gt(tram_grammar_bytes(lazy), at_compile, "grammar %zu: the walk walked no position", i);
        cr_assert_eq(tram_grammar_walk_all(lazy, &err), 0, "%s", err.msg);
        cr_assert_gt(tram_grammar_bytes(lazy), at_compile, "grammar %zu", i);
        tram_grammar_release(lazy);
        free(e.tokens);
        free(e.masks);
    }
    free(schema);
    free(counted);
    free(re);
    tram_tokenizer_free(tok);
}

/* text's token: the test needs it to be one. */
static int32_t single_token(const tram_tokenizer *tok, const char *text)
{
    int32_t *ids = NULL;
    int n = 0;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_encode(tok, text, strlen(text), 0, 0, &ids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1, "'%s' is %d tokens", text, n);
    int32_t id = ids[0];
    free(ids);
    return id;
}

static int allowed(const uint32_t *mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

/* Through the token mask with the default model's vocabulary: a string of
 * 250..300 characters cannot be closed before its 250th character, can be
 * at any length up to 300, and must be at 300; a 3-character token fits
 * only while 3 characters are left. */
Test(grammar_counts, the_mask_closes_a_string_exactly_at_its_bounds, .timeout = 60)
{
    tram_tokenizer *tok;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    char *gbnf = NULL;
    cr_assert_eq(tram_json_schema_to_gbnf("{\"type\":\"string\",\"minLength\":250,\"maxLength\":300}", "root",
                                          &gbnf, &err), 0, "%s", err.msg);
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
    cr_assert(g, "%s", err.msg);
    tram_matcher *m;
    cr_assert_eq(tram_matcher_create(&m, g, &err), 0);
    int32_t quote = single_token(tok, "\""), a = single_token(tok, "a"), the = single_token(tok, "the"),
            close = single_token(tok, "\",");
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    cr_assert_eq(tram_matcher_accept(m, quote), 1);
    for (int chars = 0; chars <= 300; chars++) {
        tram_matcher_fill_mask(m, mask);
        cr_assert_eq(allowed(mask, quote), chars >= 250, "the closing quote after %d characters", chars);
        cr_assert(!allowed(mask, close), "'\",' after %d characters (nothing may follow the string)", chars);
        cr_assert_eq(allowed(mask, a), chars < 300, "'a' after %d characters", chars);
        cr_assert_eq(allowed(mask, the), chars + 3 <= 300, "'the' after %d characters", chars);
        if (chars < 300)
            cr_assert_eq(tram_matcher_accept(m, a), 1);
    }
    cr_assert_eq(tram_matcher_accept(m, the), 0);
    cr_assert_eq(tram_matcher_accept(m, quote), 1);
    cr_assert(tram_matcher_is_done(m));
    free(mask);
    free(gbnf);
    tram_matcher_free(m);
    tram_grammar_release(g);
    tram_tokenizer_free(tok);
}

/* root ::= ((...("a")+...)+)+, `depth` deep: n bytes of a's read in
 * exponentially many ways. */
static char *nested_plus(int depth)
{
    tram_strbuf b = {0};
    tram_strbuf_addf(&b, "root ::= ");
    for (int i = 0; i < depth; i++)
        tram_strbuf_add(&b, "(", 1);
    tram_strbuf_addf(&b, "\"a\"");
    for (int i = 0; i < depth; i++)
        tram_strbuf_add(&b, ")+", 2);
    return b.s;
}

/* A grammar read in too many ways at once is refused, at compile time and
 * in the byte matcher, instead of costing seconds a byte (16 deep: 65k
 * stacks after 12 bytes before the limit). */
Test(grammar, a_too_ambiguous_grammar_is_refused, .timeout = 60)
{
    char *gbnf = nested_plus(16);
    tram_gbnf g;
    tram_error err = {{0}};
    cr_assert_eq(tram_gbnf_parse(gbnf, "root", BYTE_TAIL, &g, &err), 0, "%s", err.msg);
    tram_stackset st = {0};
    tram_stacks_start(&g, g.root, &st, buf);
    run_bytes(&g, &st, "aaaaaaaaaaaaaaaa", 16);
    cr_assert(st.too_ambiguous, "%d stacks and no refusal", st.n);
    cr_assert_leq(st.n, TRAM_MAX_STACKS);
    tram_stackset_free(&st);
    tram_gbnf_free(&g);

    tram_tokenizer *tok;
    cr_assert_eq(tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    cr_assert_null(tram_grammar_compile(gbnf, "root", tok, &err));
    cr_assert(strstr(err.msg, "too ambiguous"), "%s", err.msg);
    /* past a byte no longer token starts with, the compile (which walks the
     * start's positions alone) cannot see it: the matcher fails closed there,
     * allowing nothing, and walking the whole grammar is the refusal */
    char *after = calloc(strlen(gbnf) + 32, 1);
    sprintf(after, "root ::= \"\\x01\" r\nr%s", gbnf + strlen("root"));  /* r ::= ((...("a")+...)+)+ */
    tram_grammar *late = tram_grammar_compile(after, "root", tok, &err);
    cr_assert(late, "%s", err.msg);
    tram_matcher *m;
    cr_assert_eq(tram_matcher_create(&m, late, &err), 0);
    cr_assert_eq(tram_matcher_accept(m, single_token(tok, "\x01")), 1);
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(late), sizeof(uint32_t));
    cr_assert_eq(tram_matcher_fill_mask(m, mask), 0);
    for (int w = 0; w < tram_grammar_mask_words(late); w++)
        cr_assert_eq(mask[w], 0, "word %d of the mask allows %08x", w, mask[w]);
    cr_assert_str_eq(tram_matcher_stuck(m), TRAM_GRAMMAR_BOUND);
    cr_assert_eq(tram_grammar_walk_all(late, &err), -1);
    cr_assert(strstr(err.msg, "too ambiguous"), "%s", err.msg);
    free(mask);
    tram_matcher_free(m);
    tram_grammar_release(late);
    free(after);
    /* two deep stays well inside the limit and compiles */
    free(gbnf);
    gbnf = nested_plus(2);
    tram_grammar *ok = tram_grammar_compile(gbnf, "root", tok, &err);
    cr_assert(ok, "%s", err.msg);
    tram_grammar_release(ok);
    free(gbnf);
    tram_tokenizer_free(tok);
}

/* A grammar with a dead end on the vocabulary: after "ab" it asks for a
 * character of an empty class, which no token has, and it cannot end
 * there.  The mask then allows nothing and the matcher says why; on the
 * way there (and on the other branch) it allows tokens and is not stuck. */
Test(grammar, a_dead_end_allows_nothing_and_says_so, .timeout = 60)
{
    tram_tokenizer *tok;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    tram_grammar *g = tram_grammar_compile("root ::= \"ab\" [^\\x00-\\U0010FFFF] | \"c\"", "root", tok, &err);
    cr_assert(g, "%s", err.msg);
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    tram_matcher *m;
    cr_assert_eq(tram_matcher_create(&m, g, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_matcher_fill_mask(m, mask), 1);
    cr_assert_null(tram_matcher_stuck(m));
    cr_assert(allowed(mask, single_token(tok, "ab")) && allowed(mask, single_token(tok, "c")));
    cr_assert_eq(tram_matcher_accept(m, single_token(tok, "ab")), 1);
    cr_assert_eq(tram_matcher_fill_mask(m, mask), 0);
    for (int w = 0; w < tram_grammar_mask_words(g); w++)
        cr_assert_eq(mask[w], 0, "word %d of the mask allows %08x", w, mask[w]);
    cr_assert_str_eq(tram_matcher_stuck(m), TRAM_GRAMMAR_DEAD_END);
    cr_assert(!tram_matcher_can_end(m) && !tram_matcher_is_done(m));
    tram_matcher_free(m);
    cr_assert_eq(tram_matcher_create(&m, g, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_matcher_accept(m, single_token(tok, "c")), 1);
    cr_assert_eq(tram_matcher_fill_mask(m, mask), 1, "the end (EOS) is allowed after \"c\"");
    cr_assert_null(tram_matcher_stuck(m));
    tram_matcher_free(m);
    free(mask);
    tram_grammar_release(g);
    tram_tokenizer_free(tok);
}

/* The byte matcher for the JSON Schema tests (test_json_schema.c). */
int test_gbnf_matches(const char *gbnf, const char *text)
{
    return matches(gbnf, text);
}
