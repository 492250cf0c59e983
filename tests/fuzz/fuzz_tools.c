/* fuzz_tools.c — libFuzzer on the streamed tool-call reader
 * (server/tool_calls.c, server/json_scan.c): any text, in any format, fed
 * whole and in pieces, reads the same; the streamed content is the
 * reading's content (all of the text when it holds no calls and was not
 * cut); each call's
 * streamed arguments are its final arguments, a JSON object in valid UTF-8;
 * never a crash, a leak or undefined behaviour.
 * Input: byte 0 the format, byte 1 cut or not, byte 2 the pieces' seed,
 * then the text.  `make fuzz-tools` (FUZZ_SECONDS=600). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/tool_calls.h"

static const char tools_json[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"search\"}}]";

typedef struct {
    tram_strbuf content, args[4];
    json_t *calls;
    size_t content_len;
} reading;

static void take(tram_tool_reader *r, const char *text, reading *out)
{
    tram_tool_delta d;
    while (tram_tool_reader_next(r, &d)) {
        if (d.kind == TRAM_TOOL_DELTA_CONTENT)
            tram_strbuf_add(&out->content, text + d.from, d.to - d.from);
        else if (d.kind == TRAM_TOOL_DELTA_ARGUMENTS && d.index < 4)
            tram_strbuf_add(&out->args[d.index], d.text, d.len);
    }
}

/* Feeds text[0..len) in pieces of 1..(seed % 16 + 1) bytes (seed 0: whole). */
static void read_text(tram_tool_format f, const tram_api_tools *t, const char *text, size_t len, int cut,
                      unsigned seed, reading *out)
{
    tram_tool_reader r;
    tram_tool_reader_init(&r, f, t);
    for (size_t at = 0; at < len;) {
        at = seed ? at + 1 + (size_t)rand_r(&seed) % (seed % 16 + 1) : len;
        tram_tool_reader_feed(&r, text, at < len ? at : len);
        take(&r, text, out);
    }
    tram_tool_reader_finish(&r, cut, 0);
    take(&r, text, out);
    out->content_len = r.content_end;
    out->calls = tram_tool_reader_calls(&r);
    tram_tool_reader_free(&r);
}

/* Call i's function field (its id is new in each reading). */
static const json_t *function(const reading *r, size_t i)
{
    return json_object_get(json_array_get(r->calls, i), "function");
}

static void check(const reading *whole, const reading *split, const char *text, size_t len, int cut)
{
    if (whole->content_len != split->content_len || json_array_size(whole->calls) != json_array_size(split->calls))
        abort();
    for (size_t i = 0; i < json_array_size(split->calls); i++)
        if (!json_equal(function(whole, i), function(split, i)))
            abort();
    /* without calls all of the text is content, unless max_tokens cut a call
     * (tool_calls.h: the unfinished one is dropped, with what follows) */
    size_t want = whole->content_len;
    if ((!whole->calls && !cut && want != len) || split->content.len != want ||
        (want && memcmp(split->content.s, text, want)))
        abort();
    for (size_t i = 0; i < json_array_size(split->calls) && i < 4; i++) {
        const char *args = json_string_value(json_object_get(function(split, i), "arguments"));
        json_t *v = args ? json_loads(args, 0, NULL) : NULL;
        if (!json_is_object(v) || split->args[i].len != strlen(args) || memcmp(split->args[i].s, args, strlen(args)))
            abort();
        json_decref(v);
    }
}

static void reading_free(reading *r)
{
    tram_strbuf_free(&r->content);
    for (int i = 0; i < 4; i++)
        tram_strbuf_free(&r->args[i]);
    json_decref(r->calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    tram_tool_format f = (tram_tool_format)(data[0] % 4);
    int cut = data[1] & 1;
    unsigned seed = data[2] + 1u;
    const char *text = (const char *)data + 3;
    size_t len = size - 3;
    json_t *list = json_loads(tools_json, 0, NULL);
    tram_api_tools t = {.tools = list, .choice = TRAM_TOOL_CHOICE_AUTO, .parallel = data[1] >> 1 & 1};
    reading whole = {0}, split = {0};
    read_text(f, &t, text, len, cut, 0, &whole);
    read_text(f, &t, text, len, cut, seed, &split);
    check(&whole, &whole, text, len, cut);
    check(&whole, &split, text, len, cut);
    reading_free(&whole);
    reading_free(&split);
    json_decref(list);
    return 0;
}
