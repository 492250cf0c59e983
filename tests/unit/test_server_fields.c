/* The field table (server/api_fields.c), row by row: an honoured field is
 * really read (a value of the wrong type is a 400 naming it), an ignored one
 * is accepted and reported for the warning, a rejected one is a 400 naming it
 * unless its value changes nothing.  (docs/api-fields.md is generated from
 * the table: tests/docs/check.py keeps it equal.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_request.h"
#include "server/structured.h"
#include "tests/unit/test_fields.h"
#include "tests/unit/test_tokenizer_util.h"
#include "tests/unit/test_util.h"

static tram_sampling_params defaults;
static tram_tokenizer *tok;

static void setup(void)
{
    tram_sampling_params_init(&defaults);
    tok = tok_default();
}

static void teardown(void)
{
    tram_tokenizer_free(tok);
}

TestSuite(server_fields, .init = setup, .fini = teardown);

/* Parses the endpoint's minimal body with name set to the JSON value, as
 * the server does: the fields, then the structured-output constraint. */
static int parse_with(unsigned endpoint, const char *name, const char *value, tram_api_request *r,
                      tram_api_error *e)
{
    json_t *body = endpoint == TRAM_FIELD_CHAT
                       ? json_pack("{s:[{s:s, s:s}]}", "messages", "role", "user", "content", "hi")
                       : json_pack("{s:s}", "prompt", "hi");
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(v, "%s: example %s is not JSON", name, value);
    json_object_set_new(body, name, v);
    char *text = json_dumps(body, 0);
    json_decref(body);
    memset(e, 0, sizeof(*e));
    int rc = tram_api_request_parse(r, endpoint == TRAM_FIELD_CHAT ? TRAM_API_CHAT
                                                                  : TRAM_API_COMPLETION,
                                    &defaults, text, strlen(text), e);
    free(text);
    const tram_grammar *g = NULL;
    if (!rc && tram_structured_grammar(r->root, tok, &g, e)) {
        tram_api_request_free(r);
        return -1;
    }
    tram_grammar_release(g);
    return rc;
}

static void check_row(const tram_api_field *f, unsigned endpoint)
{
    tram_api_request r;
    tram_api_error e;
    int rc = parse_with(endpoint, f->name, f->example, &r, &e);
    if (f->kind == TRAM_FIELD_IGNORED) {
        cr_assert_eq(rc, 0, "%s: ignored, yet %s", f->name, e.message);
        cr_assert(strstr(r.ignored, f->name), "%s: not reported as ignored (%s)", f->name, r.ignored);
        tram_api_request_free(&r);
        return;
    }
    cr_assert_eq(rc, -1, "%s = %s was accepted", f->name, f->example);
    cr_assert_eq(e.status, 400);
    size_t n = strlen(f->name);   /* the field, or a part of it: "response_format.type" */
    cr_assert(!strncmp(e.param, f->name, n) && strchr(".[", e.param[n]), "%s: the 400 names '%s' (%s)",
              f->name, e.param, e.message);
    if (f->kind != TRAM_FIELD_REJECTED)
        return;
    cr_assert_eq(parse_with(endpoint, f->name, "null", &r, &e), 0, "%s: null: %s", f->name, e.message);
    tram_api_request_free(&r);
    if (f->harmless_example) {
        cr_assert_eq(parse_with(endpoint, f->name, f->harmless_example, &r, &e), 0, "%s = %s: %s",
                     f->name, f->harmless_example, e.message);
        tram_api_request_free(&r);
    }
}

Test(server_fields, every_row_does_what_the_table_says)
{
    cr_assert_geq(tram_api_num_fields, 60);
    for (size_t i = 0; i < tram_api_num_fields; i++) {
        const tram_api_field *f = &tram_api_fields[i];
        cr_assert_eq(f->kind == TRAM_FIELD_REJECTED, f->why != NULL, "%s", f->name);
        cr_assert_eq(f->harmless != NULL, f->harmless_example != NULL, "%s", f->name);
        for (unsigned endpoint = TRAM_FIELD_CHAT; endpoint <= TRAM_FIELD_COMPLETION; endpoint <<= 1)
            if (f->endpoints & endpoint)
                check_row(f, endpoint);
    }
}

