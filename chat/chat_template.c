/* chat_template.c — see chat_template.h.  The template renders through the
 * Jinja interpreter with the variables transformers' apply_chat_template
 * gives it (messages, tools, documents, add_generation_prompt, bos_token,
 * eos_token, and date_string when set). */
#include "chat/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_impl.h"

/* What tram uses when the model has no template (or one it cannot parse)
 * and the ChatML fallback was asked for. */
static const char chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

tram_chat_family tram_chat_template_family(const tram_chat_template *ct)
{
    return ct->family;
}

const char *tram_chat_template_warning(const tram_chat_template *ct)
{
    return ct->warning;
}

tram_tool_format tram_chat_template_tool_format(const tram_chat_template *ct)
{
    return ct->tool_format;
}

void tram_chat_template_set_date(tram_chat_template *ct, const char *date)
{
    snprintf(ct->date, sizeof(ct->date), "%s", date);
}

void tram_chat_template_set_clock(tram_chat_template *ct, long long now)
{
    ct->clock = now;
}

void tram_chat_template_free(tram_chat_template *ct)
{
    if (!ct)
        return;
    tram_jinja_free(ct->jinja);
    TRAM_FREE_ALL(ct->bos, ct->eos, ct->default_system, ct);
}

/* ---- rendering ---- */

/* A message as the template sees it: the keys an OpenAI request has, in its
 * order; arguments as the JSON value they hold, as vLLM passes them. */
static json_t *message_json(const tram_chat_msg *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "role", json_string(m->role));
    if (m->tool_call_id)
        json_object_set_new(o, "tool_call_id", json_string(m->tool_call_id));
    json_object_set_new(o, "content", m->content ? json_string(m->content) : json_null());
    if (m->num_tool_calls) {
        json_t *calls = json_array();
        for (int k = 0; k < m->num_tool_calls; k++) {
            const tram_chat_tool_call *c = &m->tool_calls[k];
            json_t *fn = json_pack("{s:s?,s:O?}", "name", c->name, "arguments", c->arguments);
            json_t *call = json_pack("{s:s?,s:s,s:o?}", "id", c->id, "type", "function", "function", fn);
            json_array_append_new(calls, call);
        }
        json_object_set_new(o, "tool_calls", calls);
    }
    return o;
}

/* kwargs's members join vars; one that tram sets is an error. */
static int add_kwargs(json_t *vars, const json_t *kwargs, tram_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)kwargs, key, value) {
        if (tram_chat_template_sets(key))
            return tram_fail(err, "chat template: '%s' is set by tram and cannot be a template argument", key);
        json_object_set(vars, key, value);
    }
    return 0;
}

static int render_messages(const tram_chat_template *ct, const tram_chat_conversation *c, char **out, tram_error *err)
{
    json_t *messages = json_array();
    for (int i = 0; i < c->n; i++)
        json_array_append_new(messages, message_json(&c->msgs[i]));
    json_t *vars = json_pack("{s:o,s:O,s:n,s:b,s:s,s:s}", "messages", messages, "tools",
                             c->tools ? c->tools : json_null(), "documents", "add_generation_prompt",
                             c->ending == TRAM_CHAT_OPEN_ASSISTANT, "bos_token", ct->bos, "eos_token", ct->eos);
    if (!vars)
        return tram_fail(err, "chat template: a message is not valid UTF-8, or out of memory");
    if (ct->date[0])
        json_object_set_new(vars, "date_string", json_string(ct->date));
    if (c->kwargs && add_kwargs(vars, c->kwargs, err)) {
        json_decref(vars);
        return -1;
    }
    int rc = tram_jinja_render(ct->jinja, vars, ct->clock ? ct->clock : (long long)time(NULL), out, err);
    json_decref(vars);
    return rc;
}

static int has_tool_parts(const tram_chat_msg *m, int n)
{
    for (int i = 0; i < n; i++)
        if (m[i].num_tool_calls || tram_chat_is_role(&m[i], "tool"))
            return 1;
    return 0;
}

