#include "server/api_request.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "server/json_body.h"

/* Completions may batch prompts; past this many a client should split. */
#define TRAM_API_MAX_PROMPTS 256

static const char *type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a decimal";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int type_error(tram_api_error *e, const char *param, const char *expected, const json_t *got)
{
    return tram_api_fail(e, 400, param, "invalid_type",
                         "Invalid type for '%s': expected %s, but got %s instead.", param, expected,
                         type_name(got));
}

int tram_api_type_error(tram_api_error *e, const char *param, const char *expected, const json_t *got)
{
    return type_error(e, param, expected, got);
}

json_t *tram_api_parse_object(const char *body, size_t len, tram_api_error *e)
{
    json_t *root = tram_json_body_load(body, len, JSON_DECODE_ANY, "", e);
    if (!root)
        return NULL;
    if (!json_is_object(root)) {
        tram_api_fail(e, 400, NULL, NULL, "The request body must be a JSON object, not %s.",
                      type_name(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* An error a reader gave for a key of the object at path: its param becomes
 * the key's whole path.  Returns -1. */
static int inside(tram_api_error *e, const char *path)
{
    char key[sizeof(e->param)];
    snprintf(key, sizeof(key), "%s", e->param);
    int n = snprintf(e->param, sizeof(e->param), "%s.", path);
    if (n > 0 && (size_t)n < sizeof(e->param))
        snprintf(e->param + n, sizeof(e->param) - (size_t)n, "%.*s", (int)(sizeof(e->param) - 1 - (size_t)n), key);
    return -1;
}

/* A field's JSON types, as a mask of 1 << json_type. */
#define TYPE(t) (1u << (t))
#define NUMBER (TYPE(JSON_INTEGER) | TYPE(JSON_REAL))
#define BOOLEAN (TYPE(JSON_TRUE) | TYPE(JSON_FALSE))

/* Field readers: 0 when the field is absent or null (the default stays), 1
 * when it was read, -1 on a type or range error.  get_value leaves the value
 * in *v when its type is one of `types`, which `expected` names for the
 * client. */
static int get_value(const json_t *o, const char *name, unsigned types, const char *expected,
                     const json_t **v, tram_api_error *e)
{
    *v = json_object_get(o, name);
    if (!*v || json_is_null(*v))
        return 0;
    return types & TYPE(json_typeof(*v)) ? 1 : type_error(e, name, expected, *v);
}

/* An integer, or a decimal with an integer's value (16.0), as pydantic's
 * servers take them: 1 with *out set, else 0. */
static int integral(const json_t *v, json_int_t *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 1;
    }
    double x = json_real_value(v);
    if (!json_is_real(v) || x != floor(x) || fabs(x) >= 0x1p63)
        return 0;
    *out = (json_int_t)x;
    return 1;
}

static int get_integer(const json_t *o, const char *name, json_int_t *out, tram_api_error *e)
{
    const json_t *v;
    int r = get_value(o, name, NUMBER, "an integer", &v, e);
    if (r > 0 && !integral(v, out))
        return tram_api_fail(e, 400, name, "invalid_type",
                             "Invalid type for '%s': expected an integer, but got %g instead.", name,
                             json_real_value(v));
    return r;
}

static int get_int(const json_t *o, const char *name, long long lo, long long hi, int *out,
                   tram_api_error *e)
{
    json_int_t x;
    int r = get_integer(o, name, &x, e);
    if (r <= 0)
        return r;
    if (x < lo || x > hi)
        return tram_api_fail(e, 400, name, "invalid_value",
                             "Invalid value for '%s': %lld is outside [%lld, %lld].", name,
                             (long long)x, lo, hi);
    *out = (int)x;
    return 1;
}

static int get_float(const json_t *o, const char *name, float *out, tram_api_error *e)
{
    const json_t *v;
    int r = get_value(o, name, NUMBER, "a decimal", &v, e);
    if (r <= 0)
        return r;
    double x = json_number_value(v);
    if (!isfinite(x) || fabs(x) > 1e30)
        return tram_api_fail(e, 400, name, "invalid_value", "Invalid value for '%s': %g.", name, x);
    *out = (float)x;
    return 1;
}

static int get_bool(const json_t *o, const char *name, int *out, tram_api_error *e)
{
    const json_t *v;
    int r = get_value(o, name, BOOLEAN, "a boolean", &v, e);
    if (r > 0)
        *out = json_is_true(v);
    return r;
}

static int get_string(const json_t *o, const char *name, const char **out, tram_api_error *e)
{
    const json_t *v;
    int r = get_value(o, name, TYPE(JSON_STRING), "a string", &v, e);
    if (r > 0)
        *out = json_string_value(v);
    return r;
}

/* Numeric sampling fields shared by both endpoints; their ranges are the
 * engine's to check. */
static const struct {
    const char *name;
    size_t offset;
} float_fields[] = {
    {"temperature", offsetof(tram_sampling_params, temperature)},
    {"top_p", offsetof(tram_sampling_params, top_p)},
    {"min_p", offsetof(tram_sampling_params, min_p)},
    {"presence_penalty", offsetof(tram_sampling_params, presence_penalty)},
    {"frequency_penalty", offsetof(tram_sampling_params, frequency_penalty)},
    {"repetition_penalty", offsetof(tram_sampling_params, repetition_penalty)},
}, int_fields[] = {
    {"n", offsetof(tram_sampling_params, n)},
    {"top_k", offsetof(tram_sampling_params, top_k)},
    {"min_tokens", offsetof(tram_sampling_params, min_tokens)},
}, bool_fields[] = {
    {"ignore_eos", offsetof(tram_sampling_params, ignore_eos)},
    {"skip_special_tokens", offsetof(tram_sampling_params, skip_special_tokens)},
};

static int parse_scalars(const json_t *o, tram_sampling_params *p, tram_api_error *e)
{
    char *base = (char *)p;
    for (size_t i = 0; i < sizeof(float_fields) / sizeof(float_fields[0]); i++)
        if (get_float(o, float_fields[i].name, (float *)(base + float_fields[i].offset), e) < 0)
            return -1;
    for (size_t i = 0; i < sizeof(int_fields) / sizeof(int_fields[0]); i++)
        if (get_int(o, int_fields[i].name, INT_MIN, INT_MAX, (int *)(base + int_fields[i].offset),
                    e) < 0)
            return -1;
    for (size_t i = 0; i < sizeof(bool_fields) / sizeof(bool_fields[0]); i++)
        if (get_bool(o, bool_fields[i].name, (int *)(base + bool_fields[i].offset), e) < 0)
            return -1;
    if (p->top_k == -1)  /* vLLM's spelling of "off" */
        p->top_k = 0;
    json_int_t seed;
    int has_seed = get_integer(o, "seed", &seed, e);
    if (has_seed < 0)
        return -1;
    if (has_seed) {
        p->has_seed = 1;
        p->seed = (uint64_t)seed;
    }
    return 0;
}

/* The first of the names present wins (max_completion_tokens over the
 * deprecated max_tokens), on both endpoints as vLLM reads them. */
static int parse_max_tokens(const json_t *o, tram_sampling_params *p, tram_api_error *e)
{
    const char *names[2] = {"max_completion_tokens", "max_tokens"};
    for (int i = 0; i < 2; i++) {
        int r = get_int(o, names[i], 1, INT_MAX, &p->max_tokens, e);
        if (r)
            return r < 0 ? -1 : 0;
    }
    return 0;
}

int tram_api_token_ids(const json_t *arr, const char *param, int32_t **ids, int *n,
                       tram_api_error *e)
{
    if (!json_is_array(arr))
        return type_error(e, param, "an array of token ids", arr);
    size_t count = json_array_size(arr);
    int32_t *out = malloc((count ? count : 1) * sizeof(*out));
    if (!out)
        return tram_api_out_of_memory(e);
    for (size_t i = 0; i < count; i++) {
        json_int_t id;
        if (!integral(json_array_get(arr, i), &id) || id < 0 || id > INT32_MAX) {
            free(out);
            return tram_api_fail(e, 400, param, "invalid_value",
                                 "Invalid value for '%s': item %zu is not a token id.", param, i);
        }
        out[i] = (int32_t)id;
    }
    *ids = out;
    *n = (int)count;
    return 0;
}

static int parse_stop(const json_t *o, tram_sampling_params *p, tram_api_error *e)
{
    const json_t *v;
    int r = get_value(o, "stop", TYPE(JSON_STRING) | TYPE(JSON_ARRAY),
                      "a string or an array of strings", &v, e);
    if (r <= 0)
        return r;
    size_t count = json_is_string(v) ? 1 : json_array_size(v);
    const char **stops = malloc((count ? count : 1) * sizeof(*stops));
    if (!stops)
        return tram_api_out_of_memory(e);
    for (size_t i = 0; i < count; i++) {
        const json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s) || json_string_length(s) == 0) {
            free(stops);
            return tram_api_fail(e, 400, "stop", "invalid_value",
                                 "Invalid value for 'stop': item %zu is not a non-empty string.", i);
        }
        stops[i] = json_string_value(s);
    }
    p->stop = stops;
    p->num_stop = (int)count;
    return 0;
}

static int parse_stop_token_ids(const json_t *o, tram_sampling_params *p, tram_api_error *e)
{
    const json_t *v = json_object_get(o, "stop_token_ids");
    if (!v || json_is_null(v))
        return 0;
    int32_t *ids;
    if (tram_api_token_ids(v, "stop_token_ids", &ids, &p->num_stop_token_ids, e))
        return -1;
    p->stop_token_ids = ids;
    return 0;
}

/* {"token id as a string": bias, ...}, as OpenAI sends it. */
static int parse_logit_bias(const json_t *o, tram_sampling_params *p, tram_api_error *e)
{
    const json_t *v;
    int r = get_value(o, "logit_bias", TYPE(JSON_OBJECT), "an object", &v, e);
    if (r <= 0)
        return r;
    tram_logit_bias *bias = malloc((json_object_size(v) + 1) * sizeof(*bias));
    if (!bias)
        return tram_api_out_of_memory(e);
    const char *key;
    const json_t *val;
    int n = 0;
    json_object_foreach((json_t *)v, key, val) {
        char *end;
        long id = strtol(key, &end, 10);
        if (end == key || *end || id < 0 || id > INT32_MAX || !json_is_number(val) ||
            fabs(json_number_value(val)) > 100) {
            free(bias);
            char param[sizeof(e->param)];
            snprintf(param, sizeof(param), "logit_bias.%.100s", key);
            return tram_api_fail(e, 400, param, "invalid_value",
                                 "Invalid value for '%s': keys must be token ids and values "
                                 "numbers in [-100, 100].", param);
        }
        bias[n].token = (int32_t)id;
        bias[n++].bias = (float)json_number_value(val);
    }
    p->logit_bias = bias;
    p->num_logit_bias = n;
    return 0;
}

static int parse_stream(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    if (get_bool(o, "stream", &r->stream, e) < 0)
        return -1;
    const json_t *so;
    int has = get_value(o, "stream_options", TYPE(JSON_OBJECT), "an object", &so, e);
    if (has <= 0)
        return has;
    if (!r->stream)
        return tram_api_fail(e, 400, "stream_options", "invalid_value",
                             "The 'stream_options' parameter is only allowed when 'stream' is "
                             "enabled.");
    if (tram_api_check_object(so, TRAM_OBJ_STREAM_OPTIONS, "stream_options", NULL, 0, e))
        return -1;
    if (get_bool(so, "include_usage", &r->include_usage, e) < 0 ||
        get_bool(so, "continuous_usage_stats", &r->continuous_usage, e) < 0)
        return inside(e, "stream_options");
    return 0;
}

/* A message "content": a string or an array of {"type": "text", "text": ...}
 * parts, joined by newlines into a new malloc'd string; param names the field
 * in errors. */
static int content_text(const json_t *content, const char *param, char **out, tram_api_error *e)
{
    if (json_is_string(content)) {
        *out = strdup(json_string_value(content));
        return *out ? 0 : tram_api_out_of_memory(e);
    }
    if (!json_is_array(content))
        return type_error(e, param, "a string or an array of content parts", content);
    size_t total = 1, i;
    const json_t *part;
    json_array_foreach(content, i, part) {
        const json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(json_object_get(part, "type")) ||
            strcmp(json_string_value(json_object_get(part, "type")), "text") || !json_is_string(text))
            return tram_api_fail(e, 400, param, "invalid_value",
                                 "Invalid content part %zu in '%s': only {\"type\": \"text\", "
                                 "\"text\": ...} parts are supported.", i, param);
        char path[96];
        snprintf(path, sizeof(path), "%s[%zu]", param, i);
        if (tram_api_check_object(part, TRAM_OBJ_CONTENT_PART, path, NULL, 0, e))
            return -1;
        total += json_string_length(text) + 1;
    }
    char *s = malloc(total), *p = s;
    if (!s)
        return tram_api_out_of_memory(e);
    json_array_foreach(content, i, part) {
        const json_t *text = json_object_get(part, "text");
        if (i)
            *p++ = '\n';
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *p = 0;
    *out = s;
    return 0;
}

static int parse_message(const json_t *m, int i, tram_api_message *out, char *ignored, size_t cap,
                         tram_api_error *e)
{
    char param[64];
    snprintf(param, sizeof(param), "messages[%d]", i);
    if (!json_is_object(m))
        return type_error(e, param, "an object", m);
    if (tram_api_check_object(m, TRAM_OBJ_MESSAGE, param, ignored, cap, e))
        return -1;
    const json_t *role = json_object_get(m, "role");
    snprintf(param, sizeof(param), "messages[%d].role", i);
    if (!json_is_string(role))
        return type_error(e, param, "a string", role ? role : json_null());
    const char *rs = json_string_value(role);
    if (strcmp(rs, "system") && strcmp(rs, "developer") && strcmp(rs, "user") &&
        strcmp(rs, "assistant") && strcmp(rs, "tool"))
        return tram_api_fail(e, 400, param, "invalid_value",
                             "Invalid value for '%s': supported roles are 'system', 'developer', "
                             "'user', 'assistant' and 'tool'.", param);
    /* OpenAI's newer name for the system turn; templates know only "system" */
    out->role = strcmp(rs, "developer") ? rs : "system";
    if (tram_api_parse_message_tools(m, i, &out->tool_calls, &out->num_tool_calls,
                                     &out->tool_call_id, ignored, cap, e))
        return -1;
    const json_t *content = json_object_get(m, "content");
    snprintf(param, sizeof(param), "messages[%d].content", i);
    if ((!content || json_is_null(content)) && !strcmp(rs, "assistant"))
        content = json_string("");  /* an assistant turn may carry no text */
    else
        json_incref((json_t *)content);
    if (!content)
        return tram_api_missing(e, param);
    int rc = content_text(content, param, &out->content, e);
    json_decref((json_t *)content);
    return rc;
}

/* vLLM's add_generation_prompt (true) and continue_final_message (false):
 * open the assistant's turn, or leave the last message open to be
 * continued (a prefill), not both. */
static int parse_ending(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    int open = 1, cont = 0;
    if (get_bool(o, "add_generation_prompt", &open, e) < 0 || get_bool(o, "continue_final_message", &cont, e) < 0)
        return -1;
    if (open && cont)
        return tram_api_fail(e, 400, "continue_final_message", "invalid_value",
                             "'continue_final_message' and 'add_generation_prompt' cannot both be true.");
    r->ending = cont ? TRAM_CHAT_CONTINUE_LAST : open ? TRAM_CHAT_OPEN_ASSISTANT : TRAM_CHAT_END_TURN;
    return 0;
}

/* apply_chat_template's **kwargs: more variables for the template, none of
 * them one the renderer sets itself. */
static int parse_template_kwargs(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    const json_t *v = json_object_get(o, "chat_template_kwargs");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return tram_api_fail(e, 400, "chat_template_kwargs", "invalid_type",
                             "'chat_template_kwargs' must be an object.");
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)v, key, value) {
        if (tram_chat_template_sets(key))
            return tram_api_fail(e, 400, "chat_template_kwargs", "invalid_value",
                                 "'chat_template_kwargs' cannot set '%.100s': tram sets it from the request.", key);
    }
    r->chat_template_kwargs = v;
    return 0;
}

