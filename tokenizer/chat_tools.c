/* chat_tools.c — the chat templates that write tools, calls and results,
 * each following its Jinja source line by line (Qwen2.5's, Llama 3.1's and
 * 3.2's, Mistral v0.3's), and tram's generic format for the templates that
 * have none.  `tojson` is Python's json.dumps (tokenizer/pyjson.h); a call's
 * arguments are the JSON value the client's arguments string holds, as vLLM
 * passes them to the template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/chat_impl.h"
#include "tokenizer/pyjson.h"

static int is_tool_result(const tram_chat_msg *m)
{
    return tram_chat_is_role(m, "tool");
}

/* ---- Qwen2.5 (Hermes) ---- */

/* The tool list Qwen2.5 puts in its system prompt; tram's generic format
 * uses the same words. */
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

static void qwen_system(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                        tram_strbuf *b)
{
    const char *sys = n && tram_chat_is_role(&m[0], "system") ? m[0].content : ct->default_system;
    if (tools) {
        tram_strbuf_cat(b, "<|im_start|>system\n", sys ? sys : "", "\n\n", NULL);
        hermes_tools(b, tools);
        tram_strbuf_cat(b, "<|im_end|>\n", NULL);
    } else if (sys) {
        tram_strbuf_cat(b, "<|im_start|>system\n", sys, "<|im_end|>\n", NULL);
    }
}

int tram_chat_render_qwen(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                          int gen, tram_strbuf *b)
{
    qwen_system(ct, m, n, tools, b);
    for (int i = 0; i < n; i++) {
        if (tram_chat_is_role(&m[i], "user") || (tram_chat_is_role(&m[i], "system") && i > 0) ||
            (tram_chat_is_role(&m[i], "assistant") && !m[i].num_tool_calls)) {
            tram_strbuf_cat(b, "<|im_start|>", m[i].role, "\n", m[i].content, "<|im_end|>\n", NULL);
        } else if (tram_chat_is_role(&m[i], "assistant")) {
            tram_strbuf_cat(b, "<|im_start|>assistant", *m[i].content ? "\n" : "", m[i].content, NULL);
            for (int k = 0; k < m[i].num_tool_calls; k++) {
                tram_strbuf_cat(b, "\n", NULL);
                hermes_call(b, &m[i].tool_calls[k]);
            }
            tram_strbuf_cat(b, "<|im_end|>\n", NULL);
        } else if (is_tool_result(&m[i])) {
            if (i == 0 || !is_tool_result(&m[i - 1]))
                tram_strbuf_cat(b, "<|im_start|>user", NULL);
            tram_strbuf_cat(b, "\n<tool_response>\n", m[i].content, "\n</tool_response>", NULL);
            if (i == n - 1 || !is_tool_result(&m[i + 1]))
                tram_strbuf_cat(b, "<|im_end|>\n", NULL);
        }
    }
    if (gen)
        tram_strbuf_cat(b, "<|im_start|>assistant\n", NULL);
    return 0;
}

/* ---- Llama 3.1 / 3.2 ---- */

static void llama3_header(tram_strbuf *b, const char *role)
{
    tram_strbuf_cat(b, "<|start_header_id|>", role, "<|end_header_id|>\n\n", NULL);
}

static void llama3_system(const tram_chat_template *ct, const char *system, const json_t *tools, tram_strbuf *b)
{
    char today[32] = "26 Jul 2024";   /* both templates' fallback date */
    time_t now = time(NULL);
    struct tm tm;
    if (ct->date[0])
        snprintf(today, sizeof(today), "%s", ct->date);
    else if (ct->date_from_clock && localtime_r(&now, &tm))
        strftime(today, sizeof(today), "%d %b %Y", &tm);
    llama3_header(b, "system");
    tram_strbuf_cat(b, tools ? "Environment: ipython\n" : "", "Cutting Knowledge Date: December 2023\n",
                  "Today Date: ", today, "\n\n", NULL);
    tram_text_put_stripped(b, system);
    tram_strbuf_cat(b, "<|eot_id|>", NULL);
}

/* tools_in_user_message: the tools go into the first message after the
 * system one, whatever its role. */
static void llama3_tools_message(const json_t *tools, const char *first, tram_strbuf *b)
{
    llama3_header(b, "user");
    tram_strbuf_cat(b, "Given the following functions, please respond with a JSON for a function call ",
                  "with its proper arguments that best answers the given prompt.\n\n",
                  "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
                  "its value}.", "Do not use variables.\n\n", NULL);
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        tram_pyjson_put(b, tool, 4);
        tram_strbuf_cat(b, "\n\n", NULL);
    }
    tram_text_put_stripped(b, first);
    tram_strbuf_cat(b, "<|eot_id|>", NULL);
}

