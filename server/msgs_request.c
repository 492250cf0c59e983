#include "server/msgs_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_fields.h"

/* A translation: while under way the chat body; kept to the request's end,
 * for each chat message the Anthropic message it came from (-1: the system
 * prompt), so that an error chat's parser (or a later step) finds in one
 * names that message. */
struct tram_msgs_translation {
    json_t *chat;
    json_t *messages;       /* chat's "messages" (borrowed) */
    int *origin;
    size_t num_origin, cap_origin;
    int translated;         /* the body is translated: errors from here on name chat's fields */
    char ignored[512];      /* the ignored fields met, for the warning */
    tram_api_error *e;
};
typedef struct tram_msgs_translation translation;

/* path.key and path[i]; a path too long is cut (it only names the field). */
static void join_path(char *out, size_t cap, const char *path, const char *key)
{
    int n = snprintf(out, cap, "%s%s%s", path, path[0] ? "." : "", key);
    if (n < 0)
        out[0] = 0;
}

static void index_path(char *out, size_t cap, const char *path, size_t i)
{
    int n = snprintf(out, cap, "%s[%zu]", path, i);
    if (n < 0)
        out[0] = 0;
}

/* o[key] when it is present and not null, else NULL. */
static const json_t *present(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* present(o, key), with its path in param. */
static const json_t *member(const json_t *o, const char *path, const char *key, char *param, size_t cap)
{
    join_path(param, cap, path, key);
    return present(o, key);
}

/* o[key] as a string: 1 read, 0 absent (an error when required), -1. */
static int get_string(const json_t *o, const char *path, const char *key, int required, const char **out,
                      tram_api_error *e)
{
    char param[sizeof(e->param)];
    const json_t *v = member(o, path, key, param, sizeof(param));
    if (!v)
        return required ? tram_api_missing(e, param)
                        : 0;
    if (!json_is_string(v))
        return tram_api_wrong_type(e, param, "a string");
    *out = json_string_value(v);
    return 1;
}

static int check_object(translation *t, const json_t *o, tram_api_object_id id, const char *path)
{
    if (!json_is_object(o))
        return tram_api_wrong_type(t->e, path, "an object");
    return tram_api_check_object(o, id, path, t->ignored, sizeof(t->ignored), t->e);
}

/* check_object, then o's required string `key` read into out: how every
 * block, message and tool begins. */
static int check_object_with(translation *t, const json_t *o, tram_api_object_id id, const char *path,
                             const char *key, const char **out)
{
    return check_object(t, o, id, path) || get_string(o, path, key, 1, out, t->e) < 0 ? -1 : 0;
}

static int add_message(translation *t, json_t *m, int from)
{
    if (!m || json_array_append_new(t->messages, m))
        return tram_api_out_of_memory(t->e);
    if (t->num_origin == t->cap_origin) {
        size_t cap = t->cap_origin ? 2 * t->cap_origin : 8;
        int *grown = realloc(t->origin, cap * sizeof(*grown));
        if (!grown)
            return tram_api_out_of_memory(t->e);
        t->origin = grown;
        t->cap_origin = cap;
    }
    t->origin[t->num_origin++] = from;
    return 0;
}

/* ------------------------------------------------------------ content blocks */

/* The type of the block at path; one tram cannot take is a 400 naming it. */
static int block_type(const json_t *b, const char *path, const char *const *allowed, const char **type,
                      tram_api_error *e)
{
    if (!json_is_object(b))
        return tram_api_wrong_type(e, path, "a content block (an object)");
    if (get_string(b, path, "type", 1, type, e) < 0 || !*type)
        return -1;
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(*type, allowed[i]))
            return 0;
    const char *why = !strcmp(*type, "image") || !strcmp(*type, "document")
                          ? "the model takes text only"
                      : !strcmp(*type, "thinking") || !strcmp(*type, "redacted_thinking")
                          ? "extended thinking is not supported"
                      : !strcmp(*type, "tool_use") || !strcmp(*type, "tool_result") || !strcmp(*type, "text")
                          ? "tool_use blocks are an assistant's, tool_result blocks a user's, a system prompt is text"
                          : "tram runs no server tools and takes no other content";
    char param[sizeof(e->param)];
    join_path(param, sizeof(param), path, "type");
    return tram_api_fail(e, 400, param, "unsupported_value",
                         "Unsupported value for '%s': '%.40s' blocks are not supported here: %s.", param, *type,
                         why);
}

