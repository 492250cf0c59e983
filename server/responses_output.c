/* responses_output.c — what the chat path writes, as the Responses API
 * writes it (responses.h): the response object, and the typed events of a
 * stream in the order the OpenAI SDK's responses.stream() helper checks.
 *
 * A stream is response.created and response.in_progress first; then for
 * each output item response.output_item.added, its content (a message's
 * response.content_part.added, response.output_text.delta..., .done and
 * response.content_part.done; a function call's
 * response.function_call_arguments.delta... and .done) and
 * response.output_item.done; last response.completed (or .incomplete,
 * .failed) with the whole response.  Chat's chunks drive it: text opens a
 * message item, a tool call's first chunk (its id and name) a function_call
 * item, and each item ends when the next begins or the choice finishes.
 * A finished response is stored (response_store.h) unless it failed or the
 * request said "store": false; a background one is stored as queued when
 * it is accepted, then as it ended (failed and cancelled too). */
#include "server/responses.h"

#include <stdlib.h>
#include <string.h>

#include "server/api_response.h"
#include "server/http.h"
#include "server/log.h"
#include "server/responses_state.h"

/* chat's finish reasons, kept as static strings */
static const char *const reasons[] = {"stop", "tool_calls", "length", "error", "abort"};

static const char *reason_of(const char *chat_reason)
{
    for (size_t i = 0; chat_reason && i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (!strcmp(chat_reason, reasons[i]))
            return reasons[i];
    return chat_reason ? "error" : NULL;
}

static const char *status_of(const tram_responses_state *st)
{
    if (st->background && st->finish && !strcmp(st->finish, "abort"))
        return "cancelled";   /* POST /v1/responses/{id}/cancel (or the drain) aborted it */
    if (!st->finish || !strcmp(st->finish, "error") || !strcmp(st->finish, "abort"))
        return "failed";
    return strcmp(st->finish, "length") ? "completed" : "incomplete";
}

/* Chat's usage as the Responses API counts it. */
static json_t *usage_of(const json_t *chat_usage)
{
    json_int_t in = json_integer_value(json_object_get(chat_usage, "prompt_tokens"));
    json_int_t out = json_integer_value(json_object_get(chat_usage, "completion_tokens"));
    json_int_t cached = json_integer_value(
        json_object_get(json_object_get(chat_usage, "prompt_tokens_details"), "cached_tokens"));
    return json_pack("{s:I, s:{s:I}, s:I, s:{s:I}, s:I}", "input_tokens", in, "input_tokens_details",
                     "cached_tokens", cached, "output_tokens", out, "output_tokens_details",
                     "reasoning_tokens", (json_int_t)0, "total_tokens", in + out);
}

static json_t *error_of(const tram_responses_state *st)
{
    const char *code = json_string_value(json_object_get(st->error, "code"));
    if (st->error)
        return json_pack("{s:s, s:O?}", "code", code ? code : "invalid_output", "message",
                         json_object_get(st->error, "message"));
    return json_pack("{s:s, s:s}", "code", "server_error", "message",
                     st->finish ? "The response was cut short: the server is shutting down."
                                : "The response ended before it finished.");
}

/* The response object as it stands, with status. */
static json_t *response_object(const tram_responses_state *st, const char *status)
{
    json_t *r = json_pack("{s:s, s:s, s:I, s:s}", "id", st->id, "object", "response", "created_at",
                          (json_int_t)st->created, "status", status);
    json_t *echo = json_deep_copy(st->echo);
    if (!r || !echo || json_object_update(r, echo)) {
        json_decref(r);
        json_decref(echo);
        return NULL;
    }
    json_decref(echo);
    int failed = !strcmp(status, "failed"), incomplete = !strcmp(status, "incomplete");
    json_object_set_new(r, "error", failed ? error_of(st) : json_null());
    json_object_set_new(r, "incomplete_details",
                        incomplete ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    json_object_set_new(r, "output", json_deep_copy(st->output));
    json_object_set_new(r, "usage", st->usage ? json_incref(st->usage) : json_null());
    return r;
}

/* The response failed as a whole, for error's reason. */
static void fail_with(tram_responses_state *st, const tram_api_error *error)
{
    st->finish = "error";
    json_decref(st->error);
    st->error = json_pack("{s:s, s:s}", "code", "server_error", "message", error->message);
}

/* The conversation this response ends, for a later previous_response_id:
 * the items before its output, then the output items (which the input
 * reads back as they are).  A failed one is kept only when it ran in the
 * background: GET is how its client learns that it failed. */
static void store_response(const tram_responses_state *st, const json_t *response)
{
    if (!st->store || (!st->background && !strcmp(json_string_value(json_object_get(response, "status")), "failed")))
        return;
    json_t *conversation = json_copy(st->items);
    json_array_extend(conversation, st->output);
    char *text = json_dumps(response, JSON_COMPACT), *conv = json_dumps(conversation, JSON_COMPACT);
    if (!text || !conv || tram_rstore_put(st->store, st->tenant, st->id, text, conv, tram_now()))
        tram_log(TRAM_LOG_WARNING, "%s: not stored (out of memory, or larger than --responses-store-size)",
                 st->id);
    free(text);
    free(conv);
    json_decref(conversation);
}

/* A finished item's status: a reply cut by max_output_tokens is incomplete. */
static const char *item_status(const tram_responses_state *st)
{
    return st->finish && !strcmp(st->finish, "length") ? "incomplete" : "completed";
}

/* Chat's logprobs of a choice or a chunk's choice: the output text's, a new
 * reference (an empty array when none were asked for). */
static json_t *logprobs_of(const json_t *choice)
{
    json_t *content = json_object_get(json_object_get(choice, "logprobs"), "content");
    return json_is_array(content) ? json_deep_copy(content) : json_array();
}

/* An output_text part (logprobs stolen). */
static json_t *text_part(const char *text, json_t *logprobs)
{
    return json_pack("{s:s, s:s, s:[], s:o}", "type", "output_text", "text", text, "annotations", "logprobs",
                     logprobs);
}

/* A message item (logprobs stolen), with no content part when text is NULL. */
static json_t *message_item(const char *status, const char *text, json_t *logprobs)
{
    char id[48];
    tram_api_random_id("msg_", id);
    json_t *content = text ? json_pack("[o]", text_part(text, logprobs)) : json_array();
    if (!text)
        json_decref(logprobs);
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "message", "status", status, "role",
                     "assistant", "content", content);
}

static json_t *call_item(const char *status, const char *call_id, const char *name, const char *arguments)
{
    char id[48];
    tram_api_random_id("fc_", id);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "function_call", "status", status,
                     "call_id", call_id ? call_id : "", "name", name ? name : "", "arguments",
                     arguments ? arguments : "");
}

