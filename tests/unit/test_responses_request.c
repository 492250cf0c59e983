/* A /v1/responses body as the chat body that runs it
 * (server/responses_request.c): the field table's responses rows, the
 * nested objects, the items made messages, and errors named by the
 * body's own fields. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_request.h"
#include "server/responses.h"
#include "server/responses_state.h"
#include "server/structured.h"
#include "tests/unit/test_fields.h"
#include "tests/unit/test_tokenizer_util.h"
#include "tests/unit/test_util.h"

static tram_sampling_params defaults;
static tram_tokenizer *tok;
static tram_server srv;

static void setup(void)
{
    tram_sampling_params_init(&defaults);
    tok = tok_default();
    snprintf(srv.model_name, sizeof(srv.model_name), "m");
}

static void teardown(void)
{
    tram_tokenizer_free(tok);
}

TestSuite(responses_request, .init = setup, .fini = teardown);

/* The body through to_chat, chat's parse and the structured-output
 * constraint, as the server runs it: 0 with *chat (the parsed request's
 * body, a new reference) and *state, or -1 with e renamed. */
static int run(const char *text, json_t **chat, tram_responses_state **state, tram_api_error *e)
{
    json_t *body = json_loads(text, 0, NULL);
    cr_assert_not_null(body, "not JSON: %s", text);
    tram_dialect_request in = {.srv = &srv, .body = body, .tenant = "", .id = "resp_1", .created = 1};
    void *st = NULL;
    memset(e, 0, sizeof(*e));
    json_t *out = tram_responses_to_chat(&in, &st, e);
    json_decref(body);
    tram_api_request r;
    int rc = out ? tram_api_request_parse_json(&r, TRAM_API_CHAT, &defaults, json_incref(out), e) : -1;
    if (!rc) {
        const tram_grammar *g = NULL;
        rc = tram_structured_grammar(r.root, tok, &g, e) ? -1 : 0;
        tram_grammar_release(g);
        tram_api_request_free(&r);
    }
    if (rc && st)
        tram_responses_rename_error(st, e);
    if (rc || !chat)
        json_decref(out);
    else
        *chat = out;
    if (rc || !state)
        tram_responses_free(st);
    else
        *state = st;
    return rc;
}

/* {"input": "hi", name: value}. */
static int run_with(const char *name, const char *value, tram_responses_state **state, tram_api_error *e)
{
    char text[512];
    snprintf(text, sizeof(text), "{\"input\": \"hi\", \"%s\": %s}", name, value);
    return run(text, NULL, state, e);
}

static void check_row(const tram_api_field *f)
{
    tram_api_error e;
    tram_responses_state *st = NULL;
    int rc = run_with(f->name, f->example, &st, &e);
    if (f->kind == TRAM_FIELD_IGNORED) {
        cr_assert_eq(rc, 0, "%s: ignored, yet %s", f->name, e.message);
        cr_assert(strstr(st->ignored, f->name), "%s: not reported as ignored (%s)", f->name, st->ignored);
        tram_responses_free(st);
        return;
    }
    cr_assert_eq(rc, -1, "%s = %s was accepted", f->name, f->example);
    cr_assert_eq(e.status, 400, "%s: %d %s", f->name, e.status, e.message);
    size_t n = strlen(f->name);
    cr_assert(!strncmp(e.param, f->name, n) && strchr(".[", e.param[n]), "%s: the 400 names '%s' (%s)",
              f->name, e.param, e.message);
    if (f->kind != TRAM_FIELD_REJECTED)
        return;
    cr_assert_eq(run_with(f->name, "null", NULL, &e), 0, "%s: null: %s", f->name, e.message);
    if (f->harmless_example)
        cr_assert_eq(run_with(f->name, f->harmless_example, NULL, &e), 0, "%s = %s: %s", f->name,
                     f->harmless_example, e.message);
}