static int parse_messages(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    const json_t *v = json_object_get(o, "messages");
    if (!v)
        return tram_api_missing(e, "messages");
    if (!json_is_array(v))
        return type_error(e, "messages", "an array", v);
    if (json_array_size(v) == 0)
        return tram_api_fail(e, 400, "messages", "empty_array",
                             "Invalid 'messages': empty array. Expected an array with minimum "
                             "length 1.");
    r->messages = calloc(json_array_size(v), sizeof(*r->messages));
    if (!r->messages)
        return tram_api_out_of_memory(e);
    for (size_t i = 0; i < json_array_size(v); i++) {
        int rc = parse_message(json_array_get(v, i), (int)i, &r->messages[i], r->ignored,
                               sizeof(r->ignored), e);
        r->num_messages++;  /* so that free releases what a failed message holds */
        if (rc)
            return -1;
    }
    return 0;
}

/* Chat: logprobs is a boolean and top_logprobs the number of alternatives. */
static int parse_chat_logprobs(const json_t *o, tram_sampling_params *p, tram_api_error *e)
{
    int want = 0, top = 0;
    if (get_bool(o, "logprobs", &want, e) < 0)
        return -1;
    int has_top = get_int(o, "top_logprobs", 0, TRAM_MAX_LOGPROBS, &top, e);
    if (has_top < 0)
        return -1;
    if (has_top && !want)
        return tram_api_fail(e, 400, "top_logprobs", "invalid_value",
                             "'top_logprobs' requires 'logprobs' to be true.");
    p->logprobs = want ? top : -1;
    return 0;
}