/* Renders a conversation whose ending is not CONTINUE_LAST. */
static int render_ending(const tram_chat_template *ct, const tram_chat_conversation *c, char **out, tram_error *err)
{
    *out = NULL;
    for (int i = 0; i < c->n; i++)
        if (!c->msgs[i].role)
            return tram_fail(err, "chat template: message %d has no role", i);
    if (c->tools && (!json_is_array(c->tools) || json_array_size(c->tools) == 0))
        return tram_fail(err, "chat template: tools must be a non-empty array");
    int tool_parts = c->tools || has_tool_parts(c->msgs, c->n);
    if (tool_parts && ct->tool_format == TRAM_TOOLS_UNSUPPORTED)
        return tram_fail(err, "chat template: the model's template writes tool calls in a syntax tram cannot parse "
                              "(it parses Hermes <tool_call>, Llama 3 JSON and Mistral [TOOL_CALLS] calls), so this "
                              "model cannot take tools or tool calls");
    if (!tool_parts || ct->tool_format != TRAM_TOOLS_GENERIC)
        return render_messages(ct, c, out, err);
    tram_chat_conversation plain = *c;
    tram_chat_msg *plain_msgs;
    if (tram_chat_generic(ct, c->msgs, c->n, c->tools, &plain_msgs, &plain.n, err))
        return -1;
    plain.msgs = plain_msgs;
    plain.tools = NULL;
    int rc = render_messages(ct, &plain, out, err);
    tram_chat_generic_free(plain_msgs, plain.n);
    return rc;
}

/* transformers' continue_final_message: the last message's content gets a
 * tag, the conversation is rendered without a generation prompt, and the
 * text is cut where the tag is (and trailing space trimmed where the
 * template trimmed the tag's own). */
#define CONTINUE_TAG "CONTINUE_FINAL_MESSAGE_TAG "

/* Cuts text at the last tag; -1 when the template left none. */
static int cut_at_continue_tag(char *text)
{
    const char *word = "CONTINUE_FINAL_MESSAGE_TAG";
    char *tag = NULL;
    for (char *at = strstr(text, word); at; at = strstr(at + 1, word))
        tag = at;
    if (!tag)
        return -1;
    if (strncmp(tag, CONTINUE_TAG, strlen(CONTINUE_TAG)))  /* the template trimmed the space after it */
        while (tag > text && strchr(" \t\n\r\f\v", tag[-1]))
            tag--;
    *tag = 0;
    return 0;
}

static int render_continued(const tram_chat_template *ct, const tram_chat_conversation *c, char **out,
                            tram_error *err)
{
    int n = c->n;
    if (n == 0)
        return tram_fail(err, "chat template: continue_final_message is set but the conversation is empty");
    tram_chat_msg *copy = malloc((size_t)n * sizeof(*copy));
    tram_strbuf last = {0};
    tram_strbuf_addf(&last, "%s" CONTINUE_TAG, c->msgs[n - 1].content ? c->msgs[n - 1].content : "");
    int rc = !copy || !last.s ? tram_fail(err, "chat template: out of memory") : 0;
    if (!rc) {
        memcpy(copy, c->msgs, (size_t)n * sizeof(*copy));
        copy[n - 1].content = last.s;
        tram_chat_conversation tagged = *c;
        tagged.msgs = copy;
        tagged.ending = TRAM_CHAT_END_TURN;
        rc = render_ending(ct, &tagged, out, err);
    }
    free(copy);
    free(last.s);
    if (rc || !cut_at_continue_tag(*out))
        return rc;
    free(*out);
    *out = NULL;
    return tram_fail(err, "chat template: continue_final_message is set but the final message does not appear in "
                          "the rendered conversation (the template drops or rewrites it)");
}

int tram_chat_template_render(const tram_chat_template *ct, const tram_chat_conversation *c, char **out,
                              tram_error *err)
{
    *out = NULL;
    if (c->ending == TRAM_CHAT_CONTINUE_LAST)
        return render_continued(ct, c, out, err);
    return render_ending(ct, c, out, err);
}

