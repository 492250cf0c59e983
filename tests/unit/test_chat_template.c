/* Chat templates against transformers' apply_chat_template renders
 * (tests/fixtures/make_tokenizer_fixtures.py). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test_tokenizer_util.h"
#include "chat/chat_template.h"

/* One conversation without tools, ending as asked. */
static int render(const tram_chat_template *ct, const tram_chat_msg *m, int n, int ending, char **out, tram_error *err)
{
    const tram_chat_conversation c = {.msgs = m, .n = n, .ending = (tram_chat_ending)ending};
    return tram_chat_template_render(ct, &c, out, err);
}

/* One message with template arguments, opening the assistant's turn. */
static int render_kwargs(const tram_chat_template *ct, const tram_chat_msg *m, const json_t *kwargs, char **out,
                         tram_error *err)
{
    const tram_chat_conversation c = {.msgs = m, .n = 1, .kwargs = kwargs, .ending = TRAM_CHAT_OPEN_ASSISTANT};
    return tram_chat_template_render(ct, &c, out, err);
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* A fixture row's template (its text, BOS and EOS). */
static tram_chat_template *row_template(const json_t *row)
{
    tram_chat_template *ct;
    tram_error err = {{0}};
    cr_assert_eq(tram_chat_template_create(&ct, str(row, "template"), str(row, "bos"), str(row, "eos"), 0, &err), 0,
                 "%s: %s", str(row, "name"), err.msg);
    return ct;
}

/* Every row of a fixture rendered by tram as transformers rendered it (or
 * refused, where transformers refused); ending: how each row ends, or -1:
 * as its add_generation_prompt says. */
static void check_fixture(const char *file, size_t min_rows, int ending)
{
    json_t *rows = tok_load_jsonl(file);
    cr_assert_geq(json_array_size(rows), min_rows);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        tram_chat_template *ct = row_template(row);
        tram_error err = {{0}};
        tok_conversation c;
        tok_load_conversation(json_object_get(row, "messages"), 0, &c);
        char *out;
        int row_ending = ending >= 0 ? ending : json_is_true(json_object_get(row, "add_generation_prompt"));
        int rc = render(ct, c.msgs, c.n, (tram_chat_ending)row_ending, &out, &err);
        if (json_object_get(row, "error")) {
            cr_assert_eq(rc, -1, "%s (row %zu) should refuse: %s", str(row, "name"), i, str(row, "error"));
        } else {
            cr_assert_eq(rc, 0, "%s (row %zu): %s", str(row, "name"), i, err.msg);
            cr_assert_str_eq(out, str(row, "rendered"), "%s (row %zu)", str(row, "name"), i);
            free(out);
        }
        tram_chat_template_free(ct);
    }
    json_decref(rows);
}

Test(chat_template, renders_like_transformers)
{
    check_fixture(TOK_FIXTURES "chat_templates.jsonl", 100, -1);
}

Test(chat_template, families_and_default_model)
{
    json_t *rows = tok_load_jsonl(TOK_FIXTURES "chat_templates.jsonl");
    const char *names[] = {"smollm2", "chatml", "llama2", "llama3", "mistral-v0.1", "gemma", "phi3"};
    tram_chat_family fams[] = {TRAM_CHAT_CHATML, TRAM_CHAT_CHATML, TRAM_CHAT_LLAMA2, TRAM_CHAT_LLAMA3,
                               TRAM_CHAT_MISTRAL, TRAM_CHAT_GEMMA, TRAM_CHAT_PHI3};
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            if (strcmp(str(row, "name"), names[k]))
                continue;
            tram_chat_template *ct;
            cr_assert_eq(tram_chat_template_create(&ct, str(row, "template"), "", "", 0, NULL), 0);
            cr_assert_eq(tram_chat_template_family(ct), fams[k], "%s", names[k]);
            tram_chat_template_free(ct);
        }
    }
    json_decref(rows);
    /* The default model's own template, with SmolLM2's default system prompt. */
    tram_tokenizer *t = tok_default();
    tram_chat_template *ct;
    tram_error err;
    cr_assert_eq(tram_chat_template_for(&ct, t, NULL, 0, &err), 0, "%s", err.msg);
    tram_chat_msg m[] = {{.role = "user", .content = "Hi"}};
    char *out;
    cr_assert_eq(render(ct, m, 1, 1, &out, &err), 0);
    cr_assert_str_eq(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                          "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    tram_chat_template_free(ct);
    tram_tokenizer_free(t);
}

/* A template of no known family renders through the interpreter all the
 * same; one the interpreter cannot parse, or none, is an error unless the
 * ChatML fallback is asked for. */