/* Block i of a content array: its path (what errors name) and its type. */
typedef struct {
    char path[sizeof(((tram_api_error *)0)->param)];
    const char *type;
} block;

/* Block i of the array at path read into out; its type one of allowed. */
static int read_block(const json_t *b, const char *path, size_t i, const char *const *allowed, block *out,
                      tram_api_error *e)
{
    index_path(out->path, sizeof(out->path), path, i);
    return block_type(b, out->path, allowed, &out->type, e);
}

/* A text block as a chat text part, appended to parts. */
static int text_part(translation *t, const json_t *b, const char *path, json_t *parts)
{
    const char *text = NULL;
    if (check_object_with(t, b, TRAM_OBJ_MSGS_TEXT, path, "text", &text))
        return -1;
    if (json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", text)))
        return tram_api_out_of_memory(t->e);
    return 0;
}

/* A content that is a string or text blocks only (system, tool results) as
 * chat text parts. */
static json_t *text_parts(translation *t, const json_t *content, const char *path)
{
    static const char *const text_only[] = {"text", NULL};
    json_t *parts = json_array();
    if (!parts) {
        tram_api_out_of_memory(t->e);
        return NULL;
    }
    if (json_is_string(content)) {
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", content));
        return parts;
    }
    if (!json_is_array(content)) {
        json_decref(parts);
        tram_api_wrong_type(t->e, path, "a string or an array of text blocks");
        return NULL;
    }
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        block at;
        if (read_block(b, path, i, text_only, &at, t->e) || text_part(t, b, at.path, parts)) {
            json_decref(parts);
            return NULL;
        }
    }
    return parts;
}

/* A user's tool_result block: a chat tool message.  is_error is told the
 * model the only way a chat template can: the content says so. */
static int tool_result(translation *t, const json_t *b, const char *path, int from)
{
    const char *id = NULL;
    if (check_object_with(t, b, TRAM_OBJ_MSGS_TOOL_RESULT, path, "tool_use_id", &id))
        return -1;
    char param[sizeof(t->e->param)];
    const json_t *is_error = member(b, path, "is_error", param, sizeof(param));
    if (is_error && !json_is_boolean(is_error))
        return tram_api_wrong_type(t->e, param, "a boolean");
    const json_t *content = member(b, path, "content", param, sizeof(param));
    json_t *empty = json_string("");
    json_t *parts = text_parts(t, content ? content : empty, param);
    json_decref(empty);
    if (!parts)
        return -1;
    if (json_is_true(is_error) && json_array_insert_new(parts, 0, json_pack("{s:s, s:s}", "type", "text", "text", "Error:"))) {
        json_decref(parts);
        return tram_api_out_of_memory(t->e);
    }
    return add_message(t, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", id, "content", parts), from);
}

/* An assistant's tool_use block: a chat tool call. */
static int tool_use(translation *t, const json_t *b, const char *path, json_t *calls)
{
    const char *id = NULL, *name = NULL;
    if (check_object_with(t, b, TRAM_OBJ_MSGS_TOOL_USE, path, "id", &id) ||
        get_string(b, path, "name", 1, &name, t->e) < 0)
        return -1;
    char param[sizeof(t->e->param)];
    const json_t *input = member(b, path, "input", param, sizeof(param));
    if (!json_is_object(input))
        return tram_api_wrong_type(t->e, param, "an object");
    char *arguments = json_dumps(input, JSON_COMPACT);
    json_t *call = arguments ? json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function",
                                         "name", name, "arguments", arguments)
                             : NULL;
    free(arguments);
    if (!call || json_array_append_new(calls, call))
        return tram_api_out_of_memory(t->e);
    return 0;
}