/* ---- what the template is ---- */

static tram_chat_family detect(const char *s)
{
    if (strstr(s, "<|im_start|>"))
        return TRAM_CHAT_CHATML;
    if (strstr(s, "<|start_header_id|>"))
        return TRAM_CHAT_LLAMA3;
    if (strstr(s, "<start_of_turn>"))
        return TRAM_CHAT_GEMMA;
    if (strstr(s, "<|user|>") && strstr(s, "<|end|>"))
        return TRAM_CHAT_PHI3;
    if (strstr(s, "[INST]") && strstr(s, "<<SYS>>"))
        return TRAM_CHAT_LLAMA2;
    if (strstr(s, "[INST]"))
        return TRAM_CHAT_MISTRAL;
    return TRAM_CHAT_OTHER;
}

/* The start of a literal system prompt after the "<|im_start|>system" at
 * p, or NULL: the newline is either in the file or a \n escape of the Jinja
 * string, and a literal, unlike '...\n' + messages[0]['content'], goes on
 * up to <|im_end|> inside the same string. */
static const char *literal_system(const char *p)
{
    p += strlen("<|im_start|>system");
    if (*p == '\n')
        p++;
    else if (!strncmp(p, "\\n", 2))
        p += 2;
    else
        return NULL;
    const char *end = strstr(p, "<|im_end|>");
    return end && end > p && !memchr(p, '\'', (size_t)(end - p)) ? p : NULL;
}

/* The default system prompt of a ChatML template that adds one when the
 * conversation has none (SmolLM2's "!= 'system'", Qwen2.5's else branch),
 * with the Jinja string escapes undone; NULL when there is none.  tram's
 * generic tool format puts the tool list after it. */
