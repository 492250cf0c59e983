/* response_store.h — the responses POST /v1/responses stored ("store":
 * true, the default): what GET /v1/responses/{id} answers and what a later
 * request's previous_response_id continues.
 *
 * Each entry is a response id, the tenant whose API key made it (auth.h;
 * "" without keys), the response object as JSON text and the conversation
 * it ends as JSON text (the input items before it, its own input and its
 * output).  A lookup by another tenant finds nothing, as a missing id does.
 * The store is bounded by bytes and by count (the least recently used entry
 * goes first) and by age (an entry older than the TTL is gone).  It lives
 * in memory only: a restart forgets every response.  Its lock lets the
 * loop thread store and answer while preparation threads read. */
#ifndef TRAM_RESPONSE_STORE_H
#define TRAM_RESPONSE_STORE_H

#include <stddef.h>

typedef struct {
    size_t max_bytes;       /* of all entries' texts */
    size_t max_count;       /* entries */
    double ttl;             /* seconds an entry lives; 0: until evicted */
} tram_rstore_config;

typedef enum { TRAM_RSTORE_RESPONSE, TRAM_RSTORE_CONVERSATION } tram_rstore_part;

typedef struct tram_rstore tram_rstore;

tram_rstore *tram_rstore_new(const tram_rstore_config *c);
void tram_rstore_free(tram_rstore *s);
/* Stores copies of the texts under (tenant, id), replacing an entry of the
 * same key; -1 when out of memory or larger than the whole store. */
int tram_rstore_put(tram_rstore *s, const char *tenant, const char *id, const char *response,
                    const char *conversation, double now);
/* A malloc'd copy of one part of (tenant, id)'s entry in *out (the caller
 * frees it), which becomes the most recently used; -1 when there is none
 * (never stored, evicted, expired, deleted or another tenant's) or out of
 * memory. */
int tram_rstore_get(tram_rstore *s, const char *tenant, const char *id, tram_rstore_part part,
                    char **out, double now);
/* 0 when (tenant, id) was there and is gone, -1 when there was none. */
int tram_rstore_delete(tram_rstore *s, const char *tenant, const char *id, double now);
size_t tram_rstore_count(tram_rstore *s);
size_t tram_rstore_bytes(tram_rstore *s);

#endif