/* ------------------------------------------------------------ messages */

/* A user turn: its text, and a tool message for each tool_result, in order. */
static int user_turn(translation *t, const json_t *blocks, const char *path, int from)
{
    static const char *const allowed[] = {"text", "tool_result", NULL};
    json_t *parts = json_array();
    size_t i;
    const json_t *b;
    int rc = parts ? 0 : tram_api_out_of_memory(t->e), results = 0;
    json_array_foreach(blocks, i, b) {
        block at;
        if (rc || (rc = read_block(b, path, i, allowed, &at, t->e)))
            break;
        if (!strcmp(at.type, "text")) {
            rc = text_part(t, b, at.path, parts);
            continue;
        }
        results++;
        if (json_array_size(parts)) {  /* text before a result stays before it */
            rc = add_message(t, json_pack("{s:s, s:o}", "role", "user", "content", parts), from);
            parts = json_array();
            rc = rc ? rc : parts ? 0 : tram_api_out_of_memory(t->e);
        }
        rc = rc ? rc : tool_result(t, b, at.path, from);
    }
    if (!rc && (json_array_size(parts) || !results))
        rc = add_message(t, json_pack("{s:s, s:O}", "role", "user", "content", parts), from);
    json_decref(parts);
    return rc;
}

/* An assistant turn: its text, and its tool_use blocks as tool calls. */
static int assistant_turn(translation *t, const json_t *blocks, const char *path, int from)
{
    static const char *const allowed[] = {"text", "tool_use", NULL};
    json_t *parts = json_array(), *calls = json_array();
    size_t i;
    const json_t *b;
    int rc = parts && calls ? 0 : tram_api_out_of_memory(t->e);
    json_array_foreach(blocks, i, b) {
        block at;
        if (rc || (rc = read_block(b, path, i, allowed, &at, t->e)))
            break;
        rc = !strcmp(at.type, "text") ? text_part(t, b, at.path, parts) : tool_use(t, b, at.path, calls);
    }
    json_t *m = rc ? NULL : json_pack("{s:s, s:O}", "role", "assistant", "content", parts);
    if (m && json_array_size(calls))
        json_object_set(m, "tool_calls", calls);
    json_decref(parts);
    json_decref(calls);
    return rc ? rc : add_message(t, m, from);
}

static int message(translation *t, const json_t *m, int i)
{
    char path[32], param[sizeof(t->e->param)];
    snprintf(path, sizeof(path), "messages[%d]", i);
    const char *role = NULL;
    if (check_object_with(t, m, TRAM_OBJ_MSGS_MESSAGE, path, "role", &role))
        return -1;
    const json_t *content = member(m, path, "content", param, sizeof(param));
    if (!content)
        return tram_api_missing(t->e, param);
    if (!strcmp(role, "system")) {
        json_t *parts = text_parts(t, content, param);
        return parts ? add_message(t, json_pack("{s:s, s:o}", "role", "system", "content", parts), i) : -1;
    }
    if (strcmp(role, "user") && strcmp(role, "assistant")) {
        join_path(param, sizeof(param), path, "role");
        return tram_api_fail(t->e, 400, param, "invalid_value",
                             "Invalid value for '%s': expected 'user', 'assistant' or 'system'.", param);
    }
    json_t *blocks = json_is_string(content) ? json_pack("[{s:s, s:O}]", "type", "text", "text", content)
                                             : json_incref((json_t *)content);
    if (!json_is_array(blocks)) {
        json_decref(blocks);
        return tram_api_wrong_type(t->e, param, "a string or an array of content blocks");
    }
    int rc = !strcmp(role, "user") ? user_turn(t, blocks, param, i) : assistant_turn(t, blocks, param, i);
    json_decref(blocks);
    return rc;
}

