/* msgs_request.h — Anthropic's Messages API request (POST /v1/messages and
 * /v1/messages/count_tokens) as the chat completions body it means, so that
 * it runs on chat's path as a dialect (msgs.h, dialect.h): the same
 * template, tools, structured outputs, sampling, cache and limits.
 *
 * The body is checked against api_fields.c's Messages rows and nested
 * tables first (a field tram cannot honour is a 400 naming its path), then
 * translated: system into a system message, text blocks into text, an
 * assistant's tool_use blocks into its tool_calls, a user's tool_result
 * blocks into tool messages, tools' input_schema into parameters,
 * tool_choice auto/any/tool/none into auto/required/a named function/none,
 * stop_sequences into stop, output_config.format into response_format, and
 * a last assistant message into a prefill the reply continues. */
#ifndef TRAM_MSGS_REQUEST_H
#define TRAM_MSGS_REQUEST_H

#include <jansson.h>
#include <stddef.h>

#include "server/api_error.h"

/* What a request's translation keeps for naming its errors. */
typedef struct tram_msgs_translation tram_msgs_translation;

/* body (count_only: count_tokens's, without max_tokens) as a chat body (a
 * new reference), the ignored fields met listed in ignored[0..cap); NULL
 * with e filled, its param the Anthropic field's path, when refused.  *t is
 * set either way (NULL: out of memory), for tram_msgs_translation_free. */
json_t *tram_msgs_to_chat(const json_t *body, int count_only, tram_msgs_translation **t, char *ignored,
                          size_t cap, tram_api_error *e);
void tram_msgs_translation_free(tram_msgs_translation *t);

/* An error of the request naming chat's field (or chat's message, once the
 * body is translated: t may be NULL) names the Anthropic one instead. */
void tram_msgs_rename_error(const tram_msgs_translation *t, tram_api_error *e);

#endif
