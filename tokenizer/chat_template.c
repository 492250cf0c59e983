/* chat_template.c — see chat_template.h.  Each family's renderer follows its
 * Jinja template line by line; `strip` is Python's str.strip(), which is
 * what Jinja's trim filter and .strip() call. */
#include "tokenizer/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_impl.h"


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

void tram_chat_template_free(tram_chat_template *ct)
{
    if (!ct)
        return;
    free(ct->bos);
    free(ct->eos);
    free(ct->default_system);
    free(ct);
}

/* ---- recognising a template ---- */

static int detect(const char *s, tram_chat_family *f)
{
    if (strstr(s, "<|im_start|>"))
        *f = TRAM_CHAT_CHATML;
    else if (strstr(s, "<|start_header_id|>"))
        *f = TRAM_CHAT_LLAMA3;
    else if (strstr(s, "<start_of_turn>"))
        *f = TRAM_CHAT_GEMMA;
    else if (strstr(s, "<|user|>") && strstr(s, "<|end|>"))
        *f = TRAM_CHAT_PHI3;
    else if (strstr(s, "[INST]") && strstr(s, "<<SYS>>"))
        *f = TRAM_CHAT_LLAMA2;
    else if (strstr(s, "[INST]"))
        *f = TRAM_CHAT_MISTRAL;
    else
        return -1;
    return 0;
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
 * with the Jinja string escapes undone; NULL when there is none. */
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

/* The tool format the template writes, recognised by what only it says.
 * Qwen3's template (reasoning, multi-step tool turns) also writes
 * <tool_call>, but renders differently: it gets the generic format. */
static tram_tool_format tool_format(const char *s, tram_chat_family f)
{
    if (f == TRAM_CHAT_CHATML && strstr(s, "<tool_call>") && strstr(s, "<tools></tools> XML tags") &&
        !strstr(s, "multi_step_tool") && !strstr(s, "reasoning_content"))
        return TRAM_TOOLS_HERMES;
    if (f == TRAM_CHAT_LLAMA3 && strstr(s, "Cutting Knowledge Date"))
        return TRAM_TOOLS_LLAMA3;
    if (f == TRAM_CHAT_MISTRAL && strstr(s, "[AVAILABLE_TOOLS]"))
        return TRAM_TOOLS_MISTRAL;
    return TRAM_TOOLS_GENERIC;
}

int tram_chat_template_create(tram_chat_template **out, const char *tmpl, const char *bos, const char *eos,
                              int fallback_chatml, tram_error *err)
{
    *out = NULL;
    tram_chat_family f = TRAM_CHAT_CHATML;
    int known = tmpl && !detect(tmpl, &f);
    if (!known && !fallback_chatml)
        return tram_fail(err, tmpl ? "chat template: not a family tram knows (ChatML, Llama-2, Llama-3, Mistral, "
                                     "Gemma, Phi-3); pass the ChatML fallback option to use ChatML anyway"
                                   : "chat template: the model has none; pass the ChatML fallback option to use ChatML");
    tram_chat_template *ct = tram_calloc(1, sizeof(*ct), err);
    if (!ct)
        return -1;
    *ct = (tram_chat_template){.family = f, .bos = strdup(bos ? bos : ""), .eos = strdup(eos ? eos : "")};
    if (!ct->bos || !ct->eos) {
        tram_chat_template_free(ct);
        return tram_fail(err, "chat template: out of memory");
    }
    if (known) {
        const char *lead = tmpl + strspn(tmpl, " \t\r\n");
        ct->leading_bos = !strncmp(lead, "{{ bos_token }}", 15) || !strncmp(lead, "{{bos_token}}", 13);
        ct->eos_space = strstr(tmpl, "eos_token + ' '") != NULL;
        if (f == TRAM_CHAT_CHATML)
            ct->default_system = default_system(tmpl);
        ct->tool_format = tool_format(tmpl, f);
        ct->date_from_clock = strstr(tmpl, "strftime_now") != NULL;
    } else {
        ct->warning = tmpl ? "unrecognised chat template: using ChatML" : "model has no chat template: using ChatML";
    }
    *out = ct;
    return 0;
}

int tram_chat_template_for(tram_chat_template **out, const tram_tokenizer *t, int fallback_chatml, tram_error *err)
{
    int32_t bos = tram_tokenizer_bos(t), eos = tram_tokenizer_eos(t);
    return tram_chat_template_create(out, tram_tokenizer_chat_template(t), bos >= 0 ? tram_tokenizer_piece(t, bos) : "",
                                     eos >= 0 ? tram_tokenizer_piece(t, eos) : "", fallback_chatml, err);
}

/* ---- the families ---- */

/* Templates that raise unless user and assistant turns alternate, user first. */
static int check_alternation(const tram_chat_msg *msgs, int n, tram_error *err)
{
    for (int i = 0; i < n; i++)
        if (tram_chat_is_role(&msgs[i], "user") != (i % 2 == 0))
            return tram_fail(err, "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
    return 0;
}

static int render_chatml(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, tram_strbuf *b)
{
    if (n && ct->default_system && !tram_chat_is_role(&m[0], "system"))
        tram_strbuf_cat(b, "<|im_start|>system\n", ct->default_system, "<|im_end|>\n", NULL);
    for (int i = 0; i < n; i++)
        tram_strbuf_cat(b, "<|im_start|>", m[i].role, "\n", m[i].content, "<|im_end|>\n", NULL);
    if (gen)
        tram_strbuf_cat(b, "<|im_start|>assistant\n", NULL);
    return 0;
}

static int render_llama2(const tram_chat_template *ct, const tram_chat_msg *m, int n, tram_strbuf *b, tram_error *err)
{
    const char *sys = n && tram_chat_is_role(&m[0], "system") ? m[0].content : NULL;
    if (sys) {
        m++;
        n--;
    }
    if (check_alternation(m, n, err))
        return -1;
    for (int i = 0; i < n; i++) {
        tram_strbuf content = {0};
        if (i == 0 && sys)
            tram_strbuf_cat(&content, "<<SYS>>\n", sys, "\n<</SYS>>\n\n", NULL);
        tram_strbuf_cat(&content, m[i].content, NULL);
        if (tram_chat_is_role(&m[i], "user")) {
            tram_strbuf_cat(b, ct->bos, "[INST] ", NULL);
            tram_text_put_stripped(b, content.s);
            tram_strbuf_cat(b, " [/INST]", NULL);
        } else if (tram_chat_is_role(&m[i], "assistant")) {
            tram_strbuf_cat(b, " ", NULL);
            tram_text_put_stripped(b, content.s);
            tram_strbuf_cat(b, " ", ct->eos, NULL);
        }
        b->oom |= content.oom;
        free(content.s);
    }
    return 0;
}

static int render_llama3(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, tram_strbuf *b)
{
    for (int i = 0; i < n; i++) {
        tram_strbuf_cat(b, i == 0 ? ct->bos : "", "<|start_header_id|>", m[i].role, "<|end_header_id|>\n\n", NULL);
        tram_text_put_stripped(b, m[i].content);
        tram_strbuf_cat(b, "<|eot_id|>", NULL);
    }
    if (gen)
        tram_strbuf_cat(b, "<|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
    return 0;
}

static int render_mistral(const tram_chat_template *ct, const tram_chat_msg *m, int n, tram_strbuf *b, tram_error *err)
{
    tram_strbuf_cat(b, ct->bos, NULL);
    for (int i = 0; i < n; i++) {
        if (tram_chat_is_role(&m[i], "user") != (i % 2 == 0))
            return check_alternation(m, n, err);
        if (tram_chat_is_role(&m[i], "user"))
            tram_strbuf_cat(b, "[INST] ", m[i].content, " [/INST]", NULL);
        else if (tram_chat_is_role(&m[i], "assistant"))
            tram_strbuf_cat(b, m[i].content, ct->eos, ct->eos_space ? " " : "", NULL);
        else
            return tram_fail(err, "chat template: Only user and assistant roles are supported!");
    }
    return 0;
}

static int render_gemma(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, tram_strbuf *b, tram_error *err)
{
    if (n && tram_chat_is_role(&m[0], "system"))
        return tram_fail(err, "chat template: System role not supported");
    if (check_alternation(m, n, err))
        return -1;
    tram_strbuf_cat(b, ct->leading_bos ? ct->bos : "", NULL);
    for (int i = 0; i < n; i++) {
        tram_strbuf_cat(b, "<start_of_turn>", tram_chat_is_role(&m[i], "assistant") ? "model" : m[i].role, "\n", NULL);
        tram_text_put_stripped(b, m[i].content);
        tram_strbuf_cat(b, "<end_of_turn>\n", NULL);
    }
    if (gen)
        tram_strbuf_cat(b, "<start_of_turn>model\n", NULL);
    return 0;
}

static int render_phi3(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, tram_strbuf *b)
{
    tram_strbuf_cat(b, ct->leading_bos ? ct->bos : "", NULL);
    for (int i = 0; i < n; i++)
        if (tram_chat_is_role(&m[i], "system") || tram_chat_is_role(&m[i], "user") || tram_chat_is_role(&m[i], "assistant"))
            tram_strbuf_cat(b, "<|", m[i].role, "|>\n", m[i].content, "<|end|>\n", NULL);
    tram_strbuf_cat(b, gen ? "<|assistant|>\n" : ct->eos, NULL);
    return 0;
}

/* The families as their templates render plain messages. */
static int render_plain(const tram_chat_template *ct, const tram_chat_msg *msgs, int n, int gen, tram_strbuf *b,
                        tram_error *err)
{
    switch (ct->family) {
    case TRAM_CHAT_CHATML: return render_chatml(ct, msgs, n, gen, b);
    case TRAM_CHAT_LLAMA2: return render_llama2(ct, msgs, n, b, err);
    case TRAM_CHAT_LLAMA3: return render_llama3(ct, msgs, n, gen, b);
    case TRAM_CHAT_MISTRAL: return render_mistral(ct, msgs, n, b, err);
    case TRAM_CHAT_GEMMA: return render_gemma(ct, msgs, n, gen, b, err);
    case TRAM_CHAT_PHI3: return render_phi3(ct, msgs, n, gen, b);
    }
    return 0;
}

static int has_tool_parts(const tram_chat_msg *m, int n)
{
    for (int i = 0; i < n; i++)
        if (m[i].num_tool_calls || tram_chat_is_role(&m[i], "tool"))
            return 1;
    return 0;
}

/* Templates without a tool format of their own render tram's generic one:
 * the conversation rewritten into plain messages. */
static int render_generic(const tram_chat_template *ct, const tram_chat_msg *msgs, int n, const json_t *tools,
                          int gen, tram_strbuf *b, tram_error *err)
{
    if (!tools && !has_tool_parts(msgs, n))
        return render_plain(ct, msgs, n, gen, b, err);
    tram_chat_msg *plain;
    int n_plain;
    if (tram_chat_generic(ct, msgs, n, tools, &plain, &n_plain, err))
        return -1;
    int rc = render_plain(ct, plain, n_plain, gen, b, err);
    tram_chat_generic_free(plain, n_plain);
    return rc;
}

int tram_chat_template_render_tools(const tram_chat_template *ct, const tram_chat_msg *msgs, int n,
                                    const json_t *tools, int gen, char **out, tram_error *err)
{
    *out = NULL;
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return tram_fail(err, "chat template: message %d has no %s", i, msgs[i].role ? "content" : "role");
    if (tools && (!json_is_array(tools) || json_array_size(tools) == 0))
        return tram_fail(err, "chat template: tools must be a non-empty array");
    tram_strbuf b = {0};
    int rc = 0;
    tram_strbuf_add(&b, "", 0);
    switch (ct->tool_format) {
    case TRAM_TOOLS_GENERIC: rc = render_generic(ct, msgs, n, tools, gen, &b, err); break;
    case TRAM_TOOLS_HERMES: rc = tram_chat_render_qwen(ct, msgs, n, tools, gen, &b); break;
    case TRAM_TOOLS_LLAMA3: rc = tram_chat_render_llama31(ct, msgs, n, tools, gen, &b, err); break;
    case TRAM_TOOLS_MISTRAL: rc = tram_chat_render_mistral_tools(ct, msgs, n, tools, &b, err); break;
    }
    if (!rc && b.oom)
        rc = tram_fail(err, "chat template: out of memory");
    if (rc) {
        free(b.s);
        return -1;
    }
    *out = b.s;
    return 0;
}

int tram_chat_template_render(const tram_chat_template *ct, const tram_chat_msg *msgs, int n, int gen, char **out,
                              tram_error *err)
{
    return tram_chat_template_render_tools(ct, msgs, n, NULL, gen, out, err);
}
