/* chat_tools.c — tram's generic tool format (chat_template.h), for the
 * templates that do not read `tools`: the conversation rewritten into plain
 * messages, the tool list and calls in Qwen2.5's words.  `tojson` is
 * Python's json.dumps (chat/pyjson.h); a call's arguments are the JSON
 * value the client's arguments string holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_impl.h"
#include "chat/pyjson.h"

static int is_tool_result(const tram_chat_msg *m)
{
    return tram_chat_is_role(m, "tool");
}

static const char *text_of(const tram_chat_msg *m)
{
    return m->content ? m->content : "";
}

/* The tool list as Qwen2.5 puts it in its system prompt. */
static void hermes_tools(tram_strbuf *b, const json_t *tools)
{
    tram_strbuf_cat(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                     "You are provided with function signatures within <tools></tools> XML tags:\n<tools>", NULL);
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        tram_strbuf_cat(b, "\n", NULL);
        tram_pyjson_put(b, tool, -1);
    }
    tram_strbuf_cat(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                     "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                     "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>", NULL);
}

static void hermes_call(tram_strbuf *b, const tram_chat_tool_call *c)
{
    tram_strbuf_cat(b, "<tool_call>\n{\"name\": \"", c->name, "\", \"arguments\": ", NULL);
    tram_pyjson_put(b, c->arguments, -1);
    tram_strbuf_cat(b, "}\n</tool_call>", NULL);
}

static char *calls_text(const tram_chat_msg *m)
{
    tram_strbuf b = {0};
    tram_strbuf_cat(&b, text_of(m), NULL);
    for (int k = 0; k < m->num_tool_calls; k++) {
        tram_strbuf_cat(&b, k || *text_of(m) ? "\n" : "", NULL);
        hermes_call(&b, &m->tool_calls[k]);
    }
    return tram_strbuf_take(&b);
}

/* A run of tool results from m[i], as one user turn; *used: how many. */
static char *results_text(const tram_chat_msg *m, int n, int i, int *used)
{
    tram_strbuf b = {0};
    int k = i;
    for (; k < n && is_tool_result(&m[k]); k++)
        tram_strbuf_cat(&b, k > i ? "\n" : "", "<tool_response>\n", text_of(&m[k]), "\n</tool_response>", NULL);
    *used = k - i;
    return tram_strbuf_take(&b);
}

/* The tool list joins the system prompt (or the template's default one),
 * or the first user message where the template takes no system message. */
static char *with_tools(const char *text, const json_t *tools, int before)
{
    tram_strbuf b = {0};
    if (!before && text)
        tram_strbuf_cat(&b, text, "\n\n", NULL);
    hermes_tools(&b, tools);
    if (before)
        tram_strbuf_cat(&b, "\n\n", text, NULL);
    return tram_strbuf_take(&b);
}

void tram_chat_generic_free(tram_chat_msg *m, int n)
{
    for (int i = 0; m && i < n; i++)
        free((char *)m[i].content);
    free(m);
}

static int add_plain(tram_chat_msg *out, int *n_out, const char *role, char *content)
{
    out[*n_out] = (tram_chat_msg){.role = role, .content = content};
    (*n_out)++;
    return content ? 0 : -1;
}

int tram_chat_generic(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                      tram_chat_msg **out, int *n_out, tram_error *err)
{
    tram_chat_msg *o = calloc((size_t)n + 1, sizeof(*o));
    int k = 0, rc = o ? 0 : -1, i = 0;
    int in_system = tools && ct->has_system, in_user = tools && !in_system;
    if (!rc && in_system) {
        int own = n && tram_chat_is_role(&m[0], "system");
        rc = add_plain(o, &k, "system", with_tools(own ? m[0].content : ct->default_system, tools, 0));
        i = own;
    }
    for (; !rc && i < n; i++) {
        int used = 1;
        if (m[i].num_tool_calls) {
            rc = add_plain(o, &k, "assistant", calls_text(&m[i]));
        } else if (is_tool_result(&m[i])) {
            rc = add_plain(o, &k, "user", results_text(m, n, i, &used));
        } else if (in_user && tram_chat_is_role(&m[i], "user")) {
            rc = add_plain(o, &k, "user", with_tools(text_of(&m[i]), tools, 1));
            in_user = 0;
        } else {
            rc = add_plain(o, &k, m[i].role, strdup(text_of(&m[i])));
        }
        i += used - 1;
    }
    if (rc) {
        tram_chat_generic_free(o, k);
        return tram_fail(err, "chat template: out of memory");
    }
    *out = o;
    *n_out = k;
    return 0;
}