Test(server_fields, unknown_fields_and_the_other_endpoints_fields_are_400)
{
    tram_api_request r;
    tram_api_error e;
    cr_assert_eq(parse_with(TRAM_FIELD_CHAT, "frobnicate", "1", &r, &e), -1);
    cr_assert_str_eq(e.param, "frobnicate");
    cr_assert(strstr(e.message, "Unrecognized request argument"), "%s", e.message);
    cr_assert_eq(parse_with(TRAM_FIELD_COMPLETION, "tools", "[]", &r, &e), -1);
    cr_assert_str_eq(e.param, "tools");
    cr_assert_eq(parse_with(TRAM_FIELD_CHAT, "suffix", "\"\"", &r, &e), -1);
    cr_assert_str_eq(e.param, "suffix");
}

static int parse_completion(const char *body, tram_api_request *r, tram_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return tram_api_request_parse(r, TRAM_API_COMPLETION, &defaults, body, strlen(body), e);
}

Test(server_fields, best_of_must_equal_n)
{
    tram_api_request r;
    tram_api_error e;
    cr_assert_eq(parse_completion("{\"prompt\": \"hi\", \"n\": 3, \"best_of\": 3}", &r, &e), 0, "%s", e.message);
    tram_api_request_free(&r);
    cr_assert_eq(parse_completion("{\"prompt\": \"hi\", \"n\": 2, \"best_of\": 3}", &r, &e), -1);
    cr_assert_str_eq(e.param, "best_of");
}

Test(server_fields, max_completion_tokens_on_completions)
{
    tram_api_request r;
    tram_api_error e;
    cr_assert_eq(parse_completion("{\"prompt\": \"hi\", \"max_completion_tokens\": 5, \"max_tokens\": 9}", &r, &e),
                 0, "%s", e.message);
    cr_assert_eq(r.params.max_tokens, 5);
    tram_api_request_free(&r);
}
/* Parses a chat body as the server does; 0, or -1 with e filled. */
static int parse_chat_body(const char *text, tram_api_error *e)
{
    tram_api_request r;
    memset(e, 0, sizeof(*e));
    if (tram_api_request_parse(&r, TRAM_API_CHAT, &defaults, text, strlen(text), e))
        return -1;
    const tram_grammar *g = NULL;
    int rc = tram_structured_grammar(r.root, tok, &g, e);
    tram_grammar_release(g);
    tram_api_request_free(&r);
    return rc;
}

/* Chat's nested objects (the other endpoints' suites check their own). */
Test(server_fields, an_unknown_key_in_any_nested_object_is_400_naming_its_path)
{
    cr_assert_gt(test_unknown_nested_keys_named(TRAM_FIELD_CHAT, parse_chat_body), 0);
}

/* A nested object's rejected key is a 400 naming its path unless null; an
 * ignored one is accepted and listed. */
Test(server_fields, nested_rows_are_honoured_ignored_or_rejected)
{
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\", \"name\": \"ann\"}, "
                       "{\"role\": \"assistant\", \"content\": \"x\", \"refusal\": null, \"function_call\": null}]}";
    tram_api_request r;
    tram_api_error e = {0};
    cr_assert_eq(tram_api_request_parse(&r, TRAM_API_CHAT, &defaults, body, strlen(body), &e), 0, "%s", e.message);
    cr_assert(strstr(r.ignored, "messages[0].name"), "%s", r.ignored);
    tram_api_request_free(&r);
    body = "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\", \"refusal\": \"no\"}]}";
    cr_assert_eq(parse_chat_body(body, &e), -1);
    cr_assert_str_eq(e.param, "messages[0].refusal");
    body = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": true, "
           "\"stream_options\": {\"include_usage\": 1}}";
    cr_assert_eq(parse_chat_body(body, &e), -1);
    cr_assert_str_eq(e.param, "stream_options.include_usage");
}
