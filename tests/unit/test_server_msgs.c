/* Anthropic's Messages API requests (server/msgs_request.c, through the
 * dialects of server/msgs.c as the server parses them): every row of
 * the field table's Messages and count_tokens sections and of their nested
 * tables does what the table says, and a request becomes the chat request
 * it means. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/msgs.h"
#include "server/msgs_request.h"
#include "tests/unit/test_util.h"

static tram_sampling_params defaults;

static void setup(void)
{
    tram_sampling_params_init(&defaults);
}

TestSuite(server_msgs, .init = setup);

static int parse_body(json_t *body, int count_only, tram_api_request *r, tram_api_error *e)
{
    const tram_dialect *d = count_only ? &tram_msgs_count_dialect : &tram_msgs_dialect;
    tram_dialect_request in = {.body = body, .tenant = "", .id = "msg_1", .created = 1};
    void *state = NULL;
    memset(e, 0, sizeof(*e));
    int rc = tram_dialect_parse(d, &in, &defaults, r, &state, e);
    if (rc)
        d->rename_error(state, e);
    d->free_state(state);
    return rc;
}

static int parse_text(const char *text, tram_api_request *r, tram_api_error *e)
{
    json_t *body = json_loads(text, 0, NULL);
    cr_assert_not_null(body, "not JSON: %s", text);
    int rc = parse_body(body, 0, r, e);
    json_decref(body);
    return rc;
}

/* The endpoint's minimal body with o[name] set to the JSON value. */
static int parse_with(int count_only, const char *name, const char *value, tram_api_request *r, tram_api_error *e)
{
    json_t *body = json_pack("{s:s, s:[{s:s, s:s}]}", "model", "m", "messages", "role", "user", "content", "hi");
    if (!count_only)
        json_object_set_new(body, "max_tokens", json_integer(5));
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(v, "%s: example %s is not JSON", name, value);
    json_object_set_new(body, name, v);
    int rc = parse_body(body, count_only, r, e);
    json_decref(body);
    return rc;
}

/* One row's promise, for the value example put at path (name there). */
static void check_promise(const tram_api_field *f, const char *name, int rc, tram_api_request *r,
                          const tram_api_error *e)
{
    if (f->kind == TRAM_FIELD_IGNORED) {
        cr_assert_eq(rc, 0, "%s: ignored, yet %s", name, e->message);
        cr_assert(strstr(r->ignored, name), "%s: not reported as ignored (%s)", name, r->ignored);
        tram_api_request_free(r);
        return;
    }
    cr_assert_eq(rc, -1, "%s = %s was accepted", name, f->example);
    cr_assert_eq(e->status, 400, "%s: %s", name, e->message);
    size_t n = strlen(name);
    cr_assert(!strncmp(e->param, name, n) && strchr(".[", e->param[n]), "%s: the 400 names '%s' (%s)", name,
              e->param, e->message);
}

static void check_row(const tram_api_field *f, int count_only)
{
    tram_api_request r;
    tram_api_error e;
    check_promise(f, f->name, parse_with(count_only, f->name, f->example, &r, &e), &r, &e);
    if (f->kind != TRAM_FIELD_REJECTED)
        return;
    cr_assert_eq(parse_with(count_only, f->name, "null", &r, &e), 0, "%s: null: %s", f->name, e.message);
    tram_api_request_free(&r);
    if (f->harmless_example) {
        cr_assert_eq(parse_with(count_only, f->name, f->harmless_example, &r, &e), 0, "%s = %s: %s", f->name,
                     f->harmless_example, e.message);
        tram_api_request_free(&r);
    }
}

Test(server_msgs, every_top_level_row_does_what_the_table_says)
{
    int rows = 0;
    for (size_t i = 0; i < tram_api_num_fields; i++) {
        const tram_api_field *f = &tram_api_fields[i];
        if (f->endpoints & TRAM_FIELD_MESSAGES)
            check_row(f, 0);
        if (f->endpoints & TRAM_FIELD_COUNT_TOKENS)
            check_row(f, 1);
        rows += !!(f->endpoints & (TRAM_FIELD_MESSAGES | TRAM_FIELD_COUNT_TOKENS));
    }
    cr_assert_geq(rows, 20);
    tram_api_request r;
    tram_api_error e;
    cr_assert_eq(parse_with(1, "max_tokens", "5", &r, &e), -1, "count_tokens takes no max_tokens");
    cr_assert_str_eq(e.param, "max_tokens");
    cr_assert_eq(parse_with(0, "n", "2", &r, &e), -1, "chat's fields are not Anthropic's");
    cr_assert_str_eq(e.param, "n");
}

