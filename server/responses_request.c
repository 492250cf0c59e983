/* responses_request.c — a /v1/responses body as the chat completions body
 * that runs it (responses.h).
 *
 * The body's fields pass api_fields.c's table first (TRAM_FIELD_RESPONSES),
 * and each nested object its own.  The conversation is a list of items:
 * those of the previous response, when previous_response_id names one
 * (its own conversation, stored with it), then this body's input.  Items
 * become chat messages: a message item a message, consecutive function_call
 * items one assistant message's tool_calls (joined to the assistant message
 * before them), a function_call_output item a tool message.  instructions
 * become a system message before them all; as OpenAI says, a previous
 * response's instructions are not carried over.  What a chat field keeps
 * from the body is renamed (max_output_tokens is max_completion_tokens,
 * text.format is response_format, a function tool's fields go under
 * "function"), and an error the chat parse finds names the field of the
 * body it came from (responses_rename_error). */
#include "server/responses.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/strbuf.h"
#include "server/api_fields.h"
#include "server/responses_state.h"
#include "server/state.h"

static const char *string_at(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* A required string field of an item at path. */
static int required_string(const json_t *o, const char *key, const char *path, const char **out,
                           tram_api_error *e)
{
    char param[128];
    snprintf(param, sizeof(param), "%s.%s", path, key);
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return tram_api_missing(e, param);
    if (!json_is_string(v))
        return tram_api_wrong_type(e, param, "a string");
    *out = json_string_value(v);
    return 0;
}

/* ---------------------------------------------------------------- items */

/* A message's content: a string, or text parts (input_text, or the
 * output_text of an assistant message sent back) joined by newlines. */
static json_t *content_text(const json_t *content, const char *path, tram_responses_state *st, tram_api_error *e)
{
    char param[128];
    snprintf(param, sizeof(param), "%s.content", path);
    if (json_is_string(content))
        return json_incref((json_t *)content);
    if (!json_is_array(content)) {
        tram_api_wrong_type(e, param, "a string or an array of content parts");
        return NULL;
    }
    tram_strbuf text = {0};
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part) {
        char at[160];
        snprintf(at, sizeof(at), "%s[%zu]", param, i);
        const char *type = string_at(part, "type"), *piece;
        if (!json_is_object(part)) {
            tram_api_wrong_type(e, at, "an object");
            tram_strbuf_free(&text);
            return NULL;
        }
        if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text"))) {
            snprintf(at + strlen(at), sizeof(at) - strlen(at), ".type");
            tram_api_fail(e, 400, at, "invalid_value", "Invalid value for '%s': %s%.60s%s parts are not "
                          "supported (tram takes text only: 'input_text', or an assistant's 'output_text').",
                          at, type ? "'" : "", type ? type : "untyped", type ? "'" : "");
            tram_strbuf_free(&text);
            return NULL;
        }
        if (tram_api_check_object(part, TRAM_OBJ_RESP_CONTENT_PART, at, st->ignored, sizeof(st->ignored), e) ||
            required_string(part, "text", at, &piece, e)) {
            tram_strbuf_free(&text);
            return NULL;
        }
        tram_strbuf_cat(&text, i ? "\n" : "", piece, (char *)NULL);
    }
    char *joined = tram_strbuf_take(&text);
    json_t *out = joined ? json_string(joined) : NULL;
    free(joined);
    if (!out)
        tram_api_out_of_memory(e);
    return out;
}

/* The chat message a message item makes. */
static json_t *message_of(const json_t *item, const char *path, tram_responses_state *st, tram_api_error *e)
{
    if (tram_api_check_object(item, TRAM_OBJ_RESP_MESSAGE, path, st->ignored, sizeof(st->ignored), e))
        return NULL;
    const char *role;
    if (required_string(item, "role", path, &role, e))
        return NULL;
    if (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") &&
        strcmp(role, "assistant")) {
        char param[128];
        snprintf(param, sizeof(param), "%s.role", path);
        tram_api_fail(e, 400, param, "invalid_value", "Invalid value for '%s': supported roles are 'user', "
                      "'system', 'developer' and 'assistant'.", param);
        return NULL;
    }
    json_t *content = json_object_get(item, "content");
    if (!content) {
        char param[128];
        snprintf(param, sizeof(param), "%s.content", path);
        tram_api_missing(e, param);
        return NULL;
    }
    json_t *text = content_text(content, path, st, e);
    return text ? json_pack("{s:s, s:o}", "role", role, "content", text) : NULL;
}

