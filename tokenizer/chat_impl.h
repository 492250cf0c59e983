/* chat_impl.h — what chat_template.c (recognising a template, the families
 * without a tool format) and chat_tools.c (the families' tool formats and
 * tram's generic one) share.  Private to the two files. */
#ifndef TRAM_CHAT_IMPL_H
#define TRAM_CHAT_IMPL_H

#include <jansson.h>
#include <string.h>

#include "tokenizer/chat_template.h"
#include "tokenizer/text_buf.h"

struct tram_chat_template {
    tram_chat_family family;
    tram_tool_format tool_format;
    char *bos, *eos;
    char *default_system;   /* ChatML: added when the first message is not a system one */
    int leading_bos;        /* the template starts with {{ bos_token }} */
    int eos_space;          /* Mistral v0.1: eos_token + ' ' */
    int date_from_clock;    /* Llama 3.2: "Today Date" is strftime_now("%d %b %Y") */
    char date[32];          /* a fixed "Today Date" (tests), "" when none */
    const char *warning;
};

static inline int tram_chat_is_role(const tram_chat_msg *m, const char *role)
{
    return !strcmp(m->role, role);
}

/* The templates with a tool format of their own, each following its Jinja
 * source; tools is NULL or a non-empty array of tool objects. */
int tram_chat_render_qwen(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                          int gen, tram_strbuf *b);
int tram_chat_render_llama31(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                             int gen, tram_strbuf *b, tram_error *err);
int tram_chat_render_mistral_tools(const tram_chat_template *ct, const tram_chat_msg *m, int n,
                                   const json_t *tools, tram_strbuf *b, tram_error *err);

/* tram's generic format for templates without one: the conversation
 * rewritten into plain system/user/assistant messages (see chat_template.h),
 * into *out (n_out of them; every content is malloc'd, free them with
 * tram_chat_generic_free). */
int tram_chat_generic(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                      tram_chat_msg **out, int *n_out, tram_error *err);
void tram_chat_generic_free(tram_chat_msg *m, int n);

#endif
