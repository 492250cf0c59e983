/* cache_key.h — which requests the response cache may serve, and their keys.
 *
 * The key is fail-safe by construction: it is the canonical JSON (sorted
 * keys, compact) of the WHOLE request body minus an explicit list of fields
 * known not to change the output (how it is delivered: stream,
 * stream_options; who asks: user, metadata; when: priority; the cache's own
 * opt-out), then the served model and the token ids of every prompt after
 * templating.  A request field added later (response_format, tools, ...) is
 * therefore in the key without anyone touching this file; leaving a field
 * out of the key needs a decision here.  Two bodies that differ only in the
 * spelling of a number (0 vs 0.0) get different keys: a miss, never a wrong
 * hit. */
#ifndef TRAM_CACHE_KEY_H
#define TRAM_CACHE_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "server/api_request.h"
#include "server/response_cache.h"

/* The request's prompts as token ids, one array per prompt. */
typedef struct {
    const int32_t *const *ids;
    const int *num_ids;
    int num_prompts;
} tram_cache_prompts;

/* 1 when a Cache-Control header value asks to bypass caches (no-cache or
 * no-store among its directives). */
int tram_cache_control_bypasses(const char *header);

/* 1 when mode lets r be cached: every request under ALL, under
 * DETERMINISTIC only those whose output is a function of the key
 * (temperature 0, or a seed given). */
int tram_cache_eligible(const tram_api_request *r, tram_rcache_mode mode);

/* The key of r for the served model `model` and the tenant asking (auth.h;
 * "" without API keys): a malloc'd byte string in *key, its length in *len.
 * -1 when out of memory.  One tenant never gets another's entry, nor joins
 * its flight. */
int tram_cache_key(const tram_api_request *r, const char *model, const char *tenant,
                   const tram_cache_prompts *p, char **key, size_t *len);

#endif
