/* responses.h — OpenAI's Responses API: POST /v1/responses run over the
 * chat completion path (dialect.h), in the background too, and the stored
 * responses' GET and DELETE /v1/responses/{id} and the cancel of a
 * background one (response_store.h). */
#ifndef TRAM_RESPONSES_H
#define TRAM_RESPONSES_H

#include <jansson.h>

#include "server/dialect.h"
#include "server/state.h"

struct evhttp_request;

extern const tram_dialect tram_responses_dialect;

/* GET and DELETE /v1/responses/{id}: the caller's tenant's response;
 * POST /v1/responses/{id}/cancel: its background run aborted. */
void tram_handle_response_get(tram_server *s, struct evhttp_request *req);
void tram_handle_response_delete(tram_server *s, struct evhttp_request *req);
void tram_handle_response_cancel(tram_server *s, struct evhttp_request *req);

/* The dialect's parts (responses_request.c, responses_output.c). */
json_t *tram_responses_to_chat(const tram_dialect_request *in, void **state, tram_api_error *e);
void tram_responses_rename_error(void *state, tram_api_error *e);
json_t *tram_responses_response(void *state, const tram_dialect_end *end, tram_api_error *e);
void tram_responses_stream_start(void *state, struct evhttp_request *req, const tram_api_envelope *env,
                                 long long prompt_tokens);
void tram_responses_chunk(void *state, const json_t *chunk, struct evhttp_request *req);
void tram_responses_stream_end(void *state, const tram_dialect_end *end, struct evhttp_request *req);
json_t *tram_responses_background(void *state);
void tram_responses_free(void *state);

#endif
