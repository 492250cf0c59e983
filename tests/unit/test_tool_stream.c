/* Tool calls read as the text streams (server/tool_calls.h) and the JSON
 * scanner under them (server/json_scan.h): whatever pieces a reply comes in
 * (byte by byte, every split in two, the default tokenizer's tokens, random
 * sizes), the reader streams the same content, the same calls and the same
 * arguments, and they add up to what the whole reply is read as; text that
 * only looked like the start of a call comes back as content, byte for
 * byte. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_scan.h"
#include "server/tool_calls.h"
#include "tests/unit/test_tokenizer_util.h"
#include "chat/pyjson.h"

static tram_api_tools tools, single;
static json_t *tool_list;

static void setup(void)
{
    tool_list = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
                           " {\"type\": \"function\", \"function\": {\"name\": \"search\"}}]", 0, NULL);
    tools = (tram_api_tools){.tools = tool_list, .choice = TRAM_TOOL_CHOICE_AUTO, .parallel = 1};
    single = (tram_api_tools){.tools = tool_list, .choice = TRAM_TOOL_CHOICE_AUTO, .parallel = 0};
}

static tram_tokenizer *tok;  /* loaded by the first test that splits by tokens */

static void teardown(void)
{
    json_decref(tool_list);
    tram_tokenizer_free(tok);
    tok = NULL;
}

TestSuite(tool_stream, .init = setup, .fini = teardown);

/* ---- the scanner ---- */

/* Scans text whole (it must be one object); NULL when refused. */
static char *scan(const char *text)
{
    tram_json_scan s = {0};
    tram_json_scan_init(&s);
    tram_strbuf out = {0};
    int ev = 0;
    for (const char *p = text; *p && !(ev & (TRAM_JSCAN_ERROR | TRAM_JSCAN_DONE)); p++)
        ev = tram_json_scan_byte(&s, (unsigned char)*p, &out);
    tram_json_scan_free(&s);
    if (!(ev & TRAM_JSCAN_DONE)) {
        tram_strbuf_free(&out);
        return NULL;
    }
    return tram_strbuf_take(&out);
}

Test(tool_stream, the_scanner_writes_what_json_dumps_writes)
{
    const char *objects[] = {
        "{}", "{\"a\":1}", "{ \"a\" : [ 1 , 2.50 , -0 , -0.0, 1E2 , 1e-7, 12345678901234567 ] }",
        "{\"s\": \"tab\\there \\\"q\\\" \\\\ \\/ \\b\\f\\r\\n \\u00e9 \\u20AC \\ud83d\\ude00 caf\u00e9 \u20ac \U0001F600\"}",
        "{\"n\": null, \"t\": true, \"f\": false, \"o\": {\"x\": {}, \"y\": [[], [{}]]}}",
        "{\"ctl\": \"\\u0001\\u001f\", \"big\": 1.7976931348623157e308, \"neg\": -12}",
        "{\"k\\u0041\": \"v\", \"\": \"\"}",
    };
    for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++) {
        char *got = scan(objects[i]);
        json_t *v = json_loads(objects[i], 0, NULL);
        cr_assert_not_null(v, "%s", objects[i]);
        tram_strbuf want = {0};
        tram_pyjson_put(&want, v, -1);
        cr_assert_not_null(got, "refused: %s", objects[i]);
        cr_assert_str_eq(got, want.s, "%s", objects[i]);
        free(got);
        tram_strbuf_free(&want);
        json_decref(v);
    }
}

