/* chat_impl.h — what chat_template.c (creating and rendering a template)
 * and chat_tools.c (tram's generic tool format) share.  Private to the two
 * files. */
#ifndef TRAM_CHAT_IMPL_H
#define TRAM_CHAT_IMPL_H

#include <jansson.h>
#include <string.h>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "kernels/strbuf.h"

struct tram_chat_template {
    tram_jinja *jinja;
    tram_chat_family family;
    tram_tool_format tool_format;
    char *bos, *eos;
    char *default_system;   /* ChatML: the prompt the template adds when the first message is not a system one */
    int has_system;         /* the template renders a system message (it neither refuses nor drops it) */
    char date[32];          /* date_string, "" when undefined */
    long long clock;        /* what strftime_now reads; 0: the time of the render */
    const char *warning;
};

static inline int tram_chat_is_role(const tram_chat_msg *m, const char *role)
{
    return !strcmp(m->role, role);
}

/* tram's generic format for templates without one: the conversation
 * rewritten into plain system/user/assistant messages (see chat_template.h),
 * into *out (n_out of them; every content is malloc'd, free them with
 * tram_chat_generic_free). */
int tram_chat_generic(const tram_chat_template *ct, const tram_chat_msg *m, int n, const json_t *tools,
                      tram_chat_msg **out, int *n_out, tram_error *err);
void tram_chat_generic_free(tram_chat_msg *m, int n);

#endif
