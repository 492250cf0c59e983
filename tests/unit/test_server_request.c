/* Parsing and validating OpenAI request bodies (server/api_request.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_request.h"

static tram_api_request req;
static tram_api_error err;

static tram_sampling_params defaults;

static void init_defaults(void)
{
    tram_sampling_params_init(&defaults);
}

TestSuite(server_request, .init = init_defaults);

static int parse(tram_api_kind kind, const char *body)
{
    memset(&err, 0, sizeof(err));
    return tram_api_request_parse(&req, kind, &defaults, body, strlen(body), &err);
}

Test(server_request, chat_fields_reach_the_params)
{
    const char *body =
        "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"be brief\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
        " {\"type\": \"text\", \"text\": \"b\"}]}, {\"role\": \"assistant\", \"content\": null}],"
        " \"max_completion_tokens\": 7, \"max_tokens\": 99, \"temperature\": 0.5, \"top_p\": 0.9,"
        " \"top_k\": 40, \"min_p\": 0.05, \"n\": 3, \"stop\": \"END\", \"stop_token_ids\": [2, 5],"
        " \"presence_penalty\": 0.25, \"frequency_penalty\": -0.5, \"repetition_penalty\": 1.1,"
        " \"logit_bias\": {\"17\": -100, \"42\": 3.5}, \"seed\": 1234, \"logprobs\": true,"
        " \"top_logprobs\": 4, \"ignore_eos\": true, \"min_tokens\": 2, \"user\": \"u1\","
        " \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"priority\": -3}";
    cr_assert_eq(parse(TRAM_API_CHAT, body), 0, "%s", err.message);
    cr_assert_str_eq(req.model, "m");
    cr_assert_eq(req.num_messages, 3);
    cr_assert_str_eq(req.messages[0].role, "system");
    cr_assert_str_eq(req.messages[1].content, "a\nb");
    cr_assert_str_eq(req.messages[2].content, "");
    const tram_sampling_params *p = &req.params;
    cr_assert_eq(p->max_tokens, 7, "max_completion_tokens wins over max_tokens");
    cr_assert_float_eq(p->temperature, 0.5f, 1e-6);
    cr_assert_float_eq(p->top_p, 0.9f, 1e-6);
    cr_assert_eq(p->top_k, 40);
    cr_assert_float_eq(p->min_p, 0.05f, 1e-6);
    cr_assert_eq(p->n, 3);
    cr_assert_eq(p->num_stop, 1);
    cr_assert_str_eq(p->stop[0], "END");
    cr_assert_eq(p->num_stop_token_ids, 2);
    cr_assert_eq(p->stop_token_ids[1], 5);
    cr_assert_float_eq(p->presence_penalty, 0.25f, 1e-6);
    cr_assert_float_eq(p->frequency_penalty, -0.5f, 1e-6);
    cr_assert_float_eq(p->repetition_penalty, 1.1f, 1e-6);
    cr_assert_eq(p->num_logit_bias, 2);
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        if (p->logit_bias[i].token == 17)
            seen += p->logit_bias[i].bias == -100.0f;
        if (p->logit_bias[i].token == 42)
            seen += p->logit_bias[i].bias == 3.5f;
    }
    cr_assert_eq(seen, 2);
    cr_assert(p->has_seed);
    cr_assert_eq(p->seed, 1234u);
    cr_assert_eq(p->logprobs, 4);
    cr_assert_eq(p->prompt_logprobs, -1);
    cr_assert(p->ignore_eos);
    cr_assert_eq(p->min_tokens, 2);
    cr_assert_str_eq(req.ignored, "user");
    cr_assert(req.stream && req.include_usage);
    cr_assert_eq(req.priority, -3);
    tram_api_request_free(&req);
}

Test(server_request, defaults_follow_openai)
{
    cr_assert_eq(parse(TRAM_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"), 0);
    cr_assert_eq(req.params.max_tokens, 0, "chat runs to the context limit by default");
    cr_assert_eq(req.params.logprobs, -1);
    cr_assert_null(req.model);
    cr_assert(!req.stream);
    tram_api_request_free(&req);
    cr_assert_eq(parse(TRAM_API_COMPLETION, "{\"prompt\": \"x\", \"top_k\": -1}"), 0);
    cr_assert_eq(req.params.max_tokens, 16, "completions default to 16 tokens");
    cr_assert_eq(req.params.top_k, 0, "vLLM's top_k -1 means off");
    tram_api_request_free(&req);
}

Test(server_request, completion_prompt_forms)
{
    cr_assert_eq(parse(TRAM_API_COMPLETION, "{\"prompt\": \"hello\"}"), 0);
    cr_assert_eq(req.num_prompts, 1);
    cr_assert_str_eq(req.prompts[0].text, "hello");
    tram_api_request_free(&req);

    cr_assert_eq(parse(TRAM_API_COMPLETION, "{\"prompt\": [\"a\", \"b\", \"c\"]}"), 0);
    cr_assert_eq(req.num_prompts, 3);
    cr_assert_str_eq(req.prompts[2].text, "c");
    tram_api_request_free(&req);

    cr_assert_eq(parse(TRAM_API_COMPLETION, "{\"prompt\": [1, 2, 3]}"), 0);
    cr_assert_eq(req.num_prompts, 1);
    cr_assert_null(req.prompts[0].text);
    cr_assert_eq(req.prompts[0].num_tokens, 3);
    cr_assert_eq(req.prompts[0].token_ids[2], 3);
    tram_api_request_free(&req);

    cr_assert_eq(parse(TRAM_API_COMPLETION,
                       "{\"prompt\": [[4, 5], [6]], \"echo\": true, \"logprobs\": 2}"), 0);
    cr_assert_eq(req.num_prompts, 2);
    cr_assert_eq(req.prompts[1].num_tokens, 1);
    cr_assert_eq(req.prompts[1].token_ids[0], 6);
    cr_assert(req.echo);
    cr_assert_eq(req.params.logprobs, 2);
    cr_assert_eq(req.params.prompt_logprobs, 2, "echo asks for the prompt's logprobs too");
    tram_api_request_free(&req);
}

typedef struct {
    const char *body;
    const char *param;   /* expected "param", NULL for JSON null */
} bad_case;