Test(tool_stream, the_scanner_refuses_what_jansson_refuses)
{
    const char *bad[] = {
        "{\"a\" 1}", "{\"a\": 01}", "{\"a\": 1.}", "{\"a\": .5}", "{\"a\": 1e}", "{\"a\": -}",
        "{\"a\": +1}", "{\"a\": tru}", "{\"a\": nul1}", "{\"a\": 1,}", "{,}", "{\"a\": [1,]}", "{\"a\": [1}",
        "{a: 1}", "{'a': 1}", "{\"a\": \"\t\"}", "{\"a\": \"\\x\"}", "{\"a\": \"\\u12G4\"}",
        "{\"a\": \"\\u0000\"}", "{\"a\": \"\\ud83d\"}", "{\"a\": \"\\ude00\"}", "{\"a\": \"\\ud83d\\u0041\"}",
        "{\"a\": \"\xc3\"}", "{\"a\": \"\xc0\xaf\"}", "{\"a\": \"\xed\xa0\x80\"}", "{\"a\": \"\xf4\x90\x80\x80\"}",
        "{\"a\": 99999999999999999999}", "{\"a\": 1e400}", "{\"a\": \"x\"", "{\"a\": 1]", "[{}]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *got = scan(bad[i]);
        json_t *v = json_loads(bad[i], 0, NULL);
        cr_assert_null(got, "accepted: %s -> %s", bad[i], got);
        cr_assert(!v || bad[i][0] == '[', "jansson reads %s: the case is wrong", bad[i]);
        json_decref(v);
    }
    char deep[4200];
    size_t n = 0;
    deep[n++] = '{';
    deep[n++] = '"';
    deep[n++] = 'a';
    deep[n++] = '"';
    deep[n++] = ':';
    for (int i = 0; i < 2100; i++)
        deep[n++] = '[';
    deep[n] = 0;
    tram_json_scan s = {0};
    tram_json_scan_init(&s);
    tram_strbuf out = {0};
    int ev = 0;
    size_t read = 0;
    while (read < n && !(ev & TRAM_JSCAN_ERROR))
        ev = tram_json_scan_byte(&s, (unsigned char)deep[read++], &out);
    cr_assert_eq(ev, TRAM_JSCAN_ERROR);
    cr_assert_eq(read, 5 + TRAM_JSCAN_MAX_DEPTH, "the object and 2047 arrays are %d levels", TRAM_JSCAN_MAX_DEPTH);
    tram_json_scan_free(&s);
    tram_strbuf_free(&out);
}

/* ---- the reader, fed in pieces ---- */

/* What a stream of one reply holds: its deltas in order, pieces of the
 * same kind (and call) joined, as "C[content]", "N0[name]", "A0[args]";
 * and the whole reply's reading at the end. */
typedef struct {
    tram_strbuf trace;
    int last_kind, last_index;
    tram_strbuf content;
    tram_strbuf args[8];
    int names;
    size_t content_len;
    char *calls;   /* "name:arguments|..." */
} stream_result;

static void put_delta(stream_result *s, const char *text, const tram_tool_delta *d)
{
    int joined = s->last_kind == (int)d->kind && s->last_index == d->index && d->kind != TRAM_TOOL_DELTA_NAME;
    if (!joined) {
        char head[16];
        snprintf(head, sizeof(head), "%s%c", s->trace.len ? "]" : "",
                 d->kind == TRAM_TOOL_DELTA_CONTENT ? 'C' : d->kind == TRAM_TOOL_DELTA_NAME ? 'N' : 'A');
        tram_strbuf_cat(&s->trace, head, NULL);
        if (d->kind != TRAM_TOOL_DELTA_CONTENT)
            tram_strbuf_addf(&s->trace, "%d", d->index);
        tram_strbuf_cat(&s->trace, "[", NULL);
    }
    s->last_kind = (int)d->kind;
    s->last_index = d->index;
    cr_assert_lt(d->index, 8);
    if (d->kind == TRAM_TOOL_DELTA_CONTENT) {
        tram_strbuf_add(&s->trace, text + d->from, d->to - d->from);
        tram_strbuf_add(&s->content, text + d->from, d->to - d->from);
    } else if (d->kind == TRAM_TOOL_DELTA_NAME) {
        cr_assert_eq(d->index, s->names, "calls begin in order");
        cr_assert_eq(s->args[d->index].len, 0, "a call's name before its arguments");
        s->names++;
        tram_strbuf_cat(&s->trace, d->name, NULL);
    } else {
        cr_assert_lt(d->index, s->names, "arguments after the call's name");
        tram_strbuf_add(&s->trace, d->text, d->len);
        tram_strbuf_add(&s->args[d->index], d->text, d->len);
    }
}