Test(chat_template, unknown_template)
{
    tram_chat_template *ct;
    tram_error err = {{0}};
    const char *odd = "{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}";
    cr_assert_eq(tram_chat_template_create(&ct, odd, "", "", 0, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_chat_template_family(ct), TRAM_CHAT_OTHER);
    cr_assert_null(tram_chat_template_warning(ct));
    tram_chat_msg m[] = {{.role = "user", .content = "x"}, {.role = NULL, .content = "y"}};
    char *out;
    cr_assert_eq(render(ct, m, 1, 0, &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out, "### user: x\n");
    free(out);
    tram_chat_template_free(ct);

    const char *broken = "{% for m in messages %}{{ m.content }}";
    cr_assert_eq(tram_chat_template_create(&ct, broken, "", "", 0, &err), -1);
    cr_assert(strstr(err.msg, "not closed"), "%s", err.msg);
    cr_assert_null(ct);
    cr_assert_eq(tram_chat_template_create(&ct, NULL, "", "", 0, &err), -1);
    cr_assert_eq(tram_chat_template_create(&ct, broken, "", "", 1, &err), 0);
    cr_assert_eq(tram_chat_template_family(ct), TRAM_CHAT_CHATML);
    cr_assert_not_null(tram_chat_template_warning(ct));
    cr_assert_eq(render(ct, m, 2, 0, &out, &err), -1);
    cr_assert_eq(render(ct, m, 1, 0, &out, &err), 0);
    cr_assert_str_eq(out, "<|im_start|>user\nx<|im_end|>\n");
    free(out);
    tram_chat_template_free(ct);
}

/* chat_template_kwargs: more variables for the template (Qwen3's
 * enable_thinking, say), never one the renderer sets itself. */
Test(chat_template, kwargs_are_template_variables)
{
    tram_chat_template *ct;
    tram_error err = {{0}};
    cr_assert_eq(tram_chat_template_create(&ct,
                                           "{% for m in messages %}[{{ m.role }}] {{ m.content }}"
                                           "{% if loud is defined and loud %}!{% endif %}\n{% endfor %}"
                                           "{{ greeting | default('none') }}",
                                           "", "", 0, &err),
                 0, "%s", err.msg);
    const tram_chat_msg msgs[] = {{.role = "user", .content = "hi"}};
    json_t *kwargs = json_pack("{s:b,s:s}", "loud", 1, "greeting", "hello");
    char *out = NULL;
    cr_assert_eq(render_kwargs(ct, msgs, kwargs, &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out, "[user] hi!hello");  /* trim_blocks eats the newline after endif, as jinja2 does */
    free(out);
    cr_assert_eq(render_kwargs(ct, msgs, NULL, &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out, "[user] hinone");
    free(out);
    const char *reserved[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(reserved); i++) {
        cr_assert(tram_chat_template_sets(reserved[i]), "%s", reserved[i]);
        json_t *bad = json_pack("{s:i}", reserved[i], 1);
        cr_assert_eq(render_kwargs(ct, msgs, bad, &out, &err), -1, "%s", reserved[i]);
        cr_assert(strstr(err.msg, reserved[i]), "%s", err.msg);
        json_decref(bad);
    }
    cr_assert(!tram_chat_template_sets("enable_thinking"));
    json_decref(kwargs);
    tram_chat_template_free(ct);
}

/* continue_final_message: the prompt ends inside the last message, as
 * transformers cuts it (tests/fixtures/make_continue_fixtures.py), trailing
 * space kept where the template keeps it and trimmed where it trims. */
Test(chat_template, continue_final_message_like_transformers)
{
    check_fixture(TOK_FIXTURES "chat_continue.jsonl", 12, TRAM_CHAT_CONTINUE_LAST);
    /* a template that never writes the content has nothing to continue */
    tram_chat_template *ct;
    tram_error err = {{0}};
    cr_assert_eq(tram_chat_template_create(&ct, "{% for m in messages %}[{{ m.role }}]{% endfor %}", "", "", 0, &err), 0);
    const tram_chat_msg msgs[] = {{.role = "user", .content = "hi"}, {.role = "assistant", .content = "So"}};
    char *out;
    cr_assert_eq(render(ct, msgs, 2, TRAM_CHAT_CONTINUE_LAST, &out, &err), -1);
    cr_assert(strstr(err.msg, "continue_final_message"), "%s", err.msg);
    cr_assert_eq(render(ct, msgs, 0, TRAM_CHAT_CONTINUE_LAST, &out, &err), -1);
    tram_chat_template_free(ct);
}
