/* embed_request.h — a POST /v1/embeddings body, parsed and checked.
 *
 * Every key passes api_fields.c's table first (TRAM_FIELD_EMBEDDINGS); then
 * input (a string, a list of strings, a list of token ids, or a list of
 * token-id lists; never empty, at most TRAM_EMBED_MAX_INPUTS inputs),
 * encoding_format ("float" or "base64"), dimensions (an integer >= 1, which
 * the engine checks against the model), add_special_tokens and priority.
 * Errors are 400s whose param names the field ("input[3]"). */
#ifndef TRAM_EMBED_REQUEST_H
#define TRAM_EMBED_REQUEST_H

#include <jansson.h>
#include <stddef.h>

#include "engine/tram.h"
#include "server/api_error.h"

#define TRAM_EMBED_MAX_INPUTS 2048  /* OpenAI's limit of inputs in one request */

typedef struct {
    json_t *root;
    const char *model;           /* into root, or NULL */
    tram_prompt *inputs;         /* [num_inputs]: text into root, or malloc'd token ids */
    int num_inputs;
    int base64;                  /* encoding_format "base64": little-endian float32, base64 */
    tram_embed_params params;
    int add_special_tokens;      /* text inputs get the model's BOS/EOS (1) */
    int priority;
    char ignored[256];           /* the ignored fields present, for the log */
} tram_embed_request;

/* -1 with e filled (nothing to free) or 0; free r with tram_embed_request_free. */
int tram_embed_request_parse(tram_embed_request *r, const char *body, size_t len, tram_api_error *e);
void tram_embed_request_free(tram_embed_request *r);

#endif