static void drain(tram_tool_reader *r, const char *text, stream_result *s)
{
    tram_tool_delta d;
    while (tram_tool_reader_next(r, &d))
        put_delta(s, text, &d);
}

/* Feeds text in the pieces that end at cuts[0..n) (increasing, the last
 * one strlen(text)), draining the deltas after each. */
static stream_result run(tram_tool_format f, const tram_api_tools *t, const char *text, const size_t *cuts,
                         int n, int cut)
{
    stream_result s = {.last_kind = -1};
    tram_tool_reader r;
    tram_tool_reader_init(&r, f, t);
    for (int i = 0; i < n; i++) {
        tram_tool_reader_feed(&r, text, cuts[i]);
        drain(&r, text, &s);
    }
    tram_tool_reader_finish(&r, cut, 0);
    drain(&r, text, &s);
    s.content_len = r.content_end;
    json_t *calls = tram_tool_reader_calls(&r);
    tram_strbuf list = {0};
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        tram_strbuf_cat(&list, json_string_value(json_object_get(fn, "name")), ":",
                        json_string_value(json_object_get(fn, "arguments")), "|", NULL);
    }
    s.calls = tram_strbuf_take(&list);
    json_decref(calls);
    tram_tool_reader_free(&r);
    return s;
}

static void result_free(stream_result *s)
{
    tram_strbuf_free(&s->trace);
    tram_strbuf_free(&s->content);
    for (int i = 0; i < 8; i++)
        tram_strbuf_free(&s->args[i]);
    free(s->calls);
}

/* The splits of text to try: byte by byte, every cut in two, the default
 * tokenizer's tokens, and random piece sizes; each checked against the
 * whole text fed at once. */
typedef void (*split_check)(const stream_result *whole, const stream_result *split, const char *text,
                            const char *how);

static void for_each_split(tram_tool_format f, const tram_api_tools *t, const char *text, int cut,
                           split_check check)
{
    size_t len = strlen(text), *cuts = calloc(len + 2, sizeof(*cuts));
    stream_result whole = run(f, t, text, &len, 1, cut);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    stream_result s = run(f, t, text, cuts, (int)len, cut);
    check(&whole, &s, text, "byte by byte");
    result_free(&s);
    for (size_t k = 1; k < len; k++) {
        size_t two[2] = {k, len};
        s = run(f, t, text, two, 2, cut);
        check(&whole, &s, text, "in two");
        result_free(&s);
    }
    if (!tok)
        tok = tok_default();
    int32_t *ids;
    int n;
    cr_assert_eq(tram_tokenizer_encode(tok, text, len, 0, 1, &ids, &n, NULL), 0);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t bytes;
        tram_tokenizer_token_bytes(tok, ids[i], &bytes);
        cuts[i] = at = TRAM_MIN(at + bytes, len);
    }
    cuts[n > 0 ? n - 1 : 0] = len;
    s = run(f, t, text, cuts, n > 0 ? n : 1, cut);
    check(&whole, &s, text, "token by token");
    result_free(&s);
    free(ids);
    unsigned seed = (unsigned)len;
    for (int round = 0; round < 4; round++) {
        int m = 0;
        for (at = 0; at < len; cuts[m++] = at) {
            size_t step = 1 + (size_t)(rand_r(&seed) % 7);
            at = TRAM_MIN(len, at + step);
        }
        s = run(f, t, text, cuts, m, cut);
        check(&whole, &s, text, "in random pieces");
        result_free(&s);
    }
    result_free(&whole);
    free(cuts);
}

/* A reply of calls: the same trace however it was split, and each call's
 * streamed arguments are its final arguments. */
static void same_stream(const stream_result *whole, const stream_result *s, const char *text, const char *how)
{
    cr_assert_str_eq(s->trace.s ? s->trace.s : "", whole->trace.s ? whole->trace.s : "", "%s, %s", text, how);
    cr_assert_str_eq(s->calls, whole->calls, "%s, %s", text, how);
    cr_assert_eq(s->content_len, whole->content_len, "%s, %s", text, how);
    cr_assert_eq(s->content.len, s->content_len, "%s, %s: streamed content", text, how);
    const char *p = s->calls;
    for (int i = 0; *p; i++) {
        const char *args = strchr(p, ':') + 1;
        size_t n = s->args[i].len;
        cr_assert_lt(i, s->names, "%s, %s: a call that never streamed", text, how);
        cr_assert(n && !strncmp(args, s->args[i].s, n) && args[n] == '|', "%s, %s: call %d's arguments", text,
                  how, i);
        p = args + n + 1;
    }
}

