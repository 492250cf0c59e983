/* api_tools.c — see api_tools.h. */
#include "server/api_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_fields.h"
#include "server/json_body.h"

/* OpenAI's rule for function names: [a-zA-Z0-9_-]{1,64}. */
static int valid_name(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

static const char *str_field(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int check_tool(const json_t *tool, size_t i, tram_api_error *e)
{
    char param[64];
    snprintf(param, sizeof(param), "tools[%zu]", i);
    const char *type = str_field(tool, "type");
    if (!json_is_object(tool) || !type || strcmp(type, "function"))
        return tram_api_fail(e, 400, param, "invalid_value",
                             "Invalid '%s': only {\"type\": \"function\", \"function\": {...}} tools are "
                             "supported.", param);
    if (tram_api_check_object(tool, TRAM_OBJ_TOOL, param, NULL, 0, e))
        return -1;
    const json_t *f = json_object_get(tool, "function");
    snprintf(param, sizeof(param), "tools[%zu].function", i);
    if (!json_is_object(f))
        return tram_api_fail(e, 400, param, "invalid_type", "Invalid '%s': expected an object.", param);
    if (tram_api_check_object(f, TRAM_OBJ_TOOL_FUNCTION, param, NULL, 0, e))
        return -1;
    snprintf(param, sizeof(param), "tools[%zu].function.name", i);
    if (!str_field(f, "name") || !valid_name(str_field(f, "name")))
        return tram_api_fail(e, 400, param, "invalid_value",
                             "Invalid '%s': a function name is 1 to 64 characters of a-z, A-Z, 0-9, '_' "
                             "and '-'.", param);
    const json_t *desc = json_object_get(f, "description"), *params = json_object_get(f, "parameters");
    snprintf(param, sizeof(param), "tools[%zu].function.description", i);
    if (desc && !json_is_string(desc))
        return tram_api_fail(e, 400, param, "invalid_type", "Invalid '%s': expected a string.", param);
    snprintf(param, sizeof(param), "tools[%zu].function.parameters", i);
    if (params && !json_is_object(params))
        return tram_api_fail(e, 400, param, "invalid_type",
                             "Invalid '%s': expected a JSON Schema object.", param);
    snprintf(param, sizeof(param), "tools[%zu].function.strict", i);
    const json_t *strict = json_object_get(f, "strict");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return tram_api_fail(e, 400, param, "invalid_type", "Invalid '%s': expected a boolean.", param);
    return 0;
}

/* strict promises arguments valid against the schema; tram keeps that
 * promise with its grammar, which "auto" does not run. */
static int check_strict(const tram_api_tools *t, tram_api_error *e)
{
    for (size_t i = 0; t->choice == TRAM_TOOL_CHOICE_AUTO && i < json_array_size(t->tools); i++) {
        const json_t *f = json_object_get(json_array_get(t->tools, i), "function");
        if (json_is_true(json_object_get(f, "strict"))) {
            char param[64];
            snprintf(param, sizeof(param), "tools[%zu].function.strict", i);
            return tram_api_fail(e, 400, param, "unsupported_value",
                                 "Invalid '%s': strict arguments are enforced with tool_choice "
                                 "'required' or a named function; with 'auto' tram returns the calls "
                                 "as the model wrote them.", param);
        }
    }
    return 0;
}

static int parse_tool_list(const json_t *v, tram_api_error *e)
{
    if (!json_is_array(v))
        return tram_api_wrong_type(e, "tools", "an array");
    if (json_array_size(v) == 0)
        return tram_api_fail(e, 400, "tools", "empty_array",
                             "Invalid 'tools': empty array. Expected an array with minimum length 1.");
    for (size_t i = 0; i < json_array_size(v); i++) {
        if (check_tool(json_array_get(v, i), i, e))
            return -1;
        const char *name = str_field(json_object_get(json_array_get(v, i), "function"), "name");
        for (size_t k = 0; k < i; k++)
            if (!strcmp(name, str_field(json_object_get(json_array_get(v, k), "function"), "name")))
                return tram_api_fail(e, 400, "tools", "invalid_value",
                                     "Invalid 'tools': the function name '%s' is used twice.", name);
    }
    return 0;
}

const json_t *tram_api_tool_function(const tram_api_tools *t, const char *name)
{
    for (size_t i = 0; t->tools && i < json_array_size(t->tools); i++) {
        const json_t *f = json_object_get(json_array_get(t->tools, i), "function");
        if (!strcmp(str_field(f, "name"), name))
            return f;
    }
    return NULL;
}

/* "none", "auto", "required" or {"type": "function", "function": {"name": ...}}. */
static int parse_choice(const json_t *v, tram_api_tools *t, tram_api_error *e)
{
    static const char *const words[] = {"none", "auto", "required"};
    for (int i = 0; json_is_string(v) && i < 3; i++)
        if (!strcmp(json_string_value(v), words[i])) {
            t->choice = (tram_tool_choice)i;
            return 0;
        }
    const char *type = str_field(v, "type");
    const json_t *fn = json_object_get(v, "function");
    const char *name = str_field(fn, "name");
    if (!json_is_object(v) || !type || strcmp(type, "function") || !name)
        return tram_api_fail(e, 400, "tool_choice", "invalid_value",
                             "Invalid 'tool_choice': expected 'none', 'auto', 'required' or "
                             "{\"type\": \"function\", \"function\": {\"name\": ...}}.");
    if (tram_api_check_object(v, TRAM_OBJ_TOOL_CHOICE, "tool_choice", NULL, 0, e) ||
        tram_api_check_object(fn, TRAM_OBJ_TOOL_CHOICE_FUNCTION, "tool_choice.function", NULL, 0, e))
        return -1;
    if (!tram_api_tool_function(t, name))
        return tram_api_fail(e, 400, "tool_choice", "invalid_value",
                             "Invalid 'tool_choice': no function named '%s' in 'tools'.", name);
    t->choice = TRAM_TOOL_CHOICE_NAMED;
    t->named = name;
    return 0;
}

int tram_api_parse_tools(const json_t *body, tram_api_tools *t, tram_api_error *e)
{
    *t = (tram_api_tools){.parallel = 1};
    const json_t *tools = json_object_get(body, "tools");
    const json_t *choice = json_object_get(body, "tool_choice");
    const json_t *parallel = json_object_get(body, "parallel_tool_calls");
    if (tools && !json_is_null(tools)) {
        if (parse_tool_list(tools, e))
            return -1;
        t->tools = tools;
        t->choice = TRAM_TOOL_CHOICE_AUTO;
    }
    if (parallel && !json_is_null(parallel)) {
        if (!json_is_boolean(parallel))
            return tram_api_fail(e, 400, "parallel_tool_calls", "invalid_type",
                                 "Invalid type for 'parallel_tool_calls': expected a boolean.");
        t->parallel = json_is_true(parallel);
    }
    if (choice && !json_is_null(choice)) {
        if (parse_choice(choice, t, e))
            return -1;
        if (!t->tools && t->choice != TRAM_TOOL_CHOICE_NONE)
            return tram_api_fail(e, 400, "tool_choice", "invalid_value",
                                 "Invalid 'tool_choice': it is only allowed when 'tools' are "
                                 "specified.");
    }
    return check_strict(t, e);
}

void tram_api_free_tool_calls(tram_chat_tool_call *calls, int n)
{
    for (int i = 0; calls && i < n; i++)
        json_decref((json_t *)calls[i].arguments);
    free(calls);
}

static int parse_call(const json_t *c, const char *param, tram_chat_tool_call *out, char *ignored, size_t cap,
                      tram_api_error *e)
{
    const json_t *f = json_object_get(c, "function");
    const char *type = str_field(c, "type");
    if (!json_is_object(c) || !str_field(c, "id") || (type && strcmp(type, "function")) ||
        !str_field(f, "name") || !str_field(f, "arguments"))
        return tram_api_fail(e, 400, param, "invalid_value",
                             "Invalid '%s': expected {\"id\": ..., \"type\": \"function\", \"function\": "
                             "{\"name\": ..., \"arguments\": \"<JSON>\"}}.", param);
    char path[128], path_args[128];
    snprintf(path, sizeof(path), "%s.function", param);
    snprintf(path_args, sizeof(path_args), "%s.function.arguments", param);
    if (tram_api_check_object(c, TRAM_OBJ_TOOL_CALL, param, ignored, cap, e) ||
        tram_api_check_object(f, TRAM_OBJ_TOOL_CALL_FUNCTION, path, ignored, cap, e))
        return -1;
    const json_t *text = json_object_get(f, "arguments");
    json_t *args = tram_json_body_load(json_string_value(text), json_string_length(text), JSON_DECODE_ANY,
                                       path_args, e);
    if (!args)
        return -1;
    *out = (tram_chat_tool_call){.id = str_field(c, "id"), .name = str_field(f, "name"), .arguments = args};
    return 0;
}

int tram_api_parse_message_tools(const json_t *m, int i, tram_chat_tool_call **calls, int *n,
                                 const char **tool_call_id, char *ignored, size_t cap, tram_api_error *e)
{
    char param[80];
    *calls = NULL;
    *n = 0;
    const char *role = str_field(m, "role");
    const json_t *v = json_object_get(m, "tool_calls"), *id = json_object_get(m, "tool_call_id");
    snprintf(param, sizeof(param), "messages[%d].tool_call_id", i);
    if (!strcmp(role, "tool") && !json_is_string(id))
        return tram_api_missing(e, param);
    *tool_call_id = json_string_value(id);
    if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
        return 0;
    snprintf(param, sizeof(param), "messages[%d].tool_calls", i);
    if (strcmp(role, "assistant") || !json_is_array(v))
        return tram_api_fail(e, 400, param, "invalid_value",
                             "Invalid '%s': only an assistant message has tool calls, as an array.", param);
    *calls = calloc(json_array_size(v), sizeof(**calls));
    if (!*calls)
        return tram_api_out_of_memory(e);
    for (size_t k = 0; k < json_array_size(v); k++) {
        snprintf(param, sizeof(param), "messages[%d].tool_calls[%zu]", i, k);
        if (parse_call(json_array_get(v, k), param, &(*calls)[k], ignored, cap, e)) {
            tram_api_free_tool_calls(*calls, *n);
            *calls = NULL;
            *n = 0;
            return -1;
        }
        (*n)++;
    }
    return 0;
}
