/* embeddings.h — POST /v1/embeddings: one tram_embedding per HTTP request,
 * its inputs run as embedding requests of the engine (engine/tram.h), and
 * what the server does to all of them at once (disconnects, the drain, an
 * engine failure), as completion.h does for completions.
 *
 * The engine requests' ids are the addresses of the inputs with the low bit
 * set (tram_embedding_owns), so server.c tells their events from a
 * completion's. */
#ifndef TRAM_EMBEDDINGS_H
#define TRAM_EMBEDDINGS_H

#include <stdint.h>

#include "server/state.h"
#include "server/worker.h"

struct evhttp_request;

void tram_handle_embeddings(tram_server *s, struct evhttp_request *req);

/* 1 when the engine request id is an embedding input's. */
static inline int tram_embedding_owns(uint64_t request_id) { return (int)(request_id & 1); }
/* An ACCEPTED, REJECTED or OUTPUT event of an embedding input. */
void tram_embedding_on_event(const tram_event *ev);

void tram_embeddings_poll_disconnects(tram_server *s);
void tram_embeddings_abort_all(tram_server *s);
/* Fails every request not being prepared (all of them once the pool has stopped). */
void tram_embeddings_fail_all(tram_server *s);

#endif