/* The object's example with key set to the JSON value (NULL: as it is). */
static int parse_object_with(const tram_api_object *o, const char *key, const char *value, tram_api_request *r,
                             tram_api_error *e)
{
    json_t *body = json_loads(o->example_body, 0, NULL);
    cr_assert_not_null(body, "%s: the example is not JSON", o->path);
    json_t *target = test_json_at(body, o->example_path);
    cr_assert(json_is_object(target), "%s: no object at %s", o->path, o->example_path);
    if (key)
        json_object_set_new(target, key, json_loads(value, JSON_DECODE_ANY, NULL));
    int rc = parse_body(body, 0, r, e);
    json_decref(body);
    return rc;
}

/* Every nested table: its example is taken, an unknown key is a 400 naming
 * its path, and each row keeps its promise there. */
Test(server_msgs, every_nested_row_does_what_the_table_says)
{
    int objects = 0;
    for (int id = 0; id < TRAM_OBJ_COUNT; id++) {
        const tram_api_object *o = &tram_api_objects[id];
        if (!(o->endpoints & TRAM_FIELD_MESSAGES))
            continue;
        objects++;
        tram_api_request r;
        tram_api_error e;
        cr_assert_eq(parse_object_with(o, NULL, NULL, &r, &e), 0, "%s: %s", o->path, e.message);
        tram_api_request_free(&r);
        char name[160];
        snprintf(name, sizeof(name), "%s.zz_unknown", o->example_path);
        cr_assert_eq(parse_object_with(o, "zz_unknown", "1", &r, &e), -1, "%s: an unknown key was taken", o->path);
        cr_assert_str_eq(e.param, name, "%s: %s", o->path, e.message);
        for (size_t i = 0; i < o->num_keys; i++) {
            const tram_api_field *f = &o->keys[i];
            snprintf(name, sizeof(name), "%s.%s", o->example_path, f->name);
            check_promise(f, name, parse_object_with(o, f->name, f->example, &r, &e), &r, &e);
            if (f->harmless_example) {
                cr_assert_eq(parse_object_with(o, f->name, f->harmless_example, &r, &e), 0, "%s: %s", name,
                             e.message);
                tram_api_request_free(&r);
            }
        }
    }
    cr_assert_eq(objects, 8);
}

static const char *role_of(const tram_api_request *r, int i)
{
    return r->messages[i].role;
}

Test(server_msgs, a_conversation_becomes_chats)
{
    const char *body =
        "{\"model\": \"m\", \"max_tokens\": 9, \"system\": [{\"type\": \"text\", \"text\": \"Be brief.\"}],"
        " \"stop_sequences\": [\"END\"], \"temperature\": 0.5, \"top_k\": 3,"
        " \"tools\": [{\"name\": \"w\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"}}],"
        " \"tool_choice\": {\"type\": \"any\", \"disable_parallel_tool_use\": true},"
        " \"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"},"
        "  {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"Let me look.\"},"
        "   {\"type\": \"tool_use\", \"id\": \"t1\", \"name\": \"w\", \"input\": {\"city\": \"Oslo\"}}]},"
        "  {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"is_error\": true,"
        "   \"content\": \"down\"}, {\"type\": \"text\", \"text\": \"Try again.\"}]}]}";
    tram_api_request r;
    tram_api_error e;
    cr_assert_eq(parse_text(body, &r, &e), 0, "%s (%s)", e.message, e.param);
    cr_assert_eq(r.num_messages, 5);
    const char *roles[] = {"system", "user", "assistant", "tool", "user"};
    for (int i = 0; i < 5; i++)
        cr_assert_str_eq(role_of(&r, i), roles[i], "message %d", i);
    cr_assert_str_eq(r.messages[0].content, "Be brief.");
    cr_assert_str_eq(r.messages[2].content, "Let me look.");
    cr_assert_eq(r.messages[2].num_tool_calls, 1);
    cr_assert_str_eq(r.messages[3].tool_call_id, "t1");
    cr_assert_str_eq(r.messages[3].content, "Error:\ndown");
    cr_assert_str_eq(r.messages[4].content, "Try again.");
    cr_assert_eq(r.params.max_tokens, 9);
    cr_assert_eq(r.params.num_stop, 1);
    cr_assert_str_eq(r.params.stop[0], "END");
    cr_assert_float_eq(r.params.temperature, 0.5f, 1e-6);
    cr_assert_eq(r.params.top_k, 3);
    cr_assert_eq(r.tools.choice, TRAM_TOOL_CHOICE_REQUIRED);
    cr_assert_eq(r.tools.parallel, 0);
    cr_assert_eq(r.ending, TRAM_CHAT_OPEN_ASSISTANT);
    const json_t *fn = json_object_get(json_array_get(r.tools.tools, 0), "function");
    cr_assert_str_eq(json_string_value(json_object_get(fn, "description")), "d");
    cr_assert(json_is_object(json_object_get(fn, "parameters")));
    tram_api_request_free(&r);
}

