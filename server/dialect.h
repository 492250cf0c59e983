/* dialect.h — an API other than chat completions spoken over the chat
 * completion path: the Responses API (responses.c), Anthropic's Messages.
 *
 * A dialect's body becomes a chat completions body, which completion.c
 * then runs like any chat request: the same parse, templates, tools,
 * structured outputs, sampling, response cache, metrics, auth, queue
 * limits and drain.  What the chat path would send (the whole response,
 * or each chunk of its stream and the stream's end) goes to the dialect
 * instead, which writes its own replies.  Each request has its dialect
 * state, made by to_chat and freed with the completion. */
#ifndef TRAM_DIALECT_H
#define TRAM_DIALECT_H

#include <jansson.h>

#include "server/api_error.h"

struct evhttp_request;
struct tram_server;

/* What to_chat is given: the request and where it came from. */
typedef struct {
    struct tram_server *srv;
    const json_t *body;             /* the dialect's body, a JSON object */
    const char *tenant;             /* its API key's tenant (auth.h); "" without keys */
    const char *id;                 /* the response's id, made with id_prefix */
    long long created;              /* Unix time */
} tram_dialect_request;

typedef struct tram_dialect {
    const char *id_prefix;          /* of the response ids: "resp_" */
    /* On a preparation thread: in->body as a chat completions body (a new
     * reference), and *state; NULL with e filled when it is refused (a
     * state made is still freed by free_state). */
    json_t *(*to_chat)(const tram_dialect_request *in, void **state, tram_api_error *e);
    /* An error of the chat body's parse, whose param names a chat field:
     * renamed to the dialect field it came from. */
    void (*rename_error)(void *state, tram_api_error *e);
    /* On the loop, from here on.  The non-streamed reply made of chat's
     * body (borrowed): a new reference. */
    json_t *(*response)(void *state, const json_t *chat);
    /* A chunk of chat's stream (borrowed), written as the dialect's events
     * on req (NULL once the client left: nothing is written). */
    void (*chunk)(void *state, const json_t *chunk, struct evhttp_request *req);
    /* The stream ends (error: NULL, or why it failed midway); the dialect
     * writes its last events and ends the reply. */
    void (*stream_end)(void *state, const tram_api_error *error, struct evhttp_request *req);
    void (*free_state)(void *state);
} tram_dialect;

#endif