Test(responses_request, every_responses_row_does_what_the_table_says)
{
    int rows = 0;
    for (size_t i = 0; i < tram_api_num_fields; i++)
        if (tram_api_fields[i].endpoints & TRAM_FIELD_RESPONSES) {
            check_row(&tram_api_fields[i]);
            rows++;
        }
    cr_assert_geq(rows, 25);
    tram_api_error e;
    cr_assert_eq(run_with("frobnicate", "1", NULL, &e), -1);
    cr_assert_str_eq(e.param, "frobnicate");
    cr_assert_eq(run_with("messages", "[]", NULL, &e), -1, "chat's fields are not the Responses API's");
    cr_assert_str_eq(e.param, "messages");
}

/* A test_body_parser: run for its verdict alone. */
static int parse_only(const char *text, tram_api_error *e)
{
    return run(text, NULL, NULL, e);
}

Test(responses_request, an_unknown_key_in_any_nested_object_is_400_naming_its_path)
{
    cr_assert_geq(test_unknown_nested_keys_named(TRAM_FIELD_RESPONSES, parse_only), 9);
}

static void assert_json(const json_t *got, const char *want)
{
    json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(w, "not JSON: %s", want);
    char *text = json_dumps(got, JSON_SORT_KEYS);
    cr_assert(json_equal(got, w), "got %s", text);
    free(text);
    json_decref(w);
}

Test(responses_request, items_become_chat_messages)
{
    const char *body =
        "{\"instructions\": \"Be brief.\", \"input\": ["
        "{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"a\"}, "
        "{\"type\": \"input_text\", \"text\": \"b\"}]},"
        "{\"type\": \"message\", \"role\": \"assistant\", \"content\": [{\"type\": \"output_text\", "
        "\"text\": \"Let me look.\", \"annotations\": []}], \"id\": \"msg_1\", \"status\": \"completed\"},"
        "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},"
        "{\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{\\\"x\\\": 1}\"},"
        "{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"one\"},"
        "{\"type\": \"function_call_output\", \"call_id\": \"c2\", \"output\": [{\"type\": \"input_text\", "
        "\"text\": \"two\"}]}],"
        "\"tools\": [{\"type\": \"function\", \"name\": \"f\"}, {\"type\": \"function\", \"name\": \"g\", "
        "\"parameters\": {\"type\": \"object\"}, \"strict\": true}],"
        "\"tool_choice\": {\"type\": \"function\", \"name\": \"g\"}, \"max_output_tokens\": 7}";
    json_t *chat;
    tram_api_error e;
    cr_assert_eq(run(body, &chat, NULL, &e), 0, "%s", e.message);
    assert_json(json_object_get(chat, "messages"),
                "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
                "{\"role\": \"user\", \"content\": \"a\\nb\"},"
                "{\"role\": \"assistant\", \"content\": \"Let me look.\", \"tool_calls\": ["
                "{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}},"
                "{\"id\": \"c2\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": "
                "\"{\\\"x\\\": 1}\"}}]},"
                "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"one\"},"
                "{\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"two\"}]");
    assert_json(json_object_get(chat, "tools"),
                "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", "
                "\"function\": {\"name\": \"g\", \"parameters\": {\"type\": \"object\"}, \"strict\": true}}]");
    assert_json(json_object_get(chat, "tool_choice"), "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}");
    assert_json(json_object_get(chat, "max_completion_tokens"), "7");
    json_decref(chat);
}

Test(responses_request, text_format_becomes_response_format)
{
    json_t *chat;
    tram_api_error e;
    cr_assert_eq(run("{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\", "
                     "\"schema\": {\"type\": \"object\"}, \"strict\": true}}}", &chat, NULL, &e), 0, "%s", e.message);
    assert_json(json_object_get(chat, "response_format"),
                "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", \"schema\": {\"type\": \"object\"}, "
                "\"strict\": true}}");
    json_decref(chat);
    cr_assert_eq(run("{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"json_object\"}}}", &chat, NULL, &e), 0);
    assert_json(json_object_get(chat, "response_format"), "{\"type\": \"json_object\"}");
    json_decref(chat);
    cr_assert_eq(run("{\"input\": \"hi\", \"stream\": true}", &chat, NULL, &e), 0);
    assert_json(json_object_get(chat, "stream_options"), "{\"include_usage\": true}");
    json_decref(chat);
}