/* A function_call_output's output: a string, or text parts. */
static json_t *tool_message_of(const json_t *item, const char *path, tram_responses_state *st, tram_api_error *e)
{
    const char *call_id;
    if (tram_api_check_object(item, TRAM_OBJ_RESP_CALL_OUTPUT, path, st->ignored, sizeof(st->ignored), e) ||
        required_string(item, "call_id", path, &call_id, e))
        return NULL;
    const json_t *output = json_object_get(item, "output");
    json_t *text = NULL;
    if (!output || json_is_null(output)) {
        char param[128];
        snprintf(param, sizeof(param), "%s.output", path);
        tram_api_missing(e, param);
    } else if (!(text = content_text(output, path, st, e))) {
        snprintf(e->param, sizeof(e->param), "%s.output", path);  /* content_text names ".content" */
    }
    return text ? json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", call_id, "content", text) : NULL;
}

/* A function_call item as a chat tool call. */
static json_t *tool_call_of(const json_t *item, const char *path, tram_responses_state *st, tram_api_error *e)
{
    const char *call_id, *name, *arguments;
    if (tram_api_check_object(item, TRAM_OBJ_RESP_FUNCTION_CALL, path, st->ignored, sizeof(st->ignored), e) ||
        required_string(item, "call_id", path, &call_id, e) || required_string(item, "name", path, &name, e) ||
        required_string(item, "arguments", path, &arguments, e))
        return NULL;
    return json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", call_id, "type", "function", "function", "name", name,
                     "arguments", arguments);
}

/* Appends the chat message (stolen) that came from path. */
static int add_message(json_t *messages, json_t *paths, json_t *m, const char *path, tram_api_error *e)
{
    if (!m || json_array_append_new(messages, m) || json_array_append_new(paths, json_string(path)))
        return e->status ? -1 : tram_api_out_of_memory(e);
    return 0;
}

/* A function_call joins the assistant message just before it (a message
 * item or earlier calls), else starts one. */
static int add_tool_call(json_t *messages, json_t *paths, json_t *call, const char *path, tram_api_error *e)
{
    if (!call)
        return -1;
    json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    if (!last || strcmp(string_at(last, "role"), "assistant"))
        return add_message(messages, paths,
                           json_pack("{s:s, s:n, s:[o]}", "role", "assistant", "content", "tool_calls", call),
                           path, e);
    json_t *calls = json_object_get(last, "tool_calls");
    if (!calls)
        json_object_set_new(last, "tool_calls", calls = json_array());
    return json_array_append_new(calls, call) ? tram_api_out_of_memory(e) : 0;
}

static int add_item(json_t *messages, json_t *paths, const json_t *item, const char *path, tram_responses_state *st,
                    tram_api_error *e)
{
    if (!json_is_object(item))
        return tram_api_wrong_type(e, path, "an input item (an object)");
    const json_t *type = json_object_get(item, "type");
    const char *t = json_string_value(type);
    char param[128];
    snprintf(param, sizeof(param), "%s.type", path);
    if (type && !t)
        return tram_api_wrong_type(e, param, "a string");
    if (!t || !strcmp(t, "message"))
        return add_message(messages, paths, message_of(item, path, st, e), path, e);
    if (!strcmp(t, "function_call"))
        return add_tool_call(messages, paths, tool_call_of(item, path, st, e), path, e);
    if (!strcmp(t, "function_call_output"))
        return add_message(messages, paths, tool_message_of(item, path, st, e), path, e);
    return tram_api_fail(e, 400, param, "invalid_value", "Invalid value for '%s': input items of type '%.60s' "
                         "are not supported (tram takes 'message', 'function_call' and "
                         "'function_call_output' items).", param, t);
}

/* The input as a list of items: a string is one user message. */
static json_t *input_items(const json_t *body, tram_api_error *e)
{
    const json_t *input = json_object_get(body, "input");
    if (!input || json_is_null(input)) {
        tram_api_missing(e, "input");
        return NULL;
    }
    if (json_is_string(input))
        return json_pack("[{s:s, s:O}]", "role", "user", "content", input);
    if (!json_is_array(input)) {
        tram_api_wrong_type(e, "input", "a string or an array of input items");
        return NULL;
    }
    return json_deep_copy(input);
}

