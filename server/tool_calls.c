/* tool_calls.c — see tool_calls.h.  The reader walks the text once, a byte
 * at a time; whatever pieces the text arrives in, it ends in the same
 * place, so the streamed reply and the whole one are read alike. */
#include "server/tool_calls.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kernels/base.h"

/* The places in a format (tool_calls.h shows the formats). */
enum {
    T_CONTENT,     /* before the calls' marker (all but Llama 3) */
    T_LEAD,        /* Llama 3: space before the first call or its <|python_tag|> */
    T_LITERAL,     /* matching r->literal, then r->after_literal */
    T_ARRAY,       /* Mistral: space, then the calls' '[' */
    T_BEFORE_CALL, /* space, then a call's '{' */
    T_CALL,        /* in a call's object */
    T_AFTER_CALL,  /* space, then what follows a call in the format */
    T_BETWEEN,     /* Hermes: space, then the next <tool_call> */
    T_TAIL,        /* Mistral: space after ']', then </s> */
    T_END,         /* only space may follow */
};

/* The members of a call object that matter, as bits of tram_tool_call.seen. */
enum { M_OTHER = 0, M_NAME = 1, M_ARGS = 2 };

static const char *marker(tram_tool_format f)
{
    return f == TRAM_TOOLS_MISTRAL ? "[TOOL_CALLS]" : f == TRAM_TOOLS_LLAMA3 ? "<|python_tag|>" : "<tool_call>";
}

static int is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
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

void tram_tool_reader_init(tram_tool_reader *r, tram_tool_format f, const tram_api_tools *tools)
{
    *r = (tram_tool_reader){.format = f, .tools = tools, .state = f == TRAM_TOOLS_LLAMA3 ? T_LEAD : T_CONTENT};
}

void tram_tool_reader_free(tram_tool_reader *r)
{
    for (int i = 0; i < r->num_calls; i++)
        tram_strbuf_free(&r->calls[i].out);
    free(r->calls);
    tram_json_scan_free(&r->scan);
    *r = (tram_tool_reader){0};
}

/* The text is not calls: nothing more is read, all of it is content.
 * Returns 0, for the readers' one-line exits. */
static int invalid(tram_tool_reader *r)
{
    r->invalid = 1;
    return 0;
}

static int expect_literal(tram_tool_reader *r, const char *literal, int after)
{
    r->state = T_LITERAL;
    r->literal = literal;
    r->matched = 1;   /* its first byte is the one that led here */
    r->after_literal = after;
    return 0;
}

/* ---- a call's object ---- */

static int slice_is(const tram_strbuf *b, size_t at, const char *s)
{
    return b->len - at == strlen(s) && !memcmp(b->s + at, s, b->len - at);
}

/* A key of the call object ended: which member is it. */
static void on_key(tram_tool_reader *r, tram_tool_call *c)
{
    size_t at = r->scan.key_at;
    c->member = slice_is(&c->out, at, "\"name\"") ? M_NAME
                : slice_is(&c->out, at, "\"arguments\"") ||
                          (r->format == TRAM_TOOLS_LLAMA3 && slice_is(&c->out, at, "\"parameters\""))
                      ? M_ARGS
                      : M_OTHER;
    if (c->seen & c->member)
        invalid(r);
    c->seen |= c->member;
}

/* The name's value ended: it must be one of the request's functions (their
 * names need no escapes, so the written string is the name in quotes). */
static int on_name(tram_tool_reader *r, tram_tool_call *c)
{
    const char *v = c->out.s + r->scan.value_at;
    size_t n = r->scan.value_end - r->scan.value_at;
    char name[72];
    if (n < 2 || n - 2 >= sizeof(name) || v[0] != '"')
        return invalid(r);
    memcpy(name, v + 1, n - 2);
    name[n - 2] = 0;
    const json_t *fn = memchr(name, '\\', n - 2) ? NULL : tram_api_tool_function(r->tools, name);
    if (!fn)
        return invalid(r);
    c->name = json_string_value(json_object_get(fn, "name"));
    tram_tool_call_id(r->format, c->id);
    return 0;
}

