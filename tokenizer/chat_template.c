/* chat_template.c — see chat_template.h.  Each family's renderer follows its
 * Jinja template line by line; `strip` is Python's str.strip(), which is
 * what Jinja's trim filter and .strip() call. */
#include "tokenizer/chat_template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tram_chat_template {
    tram_chat_family family;
    char *bos, *eos;
    char *default_system;   /* ChatML: added when the first message is not a system one */
    int leading_bos;        /* the template starts with {{ bos_token }} */
    int eos_space;          /* Mistral v0.1: eos_token + ' ' */
    const char *warning;
};

tram_chat_family tram_chat_template_family(const tram_chat_template *ct)
{
    return ct->family;
}

const char *tram_chat_template_warning(const tram_chat_template *ct)
{
    return ct->warning;
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

/* The default system prompt of a ChatML template that adds one when the
 * conversation has none ('<|im_start|>system\n...<|im_end|>' as a literal),
 * with the Jinja string escapes undone; NULL when there is none. */
static char *default_system(const char *s)
{
    const char *open = "<|im_start|>system";
    const char *p = strstr(s, "!= 'system'") ? strstr(s, open) : NULL;
    if (!p)
        return NULL;
    p += strlen(open);
    /* The newline is either in the file or a \n escape of the Jinja string. */
    if (*p == '\n')
        p++;
    else if (!strncmp(p, "\\n", 2))
        p += 2;
    else
        return NULL;
    const char *end = strstr(p, "<|im_end|>");
    if (!end)
        return NULL;
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

/* ---- the output string ---- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = TRAM_MAX(2 * b->cap, b->n + n + 256);
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

/* Appends each string argument in turn (NULL ends the list). */
static void cat(sbuf *b, ...)
{
    va_list ap;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *));)
        put(b, s, strlen(s));
    va_end(ap);
}

