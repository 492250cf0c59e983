/* responses_state.h — what one /v1/responses request keeps from its body
 * to its last byte: made by responses_request.c, which turns the body into
 * a chat body, and read by responses_output.c, which turns the chat path's
 * replies into the response object and the typed stream events. */
#ifndef TRAM_RESPONSES_STATE_H
#define TRAM_RESPONSES_STATE_H

#include <jansson.h>

#include "server/auth.h"
#include "server/response_store.h"

typedef struct {
    tram_rstore *store;         /* where the response goes when done; NULL: not stored */
    int background;             /* "background": true: stored at once as queued, then as it ends */
    char tenant[TRAM_TENANT_MAX + 1];
    char id[48];                /* "resp_..." */
    long long created;
    json_t *echo;               /* the request's fields the response object repeats */
    json_t *items;              /* the conversation before the output: earlier items, then the input */
    json_t *message_paths;      /* the chat body's messages[k] came from the k-th of these: "input[2]" */
    char ignored[512];          /* the accepted-and-ignored fields present (api_fields.h) */
    /* the output as it is made */
    json_t *output;             /* the output items */
    int open;                   /* the output item still being streamed, or -1 */
    int sequence;               /* the next event's sequence_number */
    int started;                /* response.created was sent */
    json_t *usage;              /* the Responses API's usage object, once known */
    const char *finish;         /* chat's finish reason, once known (static) */
    json_t *error;              /* a failed output's error object */
} tram_responses_state;

#endif
