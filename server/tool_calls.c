/* tool_calls.c — see tool_calls.h. */
#include "server/tool_calls.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kernels/base.h"
#include "tokenizer/pyjson.h"

static const char *marker(tram_tool_format f)
{
    return f == TRAM_TOOLS_MISTRAL ? "[TOOL_CALLS]" : f == TRAM_TOOLS_LLAMA3 ? "<|python_tag|>" : "<tool_call>";
}

static const char *find(const char *text, size_t len, const char *what)
{
    size_t n = strlen(what);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(text + i, what, n))
            return text + i;
    return NULL;
}

static size_t skip_space(const char *s, size_t i, size_t len)
{
    while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
        i++;
    return i;
}

void tram_tool_call_id(tram_tool_format f, char out[32])
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[24] = {0};
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        /* unique, not secret: fall back to the clock and a counter */
        static unsigned counter;
        double t = tram_now();
        memcpy(r, &t, sizeof(t));
        r[8] = (unsigned char)counter++;
    }
    int n = f == TRAM_TOOLS_MISTRAL ? 9 : 24, o = 0;
    if (f != TRAM_TOOLS_MISTRAL)
        o = (int)strlen(strcpy(out, "call_"));
    for (int i = 0; i < n; i++)
        out[o++] = alnum[r[i] % (sizeof(alnum) - 1)];
    out[o] = 0;
}

/* {"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}
 * for one call object the model wrote, or NULL when it is not a call of one
 * of the request's functions.  The arguments are written as Python's
 * json.dumps writes them, as vLLM returns them. */
static json_t *call_json(tram_tool_format f, const json_t *obj, const tram_api_tools *tools)
{
    const char *name = json_string_value(json_object_get(obj, "name"));
    const json_t *args = json_object_get(obj, f == TRAM_TOOLS_LLAMA3 ? "parameters" : "arguments");
    if (!args && f == TRAM_TOOLS_LLAMA3)
        args = json_object_get(obj, "arguments");
    if (!name || !json_is_object(args) || !tram_api_tool_function(tools, name))
        return NULL;
    tram_strbuf b = {0};
    tram_pyjson_put(&b, args, -1);
    char id[32];
    tram_tool_call_id(f, id);
    json_t *call = b.oom ? NULL
                         : json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function", "name",
                                     name, "arguments", b.s);
    free(b.s);
    return call;
}

/* Appends the call in text[from..to) (one JSON object) to calls. */
static int add_call(tram_tool_format f, const char *text, size_t from, size_t to, const tram_api_tools *tools,
                    json_t *calls)
{
    json_t *obj = json_loadb(text + from, to - from, 0, NULL);
    json_t *call = obj ? call_json(f, obj, tools) : NULL;
    json_decref(obj);
    return call ? json_array_append_new(calls, call) : -1;
}

/* <tool_call> blocks from i on, whitespace between them; the last one may
 * lack its closing tag when the model stopped right after the JSON.  A
 * reply cut short may end inside a last block, which is dropped. */
static int parse_hermes(const char *text, size_t i, size_t len, const tram_api_tools *tools, int cut,
                        json_t *calls)
{
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    while ((i = skip_space(text, i, len)) < len) {
        size_t rest = len - i;
        if (rest < sizeof(open) - 1 || memcmp(text + i, open, sizeof(open) - 1))
            return cut && rest < sizeof(open) - 1 && !memcmp(text + i, open, rest) ? 0 : -1;
        i += sizeof(open) - 1;
        const char *end = find(text + i, len - i, close);
        size_t stop = end ? (size_t)(end - text) : len;
        if (add_call(TRAM_TOOLS_HERMES, text, i, stop, tools, calls))
            return cut && !end ? 0 : -1;
        i = end ? stop + sizeof(close) - 1 : len;
    }
    return 0;
}

/* JSON objects separated by ';', as Llama 3.1's parsers read them. */
static int parse_llama3(const char *text, size_t i, size_t len, const tram_api_tools *tools, json_t *calls)
{
    while ((i = skip_space(text, i, len)) < len) {
        json_error_t err;
        json_t *obj = json_loadb(text + i, len - i, JSON_DISABLE_EOF_CHECK, &err);
        json_t *call = obj ? call_json(TRAM_TOOLS_LLAMA3, obj, tools) : NULL;
        json_decref(obj);
        if (!call || json_array_append_new(calls, call))
            return -1;
        i = skip_space(text, i + (size_t)err.position, len);
        if (i < len && text[i] != ';')
            return -1;
        i += i < len;
    }
    return 0;
}

/* The calls' array; its replies keep special tokens, so the text may end
 * with Mistral's EOS. */
static int parse_mistral(const char *text, size_t i, size_t len, const tram_api_tools *tools, json_t *calls)
{
    json_error_t err;
    json_t *arr = json_loadb(text + i, len - i, JSON_DISABLE_EOF_CHECK, &err);
    size_t end = arr ? skip_space(text, i + (size_t)err.position, len) : len;
    if (len - end >= 4 && !memcmp(text + end, "</s>", 4))
        end = skip_space(text, end + 4, len);
    size_t k;
    json_t *obj;
    int rc = json_is_array(arr) && json_array_size(arr) && end == len ? 0 : -1;
    json_array_foreach(arr, k, obj) {
        json_t *call = rc ? NULL : call_json(TRAM_TOOLS_MISTRAL, obj, tools);
        if (!call || json_array_append_new(calls, call))
            rc = -1;
    }
    json_decref(arr);
    return rc;
}

int tram_tool_calls_parse(tram_tool_format f, const char *text, size_t len, const tram_api_tools *tools,
                          int cut, tram_tool_calls *out)
{
    *out = (tram_tool_calls){.content_len = len};
    size_t start;
    if (f == TRAM_TOOLS_LLAMA3) {   /* the whole reply is the calls, or none is */
        start = skip_space(text, 0, len);
        if (start == len || (text[start] != '{' && text[start] != '<'))
            return 0;
        if (find(text + start, len - start, marker(f)) == text + start)
            start += strlen(marker(f));
        out->content_len = 0;
    } else {
        const char *at = find(text, len, marker(f));
        if (!at)
            return 0;
        out->content_len = (size_t)(at - text);
        start = out->content_len + (f == TRAM_TOOLS_MISTRAL ? strlen(marker(f)) : 0);
    }
    json_t *calls = json_array();
    if (!calls)
        return -1;
    int rc = f == TRAM_TOOLS_LLAMA3    ? parse_llama3(text, start, len, tools, calls)
             : f == TRAM_TOOLS_MISTRAL ? parse_mistral(text, start, len, tools, calls)
                                       : parse_hermes(text, start, len, tools, cut, calls);
    if (rc || json_array_size(calls) == 0) {
        json_decref(calls);
        out->content_len = len;
        return 0;
    }
    out->calls = calls;
    return 0;
}

size_t tram_tool_calls_content_prefix(tram_tool_format f, const char *text, size_t len)
{
    if (f == TRAM_TOOLS_LLAMA3) {   /* decided by the first character that is not space */
        size_t i = skip_space(text, 0, len);
        return i < len && text[i] != '{' && text[i] != '<' ? len : 0;
    }
    const char *m = marker(f), *at = find(text, len, m);
    if (at)
        return (size_t)(at - text);
    size_t n = strlen(m);
    for (size_t k = n - 1; k > 0; k--)   /* the longest end of text that begins the marker */
        if (k <= len && !memcmp(text + len - k, m, k))
            return len - k;
    return len;
}