static int call_byte(tram_tool_reader *r, char ch)
{
    tram_tool_call *c = &r->calls[r->num_calls - 1];
    int ev = tram_json_scan_byte(&r->scan, (unsigned char)ch, &c->out);
    if ((ev & TRAM_JSCAN_ERROR) || c->out.oom)
        return invalid(r);
    if (ev & TRAM_JSCAN_KEY)
        on_key(r, c);
    if ((ev & TRAM_JSCAN_BEGIN) && c->member != M_OTHER &&
        c->out.s[r->scan.value_at] != (c->member == M_NAME ? '"' : '{'))
        return invalid(r);  /* the name is a string, the arguments an object */
    if ((ev & TRAM_JSCAN_BEGIN) && c->member == M_ARGS)
        c->args_at = r->scan.value_at;
    if ((ev & TRAM_JSCAN_END) && c->member == M_NAME)
        on_name(r, c);
    if ((ev & TRAM_JSCAN_END) && c->member == M_ARGS)
        c->args_end = r->scan.value_end;
    if (r->invalid || !(ev & TRAM_JSCAN_DONE))
        return 0;
    if (!c->name || !c->args_end)
        return invalid(r);
    c->done = 1;
    r->state = T_AFTER_CALL;
    return 0;
}

/* A call's '{': a new call. */
static int begin_call(tram_tool_reader *r, char ch)
{
    if (ch != '{')
        return invalid(r);
    if (r->num_calls == r->cap_calls) {
        int cap = r->cap_calls ? 2 * r->cap_calls : 4;
        tram_tool_call *calls = realloc(r->calls, (size_t)cap * sizeof(*calls));
        if (!calls)
            return invalid(r);
        r->calls = calls;
        r->cap_calls = cap;
    }
    r->calls[r->num_calls++] = (tram_tool_call){0};
    tram_json_scan_init(&r->scan);
    r->state = T_CALL;
    return call_byte(r, ch);
}

/* ---- the format around the calls ---- */

/* Before the marker: content, as far as no marker can begin in it. */
static void content(tram_tool_reader *r, const char *text, size_t len)
{
    const char *m = marker(r->format);
    size_t n = strlen(m);
    for (; r->pos < len; r->pos++) {
        size_t k = 0;
        while (k < n && r->pos + k < len && text[r->pos + k] == m[k])
            k++;
        if (k == n) {
            r->calls_at = r->content_end = r->pos;
            r->pos += n;
            r->state = r->format == TRAM_TOOLS_MISTRAL ? T_ARRAY : T_BEFORE_CALL;
            return;
        }
        if (r->pos + k == len)
            break;  /* the text may be starting the marker */
    }
    r->content_end = r->pos;
}

/* What may follow a call in its format. */
static int after_call(tram_tool_reader *r, char ch)
{
    tram_tool_format f = r->format;
    if ((f == TRAM_TOOLS_LLAMA3 && ch == ';') || (f == TRAM_TOOLS_MISTRAL && ch == ','))
        r->state = T_BEFORE_CALL;
    else if (f == TRAM_TOOLS_MISTRAL && ch == ']')
        r->state = T_TAIL;
    else if ((f == TRAM_TOOLS_GENERIC || f == TRAM_TOOLS_HERMES) && ch == '<')
        expect_literal(r, "</tool_call>", T_BETWEEN);
    else
        invalid(r);
    return 0;
}

static int literal_byte(tram_tool_reader *r, char ch)
{
    if (ch != r->literal[r->matched++])
        return invalid(r);
    if (!r->literal[r->matched])
        r->state = r->after_literal;
    return 0;
}

/* One byte after the content; space is skipped where the format allows it. */
static int format_byte(tram_tool_reader *r, char ch)
{
    if (r->state == T_CALL)
        return call_byte(r, ch);
    if (r->state == T_LITERAL)
        return literal_byte(r, ch);
    if (is_space(ch))
        return 0;
    switch (r->state) {
    case T_LEAD: return ch == '<' ? expect_literal(r, marker(r->format), T_BEFORE_CALL) : begin_call(r, ch);
    case T_BEFORE_CALL: return begin_call(r, ch);
    case T_ARRAY:
        r->state = T_BEFORE_CALL;
        return ch == '[' ? 0 : invalid(r);
    case T_AFTER_CALL: return after_call(r, ch);
    case T_BETWEEN: return ch == '<' ? expect_literal(r, marker(r->format), T_BEFORE_CALL) : invalid(r);
    case T_TAIL: return ch == '<' ? expect_literal(r, "</s>", T_END) : invalid(r);
    default: return invalid(r);  /* T_END */
    }
}

