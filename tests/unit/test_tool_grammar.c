/* The grammar behind tool_choice "required" and a named function
 * (server/tool_grammar.c): random walks through it, token by token over the
 * default model's vocabulary, always end in text that server/tool_calls.c
 * reads back as calls of the allowed functions, in every template format,
 * and streams as those calls. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_validate.h"
#include "server/tool_calls.h"
#include "server/tool_grammar.h"
#include "tests/unit/test_tokenizer_util.h"
#include "tokenizer/tokenizer.h"

static const char *tools_json =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 12}, \"unit\": {\"enum\": [\"c\", \"f\"]},"
    " \"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\", \"unit\"],"
    " \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

/* Draws allowed tokens at random until the grammar is done or may end and
 * the draw picks the end; returns the text (malloc'd). */
static char *walk(const tram_grammar *g, const tram_tokenizer *tok, unsigned *seed)
{
    tram_matcher *m;
    cr_assert_eq(tram_matcher_create(&m, g, NULL), 0);
    int words = tram_grammar_mask_words(g), vocab = tram_grammar_vocab(g);
    uint32_t *mask = calloc((size_t)words, sizeof(*mask));
    int32_t *ids = calloc(2048, sizeof(*ids)), *allowed = calloc((size_t)vocab, sizeof(*allowed));
    int n = 0, eos = tram_tokenizer_eos(tok);
    while (!tram_matcher_is_done(m) && n < 2048) {
        tram_matcher_fill_mask(m, mask);
        int k = 0;
        for (int id = 0; id < vocab; id++)
            if (mask[id >> 5] >> (id & 31) & 1)
                allowed[k++] = id;
        cr_assert_gt(k, 0, "a dead end after %d tokens", n);
        int32_t pick = allowed[rand_r(seed) % k];
        cr_assert(tram_matcher_accept(m, pick));
        if (pick == eos)
            break;
        ids[n++] = pick;
    }
    cr_assert_lt(n, 2048);
    char *text;
    size_t len;
    cr_assert_eq(tram_tokenizer_decode(tok, ids, n, 1, &text, &len, NULL), 0);
    tram_matcher_free(m);
    free(mask);
    free(ids);
    free(allowed);
    return text;
}

/* Fed a byte at a time, the reader streams no content, each call's name in
 * order, then arguments whose pieces add up to the whole reading's. */
static void check_streamed(tram_tool_format f, const tram_api_tools *t, const char *text, const json_t *calls)
{
    size_t n = json_array_size(calls), len = strlen(text);
    tram_strbuf *args = calloc(n, sizeof(*args));
    tram_tool_reader r;
    tram_tool_reader_init(&r, f, t);
    size_t named = 0;
    for (size_t i = 1; i <= len + 1; i++) {
        if (i <= len)
            tram_tool_reader_feed(&r, text, i);
        else
            tram_tool_reader_finish(&r, 0, 0);
        tram_tool_delta d;
        while (tram_tool_reader_next(&r, &d)) {
            cr_assert_neq(d.kind, TRAM_TOOL_DELTA_CONTENT, "format %d: %s", f, text);
            cr_assert_lt((size_t)d.index, n, "format %d: %s", f, text);
            const json_t *fn = json_object_get(json_array_get(calls, (size_t)d.index), "function");
            if (d.kind == TRAM_TOOL_DELTA_NAME) {
                cr_assert_eq((size_t)d.index, named++, "format %d: %s", f, text);
                cr_assert_str_eq(d.name, json_string_value(json_object_get(fn, "name")));
            } else {
                tram_strbuf_add(&args[d.index], d.text, d.len);
            }
        }
    }
    cr_assert_eq(named, n, "format %d: %s", f, text);
    for (size_t k = 0; k < n; k++) {
        const json_t *fn = json_object_get(json_array_get(calls, k), "function");
        cr_assert_str_eq(args[k].s ? args[k].s : "", json_string_value(json_object_get(fn, "arguments")),
                         "format %d: %s", f, text);
        tram_strbuf_free(&args[k]);
    }
    free(args);
    tram_tool_reader_free(&r);
}