/* ---------------------------------------------------------------- whole */

/* The output items of chat's whole reply; -1 when out of memory. */
static int read_reply(tram_responses_state *st, const tram_dialect_end *end)
{
    json_t *chat = tram_api_response(end->env, end->choices, end->num_choices, end->usage);
    if (!chat)
        return -1;
    const json_t *choice = json_array_get(json_object_get(chat, "choices"), 0);
    const json_t *message = json_object_get(choice, "message");
    const char *text = json_string_value(json_object_get(message, "content"));
    const json_t *calls = json_object_get(message, "tool_calls");
    st->finish = reason_of(json_string_value(json_object_get(choice, "finish_reason")));
    st->error = json_incref(json_object_get(choice, "error"));
    st->usage = usage_of(json_object_get(chat, "usage"));
    if ((text && text[0]) || json_array_size(calls) == 0)
        json_array_append_new(st->output, message_item(item_status(st), text ? text : "", logprobs_of(choice)));
    size_t i;
    const json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        json_array_append_new(st->output, call_item(item_status(st), json_string_value(json_object_get(call, "id")),
                                                    json_string_value(json_object_get(fn, "name")),
                                                    json_string_value(json_object_get(fn, "arguments"))));
    }
    json_decref(chat);
    return 0;
}

json_t *tram_responses_response(void *state, const tram_dialect_end *end, tram_api_error *e)
{
    tram_responses_state *st = state;
    if (end->error) {   /* a background response that failed as a whole */
        fail_with(st, end->error);
    } else if (read_reply(st, end)) {
        tram_api_out_of_memory(e);
        return NULL;
    }
    json_t *r = response_object(st, status_of(st));
    if (r)
        store_response(st, r);
    else
        tram_api_out_of_memory(e);
    return r;
}