static int parse_prompt_item(const json_t *item, size_t i, tram_prompt *out, tram_api_error *e)
{
    if (json_is_string(item)) {
        out->text = json_string_value(item);
        return 0;
    }
    char param[32];
    snprintf(param, sizeof(param), "prompt[%zu]", i);
    int32_t *ids;
    if (tram_api_token_ids(item, param, &ids, &out->num_tokens, e))
        return -1;
    out->token_ids = ids;
    return 0;
}

/* A string, a list of strings, a list of token ids, or a list of lists. */
static int parse_prompts(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    const json_t *v = json_object_get(o, "prompt");
    if (!v)
        return tram_api_missing(e, "prompt");
    if (!json_is_string(v) && !json_is_array(v))
        return type_error(e, "prompt", "a string, an array of strings or an array of token ids", v);
    int single = json_is_string(v) || json_is_number(json_array_get(v, 0));
    size_t count = single ? 1 : json_array_size(v);
    if (json_is_array(v) && json_array_size(v) == 0)
        return tram_api_fail(e, 400, "prompt", "empty_array", "Invalid 'prompt': empty array.");
    if (count > TRAM_API_MAX_PROMPTS)
        return tram_api_fail(e, 400, "prompt", "invalid_value",
                             "Invalid 'prompt': %zu prompts, at most %d in one request.", count,
                             TRAM_API_MAX_PROMPTS);
    r->prompts = calloc(count, sizeof(*r->prompts));
    if (!r->prompts)
        return tram_api_out_of_memory(e);
    for (size_t i = 0; i < count; i++) {
        const json_t *item = single ? v : json_array_get(v, i);
        if (!single && !json_is_string(item) && !json_is_array(item))
            return type_error(e, "prompt", "an array of strings or of token-id arrays", item);
        if (parse_prompt_item(item, i, &r->prompts[i], e))
            return -1;
        r->num_prompts++;
    }
    return 0;
}