/* The conversation stored with previous_response_id: its items, or a 404. */
static json_t *earlier_items(const json_t *body, const tram_responses_state *st, tram_rstore *store,
                             tram_api_error *e)
{
    const json_t *prev = json_object_get(body, "previous_response_id");
    if (!prev || json_is_null(prev))
        return json_array();
    if (!json_is_string(prev)) {
        tram_api_wrong_type(e, "previous_response_id", "a string");
        return NULL;
    }
    char *text = NULL;
    if (!store || tram_rstore_get(store, st->tenant, json_string_value(prev), TRAM_RSTORE_CONVERSATION, &text,
                                  tram_now())) {
        tram_api_fail(e, 404, "previous_response_id", "previous_response_not_found",
                      "Previous response with id '%.100s' not found.", json_string_value(prev));
        return NULL;
    }
    if (!text[0]) {   /* a background response still running has no conversation yet */
        free(text);
        tram_api_fail(e, 400, "previous_response_id", "invalid_value", "Previous response with id '%.100s' "
                      "has not finished yet.", json_string_value(prev));
        return NULL;
    }
    json_t *items = json_loads(text, 0, NULL);
    free(text);
    if (!items)
        tram_api_out_of_memory(e);
    return items;
}

/* messages: instructions, the earlier items, the input. */
static json_t *chat_messages(const json_t *body, tram_responses_state *st, const json_t *earlier,
                             const json_t *input, tram_api_error *e)
{
    json_t *messages = json_array();
    const json_t *instructions = json_object_get(body, "instructions");
    if (instructions && !json_is_null(instructions)) {
        if (!json_is_string(instructions)) {
            json_decref(messages);
            tram_api_wrong_type(e, "instructions", "a string");
            return NULL;
        }
        if (add_message(messages, st->message_paths, json_pack("{s:s, s:O}", "role", "system", "content",
                                                               instructions), "instructions", e))
            goto fail;
    }
    size_t i;
    const json_t *item;
    /* the stored items are tram's own: their ids and statuses are no
     * client's fields to warn of */
    char ignored[sizeof(st->ignored)];
    memcpy(ignored, st->ignored, sizeof(ignored));
    json_array_foreach(earlier, i, item) {
        if (add_item(messages, st->message_paths, item, "previous_response_id", st, e))
            goto fail;
    }
    memcpy(st->ignored, ignored, sizeof(ignored));
    json_array_foreach(input, i, item) {
        char path[32];
        snprintf(path, sizeof(path), "input[%zu]", i);
        if (add_item(messages, st->message_paths, item, path, st, e))
            goto fail;
    }
    return messages;
fail:
    json_decref(messages);
    return NULL;
}

/* ---------------------------------------------------------------- tools */

static int check_object(const json_t *v, tram_api_object_id id, const char *path, tram_responses_state *st,
                        tram_api_error *e)
{
    if (!json_is_object(v))
        return tram_api_wrong_type(e, path, "an object");
    return tram_api_check_object(v, id, path, st->ignored, sizeof(st->ignored), e);
}

/* A function tool under chat's "function"; any other type (web_search,
 * file_search, computer_use_preview, ...) is a 400 naming it. */
static json_t *chat_tool(const json_t *tool, const char *path, tram_responses_state *st, tram_api_error *e)
{
    char param[64];
    snprintf(param, sizeof(param), "%s.type", path);
    const char *type = string_at(tool, "type");
    if (json_is_object(tool) && type && strcmp(type, "function")) {
        tram_api_fail(e, 400, param, "unsupported_tool", "Unsupported tool '%.60s' in '%s': tram runs no "
                      "built-in tools (web search, file search, computer use, code interpreter, ...), only "
                      "'function' tools.", type, param);
        return NULL;
    }
    if (check_object(tool, TRAM_OBJ_RESP_TOOL, path, st, e))
        return NULL;
    if (!type) {
        tram_api_missing(e, param);
        return NULL;
    }
    json_t *fn = json_deep_copy(tool);
    json_object_del(fn, "type");
    return json_pack("{s:s, s:o}", "type", "function", "function", fn);
}

static int copy_tools(const json_t *body, json_t *chat, tram_responses_state *st, tram_api_error *e)
{
    const json_t *tools = json_object_get(body, "tools");
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools))
        return tram_api_wrong_type(e, "tools", "an array");
    json_t *out = json_array();
    json_object_set_new(chat, "tools", out);
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        char path[32];
        snprintf(path, sizeof(path), "tools[%zu]", i);
        json_t *t = chat_tool(tool, path, st, e);
        if (!t)
            return -1;
        json_array_append_new(out, t);
    }
    return 0;
}

