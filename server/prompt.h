/* prompt.h — turning a request's prompt into token ids on the loop thread
 * (the tokenizer is immutable and thread-safe), so that length errors are
 * answered before anything is queued. */
#ifndef TRAM_PROMPT_H
#define TRAM_PROMPT_H

#include <stdint.h>

#include "engine/tram.h"
#include "server/api_request.h"
#include "chat/chat_template.h"

/* A chat request's conversation (with its tools and template arguments)
 * rendered with the model's chat template, ending as the request says; a
 * new malloc'd string. */
int tram_prompt_render_chat(const tram_chat_template *ct, const tram_api_request *r, char **text,
                            tram_api_error *err);

/* Text to ids (special tokens written in the text become their ids, as HF
 * tokenizers do); add_bos prepends BOS when the model asks for it. */
int tram_prompt_encode(const tram_engine *e, const char *text, int add_bos, int32_t **ids, int *n,
                       tram_api_error *err);

/* Checks ids against the vocabulary and against the context length: the
 * prompt must leave room for one token, or for max_tokens when asked for (0:
 * not asked; -1: no length check, for detokenize).  Messages give both
 * numbers. */
int tram_prompt_check(const tram_engine *e, const int32_t *ids, int n, int max_tokens,
                      const char *param, tram_api_error *err);

#endif
