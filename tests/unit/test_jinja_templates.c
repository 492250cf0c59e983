/* Every chat template llama.cpp keeps, rendered by tram against
 * transformers' renders of the same conversations
 * (tests/fixtures/make_jinja_fixtures.py): the interpreter byte for byte (or
 * the same refusal, for the same reason), and tram's chat template on top of
 * it, which also refuses tools where it cannot parse the template's calls. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/unit/test_tokenizer_util.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The same refusal: the template's own message (raise_exception), or the
 * same Python error; Python's recursion limit is tram's depth limit. */
static int same_refusal(const char *tram, const char *python)
{
    if (strstr(python, "maximum recursion depth"))
        return strstr(tram, "deeper than") != NULL;
    return strstr(tram, python) != NULL;
}

static long long pinned_clock(const json_t *head)
{
    const json_t *c = json_object_get(head, "clock");
    struct tm tm = {.tm_year = (int)json_integer_value(json_array_get(c, 0)) - 1900,
                    .tm_mon = (int)json_integer_value(json_array_get(c, 1)) - 1,
                    .tm_mday = (int)json_integer_value(json_array_get(c, 2)),
                    .tm_hour = (int)json_integer_value(json_array_get(c, 3)),
                    .tm_min = (int)json_integer_value(json_array_get(c, 4)),
                    .tm_sec = (int)json_integer_value(json_array_get(c, 5)), .tm_isdst = -1};
    return (long long)mktime(&tm);   /* strftime_now shows local time, as Python's datetime.now() */
}

/* The interpreter alone, with the variables transformers passes. */
static void check_interpreter(const json_t *t, const json_t *head, const json_t *conv, const json_t *want, int k)
{
    tram_jinja *j;
    tram_error err = {{0}};
    cr_assert_eq(tram_jinja_parse(&j, str(t, "template"), &err), 0, "%s: %s", str(t, "name"), err.msg);
    json_t *vars = json_pack("{s:O,s:O,s:n,s:b,s:s,s:s,s:s}", "messages", json_array_get(conv, 1), "tools",
                             json_array_get(conv, 0), "documents", "add_generation_prompt", 1, "bos_token",
                             str(t, "bos"), "eos_token", str(t, "eos"), "date_string", str(head, "date_string"));
    char *out = NULL;
    int rc = tram_jinja_render(j, vars, pinned_clock(head), &out, &err);
    if (str(want, "error")) {
        cr_assert_eq(rc, -1, "%s #%d should refuse: %s", str(t, "name"), k, str(want, "error"));
        cr_assert(same_refusal(err.msg, str(want, "error")), "%s #%d: %s, not %s", str(t, "name"), k, err.msg,
                  str(want, "error"));
    } else {
        cr_assert_eq(rc, 0, "%s #%d: %s", str(t, "name"), k, err.msg);
        cr_assert_str_eq(out, str(want, "rendered"), "%s #%d", str(t, "name"), k);
    }
    free(out);
    json_decref(vars);
    tram_jinja_free(j);
}

/* tram's chat template: the same, but for tools it cannot parse. */
static int check_chat_template(const json_t *t, const json_t *head, const json_t *conv, const json_t *want, int k)
{
    tram_chat_template *ct;
    tram_error err = {{0}};
    cr_assert_eq(tram_chat_template_create(&ct, str(t, "template"), str(t, "bos"), str(t, "eos"), 0, &err), 0,
                 "%s: %s", str(t, "name"), err.msg);
    tram_chat_template_set_date(ct, str(head, "date_string"));
    tram_chat_template_set_clock(ct, pinned_clock(head));
    tok_conversation c;
    tok_load_conversation(json_array_get(conv, 1), 0, &c);
    const json_t *tools = json_array_get(conv, 0);
    char *out = NULL;
    const tram_chat_conversation chat = {
        .msgs = c.msgs, .n = c.n, .tools = json_is_null(tools) ? NULL : tools, .ending = TRAM_CHAT_OPEN_ASSISTANT};
    int rc = tram_chat_template_render(ct, &chat, &out, &err);
    tram_tool_format f = tram_chat_template_tool_format(ct);
    int with_tools = c.tool_parts || !json_is_null(tools);
    if (f == TRAM_TOOLS_UNSUPPORTED && with_tools) {
        cr_assert_eq(rc, -1, "%s #%d: tools the template writes in a syntax tram cannot parse", str(t, "name"), k);
        cr_assert(strstr(err.msg, "cannot parse"), "%s", err.msg);
    } else if (f == TRAM_TOOLS_GENERIC && with_tools) {
        /* a template that does not read `tools` gets tram's generic format (chat_tools.jsonl checks its text) */
        if (!rc && !json_is_null(tools))
            cr_assert(strstr(out, "<tools>\n{\"type\": \"function\""), "%s #%d: no tool list", str(t, "name"), k);
    } else if (str(want, "error")) {
        cr_assert_eq(rc, -1, "%s #%d should refuse: %s", str(t, "name"), k, str(want, "error"));
    } else {
        cr_assert_eq(rc, 0, "%s #%d: %s", str(t, "name"), k, err.msg);
        cr_assert_str_eq(out, str(want, "rendered"), "%s #%d", str(t, "name"), k);
    }
    free(out);
    tram_chat_template_free(ct);
    return f == TRAM_TOOLS_UNSUPPORTED;
}

Test(jinja_templates, render_like_transformers, .timeout = 60)
{
    json_t *lines = tok_load_jsonl(TOK_FIXTURES "jinja_templates.jsonl");
    const json_t *head = json_array_get(lines, 0), *convs = json_object_get(head, "conversations");
    cr_assert_geq(json_array_size(lines), 71, "the fixture holds llama.cpp's 70 templates");
    cr_assert_eq(json_array_size(convs), 9);
    int unsupported = 0, rendered = 0;
    for (size_t i = 1; i < json_array_size(lines); i++) {
        const json_t *t = json_array_get(lines, i), *renders = json_object_get(t, "renders");
        cr_assert_eq(json_array_size(renders), json_array_size(convs), "%s", str(t, "name"));
        int u = 0;
        for (size_t k = 0; k < json_array_size(convs); k++) {
            check_interpreter(t, head, json_array_get(convs, k), json_array_get(renders, k), (int)k);
            u = check_chat_template(t, head, json_array_get(convs, k), json_array_get(renders, k), (int)k);
            rendered += str(json_array_get(renders, k), "rendered") != NULL;
        }
        unsupported += u;
    }
    cr_assert_geq(rendered, 500);
    cr_log_info("%d of %zu templates write tool calls tram cannot parse", unsupported, json_array_size(lines) - 1);
    json_decref(lines);
}