/* A valid chat body with more fields, as a string literal. */
#define CHAT_WITH(fields) "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], " fields "}"

static const bad_case bad_chat[] = {
    {"{\"messages\": [", NULL},
    {"[1, 2]", NULL},
    {"", NULL},
    {"{\"messages\": []}", "messages"},
    {"{}", "messages"},
    {"{\"messages\": \"hi\"}", "messages"},
    {"{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "messages[0].role"},
    {"{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role"},
    {"{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content"},
    {"{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content"},
    {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages[0].content"},
    {CHAT_WITH("\"temperature\": \"hot\""), "temperature"},
    {CHAT_WITH("\"n\": 1.5"), "n"},
    {CHAT_WITH("\"max_tokens\": 0"), "max_tokens"},
    {CHAT_WITH("\"max_completion_tokens\": -4"), "max_completion_tokens"},
    {CHAT_WITH("\"n\": 99999999999"), "n"},
    {CHAT_WITH("\"stream\": 1"), "stream"},
    {CHAT_WITH("\"stream_options\": {\"include_usage\": true}"), "stream_options"},
    {CHAT_WITH("\"top_logprobs\": 2"), "top_logprobs"},
    {CHAT_WITH("\"logprobs\": true, \"top_logprobs\": 21"), "top_logprobs"},
    {CHAT_WITH("\"stop\": [\"a\", 3]"), "stop"},
    {CHAT_WITH("\"stop\": {}"), "stop"},
    {CHAT_WITH("\"stop_token_ids\": [-1]"), "stop_token_ids"},
    {CHAT_WITH("\"logit_bias\": {\"x\": 1}"), "logit_bias.x"},
    {CHAT_WITH("\"logit_bias\": {\"3\": 101}"), "logit_bias.3"},
    {CHAT_WITH("\"seed\": \"7\""), "seed"},
    {CHAT_WITH("\"model\": 3"), "model"},
    {CHAT_WITH("\"temperature\": 1e400"), "temperature"},
    {CHAT_WITH("\"seed\": 18446744073709551616"), "seed"},
    {CHAT_WITH("\"seed\": -9223372036854775809"), "seed"},
    {CHAT_WITH("\"max_tokens\": 16.5"), "max_tokens"},
    {CHAT_WITH("\"stop\": [\"a\\u0000b\"]"), "stop[0]"},
    {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\\u0000\"}]}", "messages[0].content"},
    {CHAT_WITH("\"logit_bias\": {\"1\\u0000\": 1}"), "logit_bias.1\\u0000"},
};

static const bad_case bad_completion[] = {
    {"{}", "prompt"},
    {"{\"prompt\": []}", "prompt"},
    {"{\"prompt\": 12}", "prompt"},
    {"{\"prompt\": [1, \"a\"]}", "prompt[0]"},
    {"{\"prompt\": [\"a\", 1]}", "prompt"},
    {"{\"prompt\": [[1], [\"a\"]]}", "prompt[1]"},
    {"{\"prompt\": \"a\", \"logprobs\": true}", "logprobs"},
    {"{\"prompt\": \"a\", \"echo\": \"yes\"}", "echo"},
};

static void check_bad(tram_api_kind kind, const bad_case *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(parse(kind, bad[i].body), -1, "accepted: %s", bad[i].body);
        cr_assert_eq(err.status, 400, "%s -> %d", bad[i].body, err.status);
        cr_assert_str_eq(err.param, bad[i].param ? bad[i].param : "", "%s: param '%s'", bad[i].body,
                         err.param);
        cr_assert_gt(strlen(err.message), 10);
        cr_assert_null(req.root, "nothing is left to free after a failure");
    }
}

Test(server_request, bad_bodies_are_400_naming_the_field)
{
    check_bad(TRAM_API_CHAT, bad_chat, sizeof(bad_chat) / sizeof(bad_chat[0]));
    check_bad(TRAM_API_COMPLETION, bad_completion,
              sizeof(bad_completion) / sizeof(bad_completion[0]));
}

Test(server_request, error_body_has_openai_shape)
{
    cr_assert_eq(parse(TRAM_API_CHAT, "{\"messages\": []}"), -1);
    json_t *j = tram_api_error_json(&err);
    json_t *e = json_object_get(j, "error");
    cr_assert(json_is_object(e));
    cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "invalid_request_error");
    cr_assert_str_eq(json_string_value(json_object_get(e, "param")), "messages");
    cr_assert(json_is_string(json_object_get(e, "code")));
    cr_assert(json_is_string(json_object_get(e, "message")));
    json_decref(j);
    tram_api_error e503 = {0};
    tram_api_fail(&e503, 503, NULL, NULL, "busy");
    j = tram_api_error_json(&e503);
    e = json_object_get(j, "error");
    cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "server_error");
    cr_assert(json_is_null(json_object_get(e, "param")));
    cr_assert(json_is_null(json_object_get(e, "code")));
    json_decref(j);
}

