/* msgs_response.h — replies of Anthropic's Messages API: the message
 * object, its usage, and the typed stream
 *   message_start, then per content block content_block_start,
 *   content_block_delta (text_delta or input_json_delta)...,
 *   content_block_stop, then message_delta (stop_reason, stop_sequence,
 *   usage) and message_stop
 * written from chat's stream chunks as completion.c makes them, in the
 * order the anthropic SDK's messages.stream() accumulates. */
#ifndef TRAM_MSGS_RESPONSE_H
#define TRAM_MSGS_RESPONSE_H

#include <jansson.h>

#include "server/api_error.h"
#include "server/api_response.h"

struct evhttp_request;

/* A stream's place: the content block being written. */
typedef struct {
    int open;      /* its index, -1 while none is */
    int blocks;    /* blocks started so far */
    int open_text; /* the open one is a text block (else tool_use) */
} tram_msgs_stream;

/* "end_turn", "stop_sequence", "max_tokens" or "tool_use" for a choice that
 * ended normally; NULL for one aborted or failed. */
const char *tram_msgs_stop_reason(const tram_api_choice *choice);

/* The whole message of a finished choice; NULL when out of memory. */
json_t *tram_msgs_message(const tram_api_envelope *env, const tram_api_choice *choice, const tram_api_usage *u);

/* Starts the SSE response and writes message_start (input_tokens: the
 * prompt's length, before the prefix cache is known). */
void tram_msgs_stream_start(tram_msgs_stream *st, struct evhttp_request *req, const tram_api_envelope *env,
                            long long input_tokens);
/* Writes what one of chat's stream chunks says (borrowed) as events. */
void tram_msgs_stream_chunk(tram_msgs_stream *st, struct evhttp_request *req, const json_t *chunk);
/* Ends the stream: message_delta and message_stop, or an error event when
 * the choice did not end normally (error says why, when it is not NULL). */
void tram_msgs_stream_end(tram_msgs_stream *st, struct evhttp_request *req, const tram_api_choice *choice,
                          const tram_api_error *error, const tram_api_usage *u);

/* The error a choice that did not end normally is answered with. */
void tram_msgs_choice_error(const tram_api_choice *choice, tram_api_error *e);

#endif
