/* Hostile and very large grammars (issue 21): long rule chains compile
 * fast or are refused with the bound they pass (never a crash), lists of
 * 100,000 literals (a choice, a JSON Schema enum) compile and constrain
 * exactly through the token mask, a lone surrogate is an error, and a
 * refused grammar leaves the server's compile cache as it was.  Every big
 * input is generated here. */
#include <criterion/criterion.h>
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
#include "server/structured.h"
#include "tests/unit/test_tokenizer_util.h"

static tram_tokenizer *tok;

static void setup(void) { tok = tok_default(); }
static void teardown(void) { tram_tokenizer_free(tok); }

TestSuite(grammar_bounds, .init = setup, .fini = teardown, .timeout = 120);

/* n rules r0 (named root) .. r(n-1), rule i "body" with %s for the next
 * rule's name, the last one "y"; written from the root down, or from the
 * end up (the order changes what a fixpoint over the rules costs). */
static char *chain(int n, const char *body, int backward)
{
    tram_strbuf b = {0};
    for (int k = 0; k < n; k++) {
        int i = backward ? n - 1 - k : k;
        char next[32];
        snprintf(next, sizeof(next), "r%d", i + 1);
        if (i == 0)
            tram_strbuf_addf(&b, "root ::= ");
        else
            tram_strbuf_addf(&b, "r%d ::= ", i);
        if (i == n - 1)
            tram_strbuf_addf(&b, "\"y\"\n");
        else {
            tram_strbuf_addf(&b, body, next);
            tram_strbuf_add(&b, "\n", 1);
        }
    }
    return b.s;
}

/* Feeds text's tokens to a new matcher while it takes them (the mask
 * agreeing with accept on each): 1 when it took them all, *complete then
 * whether it may end there. */
static int walk(const tram_grammar *g, const char *text, int *complete)
{
    tram_matcher *m;
    tram_error err = {{0}};
    cr_assert_eq(tram_matcher_create(&m, g, &err), 0, "%s", err.msg);
    int32_t *ids = NULL;
    int n = 0, ok = 1;
    cr_assert_eq(tram_tokenizer_encode(tok, text, strlen(text), 0, 0, &ids, &n, &err), 0, "%s", err.msg);
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    for (int i = 0; i < n && ok; i++) {
        tram_matcher_fill_mask(m, mask);
        int allowed = (mask[ids[i] >> 5] >> (ids[i] & 31)) & 1, accepted = tram_matcher_accept(m, ids[i]);
        cr_assert_eq(allowed, accepted, "'%s' token %d: the mask says %d, accept %d", text, i, allowed, accepted);
        ok = accepted;
    }
    *complete = tram_matcher_can_end(m);
    free(mask);
    free(ids);
    tram_matcher_free(m);
    return ok;
}

/* The matcher takes all of text, and may end there exactly when `complete`. */
static void assert_walks(const tram_grammar *g, const char *text, int complete)
{
    int can_end;
    cr_assert(walk(g, text, &can_end), "'%s' refused", text);
    cr_assert_eq(can_end, complete, "'%s' complete: %d", text, can_end);
}

static int takes(const tram_grammar *g, const char *text)
{
    int can_end;
    return walk(g, text, &can_end);
}

/* 60,000 rules each referring to the next, about 1 MB, in both orders:
 * with a byte between references it compiles (and matches x^59999 y);
 * as bare references it is refused naming the step bound, and nested
 * references (each rule starting with the next) naming the depth bound.
 * The recursive expansion these replaced overflowed the C stack. */
Test(grammar_bounds, a_60k_rule_chain_compiles_or_is_refused_by_its_bound)
{
    for (int backward = 0; backward < 2; backward++) {
        tram_error err = {{0}};
        char *text = chain(60000, "\"x\" %s", backward);
        cr_assert_gt(strlen(text), 900000);
        tram_grammar *g = tram_grammar_compile(text, "root", tok, &err);
        cr_assert(g, "backward %d: %s", backward, err.msg);
        assert_walks(g, "xxxxxxxxxxxxxxxxxxxx", 0);
        cr_assert(!takes(g, "xxxxxxxxxxxxxxxxxxxxy"), "backward %d: 'y' after 20 x's (59,999 are needed)", backward);
        tram_grammar_release(g);
        free(text);

        text = chain(60000, "%s", backward);
        cr_assert_null(tram_grammar_compile(text, "root", tok, &err));
        cr_assert(strstr(err.msg, "32768 rule references"), "%s", err.msg);
        free(text);

        text = chain(60000, "%s \"x\"", backward);
        cr_assert_null(tram_grammar_compile(text, "root", tok, &err));
        cr_assert(strstr(err.msg, "nest over 1024 deep"), "%s", err.msg);
        free(text);
    }
}