/* "none", "auto", "required", or {"type": "function", "name": ...}. */
static int copy_tool_choice(const json_t *body, json_t *chat, tram_responses_state *st, tram_api_error *e)
{
    const json_t *choice = json_object_get(body, "tool_choice");
    if (!choice || json_is_null(choice) || json_is_string(choice)) {
        if (choice && !json_is_null(choice))
            json_object_set(chat, "tool_choice", (json_t *)choice);
        return 0;
    }
    const char *type = string_at(choice, "type");
    if (json_is_object(choice) && (!type || strcmp(type, "function")))
        return tram_api_fail(e, 400, "tool_choice.type", "invalid_value", "Invalid value for 'tool_choice.type': "
                             "only 'function' is supported (tram runs no built-in tools, and no "
                             "'allowed_tools' subset).");
    if (check_object(choice, TRAM_OBJ_RESP_TOOL_CHOICE, "tool_choice", st, e))
        return -1;
    json_object_set_new(chat, "tool_choice", json_pack("{s:s, s:{s:O?}}", "type", "function", "function",
                                                       "name", json_object_get(choice, "name")));
    return 0;
}

/* ---------------------------------------------------------------- the rest */

/* text.format as chat's response_format. */
static int copy_text_format(const json_t *body, json_t *chat, tram_responses_state *st, tram_api_error *e)
{
    const json_t *text = json_object_get(body, "text");
    if (!text || json_is_null(text))
        return 0;
    if (check_object(text, TRAM_OBJ_RESP_TEXT, "text", st, e))
        return -1;
    const json_t *format = json_object_get(text, "format");
    if (!format || json_is_null(format))
        return 0;
    if (check_object(format, TRAM_OBJ_RESP_FORMAT, "text.format", st, e))
        return -1;
    const char *type = string_at(format, "type");
    if (type && !strcmp(type, "json_schema")) {
        json_t *schema = json_deep_copy(format);
        json_object_del(schema, "type");
        json_object_set_new(chat, "response_format", json_pack("{s:s, s:o}", "type", "json_schema", "json_schema",
                                                               schema));
        return 0;
    }
    json_t *rf = json_deep_copy(format);
    json_object_set_new(chat, "response_format", rf);
    return 0;
}

/* What include may name besides the output text's logprobs: data of items
 * tram never makes (reasoning, built-in tools' calls, input images), so
 * asking for it changes nothing. */
static const char *const include_of_nothing[] = {
    "reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
    "web_search_call.action.sources", "message.input_image.image_url", "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
};

static int includes_nothing(const char *entry)
{
    for (size_t i = 0; i < sizeof(include_of_nothing) / sizeof(include_of_nothing[0]); i++)
        if (!strcmp(entry, include_of_nothing[i]))
            return 1;
    return 0;
}

/* Whether include asks for the output text's logprobs: 1, 0, or -1 with e. */
static int wants_logprobs(const json_t *body, tram_api_error *e)
{
    const json_t *include = json_object_get(body, "include");
    if (!include || json_is_null(include))
        return 0;
    if (!json_is_array(include))
        return tram_api_wrong_type(e, "include", "an array of strings");
    int want = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(include, i, v) {
        char at[32];
        snprintf(at, sizeof(at), "include[%zu]", i);
        const char *entry = json_string_value(v);
        if (!entry)
            return tram_api_wrong_type(e, at, "a string");
        if (!strcmp(entry, "message.output_text.logprobs"))
            want = 1;
        else if (!includes_nothing(entry))
            return tram_api_fail(e, 400, at, "invalid_value", "Invalid value for '%s': '%.60s' is not an "
                                 "include value (tram produces 'message.output_text.logprobs').", at, entry);
    }
    return want;
}

/* include's logprobs and top_logprobs as chat's logprobs and top_logprobs.
 * A top_logprobs above 0 asks for logprobs by itself; one of the wrong type
 * goes to chat, whose parse names it. */
static int copy_logprobs(const json_t *body, json_t *chat, tram_api_error *e)
{
    int want = wants_logprobs(body, e);
    if (want < 0)
        return -1;
    const json_t *top = json_object_get(body, "top_logprobs");
    int has_top = top && !json_is_null(top);
    if (has_top && !(json_is_number(top) && json_number_value(top) == 0))
        want = 1;
    if (want)
        json_object_set_new(chat, "logprobs", json_true());
    if (want && has_top)
        json_object_set(chat, "top_logprobs", (json_t *)top);
    return 0;
}

