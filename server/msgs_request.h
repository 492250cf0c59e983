/* msgs_request.h — Anthropic's Messages API request (POST /v1/messages and
 * /v1/messages/count_tokens) read into the chat completions request it
 * means, so that it runs on chat's path: the same template, tools,
 * structured outputs, sampling, cache and limits.
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

#include <stddef.h>

#include "server/api_error.h"
#include "server/api_request.h"

/* Parses body[0..len) (count_only: count_tokens's body, without max_tokens)
 * into r, a chat request whose root is the translated body.  On failure -1
 * with e filled, its param the Anthropic field's path, and nothing to free. */
int tram_msgs_request_parse(tram_api_request *r, int count_only, const tram_sampling_params *defaults,
                            const char *body, size_t len, tram_api_error *e);

/* An error found later on the chat request (the engine's ranges, the
 * grammar, the template) names chat's field: its Anthropic name instead. */
void tram_msgs_rename_param(tram_api_error *e);

#endif