/* The grammar a whole 60k chain takes: the byte matcher reads all 60,000
 * bytes of it in order (tail references keep the stack one frame deep). */
Test(grammar_bounds, the_byte_matcher_reads_a_60k_chain_to_its_end)
{
    char *text = chain(60000, "\"x\" %s", 1);
    tram_gbnf g;
    tram_error err = {{0}};
    cr_assert_eq(tram_gbnf_parse(text, "root", 8, &g, &err), 0, "%s", err.msg);
    static int32_t buf[TRAM_MAX_STACK_DEPTH + 1];
    tram_stackset a = {0}, b = {0};
    tram_stacks_start(&g, g.root, &a, buf);
    for (int i = 0; i < 60000; i++) {
        cr_assert_eq(a.n, 1, "byte %d: %d stacks", i, a.n);
        cr_assert_eq(a.has_end, 0);
        tram_stacks_advance(&g, &a, -1, (unsigned char)(i < 59999 ? 'x' : 'y'), &b, buf);
        tram_stackset t = a;
        a = b;
        b = t;
    }
    cr_assert(a.has_end && a.n == 0, "the chain is not complete after 60,000 bytes");
    tram_stackset_free(&a);
    tram_stackset_free(&b);
    tram_gbnf_free(&g);
    free(text);
}

/* 32,000 rules "x" next | "y" written forward: the FIRST/FOLLOW fixpoint
 * was quadratic on it (29 s); now it compiles and any x^k y is complete. */
Test(grammar_bounds, a_32k_forward_chain_compiles_and_constrains)
{
    tram_error err = {{0}};
    char *text = chain(32000, "\"x\" %s | \"y\"", 0);
    tram_grammar *g = tram_grammar_compile(text, "root", tok, &err);
    cr_assert(g, "%s", err.msg);
    assert_walks(g, "xxxxxxy", 1);
    assert_walks(g, "xxxx", 0);
    cr_assert(!takes(g, "xxz"));
    tram_grammar_release(g);
    free(text);
}

/* n distinct codes of 8 letters and digits, from a fixed LCG (those with
 * a prefix in common share it in the trie). */
static char **codes(int n)
{
    static const char alphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    char **v = calloc((size_t)n, sizeof(char *));
    uint64_t x = 12345;
    for (int i = 0; i < n; i++) {
        v[i] = calloc(9, 1);
        for (int k = 0; k < 8; k++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            v[i][k] = alphabet[(x >> 33) % 32];
        }
        v[i][0] = alphabet[i % 32];  /* every first character used */
        snprintf(v[i] + 5, 4, "%03u", (unsigned)i % 1000u);  /* distinct: the index in the tail */
        v[i][1] = alphabet[(i / 1000) % 32];
        v[i][2] = alphabet[(i / 32000) % 32];
    }
    return v;
}

