/* completion.h — chat and text completions (and the APIs spoken over chat:
 * dialect.h), the requests that run the engine: their handlers, the
 * engine's events for them, and what the server does to all of them at
 * once (disconnects, the drain, an engine failure). */
#ifndef TRAM_COMPLETION_H
#define TRAM_COMPLETION_H

#include <stddef.h>

#include "server/api_request.h"
#include "server/dialect.h"
#include "server/state.h"
#include "server/worker.h"

struct evhttp_request;

void tram_handle_chat(tram_server *s, struct evhttp_request *req);
void tram_handle_completion(tram_server *s, struct evhttp_request *req);
/* A request of an API spoken over chat (dialect.h: the Responses API,
 * Anthropic's Messages API), run as a chat one. */
void tram_handle_dialect(tram_server *s, struct evhttp_request *req, const tram_dialect *d);

/* Internal requests (the warm-up, preloading, tram_server_submit): a body
 * run like a client's, done (server.h) called when it ends with the status
 * and the body a client would have been answered (an aborted reply is a
 * 503).  done may run before this returns (a cache hit).  -1 with e filled
 * when the body is refused before it runs (done is then not called):
 * invalid, or must_cache and the response cache would not keep it. */
int tram_completion_start_internal(tram_server *s, tram_api_kind kind, const char *body,
                                   size_t len, int must_cache, tram_server_done done,
                                   void *arg, tram_api_error *e);
/* An ACCEPTED, REJECTED or OUTPUT event from the worker. */
void tram_completion_on_event(const tram_event *ev);

/* Notices clients that went away while their request waits or runs. */
void tram_completions_poll_disconnects(tram_server *s);
/* Aborts the background request of that tenant with that id (dialect.h):
 * its dialect keeps how it ended; -1 when none runs. */
int tram_completion_cancel(tram_server *s, const char *tenant, const char *id);
/* Aborts every request in flight (the drain deadline passed). */
void tram_completions_abort_all(tram_server *s);
/* Fails every request in flight without waiting for the engine (it is gone). */
void tram_completions_fail_all(tram_server *s);
/* Ends the event loop once the server is draining and every completion has
 * been answered and its reply written. */
void tram_completions_check_drained(tram_server *s);

#endif