/* Completions: logprobs is the number of alternatives; with echo the prompt
 * tokens get theirs too. */
static int parse_completion_fields(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    if (parse_prompts(o, r, e) || get_bool(o, "echo", &r->echo, e) < 0)
        return -1;
    int k;
    int has = get_int(o, "logprobs", 0, TRAM_MAX_LOGPROBS, &k, e);
    if (has < 0)
        return -1;
    if (has) {
        r->params.logprobs = k;
        if (r->echo)
            r->params.prompt_logprobs = k;
    }
    return 0;
}

static int parse_fields(const json_t *o, tram_api_request *r, tram_api_error *e)
{
    unsigned endpoint = r->kind == TRAM_API_CHAT ? TRAM_FIELD_CHAT : TRAM_FIELD_COMPLETION;
    if (tram_api_check_fields(o, endpoint, r->ignored, sizeof(r->ignored), e) ||
        get_string(o, "model", &r->model, e) < 0 ||
        get_int(o, "priority", INT_MIN, INT_MAX, &r->priority, e) < 0 ||
        get_bool(o, "response_cache", &r->response_cache, e) < 0)
        return -1;
    if (parse_scalars(o, &r->params, e) || parse_max_tokens(o, &r->params, e) ||
        parse_stop(o, &r->params, e) || parse_stop_token_ids(o, &r->params, e) ||
        parse_logit_bias(o, &r->params, e) || parse_stream(o, r, e))
        return -1;
    if (r->kind == TRAM_API_CHAT)
        return parse_messages(o, r, e) || parse_chat_logprobs(o, &r->params, e) ||
                       tram_api_parse_tools(o, &r->tools, e) || parse_template_kwargs(o, r, e) ||
                       parse_ending(o, r, e)
                   ? -1
                   : 0;
    return parse_completion_fields(o, r, e);
}