/* Not calls: the stream's content is the whole text, byte for byte, and
 * the whole reply is content too. */
static void all_content(const stream_result *whole, const stream_result *s, const char *text, const char *how)
{
    size_t len = strlen(text);
    cr_assert_str_eq(whole->calls, "", "%s", text);
    cr_assert_eq(whole->content_len, len, "%s", text);
    cr_assert_str_eq(s->calls, "", "%s, %s", text, how);
    cr_assert_eq(s->content.len, len, "%s, %s: %zu bytes of content", text, how, s->content.len);
    cr_assert_eq(memcmp(s->content.s, text, len), 0, "%s, %s", text, how);
}

/* Plain text: not even a call began. */
static void plain_text(const stream_result *whole, const stream_result *s, const char *text, const char *how)
{
    all_content(whole, s, text, how);
    cr_assert_eq(s->names, 0, "%s, %s", text, how);
}

static const char *const hermes_calls[] = {
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
    "Sure, let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\u00fcrich \\u00e9\\n\","
    " \"unit\": \"celsius\", \"at\": [1.50, -0, 1E3, {\"deep\": [true, false, null]}]}}\n</tool_call>\n"
    "<tool_call>\n{\"arguments\": {\"q\": \"tools <tool_call> </tool_call>\"}, \"name\": \"search\"}\n</tool_call>",
    "<tool_call>{\"name\":\"search\",\"arguments\":{}, \"id\": 7}</tool_call>\n\n<tool_call>{\"name\": \"search\", "
    "\"arguments\": {\"q\": \"x\"}}",
};

Test(tool_stream, hermes_and_generic_calls_stream_alike_in_any_pieces)
{
    for (tram_tool_format f = TRAM_TOOLS_GENERIC; f <= TRAM_TOOLS_HERMES; f++)
        for (size_t i = 0; i < sizeof(hermes_calls) / sizeof(hermes_calls[0]); i++)
            for_each_split(f, &tools, hermes_calls[i], 0, same_stream);
    /* without parallel_tool_calls only the first streams, and only it is returned */
    for_each_split(TRAM_TOOLS_HERMES, &single, hermes_calls[1], 0, same_stream);
    stream_result one = run(TRAM_TOOLS_HERMES, &single, hermes_calls[1], (size_t[]){strlen(hermes_calls[1])}, 1, 0);
    cr_assert_eq(one.names, 1);
    cr_assert_eq(strchr(one.calls, '|')[1], 0, "%s", one.calls);
    result_free(&one);
}

Test(tool_stream, llama3_and_mistral_calls_stream_alike_in_any_pieces)
{
    const char *llama[] = {
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}",
        " <|python_tag|>{\"name\": \"search\", \"arguments\": {\"q\": [1, 2]}}; {\"parameters\": {\"q\": \"b\"}, "
        "\"name\": \"get_weather\"}\n",
    };
    for (size_t i = 0; i < sizeof(llama) / sizeof(llama[0]); i++)
        for_each_split(TRAM_TOOLS_LLAMA3, &tools, llama[i], 0, same_stream);
    const char *mistral[] = {
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}, "
        "{\"name\": \"search\", \"arguments\": {}, \"id\": \"abcdefghi\"}]",
        "Let me check. [TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"q\": \"[TOOL_CALLS]\"}}]</s>",
    };
    for (size_t i = 0; i < sizeof(mistral) / sizeof(mistral[0]); i++)
        for_each_split(TRAM_TOOLS_MISTRAL, &tools, mistral[i], 0, same_stream);
}

