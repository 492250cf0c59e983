/* preload.h — what runs before the server reports ready: a warm-up request
 * through the whole path (tokenizer, a prefill and a decode forward pass,
 * the sampler, the detokenizer), so the first client never pays for cold
 * pages and caches; then the requests of --response-cache-preload FILE.jsonl,
 * so the hot keys are in the response cache before any client asks.
 *
 * The file holds one request a line, in the forms `tram generate --input`
 * reads (server/batch_line.h): the OpenAI batch format
 *   {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions", "body": {...}}
 * (custom_id and method optional; url /v1/chat/completions or
 * /v1/completions), or a plain body.  Every line must be cacheable under the server's
 * --response-cache mode and must succeed, else the server does not start:
 * a preload that silently did less would be a cold cache nobody knows of. */
#ifndef TRAM_PRELOAD_H
#define TRAM_PRELOAD_H

#include "server/state.h"

typedef struct tram_preload tram_preload;

/* Reads path (NULL: no preload file, only the warm-up); -1 after logging
 * "FILE:LINE: what is wrong". */
int tram_preload_read(tram_preload **out, const char *path);
void tram_preload_free(tram_preload *p);

/* Runs the warm-up, then the file's requests (a few at once), on s; then
 * calls ready(s), or failed(s) after logging why.  Stops launching when s
 * starts draining (then neither is called). */
void tram_preload_run(tram_preload *p, tram_server *s, void (*ready)(tram_server *),
                      void (*failed)(tram_server *));

#endif
