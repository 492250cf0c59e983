/* chat_template.h — a model's chat template, rendered by tram's Jinja
 * interpreter (chat/jinja.h) exactly as transformers'
 * apply_chat_template renders it.  What the rest of tram needs to know about
 * the template (its family, whether it takes a system message, the syntax it
 * writes tool calls in) is read from the template text and from probe
 * renders when it is created. */
#ifndef TRAM_CHAT_TEMPLATE_H
#define TRAM_CHAT_TEMPLATE_H

#include <jansson.h>
#include <string.h>

#include "kernels/base.h"
#include "tokenizer/tokenizer.h"

/* The family, from the template's markers; OTHER renders just as well. */
typedef enum {
    TRAM_CHAT_CHATML, TRAM_CHAT_LLAMA2, TRAM_CHAT_LLAMA3, TRAM_CHAT_MISTRAL, TRAM_CHAT_GEMMA, TRAM_CHAT_PHI3,
    TRAM_CHAT_OTHER,
} tram_chat_family;

/* The syntax a template writes tool calls in, which is the syntax tram
 * parses out of the model's reply.  A template that takes `tools` renders
 * them itself; the syntax is read from a probe render of one call.  A
 * template that does not read `tools` at all gets GENERIC, tram's documented
 * format (docs/tools.md): the tool list, in Qwen2.5's words, joins the
 * system prompt (or, for templates without one, the first user message); a
 * call is written in the assistant's turn as
 * <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>; results
 * become a user turn of <tool_response>\n...\n</tool_response> blocks.  A
 * template that takes `tools` but writes calls in another syntax is
 * UNSUPPORTED: a conversation with tools or tool calls is an error. */
typedef enum {
    TRAM_TOOLS_GENERIC,
    TRAM_TOOLS_HERMES,    /* <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen2.5, Hermes, ...) */
    TRAM_TOOLS_LLAMA3,    /* Llama 3.1 / 3.2: {"name": ..., "parameters": {...}} */
    TRAM_TOOLS_MISTRAL,   /* [TOOL_CALLS] [{"name": ..., "arguments": {...}, ...}] */
    TRAM_TOOLS_UNSUPPORTED,
} tram_tool_format;

typedef struct {
    const char *id;           /* the call's id */
    const char *name;
    const json_t *arguments;  /* the arguments as a JSON value (an object) */
} tram_chat_tool_call;

typedef struct {
    const char *role;      /* "system", "user", "assistant", "tool", ... */
    const char *content;   /* NULL: None */
    const tram_chat_tool_call *tool_calls;  /* an assistant's calls (num_tool_calls > 0) */
    int num_tool_calls;
    const char *tool_call_id;               /* a tool result: the call it answers */
} tram_chat_msg;

typedef struct tram_chat_template tram_chat_template;

/* tmpl: the Jinja source (NULL when the model has none).  bos / eos: the
 * strings bos_token / eos_token stand for.  A missing template, or one the
 * interpreter cannot parse, is an error, unless fallback_chatml: then it is
 * ChatML and tram_chat_template_warning says so. */
int tram_chat_template_create(tram_chat_template **out, const char *tmpl, const char *bos, const char *eos,
                              int fallback_chatml, tram_error *err);
/* The model's BOS and EOS with tmpl, the Jinja source that replaces the
 * model's own template (vLLM's --chat-template), or with the model's own
 * when tmpl is NULL. */
int tram_chat_template_for(tram_chat_template **out, const tram_tokenizer *t, const char *tmpl,
                           int fallback_chatml, tram_error *err);
void tram_chat_template_free(tram_chat_template *ct);

tram_chat_family tram_chat_template_family(const tram_chat_template *ct);
/* A warning to show the user (the ChatML fallback, tools unsupported), or NULL. */
const char *tram_chat_template_warning(const tram_chat_template *ct);
tram_tool_format tram_chat_template_tool_format(const tram_chat_template *ct);
/* The template variable date_string (Llama 3.x's "Today Date", e.g.
 * "26 Jul 2024"), left undefined unless set. */
void tram_chat_template_set_date(tram_chat_template *ct, const char *date);
/* The time strftime_now reads (seconds since the epoch, shown in local
 * time); 0, the default: the time of each render. */
void tram_chat_template_set_clock(tram_chat_template *ct, long long now);

/* How a rendered conversation ends (the values are add_generation_prompt's
 * 0 and 1, so a flag passes as one). */
typedef enum {
    TRAM_CHAT_END_TURN = 0,        /* after the last message's turn */
    TRAM_CHAT_OPEN_ASSISTANT = 1,  /* with the assistant's generation prompt */
    TRAM_CHAT_CONTINUE_LAST = 2,   /* inside the last message, for the model to go on writing it
                                    * (transformers' continue_final_message) */
} tram_chat_ending;

/* What a render takes: the messages; tools: NULL, or a non-empty JSON
 * array of {"type": "function", "function": {...}} objects, rendered the way
 * apply_chat_template(tools=...) renders them; kwargs: NULL, or a JSON
 * object whose members are more template variables (apply_chat_template's
 * **kwargs, vLLM's chat_template_kwargs), none of them one tram sets; and how
 * the rendered text ends. */
typedef struct {
    const tram_chat_msg *msgs;
    int n;
    const json_t *tools;
    const json_t *kwargs;
    tram_chat_ending ending;
} tram_chat_conversation;

/* Renders the conversation into a new malloc'd string.  Conversations the
 * template refuses (roles that do not alternate, a system message where the
 * template takes none) are errors with the template's own message. */
int tram_chat_template_render(const tram_chat_template *ct, const tram_chat_conversation *c, char **out,
                              tram_error *err);
/* 1 when the template variable `name` is one the renderer sets itself,
 * which kwargs may not (inline: the request parser checks it too, and
 * links without the renderer). */
static inline int tram_chat_template_sets(const char *name)
{
    static const char *const set_by_tram[] = {"messages", "tools", "documents", "add_generation_prompt",
                                              "bos_token", "eos_token"};
    for (size_t i = 0; i < sizeof(set_by_tram) / sizeof(set_by_tram[0]); i++)
        if (!strcmp(name, set_by_tram[i]))
            return 1;
    return 0;
}

#endif