Test(tool_stream, arguments_stream_while_they_are_written)
{
    /* fed byte by byte, a call's arguments come in many pieces, before the call's end */
    const char *text = hermes_calls[0];
    size_t len = strlen(text);
    tram_tool_reader r;
    tram_tool_reader_init(&r, TRAM_TOOLS_HERMES, &tools);
    int pieces = 0, named_at = -1;
    for (size_t i = 1; i <= len; i++) {
        tram_tool_reader_feed(&r, text, i);
        tram_tool_delta d;
        while (tram_tool_reader_next(&r, &d)) {
            if (d.kind == TRAM_TOOL_DELTA_NAME)
                named_at = (int)i;
            pieces += d.kind == TRAM_TOOL_DELTA_ARGUMENTS;
        }
    }
    cr_assert_eq(named_at, (int)(strstr(text, "\"get_weather\"") - text) + 13, "the name as soon as it ends");
    cr_assert_gt(pieces, 20);
    tram_tool_reader_free(&r);
}

Test(tool_stream, marker_prefixes_that_are_text_come_back_as_content)
{
    const char *hermes[] = {"a <tool b", "x <tool_cal> y", "ends with <tool_call", "<", "<<tool_call", "< tool_call>",
                            "1 < 2 and <tool_", ""};
    for (tram_tool_format f = TRAM_TOOLS_GENERIC; f <= TRAM_TOOLS_HERMES; f++)
        for (size_t i = 0; i < sizeof(hermes) / sizeof(hermes[0]); i++)
            if (hermes[i][0])
                for_each_split(f, &tools, hermes[i], 0, plain_text);
    const char *mistral[] = {"[TOOL", "[TOOL_CALL] x", "see [TOOL_CALLS", "[TOOL_CALLS] plain"};
    for (size_t i = 0; i < sizeof(mistral) / sizeof(mistral[0]); i++)
        for_each_split(TRAM_TOOLS_MISTRAL, &tools, mistral[i], 0, plain_text);
    const char *llama[] = {"  <|python_ta", "<|python_tag| x", "<b>bold</b>", "{\"city\": \"Paris\"}", "  hi {",
                           "{\"name\": \"nope\", \"parameters\": {}}"};
    for (size_t i = 0; i < sizeof(llama) / sizeof(llama[0]); i++)
        for_each_split(TRAM_TOOLS_LLAMA3, &tools, llama[i], 0, plain_text);
}

Test(tool_stream, a_reply_that_turns_out_not_to_be_calls_streams_all_its_text)
{
    const char *hermes[] = {
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call> and then text",
        "Hm. <tool_call>{\"name\": \"search\", \"arguments\": {\"q\": }}</tool_call>",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": 1}, \"name\": \"search\"}</tool_call>",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": 1}}\n</tool_call>\n<tool_call>{\"name\": \"launch\"",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"unfinished",
    };
    for (size_t i = 0; i < sizeof(hermes) / sizeof(hermes[0]); i++)
        for_each_split(TRAM_TOOLS_HERMES, &tools, hermes[i], 0, all_content);
    for_each_split(TRAM_TOOLS_LLAMA3, &tools, "{\"name\": \"search\", \"parameters\": {\"q\": 2}} trailing", 0,
                   all_content);
    for_each_split(TRAM_TOOLS_LLAMA3, &tools, "{\"name\": \"get_weather\"", 0, all_content);
    for_each_split(TRAM_TOOLS_MISTRAL, &tools, "[TOOL_CALLS] [{\"name\": \"search\", \"arguments\": {}}] and more", 0,
                   all_content);
}

/* max_tokens cut the reply: the finished calls are the reply's in any
 * pieces (an unfinished last one may have begun streaming). */
static void same_calls(const stream_result *whole, const stream_result *s, const char *text, const char *how)
{
    cr_assert_str_eq(s->calls, whole->calls, "%s, %s", text, how);
    cr_assert_eq(s->content_len, whole->content_len, "%s, %s", text, how);
    cr_assert_str_eq(whole->calls, "search:{\"q\": 1}|", "%s", text);
}

Test(tool_stream, a_cut_reply_keeps_its_finished_calls_in_any_pieces)
{
    const char *text = "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": 1}}</tool_call>\n"
                       "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    for_each_split(TRAM_TOOLS_HERMES, &tools, text, 1, same_calls);
}