static int llama3_message(const tram_chat_msg *m, tram_strbuf *b, tram_error *err)
{
    if (m->num_tool_calls) {
        if (m->num_tool_calls != 1)
            return tram_fail(err, "chat template: This model only supports single tool-calls at once!");
        llama3_header(b, "assistant");
        tram_strbuf_cat(b, "{\"name\": \"", m->tool_calls[0].name, "\", \"parameters\": ", NULL);
        tram_pyjson_put(b, m->tool_calls[0].arguments, -1);
        tram_strbuf_cat(b, "}<|eot_id|>", NULL);
    } else if (is_tool_result(m) || tram_chat_is_role(m, "ipython")) {
        /* a string is "iterable" to Jinja, so the template writes it as JSON */
        llama3_header(b, "ipython");
        json_t *s = json_string(m->content);
        if (!s)
            return tram_fail(err, "chat template: a tool result is not UTF-8");
        tram_pyjson_put(b, s, -1);
        json_decref(s);
        tram_strbuf_cat(b, "<|eot_id|>", NULL);
    } else {
        llama3_header(b, m->role);
        tram_text_put_stripped(b, m->content);
        tram_strbuf_cat(b, "<|eot_id|>", NULL);
    }
    return 0;
}

int tram_chat_render_llama31(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                             int gen, tram_strbuf *b, tram_error *err)
{
    tram_strbuf_cat(b, ct->bos, NULL);
    const char *system = "";
    if (n && tram_chat_is_role(&m[0], "system")) {
        system = m[0].content;
        m++;
        n--;
    }
    llama3_system(ct, system, tools, b);
    if (tools) {
        if (n == 0)
            return tram_fail(err, "chat template: Cannot put tools in the first user message when there's no first "
                                  "user message!");
        llama3_tools_message(tools, m[0].content, b);
        m++;
        n--;
    }
    for (int i = 0; i < n; i++)
        if (llama3_message(&m[i], b, err))
            return -1;
    if (gen)
        llama3_header(b, "assistant");
    return 0;
}

/* ---- Mistral v0.3 ---- */

static const char *const mistral_id_error = "chat template: Tool call IDs should be alphanumeric strings with length 9!";

/* Jinja's `val is string`: written raw between quotes, no escaping. */
static void mistral_tools(const json_t *tools, tram_strbuf *b)
{
    tram_strbuf_cat(b, "[AVAILABLE_TOOLS] [", NULL);
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        tram_strbuf_cat(b, "{\"type\": \"function\", \"function\": {", NULL);
        const char *key;
        const json_t *val;
        int first = 1;
        json_object_foreach((json_t *)json_object_get(tool, "function"), key, val) {
            if (!strcmp(key, "return"))
                continue;
            tram_strbuf_cat(b, first ? "\"" : ", \"", key, "\": ", NULL);
            first = 0;
            if (json_is_string(val))
                tram_strbuf_cat(b, "\"", json_string_value(val), "\"", NULL);
            else
                tram_pyjson_put(b, val, -1);
        }
        tram_strbuf_cat(b, "}}", i + 1 < json_array_size(tools) ? ", " : "]", NULL);
    }
    tram_strbuf_cat(b, "[/AVAILABLE_TOOLS]", NULL);
}

/* `tool_call.function|tojson` without its closing brace, then the id. */
static int mistral_calls(const tram_chat_template *ct, const tram_chat_msg *m, tram_strbuf *b, tram_error *err)
{
    tram_strbuf_cat(b, "[TOOL_CALLS] [", NULL);
    for (int k = 0; k < m->num_tool_calls; k++) {
        const tram_chat_tool_call *c = &m->tool_calls[k];
        tram_strbuf_cat(b, "{\"name\": ", NULL);
        json_t *name = json_string(c->name);
        tram_pyjson_put(b, name, -1);
        json_decref(name);
        tram_strbuf_cat(b, ", \"arguments\": ", NULL);
        tram_pyjson_put(b, c->arguments, -1);
        if (!c->id || tram_text_py_len(c->id) != 9)
            return tram_fail(err, "%s", mistral_id_error);
        tram_strbuf_cat(b, ", \"id\": \"", c->id, "\"}", k + 1 < m->num_tool_calls ? ", " : "]", NULL);
    }
    tram_strbuf_cat(b, ct->eos, NULL);
    return 0;
}