json_t *tram_responses_background(void *state)
{
    tram_responses_state *st = state;
    if (!st->background)
        return NULL;
    json_t *r = response_object(st, "queued");
    char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
    /* no conversation yet: previous_response_id cannot continue it before it ends */
    if (!text || tram_rstore_put(st->store, st->tenant, st->id, text, "", tram_now()))
        tram_log(TRAM_LOG_WARNING, "%s: not stored while it runs (out of memory, or larger than "
                 "--responses-store-size)", st->id);
    free(text);
    return r;
}

/* ---------------------------------------------------------------- stream */

/* Sends one event (stolen) of the given type, numbered. */
static void emit(tram_responses_state *st, struct evhttp_request *req, const char *type, json_t *event)
{
    if (!event)
        return;
    json_object_set_new(event, "type", json_string(type));
    json_object_set_new(event, "sequence_number", json_integer(st->sequence++));
    if (req)
        tram_http_sse_event(req, type, event);
    json_decref(event);
}

static void start(tram_responses_state *st, struct evhttp_request *req)
{
    if (st->started)
        return;
    st->started = 1;
    emit(st, req, "response.created", json_pack("{s:o}", "response", response_object(st, "in_progress")));
    emit(st, req, "response.in_progress", json_pack("{s:o}", "response", response_object(st, "in_progress")));
}

static json_t *open_item(const tram_responses_state *st)
{
    return st->open < 0 ? NULL : json_array_get(st->output, (size_t)st->open);
}

/* Ends the item being streamed, if any. */
static void close_item(tram_responses_state *st, struct evhttp_request *req)
{
    json_t *item = open_item(st);
    if (!item)
        return;
    const char *id = json_string_value(json_object_get(item, "id"));
    if (!strcmp(json_string_value(json_object_get(item, "type")), "message")) {
        json_t *part = json_array_get(json_object_get(item, "content"), 0);
        emit(st, req, "response.output_text.done",
             json_pack("{s:s, s:i, s:i, s:O, s:O}", "item_id", id, "output_index", st->open, "content_index", 0,
                       "text", json_object_get(part, "text"), "logprobs", json_object_get(part, "logprobs")));
        emit(st, req, "response.content_part.done", json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index",
                                                              st->open, "content_index", 0, "part", part));
    } else {
        emit(st, req, "response.function_call_arguments.done",
             json_pack("{s:s, s:i, s:O, s:O}", "item_id", id, "output_index", st->open, "name",
                       json_object_get(item, "name"), "arguments", json_object_get(item, "arguments")));
    }
    json_object_set_new(item, "status", json_string(item_status(st)));
    emit(st, req, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", st->open, "item", item));
    st->open = -1;
}

/* Adds item (stolen) to the output as the one being streamed. */
static json_t *add_item(tram_responses_state *st, struct evhttp_request *req, json_t *item)
{
    close_item(st, req);
    if (!item || json_array_append_new(st->output, item))
        return NULL;
    st->open = (int)json_array_size(st->output) - 1;
    emit(st, req, "response.output_item.added", json_pack("{s:i, s:O}", "output_index", st->open, "item", item));
    return item;
}

static void open_message(tram_responses_state *st, struct evhttp_request *req)
{
    json_t *item = open_item(st);
    if (item && !strcmp(json_string_value(json_object_get(item, "type")), "message"))
        return;
    if (!(item = add_item(st, req, message_item("in_progress", NULL, NULL))))
        return;
    json_t *part = text_part("", json_array());
    emit(st, req, "response.content_part.added",
         json_pack("{s:O, s:i, s:i, s:O}", "item_id", json_object_get(item, "id"), "output_index", st->open,
                   "content_index", 0, "part", part));
    json_array_append_new(json_object_get(item, "content"), part);
}

/* Appends delta to the string at key of o. */
static void append_string(json_t *o, const char *key, const char *delta, size_t len)
{
    const json_t *old = json_object_get(o, key);
    size_t n = json_string_length(old);
    char *s = malloc(n + len + 1);
    if (!s)
        return;
    memcpy(s, json_string_value(old), n);
    memcpy(s + n, delta, len);
    s[n + len] = 0;
    json_object_set_new(o, key, json_stringn(s, n + len));
    free(s);
}