static void free_codes(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* A value not in the list: the first code with its last digit changed to
 * a letter (the codes end in digits). */
static void non_value(const char *code, char *out)
{
    strcpy(out, code);
    out[7] = 'Q';
}

/* A choice of 100,000 strings compiles (it was refused as too ambiguous
 * past 512) and constrains exactly: a value is complete, a non-value is
 * refused, a value's prefix is not complete. */
Test(grammar_bounds, a_choice_of_100k_strings_constrains_exactly)
{
    int n = 100000;
    char **v = codes(n);
    char *gbnf = NULL, other[16];
    tram_error err = {{0}};
    cr_assert_eq(tram_choice_to_gbnf((const char *const *)v, n, "root", &gbnf, &err), 0, "%s", err.msg);
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
    cr_assert(g, "%s", err.msg);
    for (int i = 0; i < n; i += 33331)
        assert_walks(g, v[i], 1);
    char prefix[8];
    memcpy(prefix, v[777], 7);
    prefix[7] = 0;
    assert_walks(g, prefix, 0);
    non_value(v[0], other);
    cr_assert(!takes(g, other), "'%s' is not a value", other);
    tram_grammar_release(g);
    free(gbnf);
    free_codes(v, n);
}

/* The same through JSON Schema: an enum of 100,000 strings, and an anyOf
 * of 2,000 consts (each a rule of its own, inlined into the trie). */
Test(grammar_bounds, a_100k_enum_and_a_2k_anyof_of_consts_constrain_exactly)
{
    int n = 100000;
    char **v = codes(n);
    for (int anyof = 0; anyof < 2; anyof++) {
        int count = anyof ? 2000 : n;
        tram_strbuf s = {0};
        tram_strbuf_addf(&s, anyof ? "{\"anyOf\":[" : "{\"enum\":[");
        for (int i = 0; i < count; i++)
            tram_strbuf_addf(&s, anyof ? "%s{\"const\":\"%s\"}" : "%s\"%s\"", i ? "," : "", v[i]);
        tram_strbuf_addf(&s, "]}");
        char *gbnf = NULL, quoted[32];
        tram_error err = {{0}};
        cr_assert_eq(tram_json_schema_to_gbnf(s.s, "root", &gbnf, &err), 0, "%s", err.msg);
        tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
        cr_assert(g, "anyOf %d: %s", anyof, err.msg);
        snprintf(quoted, sizeof(quoted), "\"%s\"", v[count - 1]);
        assert_walks(g, quoted, 1);
        snprintf(quoted, sizeof(quoted), "\"%.7s", v[count / 2]);
        assert_walks(g, quoted, 0);
        char other[16];
        non_value(v[3], other);
        snprintf(quoted, sizeof(quoted), "\"%s\"", other);
        cr_assert(!takes(g, quoted), "%s is not a value", quoted);
        tram_grammar_release(g);
        free(gbnf);
        tram_strbuf_free(&s);
    }
    free_codes(v, n);
}

/* 600 alternatives that each begin with a different character (U+0100
 * and on) stay one stack per alternative's first byte run: they compile. */
Test(grammar_bounds, six_hundred_values_with_distinct_first_characters_compile)
{
    tram_strbuf b = {0};
    tram_strbuf_addf(&b, "root ::= ");
    for (int i = 0; i < 600; i++)
        tram_strbuf_addf(&b, "%s\"\\u%04X-%d\"", i ? " | " : "", 0x100 + i, i);
    tram_error err = {{0}};
    tram_grammar *g = tram_grammar_compile(b.s, "root", tok, &err);
    cr_assert(g, "%s", err.msg);
    assert_walks(g, "\xc8\x80-256", 1);  /* U+0200 */
    cr_assert(!takes(g, "\xc8\x80-257"));
    tram_grammar_release(g);
    tram_strbuf_free(&b);
}

/* The text's bounds, each named in its error. */
Test(grammar_bounds, the_text_bounds_are_named)
{
    tram_error err = {{0}};
    tram_gbnf g;
    size_t big = (size_t)TRAM_GBNF_MAX_TEXT + 16;
    char *text = malloc(big + 1);
    memcpy(text, "root ::= \"", 10);
    memset(text + 10, 'a', big - 11);
    text[big - 1] = '"';
    text[big] = 0;
    cr_assert_eq(tram_gbnf_parse(text, "root", 8, &g, &err), -1);
    cr_assert(strstr(err.msg, "over 8 MiB"), "%s", err.msg);
    /* a choice list whose grammar would pass it stops as it grows */
    const char *nine[9];
    text[TRAM_GBNF_MAX_TEXT / 8] = 0;
    for (int i = 0; i < 9; i++)
        nine[i] = text + 10;
    char *gbnf = NULL;
    cr_assert_eq(tram_choice_to_gbnf(nine, 9, "root", &gbnf, &err), -1);
    cr_assert(strstr(err.msg, "over 8 MiB (at entry 8)"), "%s", err.msg);
    free(text);

    tram_strbuf b = {0};
    for (int i = 0; i <= TRAM_GBNF_MAX_RULES; i++)
        tram_strbuf_addf(&b, i ? "r%d ::= \"a\"\n" : "root ::= \"a\"\n", i);
    cr_assert_eq(tram_gbnf_parse(b.s, "root", 8, &g, &err), -1);
    cr_assert(strstr(err.msg, "more than 131072 rules"), "%s", err.msg);
    tram_strbuf_free(&b);
}

/* A lone surrogate is no character: an error in a regex (also inside a
 * JSON Schema pattern) and in GBNF, not a grammar that matches nothing;
 * a UTF-16 pair is the character it encodes. */
Test(grammar_bounds, a_lone_surrogate_is_an_error)
{
    char *gbnf = NULL;
    tram_error err = {{0}};
    static const char *const regexes[] = {"\\ud800", "a\\uDFFF", "[\\ud800-\\udbff]", "\\ud83d\\u0041"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(regexes); i++) {
        cr_assert_eq(tram_regex_to_gbnf(regexes[i], "root", &gbnf, &err), -1, "%s compiled", regexes[i]);
        cr_assert(strstr(err.msg, "lone surrogate"), "%s: %s", regexes[i], err.msg);
    }
    cr_assert_eq(tram_json_schema_to_gbnf("{\"type\":\"string\",\"pattern\":\"^\\\\ud800$\"}", "root", &gbnf, &err),
                 -1);
    cr_assert(strstr(err.msg, "lone surrogate"), "%s", err.msg);
    tram_gbnf g;
    cr_assert_eq(tram_gbnf_parse("root ::= \"\\uD800\"", "root", 8, &g, &err), -1);
    cr_assert(strstr(err.msg, "surrogate"), "%s", err.msg);

    cr_assert_eq(tram_regex_to_gbnf("\\ud83d\\ude00", "root", &gbnf, &err), 0, "%s", err.msg);
    tram_grammar *ok = tram_grammar_compile(gbnf, "root", tok, &err);
    cr_assert(ok, "%s", err.msg);
    assert_walks(ok, "\xf0\x9f\x98\x80", 1);
    tram_grammar_release(ok);
    free(gbnf);
}

/* Through the server's call: a grammar refused (too ambiguous, and a
 * chain past the step bound) is a 400 naming its field, and leaves the
 * compile cache as it was; one that compiles is kept, and counted in the
 * cache's bytes. */
Test(grammar_bounds, a_refused_grammar_leaves_the_cache_unchanged)
{
    int entries0, entries1, entries2;
    size_t bytes0, bytes1, bytes2;
    tram_structured_cache_stats(&entries0, &bytes0);
    char *refused[2] = {NULL, chain(40000, "%s", 0)};
    tram_strbuf nested = {0};
    tram_strbuf_addf(&nested, "root ::= ");
    for (int i = 0; i < 16; i++)
        tram_strbuf_add(&nested, "(", 1);
    tram_strbuf_addf(&nested, "\"a\"");
    for (int i = 0; i < 16; i++)
        tram_strbuf_add(&nested, ")+", 2);
    refused[0] = nested.s;
    for (int i = 0; i < 2; i++) {
        json_t *body = json_pack("{s:{s:s}}", "structured_outputs", "grammar", refused[i]);
        const tram_grammar *g = NULL;
        tram_api_error e = {0};
        cr_assert_eq(tram_structured_grammar(body, tok, &g, &e), -1, "case %d compiled", i);
        cr_assert_eq(e.status, 400);
        cr_assert_str_eq(e.param, "structured_outputs.grammar");
        cr_assert(strstr(e.message, i ? "32768 rule references" : "too ambiguous"), "%s", e.message);
        json_decref(body);
        tram_structured_cache_stats(&entries1, &bytes1);
        cr_assert_eq(entries1, entries0, "case %d: %d grammars kept, %d before", i, entries1, entries0);
        cr_assert_eq(bytes1, bytes0);
    }
    json_t *body = json_pack("{s:{s:s}}", "structured_outputs", "regex", "[a-z]{3}-[0-9]+ refused-not");
    const tram_grammar *g = NULL;
    tram_api_error e = {0};
    cr_assert_eq(tram_structured_grammar(body, tok, &g, &e), 0, "%s", e.message);
    tram_structured_cache_stats(&entries2, &bytes2);
    cr_assert_eq(entries2, entries0 + 1);
    cr_assert_geq(bytes2, bytes0 + tram_grammar_bytes(g));
    tram_grammar_release(g);
    json_decref(body);
    free(refused[0]);
    free(refused[1]);
}

/* 1 when the byte matcher reads all of text and may end there. */
static int gbnf_matches(const char *gbnf, const char *text)
{
    tram_gbnf g;
    tram_error err = {{0}};
    cr_assert_eq(tram_gbnf_parse(gbnf, "root", 8, &g, &err), 0, "%s", err.msg);
    static int32_t buf[TRAM_MAX_STACK_DEPTH + 1];
    tram_stackset a = {0}, b = {0};
    tram_stacks_start(&g, g.root, &a, buf);
    for (const char *p = text; *p && (a.n > 0); p++) {
        tram_stacks_advance(&g, &a, -1, (unsigned char)*p, &b, buf);
        tram_stackset t = a;
        a = b;
        b = t;
        if (p[1] && a.n == 0)
            a.has_end = 0;
    }
    int ok = a.has_end && (int)strlen(text) > 0;
    tram_stackset_free(&a);
    tram_stackset_free(&b);
    tram_gbnf_free(&g);
    return ok;
}

/* Merging alternatives into a trie keeps the language: prefixes shared
 * by literals, by a class, by a rule of literals inlined and by a rule
 * that is not. */
Test(grammar_bounds, merged_alternatives_match_the_same_strings)
{
    const char *gbnf = "root ::= ( \"one\" | \"once\" | \"only\" | \"on\" [a-z] | x | \"o\" y | \"o\" y \"?\" ) \"!\"\n"
                       "x ::= \"onyx\" | \"o\"\ny ::= \"n\"+";
    static const char *const yes[] = {"one!", "once!", "only!", "onz!", "onc!", "onyx!", "o!", "on!", "onnn!",
                                      "onnn?!"};
    static const char *const no[] = {"oncx!", "onyxx!", "oo!", "!", "one", "onnnx!", "o?!", "onc?!"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(yes); i++)
        cr_assert(gbnf_matches(gbnf, yes[i]), "'%s' refused", yes[i]);
    for (size_t i = 0; i < TRAM_ARRAY_LEN(no); i++)
        cr_assert(!gbnf_matches(gbnf, no[i]), "'%s' accepted", no[i]);
}