void tram_tool_reader_feed(tram_tool_reader *r, const char *text, size_t len)
{
    r->len = len;
    if (r->state == T_CONTENT && !r->invalid)
        content(r, text, len);
    while (r->state != T_CONTENT && !r->invalid && r->pos < len)
        format_byte(r, text[r->pos++]);
    if (r->invalid)
        r->content_end = len;
}

/* Where the text may end with its calls complete. */
static int may_end(const tram_tool_reader *r)
{
    switch (r->format) {
    case TRAM_TOOLS_LLAMA3: return r->state == T_AFTER_CALL || r->state == T_BEFORE_CALL;
    case TRAM_TOOLS_MISTRAL: return r->state == T_TAIL || r->state == T_END;
    default: return r->state == T_AFTER_CALL || r->state == T_BETWEEN;  /* the last may lack its tag */
    }
}

void tram_tool_reader_finish(tram_tool_reader *r, int cut, int abort)
{
    int n = 0;
    while (n < r->num_calls && r->calls[n].done)
        n++;
    r->finished = 1;
    if (cut && !abort && !r->invalid) {
        /* max_tokens cut the text while it still read as calls: the calls
         * it completed count, and neither the unfinished one nor a marker
         * begun at the cut is content (content() held its bytes back) */
        r->num_final = r->state == T_CONTENT ? 0 : r->tools->parallel ? n : TRAM_MIN(n, 1);
        if (r->state != T_CONTENT)
            r->content_end = r->calls_at;
        return;
    }
    if (abort || r->state == T_CONTENT || n == 0 || !may_end(r))
        r->invalid = 1;
    r->num_final = r->invalid ? 0 : r->tools->parallel ? n : 1;
    r->content_end = r->invalid ? r->len : r->calls_at;
}

json_t *tram_tool_reader_calls(const tram_tool_reader *r)
{
    json_t *calls = r->num_final ? json_array() : NULL;
    for (int i = 0; calls && i < r->num_final; i++) {
        const tram_tool_call *c = &r->calls[i];
        json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s%}}", "id", c->id, "type", "function", "function",
                                 "name", c->name, "arguments", c->out.s + c->args_at,
                                 c->args_end - c->args_at);
        if (!call || json_array_append_new(calls, call)) {
            json_decref(calls);
            calls = NULL;
        }
    }
    return calls;
}

/* How many calls may stream: all, or the first without parallel_tool_calls;
 * once finished, those the reply holds. */
static int streamable(const tram_tool_reader *r)
{
    if (r->invalid)
        return 0;
    return r->finished ? r->num_final : r->tools->parallel ? r->num_calls : TRAM_MIN(r->num_calls, 1);
}

int tram_tool_reader_next(tram_tool_reader *r, tram_tool_delta *d)
{
    if (r->content_end > r->content_sent) {
        *d = (tram_tool_delta){.kind = TRAM_TOOL_DELTA_CONTENT, .from = r->content_sent, .to = r->content_end};
        r->content_sent = r->content_end;
        return 1;
    }
    for (int i = 0; i < streamable(r); i++) {
        tram_tool_call *c = &r->calls[i];
        if (!c->name)
            return 0;   /* its arguments wait for its name */
        if (!c->named_sent) {
            c->named_sent = 1;
            *d = (tram_tool_delta){.kind = TRAM_TOOL_DELTA_NAME, .index = i, .id = c->id, .name = c->name};
            return 1;
        }
        size_t written = !c->args_at ? 0 : (c->args_end ? c->args_end : c->out.len) - c->args_at;
        if (written > c->args_sent) {
            *d = (tram_tool_delta){.kind = TRAM_TOOL_DELTA_ARGUMENTS, .index = i,
                                   .text = c->out.s + c->args_at + c->args_sent, .len = written - c->args_sent};
            c->args_sent = written;
            return 1;
        }
    }
    return 0;
}

int tram_tool_calls_parse(tram_tool_format f, const char *text, size_t len, const tram_api_tools *tools,
                          int cut, tram_tool_calls *out)
{
    tram_tool_reader r;
    tram_tool_reader_init(&r, f, tools);
    tram_tool_reader_feed(&r, text, len);
    tram_tool_reader_finish(&r, cut, 0);
    *out = (tram_tool_calls){.content_len = r.content_end, .calls = tram_tool_reader_calls(&r)};
    int rc = r.num_final && !out->calls ? -1 : 0;
    tram_tool_reader_free(&r);
    return rc;
}