/* Fields chat reads under the same name, and those it reads under another. */
static const char *const same_name[] = {"model", "temperature", "top_p", "seed", "parallel_tool_calls",
                                        "stream"};
static const struct {
    const char *ours, *chat;
} renamed[] = {
    {"max_output_tokens", "max_completion_tokens"},
};

static void copy_scalars(const json_t *body, json_t *chat)
{
    for (size_t i = 0; i < sizeof(same_name) / sizeof(same_name[0]); i++) {
        json_t *v = json_object_get(body, same_name[i]);
        if (v)
            json_object_set(chat, same_name[i], v);
    }
    for (size_t i = 0; i < sizeof(renamed) / sizeof(renamed[0]); i++) {
        json_t *v = json_object_get(body, renamed[i].ours);
        if (v)
            json_object_set(chat, renamed[i].chat, v);
    }
    /* the stream's end carries the usage, so chat's stream must too */
    if (json_is_true(json_object_get(body, "stream")))
        json_object_set_new(chat, "stream_options", json_pack("{s:b}", "include_usage", 1));
}

/* background: true runs it with no client waiting, stored (and so needs
 * the store) and polled with GET, not streamed. */
static int read_background(const json_t *body, tram_responses_state *st, tram_api_error *e)
{
    const json_t *v = json_object_get(body, "background");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return tram_api_wrong_type(e, "background", "a boolean");
    st->background = json_is_true(v);
    if (st->background && !st->store)
        return tram_api_fail(e, 400, "background", "invalid_value", "Invalid value for 'background': a "
                             "background response must be stored (\"store\": true, and a server with "
                             "--responses-store-size above 0).");
    if (st->background && json_is_true(json_object_get(body, "stream")))
        return tram_api_fail(e, 400, "background", "invalid_value", "Invalid value for 'background': tram "
                             "does not stream background responses; poll GET /v1/responses/{id} instead.");
    return 0;
}

/* stream_options, store, background and metadata: read here, not by chat. */
static int read_own_fields(const json_t *body, tram_responses_state *st, tram_server *s, tram_api_error *e)
{
    const json_t *so = json_object_get(body, "stream_options");
    if (so && !json_is_null(so) && check_object(so, TRAM_OBJ_RESP_STREAM_OPTIONS, "stream_options", st, e))
        return -1;
    const json_t *store = json_object_get(body, "store");
    if (store && !json_is_null(store) && !json_is_boolean(store))
        return tram_api_wrong_type(e, "store", "a boolean");
    st->store = json_is_false(store) ? NULL : s->responses;
    if (read_background(body, st, e))
        return -1;
    const json_t *meta = json_object_get(body, "metadata");
    if (meta && !json_is_null(meta)) {
        const char *key;
        const json_t *v;
        if (!json_is_object(meta))
            return tram_api_wrong_type(e, "metadata", "an object of strings");
        json_object_foreach((json_t *)meta, key, v) {
            if (!json_is_string(v))
                return tram_api_wrong_type(e, "metadata", "an object of strings");
        }
    }
    return 0;
}

/* The body's value of key, or a new fallback (stolen) when it has none. */
static json_t *or_else(const json_t *body, const char *key, json_t *fallback)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return fallback;
    json_decref(fallback);
    return json_incref(v);
}

/* The fields of the response object that repeat the request (the tools
 * and the format as the body wrote them, checked by now). */
static json_t *echo_of(const json_t *body, const tram_server *s)
{
    json_t *format = json_object_get(json_object_get(body, "text"), "format");
    return json_pack("{s:o, s:o, s:o, s:s, s:o, s:o, s:b, s:o, s:{s:o}, s:o, s:o, s:o, s:s, s:o, s:o, "
                     "s:b, s:o, s:{s:n, s:n}, s:s, s:o}",
                     "instructions", or_else(body, "instructions", json_null()),
                     "max_output_tokens", or_else(body, "max_output_tokens", json_null()),
                     "metadata", or_else(body, "metadata", json_object()),
                     "model", s->model_name,
                     "parallel_tool_calls", or_else(body, "parallel_tool_calls", json_true()),
                     "previous_response_id", or_else(body, "previous_response_id", json_null()),
                     "store", !json_is_false(json_object_get(body, "store")),
                     "temperature", or_else(body, "temperature", json_real(1.0)),
                     "text", "format", json_is_object(format) ? json_incref(format) : json_pack("{s:s}", "type", "text"),
                     "tool_choice", or_else(body, "tool_choice", json_string("auto")),
                     "tools", or_else(body, "tools", json_array()),
                     "top_p", or_else(body, "top_p", json_real(1.0)),
                     "truncation", "disabled",
                     "user", or_else(body, "user", json_null()),
                     "safety_identifier", or_else(body, "safety_identifier", json_null()),
                     "background", json_is_true(json_object_get(body, "background")),
                     "max_tool_calls", or_else(body, "max_tool_calls", json_null()),
                     "reasoning", "effort", "summary",
                     "service_tier", "default",
                     "top_logprobs", or_else(body, "top_logprobs", json_integer(0)));
}

