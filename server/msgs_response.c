#include "server/msgs_response.h"

#include <event2/http.h>
#include <string.h>

#include "server/http.h"

const char *tram_msgs_stop_reason(const tram_api_choice *choice)
{
    const char *r = choice->finish_reason;
    if (!r)
        return NULL;
    if (!strcmp(r, "stop"))
        return choice->stop_string ? "stop_sequence" : "end_turn";
    if (!strcmp(r, "length"))
        return "max_tokens";
    return !strcmp(r, "tool_calls") ? "tool_use" : NULL;
}

/* Anthropic counts the prompt tokens read from its cache apart from the
 * others: input_tokens are those computed. */
static json_t *usage_json(const tram_api_usage *u)
{
    return json_pack("{s:I, s:I, s:I, s:I}", "input_tokens", (json_int_t)(u->prompt_tokens - u->cached_tokens),
                     "cache_creation_input_tokens", (json_int_t)0, "cache_read_input_tokens",
                     (json_int_t)u->cached_tokens, "output_tokens", (json_int_t)u->completion_tokens);
}

/* A chat tool call {id, function: {name, arguments}} as a tool_use block
 * (tool_calls.c reads only calls whose arguments are an object). */
static json_t *tool_use_block(const json_t *call)
{
    const json_t *fn = json_object_get(call, "function");
    const char *arguments = json_string_value(json_object_get(fn, "arguments"));
    json_t *input = arguments ? json_loads(arguments, 0, NULL) : NULL;
    return json_pack("{s:s, s:O, s:O, s:o}", "type", "tool_use", "id", json_object_get(call, "id"), "name",
                     json_object_get(fn, "name"), "input", input ? input : json_object());
}

json_t *tram_msgs_message(const tram_api_envelope *env, const tram_api_choice *choice, const tram_api_usage *u)
{
    const char *reason = tram_msgs_stop_reason(choice);
    json_t *content = json_array();
    if (content && choice->len)
        json_array_append_new(content, json_pack("{s:s, s:s%}", "type", "text", "text", choice->text, choice->len));
    size_t i;
    const json_t *call;
    json_array_foreach(choice->tool_calls, i, call)
        json_array_append_new(content, tool_use_block(call));
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s?, s:s?, s:o}", "id", env->id, "type", "message", "role",
                     "assistant", "model", env->model, "content", content, "stop_reason", reason, "stop_sequence",
                     reason && !strcmp(reason, "stop_sequence") ? choice->stop_string : NULL, "usage",
                     usage_json(u));
}

/* ------------------------------------------------------------ the stream */

/* Sends an event whose "type" is its name, and releases it. */
static void send_event(struct evhttp_request *req, json_t *event)
{
    tram_http_sse_event(req, json_string_value(json_object_get(event, "type")), event);
    json_decref(event);
}

static void close_block(tram_msgs_stream *st, struct evhttp_request *req)
{
    if (st->open < 0)
        return;
    send_event(req, json_pack("{s:s, s:i}", "type", "content_block_stop", "index", st->open));
    st->open = -1;
}

/* Starts the next block (block is stolen). */
static void open_block(tram_msgs_stream *st, struct evhttp_request *req, json_t *block, int text)
{
    close_block(st, req);
    st->open = st->blocks++;
    st->open_text = text;
    send_event(req, json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", st->open,
                              "content_block", block));
}

static void send_delta(tram_msgs_stream *st, struct evhttp_request *req, const char *type, const char *key,
                       const char *text)
{
    send_event(req, json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_delta", "index", st->open,
                              "delta", "type", type, key, text));
}

void tram_msgs_stream_start(tram_msgs_stream *st, struct evhttp_request *req, const tram_api_envelope *env,
                            long long input_tokens)
{
    *st = (tram_msgs_stream){.open = -1};
    tram_http_sse_start(req);
    send_event(req, json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:{s:I, s:i}}}", "type",
                              "message_start", "message", "id", env->id, "type", "message", "role", "assistant",
                              "model", env->model, "content", "stop_reason", "stop_sequence", "usage",
                              "input_tokens", (json_int_t)input_tokens, "output_tokens", 0));
}

/* Text goes into a text block, a call's first chunk (its id and name)
 * starts a tool_use block and the pieces of its arguments follow as
 * input_json_delta; the finish reason closes the open block. */
void tram_msgs_stream_chunk(tram_msgs_stream *st, struct evhttp_request *req, const json_t *chunk)
{
    const json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
    const json_t *delta = json_object_get(choice, "delta");
    const char *text = json_string_value(json_object_get(delta, "content"));
    if (text && *text) {
        if (st->open < 0 || !st->open_text)
            open_block(st, req, json_pack("{s:s, s:s}", "type", "text", "text", ""), 1);
        send_delta(st, req, "text_delta", "text", text);
    }
    const json_t *call = json_array_get(json_object_get(delta, "tool_calls"), 0);
    const json_t *fn = json_object_get(call, "function");
    const json_t *id = json_object_get(call, "id");
    if (id)
        open_block(st, req, json_pack("{s:s, s:O, s:O, s:{}}", "type", "tool_use", "id", id, "name",
                                      json_object_get(fn, "name"), "input"), 0);
    const char *arguments = json_string_value(json_object_get(fn, "arguments"));
    if (arguments && *arguments && st->open >= 0 && !st->open_text)
        send_delta(st, req, "input_json_delta", "partial_json", arguments);
    if (json_is_string(json_object_get(choice, "finish_reason")))
        close_block(st, req);
}

void tram_msgs_choice_error(const tram_api_choice *choice, tram_api_error *e)
{
    const char *why = choice ? json_string_value(json_object_get(choice->error, "message")) : NULL;
    if (why)
        tram_api_fail(e, 500, NULL, NULL, "The reply failed its check: %s", why);
    else
        tram_api_fail(e, 503, NULL, NULL, "The request was aborted: the server is shutting down.");
}

void tram_msgs_stream_end(tram_msgs_stream *st, struct evhttp_request *req, const tram_api_choice *choice,
                          const tram_api_error *error, const tram_api_usage *u)
{
    close_block(st, req);
    const char *reason = choice ? tram_msgs_stop_reason(choice) : NULL;
    tram_api_error failed = {0};
    if (error || !reason) {
        if (!error)
            tram_msgs_choice_error(choice, &failed);
        json_t *body = tram_api_error_json_as(error ? error : &failed, TRAM_PROTOCOL_ANTHROPIC);
        tram_http_sse_event(req, "error", body);
        json_decref(body);
    } else {
        json_t *usage = usage_json(u);
        send_event(req, json_pack("{s:s, s:{s:s, s:s?}, s:o}", "type", "message_delta", "delta", "stop_reason",
                                  reason, "stop_sequence",
                                  !strcmp(reason, "stop_sequence") ? choice->stop_string : NULL, "usage", usage));
        send_event(req, json_pack("{s:s}", "type", "message_stop"));
    }
    tram_http_sse_end(req);
}
