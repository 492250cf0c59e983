/* Tools, tool calls and tool results in the chat templates, against
 * transformers' renders of the real templates and of tram's generic format
 * (tests/fixtures/make_tool_template_fixtures.py); and Python's json.dumps,
 * which the templates' tojson is. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test_tokenizer_util.h"
#include "chat/chat_template.h"
#include "chat/pyjson.h"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

Test(chat_tools, renders_like_transformers)
{
    json_t *rows = tok_load_jsonl(TOK_FIXTURES "chat_tools.jsonl");
    cr_assert_geq(json_array_size(rows), 100);
    size_t i;
    json_t *row;
    int seen[4] = {0};
    json_array_foreach(rows, i, row) {
        tram_chat_template *ct;
        tram_error err = {{0}};
        cr_assert_eq(tram_chat_template_create(&ct, str(row, "template"), str(row, "bos"), str(row, "eos"), 0, &err), 0,
                     "%s: %s", str(row, "name"), err.msg);
        int generic = !strncmp(str(row, "name"), "generic-", 8);
        cr_assert_eq(tram_chat_template_tool_format(ct) == TRAM_TOOLS_GENERIC, generic, "%s", str(row, "name"));
        seen[tram_chat_template_tool_format(ct)]++;
        if (str(row, "date_string"))
            tram_chat_template_set_date(ct, str(row, "date_string"));
        tok_conversation c;
        tok_load_conversation(json_object_get(row, "messages"), 1, &c);   /* null content as the server passes it */
        int n = c.n;
        const json_t *tools = json_object_get(row, "tools");
        char *out = NULL;
        const tram_chat_conversation conv = {
            .msgs = c.msgs, .n = n, .tools = json_is_null(tools) ? NULL : tools,
            .ending = json_is_true(json_object_get(row, "add_generation_prompt")) ? TRAM_CHAT_OPEN_ASSISTANT
                                                                                 : TRAM_CHAT_END_TURN};
        int rc = tram_chat_template_render(ct, &conv, &out, &err);
        if (json_object_get(row, "error")) {
            cr_assert_eq(rc, -1, "%s (row %zu) should refuse: %s", str(row, "name"), i, str(row, "error"));
            cr_assert(strstr(err.msg, str(row, "error")), "%s (row %zu): %s", str(row, "name"), i, err.msg);
        } else {
            cr_assert_eq(rc, 0, "%s (row %zu): %s", str(row, "name"), i, err.msg);
            cr_assert_str_eq(out, str(row, "rendered"), "%s (row %zu)", str(row, "name"), i);
            free(out);
        }
        tram_chat_template_free(ct);
    }
    for (int f = 0; f < 4; f++)
        cr_assert_gt(seen[f], 0, "tool format %d untested", f);
    json_decref(rows);
}

static void check_dumps(const char *json, int indent, const char *want)
{
    json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(v, "%s", json);
    tram_strbuf b = {0};
    tram_pyjson_put(&b, v, indent);
    cr_assert_str_eq(b.s, want);
    free(b.s);
    json_decref(v);
}

/* Expected strings: Python's json.dumps(json.loads(x), ensure_ascii=False). */
Test(chat_tools, pyjson_is_python_json_dumps)
{
    check_dumps("[1.0, 0.1, 1e-05, 0.0001, 1e16, 1.5e16, 123456789012345.6, -0.0, 2.5e-300, 100, -7]", -1,
                "[1.0, 0.1, 1e-05, 0.0001, 1e+16, 1.5e+16, 123456789012345.6, -0.0, 2.5e-300, 100, -7]");
    check_dumps("{\"a\": \"x\\u0001\\t\\\"é\\u2028\", \"b\": [], \"c\": {}, \"d\": null, \"e\": true}", -1,
                "{\"a\": \"x\\u0001\\t\\\"é\u2028\", \"b\": [], \"c\": {}, \"d\": null, \"e\": true}");
    check_dumps("{\"a\": [1, {\"b\": []}], \"c\": {}}", 2,
                "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ],\n  \"c\": {}\n}");
    check_dumps("{\"z\": 1, \"a\": 2}", -1, "{\"z\": 1, \"a\": 2}");
}