/* A last assistant turn of text is a prefill: the reply continues it. */
static int is_prefill(const json_t *chat_messages)
{
    const json_t *last = json_array_get(chat_messages, json_array_size(chat_messages) - 1);
    return !strcmp(json_string_value(json_object_get(last, "role")), "assistant") &&
           !json_object_get(last, "tool_calls");
}

static int translate_messages(translation *t, const json_t *body)
{
    const json_t *system = present(body, "system");
    if (system) {
        json_t *parts = text_parts(t, system, "system");
        if (!parts || add_message(t, json_pack("{s:s, s:o}", "role", "system", "content", parts), -1))
            return -1;
    }
    const json_t *v = present(body, "messages");
    if (!v)
        return tram_api_missing(t->e, "messages");
    if (!json_is_array(v))
        return tram_api_wrong_type(t->e, "messages", "an array");
    if (!json_array_size(v))
        return tram_api_fail(t->e, 400, "messages", "empty_array",
                             "Invalid 'messages': empty array. Expected at least one message.");
    for (size_t i = 0; i < json_array_size(v); i++)
        if (message(t, json_array_get(v, i), (int)i))
            return -1;
    if (is_prefill(t->messages) &&
        (json_object_set_new(t->chat, "continue_final_message", json_true()) ||
         json_object_set_new(t->chat, "add_generation_prompt", json_false())))
        return tram_api_out_of_memory(t->e);
    return 0;
}

/* ------------------------------------------------------------ tools */

static json_t *function_tool(translation *t, const json_t *tool, const char *path)
{
    const char *type = NULL, *name = NULL, *description = NULL;
    char param[sizeof(t->e->param)];
    if (!json_is_object(tool)) {
        tram_api_wrong_type(t->e, path, "an object");
        return NULL;
    }
    if (get_string(tool, path, "type", 0, &type, t->e) < 0)
        return NULL;
    if (type && strcmp(type, "custom")) {
        join_path(param, sizeof(param), path, "type");
        tram_api_fail(t->e, 400, param, "unsupported_value",
                      "Unsupported tool type '%.60s' in '%s': tram runs no server tools; only custom tools "
                      "(name, description, input_schema) are supported.", type, param);
        return NULL;
    }
    if (check_object_with(t, tool, TRAM_OBJ_MSGS_TOOL, path, "name", &name) ||
        get_string(tool, path, "description", 0, &description, t->e) < 0)
        return NULL;
    const json_t *schema = member(tool, path, "input_schema", param, sizeof(param));
    if (!json_is_object(schema)) {
        tram_api_wrong_type(t->e, param, "a JSON Schema object");
        return NULL;
    }
    json_t *fn = json_pack("{s:s, s:O}", "name", name, "parameters", schema);
    const json_t *strict = json_object_get(tool, "strict");
    if (fn && description)
        json_object_set_new(fn, "description", json_string(description));
    if (fn && strict)
        json_object_set(fn, "strict", (json_t *)strict);
    json_t *out = fn ? json_pack("{s:s, s:o}", "type", "function", "function", fn) : NULL;
    if (!out)
        tram_api_out_of_memory(t->e);
    return out;
}

static int translate_tools(translation *t, const json_t *body)
{
    const json_t *v = present(body, "tools");
    if (!v)
        return 0;
    if (!json_is_array(v))
        return tram_api_wrong_type(t->e, "tools", "an array");
    json_t *tools = json_array();
    if (!tools || json_object_set_new(t->chat, "tools", tools))
        return tram_api_out_of_memory(t->e);
    for (size_t i = 0; i < json_array_size(v); i++) {
        char path[32];
        snprintf(path, sizeof(path), "tools[%zu]", i);
        json_t *tool = function_tool(t, json_array_get(v, i), path);
        if (!tool || json_array_append_new(tools, tool))
            return -1;
    }
    return 0;
}

/* auto, any, tool (a name), none: chat's auto, required, a named function,
 * none; disable_parallel_tool_use is parallel_tool_calls false. */
