/* completion.h — chat and text completions, the requests that run the
 * engine: their handlers, the engine's events for them, and what the server
 * does to all of them at once (disconnects, the drain, an engine failure). */
#ifndef TRAM_COMPLETION_H
#define TRAM_COMPLETION_H

#include "server/state.h"
#include "server/worker.h"

struct evhttp_request;

void tram_handle_chat(tram_server *s, struct evhttp_request *req);
void tram_handle_completion(tram_server *s, struct evhttp_request *req);

/* An ACCEPTED, REJECTED or OUTPUT event from the worker. */
void tram_completion_on_event(const tram_event *ev);

/* Notices clients that went away while their request waits or runs. */
void tram_completions_poll_disconnects(tram_server *s);
/* Aborts every request in flight (the drain deadline passed). */
void tram_completions_abort_all(tram_server *s);
/* Fails every request in flight without waiting for the engine (it is gone). */
void tram_completions_fail_all(tram_server *s);
/* Ends the event loop once the server is draining and every completion has
 * been answered and its reply written. */
void tram_completions_check_drained(tram_server *s);

#endif