/* include's logprobs and top_logprobs are chat's logprobs and top_logprobs;
 * the include values of items tram never makes ask for nothing. */
Test(responses_request, include_and_top_logprobs_become_chats_logprobs)
{
    static const struct {
        const char *fields;   /* besides the input */
        int logprobs;         /* chat's logprobs is true */
        int top;              /* chat's top_logprobs, -1: absent */
    } cases[] = {
        {"\"include\": [\"message.output_text.logprobs\"]", 1, -1},
        {"\"include\": [\"message.output_text.logprobs\"], \"top_logprobs\": 3", 1, 3},
        {"\"top_logprobs\": 2", 1, 2},
        {"\"top_logprobs\": 0", 0, -1},
        {"\"include\": [\"reasoning.encrypted_content\", \"file_search_call.results\"]", 0, -1},
        {"\"include\": []", 0, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"input\": \"hi\", %s}", cases[i].fields);
        json_t *chat;
        tram_api_error e;
        cr_assert_eq(run(body, &chat, NULL, &e), 0, "%s: %s", body, e.message);
        cr_assert_eq(json_is_true(json_object_get(chat, "logprobs")), cases[i].logprobs, "%s", body);
        const json_t *top = json_object_get(chat, "top_logprobs");
        cr_assert_eq(top ? (int)json_integer_value(top) : -1, cases[i].top, "%s", body);
        json_decref(chat);
    }
}

/* Each body's error names the body's own field. */
Test(responses_request, errors_name_the_fields_of_the_body)
{
    static const struct {
        const char *body, *param;
        int status;
    } cases[] = {
        {"{\"input\": \"hi\", \"tools\": [{\"type\": \"web_search\"}]}", "tools[0].type", 400},
        {"{\"input\": \"hi\", \"tools\": [{\"type\": \"file_search\", \"vector_store_ids\": []}]}", "tools[0].type", 400},
        {"{\"input\": \"hi\", \"tools\": [{\"type\": \"computer_use_preview\"}]}", "tools[0].type", 400},
        {"{\"input\": \"hi\", \"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": 5}]}",
         "tools[0].parameters", 400},
        {"{\"input\": \"hi\", \"tool_choice\": {\"type\": \"web_search_preview\"}}", "tool_choice.type", 400},
        {"{\"input\": \"hi\", \"max_output_tokens\": 0}", "max_output_tokens", 400},
        {"{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\", "
         "\"schema\": {\"type\": \"nonsense\"}}}}", "text.format.schema", 400},
        {"{\"input\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"critic\", \"content\": \"b\"}]}",
         "input[1].role", 400},
        {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"image_url\": \"x\"}]}]}",
         "input[0].content[0].type", 400},
        {"{\"input\": [{\"type\": \"reasoning\", \"summary\": []}]}", "input[0].type", 400},
        {"{\"input\": [{\"type\": \"function_call\", \"name\": \"f\", \"arguments\": \"{}\"}]}", "input[0].call_id", 400},
        {"{\"input\": [{\"type\": \"function_call\", \"call_id\": \"c\", \"name\": \"f\", \"arguments\": \"{\"}]}",
         "input[0]", 400},
        {"{\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\"}]}", "input[0].output", 400},
        {"{\"input\": \"hi\", \"previous_response_id\": \"resp_none\"}", "previous_response_id", 404},
        {"{}", "input", 400},
        {"{\"input\": \"hi\", \"include\": [\"message.output_text.bogus\"]}", "include[0]", 400},
        {"{\"input\": \"hi\", \"include\": \"message.output_text.logprobs\"}", "include", 400},
        {"{\"input\": \"hi\", \"top_logprobs\": 21}", "top_logprobs", 400},
        {"{\"input\": \"hi\", \"top_logprobs\": \"x\"}", "top_logprobs", 400},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tram_api_error e;
        cr_assert_eq(run(cases[i].body, NULL, NULL, &e), -1, "accepted %s", cases[i].body);
        cr_assert_eq(e.status, cases[i].status, "%s: %d %s", cases[i].body, e.status, e.message);
        cr_assert_str_eq(e.param, cases[i].param, "%s: %s", cases[i].body, e.message);
    }
}