static int translate_tool_choice(translation *t, const json_t *body)
{
    const json_t *v = present(body, "tool_choice");
    if (!v)
        return 0;
    const char *type = NULL, *name = NULL;
    if (check_object_with(t, v, TRAM_OBJ_MSGS_TOOL_CHOICE, "tool_choice", "type", &type))
        return -1;
    json_t *choice = !strcmp(type, "auto") ? json_string("auto")
                     : !strcmp(type, "any") ? json_string("required")
                     : !strcmp(type, "none") ? json_string("none")
                                             : NULL;
    if (!choice && !strcmp(type, "tool")) {
        if (get_string(v, "tool_choice", "name", 1, &name, t->e) < 0)
            return -1;
        choice = json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
    } else if (!choice) {
        return tram_api_fail(t->e, 400, "tool_choice.type", "invalid_value",
                             "Invalid value for 'tool_choice.type': expected 'auto', 'any', 'tool' or 'none'.");
    }
    if (json_object_set_new(t->chat, "tool_choice", choice))
        return tram_api_out_of_memory(t->e);
    char param[64];
    const json_t *serial = member(v, "tool_choice", "disable_parallel_tool_use", param, sizeof(param));
    if (serial && !json_is_boolean(serial))
        return tram_api_wrong_type(t->e, param, "a boolean");
    if (json_is_true(serial) && json_object_set_new(t->chat, "parallel_tool_calls", json_false()))
        return tram_api_out_of_memory(t->e);
    return 0;
}

/* ------------------------------------------------------------ the rest */

/* output_config.format {"type": "json_schema", "schema": ...}: chat's
 * response_format of that schema. */
static int translate_output_config(translation *t, const json_t *body)
{
    const json_t *v = present(body, "output_config");
    if (!v)
        return 0;
    if (check_object(t, v, TRAM_OBJ_MSGS_OUTPUT_CONFIG, "output_config"))
        return -1;
    char param[64];
    const json_t *format = member(v, "output_config", "format", param, sizeof(param));
    const char *type = NULL;
    if (!format)
        return 0;
    if (check_object_with(t, format, TRAM_OBJ_MSGS_OUTPUT_FORMAT, param, "type", &type))
        return -1;
    if (strcmp(type, "json_schema"))
        return tram_api_fail(t->e, 400, "output_config.format.type", "invalid_value",
                             "Invalid value for 'output_config.format.type': expected 'json_schema'.");
    const json_t *schema = present(format, "schema");
    if (!json_is_object(schema))
        return tram_api_wrong_type(t->e, "output_config.format.schema", "a JSON Schema object");
    json_t *rf = json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name", "output", "schema",
                           schema);
    return !rf || json_object_set_new(t->chat, "response_format", rf) ? tram_api_out_of_memory(t->e) : 0;
}

/* The fields chat reads under the same name and meaning. */
static int copy_scalars(translation *t, const json_t *body, int count_only)
{
    static const char *const same[] = {"model", "max_tokens", "temperature", "top_p", "top_k", "stream"};
    if (!count_only && !present(body, "max_tokens"))
        return tram_api_missing(t->e, "max_tokens");
    const json_t *temperature = json_object_get(body, "temperature");
    if (json_is_number(temperature) && !(json_number_value(temperature) >= 0 && json_number_value(temperature) <= 1))
        return tram_api_fail(t->e, 400, "temperature", "invalid_value",
                             "Invalid value for 'temperature': %g is outside [0, 1].", json_number_value(temperature));
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        json_t *v = json_object_get(body, same[i]);
        if (v && json_object_set(t->chat, same[i], v))
            return tram_api_out_of_memory(t->e);
    }
    const json_t *stops = json_object_get(body, "stop_sequences");
    if (stops && !json_is_null(stops) && !json_is_array(stops))
        return tram_api_wrong_type(t->e, "stop_sequences", "an array of strings");
    if (json_array_size(stops) && json_object_set(t->chat, "stop", (json_t *)stops))
        return tram_api_out_of_memory(t->e);
    return 0;
}

