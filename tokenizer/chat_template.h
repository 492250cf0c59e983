/* chat_template.h — chat templates of the common model families, rendered in
 * C exactly as their Jinja templates render through transformers'
 * apply_chat_template.  The family is recognised from the template string;
 * details that vary between a family's releases (SmolLM2's default system
 * prompt, a leading bos_token, Mistral v0.1's space after EOS) are read from
 * the template too. */
#ifndef TRAM_CHAT_TEMPLATE_H
#define TRAM_CHAT_TEMPLATE_H

#include "kernels/base.h"
#include "tokenizer/tokenizer.h"

typedef enum {
    TRAM_CHAT_CHATML, TRAM_CHAT_LLAMA2, TRAM_CHAT_LLAMA3, TRAM_CHAT_MISTRAL, TRAM_CHAT_GEMMA, TRAM_CHAT_PHI3,
} tram_chat_family;

typedef struct {
    const char *role;      /* "system", "user", "assistant", ... */
    const char *content;
} tram_chat_msg;

typedef struct tram_chat_template tram_chat_template;

/* tmpl: the Jinja source (NULL when the model has none).  bos / eos: the
 * strings bos_token / eos_token stand for.  An unrecognised or missing
 * template is an error, unless fallback_chatml: then it is ChatML and
 * tram_chat_template_warning says so. */
int tram_chat_template_create(tram_chat_template **out, const char *tmpl, const char *bos, const char *eos,
                              int fallback_chatml, tram_error *err);
/* The model's own template, BOS and EOS. */
int tram_chat_template_for(tram_chat_template **out, const tram_tokenizer *t, int fallback_chatml,
                           tram_error *err);
void tram_chat_template_free(tram_chat_template *ct);

tram_chat_family tram_chat_template_family(const tram_chat_template *ct);
/* A warning to show the user (the ChatML fallback), or NULL. */
const char *tram_chat_template_warning(const tram_chat_template *ct);

/* Renders the conversation into a new malloc'd string.  Conversations the
 * template refuses (roles that do not alternate, a system message where the
 * family has none) are errors with the template's own message. */
int tram_chat_template_render(const tram_chat_template *ct, const tram_chat_msg *msgs, int n,
                              int add_generation_prompt, char **out, tram_error *err);

#endif
