/* api_request.h — parsing and validating OpenAI request bodies.
 *
 * A body becomes a tram_api_request: JSON types are checked field by field,
 * values that only this API defines (max_tokens >= 1, top_logprobs without
 * logprobs, stream_options without stream, roles, message shapes) are checked
 * here, and ranges the engine defines are checked by
 * tram_engine_validate_params afterwards.  Every failure fills a
 * tram_api_error naming the field, as the OpenAI API does. */
#ifndef TRAM_API_REQUEST_H
#define TRAM_API_REQUEST_H

#include <jansson.h>
#include <stddef.h>

#include "engine/tram.h"
#include "server/api_error.h"
#include "server/api_fields.h"
#include "server/api_tools.h"
#include "chat/chat_template.h"

typedef enum {
    TRAM_API_CHAT,        /* POST /v1/chat/completions */
    TRAM_API_COMPLETION,  /* POST /v1/completions */
} tram_api_kind;

typedef struct {
    const char *role;     /* "system" (a "developer" message too), "user", "assistant" or "tool" */
    char *content;        /* owned; text parts joined by newlines */
    tram_chat_tool_call *tool_calls;  /* an assistant's calls: owned, num_tool_calls of them */
    int num_tool_calls;
    const char *tool_call_id;         /* a tool message: the call it answers */
} tram_api_message;

typedef struct {
    tram_api_kind kind;
    json_t *root;                   /* owns every const char * below */
    const char *model;              /* NULL when the client named none */
    tram_api_message *messages;     /* chat */
    int num_messages;
    tram_api_tools tools;           /* chat: tools, tool_choice, parallel_tool_calls */
    const json_t *chat_template_kwargs;  /* chat: NULL, or more template variables (an object) */
    tram_chat_ending ending;        /* chat: how the prompt ends (the assistant's generation prompt) */
    tram_prompt *prompts;           /* completions: text, or owned token ids */
    int num_prompts;
    int echo;                       /* completions: prepend the prompt */
    int stream, include_usage;
    int continuous_usage;           /* stream_options.continuous_usage_stats: usage on every chunk */
    int priority;
    int response_cache;             /* 0: the body opted out of the response cache (1) */
    char ignored[512];              /* the accepted-and-ignored fields present (api_fields.h) */
    tram_sampling_params params;    /* its arrays are owned */
} tram_api_request;

/* Parses body[0..len) over the engine's default params (from
 * tram_sampling_params_init).  On failure returns -1 with e filled (status
 * 400) and leaves nothing to free.  On success the caller frees r with
 * tram_api_request_free. */
int tram_api_request_parse(tram_api_request *r, tram_api_kind kind,
                           const tram_sampling_params *defaults, const char *body, size_t len,
                           tram_api_error *e);
/* The same over a body already read (an object, stolen: freed on failure,
 * else owned by r): a dialect's chat body (dialect.h), Anthropic's
 * requests translated into chat's. */
int tram_api_request_parse_json(tram_api_request *r, tram_api_kind kind,
                                const tram_sampling_params *defaults, json_t *root,
                                tram_api_error *e);
void tram_api_request_free(tram_api_request *r);

/* Parses body[0..len) as a JSON object (for /tokenize and /detokenize too);
 * NULL with e filled when it is not one. */
json_t *tram_api_parse_object(const char *body, size_t len, tram_api_error *e);

/* A 400 "Invalid type for 'param': expected ..., but got ...". */
int tram_api_type_error(tram_api_error *e, const char *param, const char *expected, const json_t *got);

/* A JSON array of token ids into a new malloc'd array (the caller frees it);
 * ids are checked against [0, INT32_MAX] here and against the vocabulary by
 * the engine. */
int tram_api_token_ids(const json_t *arr, const char *param, int32_t **ids, int *n,
                       tram_api_error *e);

#endif