/* Length of a Python whitespace character (str.isspace) at s, or 0. */
static int py_space(const unsigned char *s)
{
    if ((*s >= 0x09 && *s <= 0x0d) || (*s >= 0x1c && *s <= 0x20))
        return 1;
    if (s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
        return 3;   /* U+1680 */
    if (s[0] == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3;   /* U+2000..200A, 2028, 2029, 202F */
    if ((s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) || (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80))
        return 3;   /* U+205F, U+3000 */
    return 0;
}

/* Appends s without leading and trailing whitespace. */
static void put_stripped(sbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s), *last = p;
    for (int k; *p && (k = py_space(p)); p += k) {
    }
    for (const unsigned char *q = p; q < end;) {
        int k = py_space(q);
        if (!k) {   /* step over one whole character */
            q++;
            while (q < end && (*q & 0xc0) == 0x80)
                q++;
            last = q;
        } else {
            q += k;
        }
    }
    if (last > p)
        put(b, (const char *)p, (size_t)(last - p));
}

/* ---- the families ---- */

static int is_role(const tram_chat_msg *m, const char *role)
{
    return !strcmp(m->role, role);
}

/* Templates that raise unless user and assistant turns alternate, user first. */
static int check_alternation(const tram_chat_msg *msgs, int n, tram_error *err)
{
    for (int i = 0; i < n; i++)
        if (is_role(&msgs[i], "user") != (i % 2 == 0))
            return tram_fail(err, "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
    return 0;
}

static int render_chatml(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, sbuf *b)
{
    if (n && ct->default_system && !is_role(&m[0], "system"))
        cat(b, "<|im_start|>system\n", ct->default_system, "<|im_end|>\n", NULL);
    for (int i = 0; i < n; i++)
        cat(b, "<|im_start|>", m[i].role, "\n", m[i].content, "<|im_end|>\n", NULL);
    if (gen)
        cat(b, "<|im_start|>assistant\n", NULL);
    return 0;
}

static int render_llama2(const tram_chat_template *ct, const tram_chat_msg *m, int n, sbuf *b, tram_error *err)
{
    const char *sys = n && is_role(&m[0], "system") ? m[0].content : NULL;
    if (sys) {
        m++;
        n--;
    }
    if (check_alternation(m, n, err))
        return -1;
    for (int i = 0; i < n; i++) {
        sbuf content = {0};
        if (i == 0 && sys)
            cat(&content, "<<SYS>>\n", sys, "\n<</SYS>>\n\n", NULL);
        cat(&content, m[i].content, NULL);
        if (is_role(&m[i], "user")) {
            cat(b, ct->bos, "[INST] ", NULL);
            put_stripped(b, content.s);
            cat(b, " [/INST]", NULL);
        } else if (is_role(&m[i], "assistant")) {
            cat(b, " ", NULL);
            put_stripped(b, content.s);
            cat(b, " ", ct->eos, NULL);
        }
        b->oom |= content.oom;
        free(content.s);
    }
    return 0;
}

static int render_llama3(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, sbuf *b)
{
    for (int i = 0; i < n; i++) {
        cat(b, i == 0 ? ct->bos : "", "<|start_header_id|>", m[i].role, "<|end_header_id|>\n\n", NULL);
        put_stripped(b, m[i].content);
        cat(b, "<|eot_id|>", NULL);
    }
    if (gen)
        cat(b, "<|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
    return 0;
}

static int render_mistral(const tram_chat_template *ct, const tram_chat_msg *m, int n, sbuf *b, tram_error *err)
{
    cat(b, ct->bos, NULL);
    for (int i = 0; i < n; i++) {
        if (is_role(&m[i], "user") != (i % 2 == 0))
            return check_alternation(m, n, err);
        if (is_role(&m[i], "user"))
            cat(b, "[INST] ", m[i].content, " [/INST]", NULL);
        else if (is_role(&m[i], "assistant"))
            cat(b, m[i].content, ct->eos, ct->eos_space ? " " : "", NULL);
        else
            return tram_fail(err, "chat template: Only user and assistant roles are supported!");
    }
    return 0;
}

static int render_gemma(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, sbuf *b, tram_error *err)
{
    if (n && is_role(&m[0], "system"))
        return tram_fail(err, "chat template: System role not supported");
    if (check_alternation(m, n, err))
        return -1;
    cat(b, ct->leading_bos ? ct->bos : "", NULL);
    for (int i = 0; i < n; i++) {
        cat(b, "<start_of_turn>", is_role(&m[i], "assistant") ? "model" : m[i].role, "\n", NULL);
        put_stripped(b, m[i].content);
        cat(b, "<end_of_turn>\n", NULL);
    }
    if (gen)
        cat(b, "<start_of_turn>model\n", NULL);
    return 0;
}

static int render_phi3(const tram_chat_template *ct, const tram_chat_msg *m, int n, int gen, sbuf *b)
{
    cat(b, ct->leading_bos ? ct->bos : "", NULL);
    for (int i = 0; i < n; i++)
        if (is_role(&m[i], "system") || is_role(&m[i], "user") || is_role(&m[i], "assistant"))
            cat(b, "<|", m[i].role, "|>\n", m[i].content, "<|end|>\n", NULL);
    cat(b, gen ? "<|assistant|>\n" : ct->eos, NULL);
    return 0;
}

int tram_chat_template_render(const tram_chat_template *ct, const tram_chat_msg *msgs, int n, int gen, char **out,
                              tram_error *err)
{
    *out = NULL;
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return tram_fail(err, "chat template: message %d has no %s", i, msgs[i].role ? "content" : "role");
    sbuf b = {0};
    int rc = 0;
    put(&b, "", 0);
    switch (ct->family) {
    case TRAM_CHAT_CHATML: rc = render_chatml(ct, msgs, n, gen, &b); break;
    case TRAM_CHAT_LLAMA2: rc = render_llama2(ct, msgs, n, &b, err); break;
    case TRAM_CHAT_LLAMA3: rc = render_llama3(ct, msgs, n, gen, &b); break;
    case TRAM_CHAT_MISTRAL: rc = render_mistral(ct, msgs, n, &b, err); break;
    case TRAM_CHAT_GEMMA: rc = render_gemma(ct, msgs, n, gen, &b, err); break;
    case TRAM_CHAT_PHI3: rc = render_phi3(ct, msgs, n, gen, &b); break;
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