/* Roles alternate, tool calls and results aside. */
static int mistral_check_roles(const tram_chat_msg *m, int n, tram_error *err)
{
    int index = 0;
    for (int i = 0; i < n; i++) {
        if (is_tool_result(&m[i]) || tram_chat_is_role(&m[i], "tool_results") || m[i].num_tool_calls)
            continue;
        if (tram_chat_is_role(&m[i], "user") != (index % 2 == 0))
            return tram_fail(err, "chat template: After the optional system message, conversation roles must "
                                  "alternate user/assistant/user/assistant/...");
        index++;
    }
    return 0;
}

/* Jinja compares the messages as dicts: equal role and content. */
static int same_message(const tram_chat_msg *a, const tram_chat_msg *b)
{
    return b && !strcmp(a->role, b->role) && !strcmp(a->content, b->content) && !a->num_tool_calls &&
           !b->num_tool_calls;
}

static int mistral_message(const tram_chat_template *ct, const tram_chat_msg *m, int last, const char *system,
                           tram_strbuf *b, tram_error *err)
{
    if (tram_chat_is_role(m, "user")) {
        if (last && system)
            tram_strbuf_cat(b, "[INST] ", system, "\n\n", m->content, "[/INST]", NULL);
        else
            tram_strbuf_cat(b, "[INST] ", m->content, "[/INST]", NULL);
    } else if (m->num_tool_calls) {
        return mistral_calls(ct, m, b, err);
    } else if (tram_chat_is_role(m, "assistant")) {
        tram_strbuf_cat(b, " ", NULL);
        tram_text_put_stripped(b, m->content);
        tram_strbuf_cat(b, ct->eos, NULL);
    } else if (is_tool_result(m) || tram_chat_is_role(m, "tool_results")) {
        tram_strbuf_cat(b, "[TOOL_RESULTS] {\"content\": ", m->content, ", ", NULL);
        if (!m->tool_call_id || tram_text_py_len(m->tool_call_id) != 9)
            return tram_fail(err, "%s", mistral_id_error);
        tram_strbuf_cat(b, "\"call_id\": \"", m->tool_call_id, "\"}[/TOOL_RESULTS]", NULL);
    } else {
        return tram_fail(err, "chat template: Only user and assistant roles are supported, with the exception of an "
                              "initial optional system message!");
    }
    return 0;
}

int tram_chat_render_mistral_tools(const tram_chat_template *ct, const tram_chat_msg *m, int n,
                                   const json_t *tools, tram_strbuf *b, tram_error *err)
{
    const char *system = NULL;
    if (n && tram_chat_is_role(&m[0], "system")) {
        system = m[0].content;
        m++;
        n--;
    }
    const tram_chat_msg *last_user = NULL;
    for (int i = 0; i < n; i++)
        if (tram_chat_is_role(&m[i], "user"))
            last_user = &m[i];
    if (mistral_check_roles(m, n, err))
        return -1;
    tram_strbuf_cat(b, ct->bos, NULL);
    for (int i = 0; i < n; i++) {
        if (tools && tram_chat_is_role(&m[i], "user") && same_message(&m[i], last_user))
            mistral_tools(tools, b);
        if (mistral_message(ct, &m[i], i == n - 1, system, b, err))
            return -1;
    }
    return 0;
}

/* ---- tram's generic format ---- */

static int has_system_role(tram_chat_family f)
{
    return f != TRAM_CHAT_GEMMA && f != TRAM_CHAT_MISTRAL;
}

static char *calls_text(const tram_chat_msg *m)
{
    tram_strbuf b = {0};
    tram_strbuf_cat(&b, m->content, NULL);
    for (int k = 0; k < m->num_tool_calls; k++) {
        tram_strbuf_cat(&b, k || *m->content ? "\n" : "", NULL);
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
        tram_strbuf_cat(&b, k > i ? "\n" : "", "<tool_response>\n", m[k].content, "\n</tool_response>", NULL);
    *used = k - i;
    return tram_strbuf_take(&b);
}

/* The tool list joins the system prompt (or the template's default one),
 * or the first user message where the family has no system role. */
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
    int in_system = tools && has_system_role(ct->family), in_user = tools && !in_system;
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
            rc = add_plain(o, &k, "user", with_tools(m[i].content, tools, 1));
            in_user = 0;
        } else {
            rc = add_plain(o, &k, m[i].role, strdup(m[i].content));
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