/* A call cut at any byte and streamed in any pieces: the content that went
 * out is the text before the call, never its markup ("Hi " here). */
static void no_markup_streamed(const stream_result *whole, const stream_result *s, const char *text,
                               const char *how)
{
    cr_assert_eq(s->content_len, 3, "%s, %s", text, how);
    cr_assert_eq(s->content.len, 3, "%s, %s: %zu bytes of content streamed", text, how, s->content.len);
    cr_assert_str_eq(s->calls, whole->calls, "%s, %s", text, how);
}

Test(tool_stream, a_call_cut_anywhere_streams_no_markup_as_content)
{
    const char *text = "Hi <tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 1}}\n</tool_call>";
    char cut[128];
    for (size_t at = 4; at < strlen(text); at++) {
        snprintf(cut, sizeof(cut), "%.*s", (int)at, text);
        for_each_split(TRAM_TOOLS_HERMES, &tools, cut, 1, no_markup_streamed);
    }
}

/* Any text, split any way: the same reading at the end, the streamed content
 * is that reading's content (all of the text when it holds no calls), and
 * the calls it holds streamed as they are. */
static void consistent(const stream_result *whole, const stream_result *s, const char *text, const char *how)
{
    cr_assert_str_eq(s->calls, whole->calls, "%s, %s", text, how);
    cr_assert_eq(s->content_len, whole->content_len, "%s, %s", text, how);
    size_t want = whole->calls[0] ? whole->content_len : strlen(text);
    cr_assert_eq(s->content.len, want, "%s, %s", text, how);
    cr_assert_eq(memcmp(s->content.s ? s->content.s : "", text, want), 0, "%s, %s", text, how);
    const char *p = s->calls;
    for (int i = 0; *p; i++) {
        const char *args = strchr(p, ':') + 1;
        size_t n = s->args[i].len;
        cr_assert(n && !strncmp(args, s->args[i].s, n) && args[n] == '|', "%s, %s: call %d", text, how, i);
        p = args + n + 1;
    }
}

Test(tool_stream, random_texts_read_alike_in_any_pieces)
{
    static const char *const frags[] = {
        "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "</s>", "{", "}", "[", "]", ": ", ", ",
        ";", "\"name\"", "\"arguments\"", "\"parameters\"", "\"get_weather\"", "\"search\"", "\"q\"", "1", "-2.5e3",
        "\"\\u00e9\\n\"", "true", " ", "\n", "<", "text", "\"\\ud83d", "{\"name\": \"search\", \"arguments\": {\"q\": 1}}",
    };
    static const char *const valid[] = {
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": [1, \"a\"]}}\n</tool_call>",
        "{\"name\": \"search\", \"parameters\": {\"q\": 1}}; {\"name\": \"get_weather\", \"parameters\": {}}",
        "Hi [TOOL_CALLS] [{\"name\": \"search\", \"arguments\": {\"q\": true}}]</s>",
    };
    const size_t nf = sizeof(frags) / sizeof(frags[0]);
    unsigned seed = 99;
    char text[512];
    for (int round = 0; round < 120; round++) {
        size_t n = 0;
        if (round % 2) {   /* a call with a fragment put in, or cut short */
            const char *base = valid[rand_r(&seed) % 3], *f = frags[rand_r(&seed) % nf];
            size_t at = (size_t)rand_r(&seed) % strlen(base);
            if (rand_r(&seed) % 3 == 0)
                n = (size_t)snprintf(text, sizeof(text), "%.*s", (int)at, base);
            else
                n = (size_t)snprintf(text, sizeof(text), "%.*s%s%s", (int)at, base, f, base + at);
        } else {
            for (int k = 1 + rand_r(&seed) % 12; k > 0 && n < 400; k--)
                n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", frags[rand_r(&seed) % nf]);
        }
        if (!n)
            continue;
        for (tram_tool_format f = TRAM_TOOLS_GENERIC; f <= TRAM_TOOLS_MISTRAL; f++)
            for_each_split(f, &tools, text, 0, consistent);
    }
}