static json_t *build_chat(const tram_dialect_request *in, tram_responses_state *st, tram_api_error *e)
{
    const json_t *body = in->body;
    if (tram_api_check_fields(body, TRAM_FIELD_RESPONSES, st->ignored, sizeof(st->ignored), e) ||
        read_own_fields(body, st, in->srv, e))
        return NULL;
    json_t *input = input_items(body, e);
    json_t *earlier = input ? earlier_items(body, st, in->srv->responses, e) : NULL;
    json_t *messages = earlier ? chat_messages(body, st, earlier, input, e) : NULL;
    json_t *chat = messages ? json_pack("{s:o}", "messages", messages) : NULL;
    if (chat) {
        copy_scalars(body, chat);
        if (copy_tools(body, chat, st, e) || copy_tool_choice(body, chat, st, e) ||
            copy_text_format(body, chat, st, e) || copy_logprobs(body, chat, e)) {
            json_decref(chat);
            chat = NULL;
        }
    }
    if (chat) {   /* the conversation this response ends: the earlier items and the input */
        json_array_extend(earlier, input);
        st->items = json_incref(earlier);
        st->echo = echo_of(body, in->srv);
    }
    json_decref(earlier);
    json_decref(input);
    if (chat && (!st->items || !st->echo)) {
        json_decref(chat);
        tram_api_out_of_memory(e);
        return NULL;
    }
    return chat;
}

json_t *tram_responses_to_chat(const tram_dialect_request *in, void **state, tram_api_error *e)
{
    tram_responses_state *st = calloc(1, sizeof(*st));
    *state = st;
    if (!st || !(st->message_paths = json_array()) || !(st->output = json_array())) {
        tram_api_out_of_memory(e);
        return NULL;
    }
    snprintf(st->tenant, sizeof(st->tenant), "%s", in->tenant);
    snprintf(st->id, sizeof(st->id), "%s", in->id);
    st->created = in->created;
    st->open = -1;
    json_t *chat = build_chat(in, st, e);
    if (chat && in->ignored)
        snprintf(in->ignored, in->ignored_cap, "%s", st->ignored);
    return chat;
}

/* ---------------------------------------------------------------- errors */

/* Chat's names of the body's fields, longest first where one begins another. */
static const struct {
    const char *chat, *ours;
} param_names[] = {
    {"max_completion_tokens", "max_output_tokens"},
    {"response_format.json_schema", "text.format"},
    {"response_format", "text.format"},
    {"tool_choice.function", "tool_choice"},
    {"logprobs", "include"},
};

void tram_responses_rename_error(void *state, tram_api_error *e)
{
    tram_responses_state *st = state;
    char *p = e->param, rest[sizeof(e->param)];
    unsigned long k;
    int n = -1;
    if (st && sscanf(p, "messages[%lu]%n", &k, &n) == 1 && n > 0 && k < json_array_size(st->message_paths)) {
        /* the item the message came from: chat's path inside it is not the item's */
        snprintf(p, sizeof(e->param), "%s", json_string_value(json_array_get(st->message_paths, k)));
        return;
    }
    n = -1;
    if (sscanf(p, "tools[%lu].function%n", &k, &n) == 1 && n > 0) {
        snprintf(rest, sizeof(rest), "%s", p + n);
        snprintf(p, sizeof(e->param), "tools[%lu]%.100s", k, rest);
        return;
    }
    for (size_t i = 0; i < sizeof(param_names) / sizeof(param_names[0]); i++) {
        size_t len = strlen(param_names[i].chat);
        if (!strncmp(p, param_names[i].chat, len) && (!p[len] || p[len] == '.' || p[len] == '[')) {
            snprintf(rest, sizeof(rest), "%s", p + len);
            snprintf(p, sizeof(e->param), "%s%.100s", param_names[i].ours, rest);
            return;
        }
    }
}
