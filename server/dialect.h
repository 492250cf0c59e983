/* dialect.h — an API other than chat completions spoken over the chat
 * completion path: the Responses API (responses.c) and Anthropic's Messages
 * API (msgs.c).
 *
 * A dialect's body becomes a chat completions body, which completion.c
 * then runs like any chat request: the same parse, templates, tools,
 * structured outputs, sampling, response cache, metrics, auth, queue
 * limits and drain.  What the chat path would send (the whole response,
 * or each chunk of its stream and the stream's end) goes to the dialect
 * instead, which writes its own replies, and errors go out in the shape
 * of its protocol.  Each request has its dialect state, made by to_chat
 * and freed with the completion. */
#ifndef TRAM_DIALECT_H
#define TRAM_DIALECT_H

#include <jansson.h>
#include <stddef.h>

#include "server/api_error.h"
#include "server/api_request.h"
#include "server/api_response.h"

struct evhttp_request;
struct tram_server;

/* What to_chat is given: the request and where it came from. */
typedef struct {
    struct tram_server *srv;
    const json_t *body;             /* the dialect's body, a JSON object */
    const char *tenant;             /* its API key's tenant (auth.h); "" without keys */
    const char *id;                 /* the response's id, made with id_prefix */
    long long created;              /* Unix time */
    char *ignored;                  /* where to_chat lists the ignored fields it met (api_fields.h):
                                       tram_dialect_parse gives it */
    size_t ignored_cap;
} tram_dialect_request;

/* How a reply ended: chat's choices, its usage, and why it failed (NULL:
 * it did not fail as a whole; only a background request's end says so to
 * response). */
typedef struct {
    const tram_api_envelope *env;
    const tram_api_choice *choices;
    int num_choices;
    const tram_api_usage *usage;
    const tram_api_error *error;
} tram_dialect_end;

typedef struct tram_dialect {
    const char *id_prefix;          /* of the response ids: "resp_" */
    tram_api_protocol errors;       /* the shape of its error replies */
    int count_only;                 /* prepared, then answered with the prompt's length (count_tokens) */
    /* On a preparation thread: in->body as a chat completions body (a new
     * reference), and *state; NULL with e filled when it is refused (a
     * state made is still freed by free_state). */
    json_t *(*to_chat)(const tram_dialect_request *in, void **state, tram_api_error *e);
    /* An error of the request, whose param may name a chat field: renamed
     * to the dialect field it came from (state may be NULL). */
    void (*rename_error)(void *state, tram_api_error *e);
    /* On the loop, from here on; req is NULL once the client left (nothing
     * is written then).  The stream starts (prompt_tokens: its length). */
    void (*stream_start)(void *state, struct evhttp_request *req, const tram_api_envelope *env,
                         long long prompt_tokens);
    /* A chunk of chat's stream (borrowed), written as the dialect's events. */
    void (*chunk)(void *state, const json_t *chunk, struct evhttp_request *req);
    /* The stream ends; the dialect writes its last events and ends the reply. */
    void (*stream_end)(void *state, const tram_dialect_end *end, struct evhttp_request *req);
    /* The non-streamed reply of a request that did not fail as a whole (or
     * of a background one however it ended): a new reference, or NULL with
     * e filled (answered as an error). */
    json_t *(*response)(void *state, const tram_dialect_end *end, tram_api_error *e);
    /* Once prepared: NULL, or the request runs in the background and this
     * (a new reference) is its client's reply, sent at once; the request
     * then runs without a client, and the dialect keeps what response
     * makes of its end.  NULL hook: never. */
    json_t *(*background)(void *state);
    void (*free_state)(void *state);
} tram_dialect;

/* On a preparation thread: in->body through d's to_chat and chat's parse
 * into r, with the ignored fields of both in r->ignored.  -1 with e filled
 * (not yet renamed: rename_error is the caller's, once) when refused;
 * *state is set either way. */
int tram_dialect_parse(const tram_dialect *d, const tram_dialect_request *in, const tram_sampling_params *defaults,
                       tram_api_request *r, void **state, tram_api_error *e);

#endif