int tram_api_request_parse(tram_api_request *r, tram_api_kind kind,
                           const tram_sampling_params *defaults, const char *body, size_t len,
                           tram_api_error *e)
{
    json_t *root = tram_api_parse_object(body, len, e);
    if (!root) {
        memset(r, 0, sizeof(*r));
        return -1;
    }
    return tram_api_request_parse_json(r, kind, defaults, root, e);
}

int tram_api_request_parse_json(tram_api_request *r, tram_api_kind kind,
                                const tram_sampling_params *defaults, json_t *root,
                                tram_api_error *e)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->params = *defaults;
    r->response_cache = 1;
    /* OpenAI's defaults: completions stop after 16 tokens, chat runs until
     * the context is full. */
    r->params.max_tokens = kind == TRAM_API_COMPLETION ? 16 : 0;
    r->root = root;
    if (parse_fields(r->root, r, e)) {
        tram_api_request_free(r);
        return -1;
    }
    return 0;
}

void tram_api_request_free(tram_api_request *r)
{
    for (int i = 0; i < r->num_messages; i++) {
        free(r->messages[i].content);
        tram_api_free_tool_calls(r->messages[i].tool_calls, r->messages[i].num_tool_calls);
    }
    free(r->messages);
    for (int i = 0; i < r->num_prompts; i++)
        free((void *)r->prompts[i].token_ids);
    free(r->prompts);
    free((void *)r->params.stop);
    free((void *)r->params.stop_token_ids);
    free((void *)r->params.logit_bias);
    json_decref(r->root);
    memset(r, 0, sizeof(*r));
}