Test(server_msgs, a_named_tool_a_prefill_and_an_output_format)
{
    const char *body =
        "{\"model\": \"m\", \"max_tokens\": 9,"
        " \"tools\": [{\"name\": \"w\", \"input_schema\": {\"type\": \"object\"}}],"
        " \"tool_choice\": {\"type\": \"tool\", \"name\": \"w\"},"
        " \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hel\"}]}";
    tram_api_request r;
    tram_api_error e;
    cr_assert_eq(parse_text(body, &r, &e), 0, "%s", e.message);
    cr_assert_eq(r.tools.choice, TRAM_TOOL_CHOICE_NAMED);
    cr_assert_str_eq(r.tools.named, "w");
    cr_assert_eq(r.tools.parallel, 1);
    cr_assert_eq(r.ending, TRAM_CHAT_CONTINUE_LAST, "a last assistant turn is continued");
    tram_api_request_free(&r);
    body = "{\"model\": \"m\", \"max_tokens\": 9, \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
           " \"output_config\": {\"format\": {\"type\": \"json_schema\", \"schema\": {\"type\": \"integer\"}}}}";
    cr_assert_eq(parse_text(body, &r, &e), 0, "%s", e.message);
    const json_t *rf = json_object_get(r.root, "response_format");
    cr_assert_str_eq(json_string_value(json_object_get(rf, "type")), "json_schema");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(rf, "json_schema"), "schema"),
                                                       "type")), "integer");
    tram_api_request_free(&r);
}

/* Errors chat's parser finds name the Anthropic field. */
Test(server_msgs, errors_name_anthropics_fields)
{
    static const struct {
        const char *extra, *param;
    } cases[] = {
        {"\"stop_sequences\": [\"a\", \"\"]", "stop_sequences"},
        {"\"tools\": [{\"name\": \"a b\", \"input_schema\": {}}]", "tools[0].name"},
        {"\"tools\": [{\"name\": \"f\", \"input_schema\": {}, \"strict\": 3}]", "tools[0].strict"},
        {"\"tools\": [{\"name\": \"f\", \"input_schema\": {}}], \"tool_choice\": {\"type\": \"tool\", \"name\": \"g\"}",
         "tool_choice"},
        {"\"temperature\": 1.5", "temperature"},
        {"\"max_tokens\": 0", "max_tokens"},
        {"\"system\": [{\"type\": \"image\"}]", "system[0].type"},
        {"\"tools\": [{\"type\": \"web_search_20250305\", \"name\": \"web_search\"}]", "tools[0].type"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[512];
        snprintf(body, sizeof(body), "{\"max_tokens\": 4, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s}",
                 cases[i].extra);
        tram_api_request r;
        tram_api_error e;
        cr_assert_eq(parse_text(body, &r, &e), -1, "accepted: %s", body);
        cr_assert_eq(e.status, 400);
        cr_assert_str_eq(e.param, cases[i].param, "%s: %s", body, e.message);
        cr_assert(strstr(e.message, cases[i].param), "the message names it: %s", e.message);
    }
    tram_api_error e = {.status = 400};
    snprintf(e.param, sizeof(e.param), "tools[2].function.parameters.properties");
    snprintf(e.message, sizeof(e.message), "Invalid 'tools[2].function.parameters.properties': no.");
    tram_msgs_rename_error(NULL, &e);
    cr_assert_str_eq(e.param, "tools[2].input_schema.properties");
    cr_assert_str_eq(e.message, "Invalid 'tools[2].input_schema.properties': no.");
    snprintf(e.param, sizeof(e.param), "response_format.json_schema.schema.minimum");
    tram_msgs_rename_error(NULL, &e);
    cr_assert_str_eq(e.param, "output_config.format.schema.minimum");
}