Test(server_request, invalid_utf8_and_nul_are_rejected)
{
    const char body[] = "{\"prompt\": \"a\xff\xfe\"}";
    memset(&err, 0, sizeof(err));
    cr_assert_eq(tram_api_request_parse(&req, TRAM_API_COMPLETION, &defaults, body, sizeof(body) - 1, &err), -1);
    cr_assert_eq(err.status, 400);
    const char nul[] = "{\"prompt\": \"a\\u0000b\"}";
    cr_assert_eq(tram_api_request_parse(&req, TRAM_API_COMPLETION, &defaults, nul, sizeof(nul) - 1, &err), -1);
    cr_assert_str_eq(err.param, "prompt", "valid JSON: a 400 naming the field, not a parse error");
    const char raw_nul[] = "{\"prompt\": \"a\0b\"}";
    cr_assert_eq(tram_api_request_parse(&req, TRAM_API_COMPLETION, &defaults, raw_nul, sizeof(raw_nul) - 1, &err), -1);
}

/* A refusal that quotes the request quotes bytes that need not be UTF-8:
 * the error body is still JSON, each such byte a '?'. */
Test(server_request, error_quoting_invalid_utf8_is_still_json)
{
    const char body[] = "{\"\x8c" "essages\": 123456789012345678901234567890}";
    memset(&err, 0, sizeof(err));
    cr_assert_eq(tram_api_request_parse(&req, TRAM_API_CHAT, &defaults, body, sizeof(body) - 1, &err), -1);
    cr_assert_eq(err.status, 400);
    json_t *j = tram_api_error_json(&err);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    cr_assert(text, "the error body could not be written: %s", err.message);
    cr_assert(strstr(text, "?essages"), "%s", text);
    free(text);
    json_decref(j);
}

/* Valid JSON that jansson cannot hold as it is: integers past 64 bits,
 * numbers past a double, \u0000.  Each is a 400 naming its path, but where
 * it means nothing (a schema's default or examples); 64-bit integers and
 * integer-valued decimals are taken. */