static void check_format(tram_tool_format f, const tram_api_tools *t, const tram_tokenizer *tok, int max_calls)
{
    tram_api_error e = {0};
    const tram_grammar *g = tram_tool_grammar(f, t, tok, &e);
    cr_assert_not_null(g, "format %d: %s", f, e.message);
    unsigned seed = 1234 + (unsigned)f;
    for (int run = 0; run < 8; run++) {
        char *text = walk(g, tok, &seed);
        tram_tool_calls tc;
        cr_assert_eq(tram_tool_calls_parse(f, text, strlen(text), t, 0, &tc), 0);
        cr_assert_not_null(tc.calls, "format %d: no calls in %s", f, text);
        cr_assert_eq(tc.content_len, 0, "format %d: %s", f, text);
        cr_assert_leq((int)json_array_size(tc.calls), max_calls, "format %d: %s", f, text);
        size_t i;
        json_t *call;
        json_array_foreach(tc.calls, i, call) {
            const char *name = json_string_value(json_object_get(json_object_get(call, "function"), "name"));
            cr_assert(!t->named || !strcmp(name, t->named), "format %d: %s", f, text);
        }
        check_streamed(f, t, text, tc.calls);
        json_decref(tc.calls);
        free(text);
    }
    tram_grammar_release(g);
}

Test(tool_grammar, walks_parse_back_as_calls)
{
    tram_tokenizer *tok = tok_default();
    json_t *tools = json_loads(tools_json, 0, NULL);
    for (tram_tool_format f = TRAM_TOOLS_GENERIC; f <= TRAM_TOOLS_MISTRAL; f++) {
        tram_api_tools required = {.tools = tools, .choice = TRAM_TOOL_CHOICE_REQUIRED, .parallel = 1};
        check_format(f, &required, tok, f == TRAM_TOOLS_LLAMA3 ? 1 : 1000);
        tram_api_tools one = {.tools = tools, .choice = TRAM_TOOL_CHOICE_REQUIRED, .parallel = 0};
        check_format(f, &one, tok, 1);
        tram_api_tools named = {.tools = tools, .choice = TRAM_TOOL_CHOICE_NAMED, .named = "get_weather", .parallel = 1};
        check_format(f, &named, tok, 1);
    }
    json_decref(tools);
    tram_tokenizer_free(tok);
}

Test(tool_grammar, a_schema_it_cannot_enforce_names_the_function)
{
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"a\"}},"
                               " {\"type\": \"function\", \"function\": {\"name\": \"b\", \"parameters\":"
                               " {\"type\": \"object\", \"not\": {}}}}]", 0, NULL);
    tram_api_tools t = {.tools = tools, .choice = TRAM_TOOL_CHOICE_REQUIRED, .parallel = 1};
    tram_api_error e = {0};
    cr_assert_null(tram_tool_grammar_gbnf(TRAM_TOOLS_HERMES, &t, &e));
    cr_assert_eq(e.status, 400);
    cr_assert_str_eq(e.param, "tools[1].function.parameters");
    cr_assert(strstr(e.message, "not"), "%s", e.message);
    /* named a, b's schema does not matter */
    t = (tram_api_tools){.tools = tools, .choice = TRAM_TOOL_CHOICE_NAMED, .named = "a", .parallel = 1};
    char *gbnf = tram_tool_grammar_gbnf(TRAM_TOOLS_HERMES, &t, &e);
    cr_assert_not_null(gbnf, "%s", e.message);
    free(gbnf);
    json_decref(tools);
}

/* A keyword the grammar only approximates compiles: each call's arguments
 * are validated after generation (tram_tool_validators), so the reply is
 * checked against the whole schema there. */
Test(tool_grammar, an_approximated_keyword_is_left_to_the_validator)
{
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"tag\", \"parameters\":"
                               " {\"type\": \"object\", \"properties\": {\"tags\": {\"type\": \"array\","
                               " \"items\": {\"type\": \"string\"}, \"uniqueItems\": true},"
                               " \"n\": {\"type\": \"integer\", \"multipleOf\": 7}}}}}]", 0, NULL);
    tram_api_tools t = {.tools = tools, .choice = TRAM_TOOL_CHOICE_REQUIRED, .parallel = 1};
    tram_api_error e = {0};
    char *gbnf = tram_tool_grammar_gbnf(TRAM_TOOLS_HERMES, &t, &e);
    cr_assert_not_null(gbnf, "%s", e.message);
    free(gbnf);
    tram_jv_schema **v = NULL;
    cr_assert_eq(tram_tool_validators(&t, &v, &e), 0, "%s", e.message);
    cr_assert_not_null(v[0]);
    /* what the grammar lets through, the validator stops */
    const char *twice = "{\"tags\": [\"a\", \"a\"]}", *once = "{\"tags\": [\"a\"], \"n\": 14}";
    tram_jv_failure f;
    cr_assert_eq(tram_jv_check(v[0], twice, strlen(twice), &f), 1);
    cr_assert_str_eq(f.keyword, "uniqueItems");
    cr_assert_eq(tram_jv_check(v[0], once, strlen(once), &f), 0, "%s", f.message);
    tram_jv_free(v[0]);
    free(v);
    json_decref(tools);
}