static int translate(translation *t, const json_t *body, int count_only)
{
    t->chat = json_object();
    t->messages = json_array();
    if (!t->chat || !t->messages || json_object_set_new(t->chat, "messages", t->messages)) {
        if (!t->chat)
            json_decref(t->messages);
        return tram_api_out_of_memory(t->e);
    }
    if (tram_api_check_fields(body, count_only ? TRAM_FIELD_COUNT_TOKENS : TRAM_FIELD_MESSAGES, t->ignored,
                              sizeof(t->ignored), t->e))
        return -1;
    return copy_scalars(t, body, count_only) || translate_messages(t, body) || translate_tools(t, body) ||
                   translate_tool_choice(t, body) || translate_output_config(t, body)
               ? -1
               : 0;
}

/* Replaces the first from in s (of cap bytes) by to. */
static void replace_in(char *s, size_t cap, const char *from, const char *to)
{
    char *at = strstr(s, from), rest[512];
    if (!at)
        return;
    snprintf(rest, sizeof(rest), "%s", at + strlen(from));
    snprintf(at, cap - (size_t)(at - s), "%s%s", to, rest);
}

/* Chat's "messages[K]..." names the Anthropic message chat message K came from. */
static void rename_message_param(const translation *t, tram_api_error *e)
{
    unsigned k;
    char was[sizeof(e->param)];
    if (sscanf(e->param, "messages[%u]", &k) != 1 || k >= t->num_origin)
        return;
    snprintf(was, sizeof(was), "%s", e->param);
    if (t->origin[k] < 0)
        snprintf(e->param, sizeof(e->param), "system");
    else
        snprintf(e->param, sizeof(e->param), "messages[%d]", t->origin[k]);
    replace_in(e->message, sizeof(e->message), was, e->param);
}

json_t *tram_msgs_to_chat(const json_t *body, int count_only, tram_msgs_translation **out, char *ignored,
                          size_t cap, tram_api_error *e)
{
    translation *t = calloc(1, sizeof(*t));
    *out = t;
    if (!t) {
        tram_api_out_of_memory(e);
        return NULL;
    }
    t->e = e;
    int rc = translate(t, body, count_only);
    json_t *chat = rc ? NULL : t->chat;
    if (rc)
        json_decref(t->chat);
    else if (ignored)
        snprintf(ignored, cap, "%s", t->ignored);
    t->translated = !rc;
    t->chat = t->messages = NULL;
    t->e = NULL;
    return chat;
}

void tram_msgs_translation_free(tram_msgs_translation *t)
{
    if (t)
        free(t->origin);
    free(t);
}

/* Chat's names of the fields translated under another name. */
static const struct {
    const char *chat, *anthropic;
} renamed[] = {
    {"stop", "stop_sequences"},
    {"response_format.json_schema.schema", "output_config.format.schema"},
    {"response_format", "output_config.format"},
    {"parallel_tool_calls", "tool_choice.disable_parallel_tool_use"},
    {"continue_final_message", "messages"},
};

/* Chat's name of a field, in e's param and message, as the Anthropic one. */
static void rename_param(tram_api_error *e)
{
    char was[sizeof(e->param)];
    snprintf(was, sizeof(was), "%s", e->param);
    for (size_t i = 0; i < sizeof(renamed) / sizeof(renamed[0]); i++) {
        size_t n = strlen(renamed[i].chat);
        if (!strncmp(e->param, renamed[i].chat, n) && strchr(".[", e->param[n])) {
            replace_in(e->param, sizeof(e->param), renamed[i].chat, renamed[i].anthropic);
            break;
        }
    }
    if (!strncmp(e->param, "tools[", 6)) {  /* tools[i].function.parameters: tools[i].input_schema */
        replace_in(e->param, sizeof(e->param), ".function", "");
        replace_in(e->param, sizeof(e->param), ".parameters", ".input_schema");
    }
    if (strcmp(was, e->param))
        replace_in(e->message, sizeof(e->message), was, e->param);
}

void tram_msgs_rename_error(const tram_msgs_translation *t, tram_api_error *e)
{
    if (t && t->translated)
        rename_message_param(t, e);
    rename_param(e);
}