Test(server_request, numbers_past_64_bits_are_named_or_taken)
{
    static const struct {
        const char *extra, *param;  /* param NULL: accepted */
    } cases[] = {
        {"\"seed\": 9223372036854775807", NULL},
        {"\"seed\": -9223372036854775808", NULL},
        {"\"seed\": 123456789012345678901234567890", "seed"},
        {"\"max_tokens\": 16.0, \"n\": 2.0, \"top_k\": 5e0", NULL},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
         "\"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"default\": 99999999999999999999, "
         "\"examples\": [1e999]}}}}}]", NULL},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
         "\"object\", \"properties\": {\"n\": {\"enum\": [1, 99999999999999999999]}}}}}]",
         "tools[0].function.parameters.properties.n.enum[1]"},
        {"\"chat_template_kwargs\": {\"default\": 99999999999999999999}", "chat_template_kwargs.default"},
        /* a schema's bounds are read exactly (grammar/json_big_bounds.h); the same key elsewhere is not */
        {"\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": "
         "{\"type\": \"integer\", \"minimum\": -9223372036854775809, \"maximum\": 18446744073709551615}}}", NULL},
        {"\"chat_template_kwargs\": {\"maximum\": 99999999999999999999}", "chat_template_kwargs.maximum"},
        {"\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": "
         "{\"const\": -99999999999999999999}}}", "response_format.json_schema.schema.const"},
    };
    char body[1024];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], %s}",
                 cases[i].extra);
        int rc = parse(TRAM_API_CHAT, body);
        if (!cases[i].param) {
            cr_assert_eq(rc, 0, "%s: %s", body, err.message);
            tram_api_request_free(&req);
            continue;
        }
        cr_assert_eq(rc, -1, "accepted: %s", body);
        cr_assert_str_eq(err.param, cases[i].param, "%s: %s", body, err.message);
        cr_assert(strstr(err.message, "out of range"), "%s", err.message);
    }
    cr_assert_eq(parse(TRAM_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                                      "\"seed\": 1.5}"), -1);
    const char *call = "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c\", \"type\": "
                       "\"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"n\\\": "
                       "99999999999999999999}\"}}]}]}";
    cr_assert_eq(parse(TRAM_API_CHAT, call), -1);
    cr_assert_str_eq(err.param, "messages[0].tool_calls[0].function.arguments.n", "%s", err.message);
}

Test(server_request, deep_nesting_is_an_error_not_a_crash)
{
    enum { DEPTH = 100000 };
    char *body = malloc(2 * DEPTH + 32);
    size_t n = (size_t)sprintf(body, "{\"prompt\": ");
    for (int i = 0; i < DEPTH; i++)
        body[n++] = '[';
    for (int i = 0; i < DEPTH; i++)
        body[n++] = ']';
    body[n++] = '}';
    memset(&err, 0, sizeof(err));
    cr_assert_eq(tram_api_request_parse(&req, TRAM_API_COMPLETION, &defaults, body, n, &err), -1);
    cr_assert_eq(err.status, 400);
    free(body);
}

Test(server_request, tool_calls_and_results_in_messages)
{
    const char *body =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"weather?\"},"
        " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
        " \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"sunny\"}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}],"
        " \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
        " \"parallel_tool_calls\": false}";
    cr_assert_eq(parse(TRAM_API_CHAT, body), 0, "%s", err.message);
    cr_assert_eq(req.num_messages, 3);
    cr_assert_eq(req.messages[1].num_tool_calls, 1);
    cr_assert_str_eq(req.messages[1].content, "");
    cr_assert_str_eq(req.messages[1].tool_calls[0].id, "call_1");
    cr_assert_str_eq(req.messages[1].tool_calls[0].name, "get_weather");
    cr_assert_str_eq(json_string_value(json_object_get(req.messages[1].tool_calls[0].arguments, "city")), "Paris");
    cr_assert_str_eq(req.messages[2].role, "tool");
    cr_assert_str_eq(req.messages[2].tool_call_id, "call_1");
    cr_assert_eq(req.tools.choice, TRAM_TOOL_CHOICE_NAMED);
    cr_assert_str_eq(req.tools.named, "get_weather");
    cr_assert_eq(req.tools.parallel, 0);
    cr_assert_eq(json_array_size(req.tools.tools), 1);
    tram_api_request_free(&req);
    cr_assert_eq(parse(TRAM_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": "
                                      "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}"), 0);
    cr_assert_eq(req.tools.choice, TRAM_TOOL_CHOICE_AUTO, "auto is the default with tools");
    tram_api_request_free(&req);
}