/* A piece of the text, with its tokens' logprobs (stolen). */
static void text_delta(tram_responses_state *st, struct evhttp_request *req, const json_t *text, json_t *logprobs)
{
    open_message(st, req);
    json_t *item = open_item(st);
    json_t *part = json_array_get(json_object_get(item, "content"), 0);
    if (!part || !logprobs) {
        json_decref(logprobs);
        return;
    }
    append_string(part, "text", json_string_value(text), json_string_length(text));
    json_array_extend(json_object_get(part, "logprobs"), logprobs);
    emit(st, req, "response.output_text.delta",
         json_pack("{s:O, s:i, s:i, s:O, s:o}", "item_id", json_object_get(item, "id"), "output_index", st->open,
                   "content_index", 0, "delta", text, "logprobs", logprobs));
}

/* One entry of a chunk's delta.tool_calls: a call's first (id and name)
 * or the next piece of its arguments. */
static void call_delta(tram_responses_state *st, struct evhttp_request *req, const json_t *call)
{
    const json_t *fn = json_object_get(call, "function");
    const json_t *args = json_object_get(fn, "arguments");
    json_t *item = open_item(st);
    if (json_object_get(call, "id")) {
        item = add_item(st, req, call_item("in_progress", json_string_value(json_object_get(call, "id")),
                                           json_string_value(json_object_get(fn, "name")), NULL));
        if (!json_string_length(args))
            return;
    }
    if (!item || strcmp(json_string_value(json_object_get(item, "type")), "function_call") || !json_is_string(args))
        return;
    append_string(item, "arguments", json_string_value(args), json_string_length(args));
    emit(st, req, "response.function_call_arguments.delta",
         json_pack("{s:O, s:i, s:O}", "item_id", json_object_get(item, "id"), "output_index", st->open, "delta",
                   args));
}

void tram_responses_chunk(void *state, const json_t *chunk, struct evhttp_request *req)
{
    tram_responses_state *st = state;
    start(st, req);
    const json_t *usage = json_object_get(chunk, "usage");
    if (json_is_object(usage)) {
        json_decref(st->usage);
        st->usage = usage_of(usage);
    }
    const json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
    const json_t *delta = json_object_get(choice, "delta");
    const json_t *content = json_object_get(delta, "content");
    if (json_string_length(content) > 0)
        text_delta(st, req, content, logprobs_of(choice));
    size_t i;
    const json_t *call;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, call)
        call_delta(st, req, call);
    const char *reason = json_string_value(json_object_get(choice, "finish_reason"));
    if (reason) {
        st->finish = reason_of(reason);
        json_decref(st->error);
        st->error = json_incref(json_object_get(choice, "error"));
    }
}

void tram_responses_stream_start(void *state, struct evhttp_request *req, const tram_api_envelope *env,
                                 long long prompt_tokens)
{
    (void)env;   /* the id and the time are the state's already */
    (void)prompt_tokens;   /* the usage comes with the stream's last chunk */
    if (req)
        tram_http_sse_start(req);
    start(state, req);
}

void tram_responses_stream_end(void *state, const tram_dialect_end *end, struct evhttp_request *req)
{
    tram_responses_state *st = state;
    const tram_api_error *error = end->error;
    start(st, req);
    if (json_array_size(st->output) == 0 && st->finish && !error)
        open_message(st, req);   /* an empty reply is still one (empty) message */
    close_item(st, req);
    if (error)
        fail_with(st, error);
    const char *status = status_of(st);
    json_t *r = response_object(st, status);
    if (r)
        store_response(st, r);
    const char *type = !strcmp(status, "completed") ? "response.completed"
                       : !strcmp(status, "incomplete") ? "response.incomplete" : "response.failed";
    emit(st, req, type, json_pack("{s:o}", "response", r));
    if (req)
        tram_http_sse_end(req);
}

void tram_responses_free(void *state)
{
    tram_responses_state *st = state;
    if (!st)
        return;
    json_decref(st->echo);
    json_decref(st->items);
    json_decref(st->message_paths);
    json_decref(st->output);
    json_decref(st->usage);
    json_decref(st->error);
    free(st);
}
