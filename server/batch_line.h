/* batch_line.h — one line of a JSONL request file: `tram generate --input`
 * and `tram serve --response-cache-preload` read the same lines.
 *
 * A line is one of two forms:
 *   OpenAI's Batch input: {"custom_id": "...", "method": "POST",
 *       "url": "/v1/chat/completions" | "/v1/completions", "body": {...}}
 *     (custom_id and method may be left out; url and body may not);
 *   a plain body, as tram generate has always read it: a chat when it has
 *     "messages", else a text completion ({"prompt": ...}).
 * A line is in the Batch form as soon as it has one of the four keys (no
 * request body has them: the field table refuses them).  The body itself is
 * not checked here: the server's parser does that, with its own messages. */
#ifndef TRAM_SERVER_BATCH_LINE_H
#define TRAM_SERVER_BATCH_LINE_H

#include <stddef.h>

#include "server/api_error.h"
#include "server/api_request.h"

typedef struct {
    char *custom_id;     /* owned; NULL when the line names none */
    tram_api_kind kind;  /* the endpoint the line's url (or its shape) names */
    char *body;          /* owned: the request body, JSON text */
    int stream;          /* the body asks for a stream ("stream": true) */
} tram_batch_line;

/* text[0..len) into *out; -1 with e filled (status 400, a message saying
 * what is wrong with the line).  A line that is an object with a string
 * custom_id keeps it in *out even when it fails, so that its error can name
 * it: free *out with tram_batch_line_free either way. */
int tram_batch_line_parse(const char *text, size_t len, tram_batch_line *out, tram_api_error *e);
void tram_batch_line_free(tram_batch_line *l);

#endif