static char *default_system(const char *s)
{
    const char *p = NULL;
    if (strstr(s, "!= 'system'") || strstr(s, "== 'system'"))
        for (const char *q = strstr(s, "<|im_start|>system"); q && !p; q = strstr(q + 1, "<|im_start|>system"))
            p = literal_system(q);
    if (!p)
        return NULL;
    const char *end = strstr(p, "<|im_end|>");
    char *out = malloc((size_t)(end - p) + 1), *o = out;
    if (!out)
        return NULL;
    for (; p < end; p++) {
        if (*p == '\\' && p + 1 < end) {
            p++;
            *o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

/* Whether the template renders a system message: it neither refuses one
 * (Gemma, Mistral v0.1) nor drops it. */
static int takes_system(const tram_chat_template *ct)
{
    static const char probe[] = "tram-probe-system-prompt";
    const tram_chat_msg m[] = {{.role = "system", .content = probe}, {.role = "user", .content = "Hi"}};
    const tram_chat_conversation c = {.msgs = m, .n = 2, .ending = TRAM_CHAT_OPEN_ASSISTANT};
    char *out;
    if (render_messages(ct, &c, &out, NULL))
        return 0;
    int found = strstr(out, probe) != NULL;
    free(out);
    return found;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\n')
        s++;
    return s;
}

/* Whether text holds open, then body (space around it allowed), then close
 * (NULL: anything may follow the body). */
static int written_as(const char *text, const char *open, const char *body, const char *close)
{
    for (const char *p = strstr(text, open); p; p = strstr(p + 1, open)) {
        const char *q = skip_space(p + strlen(open));
        if (!strncmp(q, body, strlen(body)) && (!close || !strncmp(skip_space(q + strlen(body)), close, strlen(close))))
            return 1;
    }
    return 0;
}

/* The syntax the template writes a tool call in, from a probe render of a
 * conversation with one call and its result; GENERIC when it does not read
 * `tools` at all. */
static tram_tool_format call_syntax(const tram_chat_template *ct)
{
    if (!tram_jinja_uses(ct->jinja, "tools"))
        return TRAM_TOOLS_GENERIC;
    json_t *args = json_pack("{s:i}", "probe_arg", 1);
    json_t *tools = json_pack("[{s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s}}}}}]", "type", "function", "function", "name",
                              "probe_fn", "description", "A probe.", "parameters", "type", "object", "properties",
                              "probe_arg", "type", "integer");
    const tram_chat_tool_call call = {.id = "a1B2c3D4e", .name = "probe_fn", .arguments = args};
    const tram_chat_msg m[] = {{.role = "user", .content = "Probe?"},
                               {.role = "assistant", .content = "", .tool_calls = &call, .num_tool_calls = 1},
                               {.role = "tool", .content = "1", .tool_call_id = "a1B2c3D4e"}};
    const tram_chat_conversation c = {.msgs = m, .n = 3, .tools = tools, .ending = TRAM_CHAT_OPEN_ASSISTANT};
    char *out = NULL;
    tram_tool_format f = TRAM_TOOLS_UNSUPPORTED;
    if (args && tools && !render_messages(ct, &c, &out, NULL)) {
        if (written_as(out, "<tool_call>", "{\"name\": \"probe_fn\", \"arguments\": {\"probe_arg\": 1}}", "</tool_call>"))
            f = TRAM_TOOLS_HERMES;
        else if (written_as(out, "<|start_header_id|>assistant<|end_header_id|>",
                            "{\"name\": \"probe_fn\", \"parameters\": {\"probe_arg\": 1}}", "<|eot_id|>"))
            f = TRAM_TOOLS_LLAMA3;
        else if (written_as(out, "[TOOL_CALLS]", "[{\"name\": \"probe_fn\", \"arguments\": {\"probe_arg\": 1}", NULL))
            f = TRAM_TOOLS_MISTRAL;
    }
    free(out);
    json_decref(args);
    json_decref(tools);
    return f;
}

static int init(tram_chat_template *ct, const char *tmpl, int fallback_chatml, tram_error *err)
{
    if (!tmpl) {
        if (!fallback_chatml)
            return tram_fail(err, "chat template: the model has none; pass the ChatML fallback option to use ChatML");
        ct->warning = "model has no chat template: using ChatML";
    } else if (tram_jinja_parse(&ct->jinja, tmpl, err)) {
        if (!fallback_chatml)
            return -1;
        ct->warning = "the chat template cannot be parsed: using ChatML";
    }
    if (!ct->jinja && tram_jinja_parse(&ct->jinja, chatml, err))
        return -1;
    const char *text = ct->warning ? chatml : tmpl;
    ct->family = detect(text);
    if (ct->family == TRAM_CHAT_CHATML)
        ct->default_system = default_system(text);
    ct->has_system = takes_system(ct);
    ct->tool_format = call_syntax(ct);
    if (ct->tool_format == TRAM_TOOLS_UNSUPPORTED)
        ct->warning = "the chat template writes tool calls in a syntax tram cannot parse: requests with tools get a 400";
    return 0;
}

int tram_chat_template_create(tram_chat_template **out, const char *tmpl, const char *bos, const char *eos,
                              int fallback_chatml, tram_error *err)
{
    *out = NULL;
    tram_chat_template *ct = tram_calloc(1, sizeof(*ct), err);
    if (!ct)
        return -1;
    ct->bos = strdup(bos ? bos : "");
    ct->eos = strdup(eos ? eos : "");
    if (!ct->bos || !ct->eos) {
        tram_chat_template_free(ct);
        return tram_fail(err, "chat template: out of memory");
    }
    if (init(ct, tmpl, fallback_chatml, err)) {
        tram_chat_template_free(ct);
        return -1;
    }
    *out = ct;
    return 0;
}

int tram_chat_template_for(tram_chat_template **out, const tram_tokenizer *t, const char *tmpl, int fallback_chatml,
                           tram_error *err)
{
    int32_t bos = tram_tokenizer_bos(t), eos = tram_tokenizer_eos(t);
    return tram_chat_template_create(out, tmpl ? tmpl : tram_tokenizer_chat_template(t), bos >= 0 ? tram_tokenizer_piece(t, bos) : "",
                                     eos >= 0 ? tram_tokenizer_piece(t, eos) : "", fallback_chatml, err);
}
