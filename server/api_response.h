/* api_response.h — response bodies and stream chunks as the OpenAI API
 * shapes them, for chat ("chatcmpl-" ids, chat.completion[.chunk]) and text
 * completions ("cmpl-" ids, text_completion). */
#ifndef TRAM_API_RESPONSE_H
#define TRAM_API_RESPONSE_H

#include <jansson.h>
#include <stddef.h>

#include "engine/tram.h"
#include "server/api_request.h"

struct tram_tokenizer;

/* What one choice has produced so far (non-streamed responses keep all). */
typedef struct {
    char *text;
    size_t len, cap;
    json_t *logprobs;           /* NULL unless logprobs were asked for */
    const char *finish_reason;  /* NULL while running */
    int started;                /* its first output arrived */
    json_t *tool_calls;         /* message.tool_calls; text is then the content before them */
    size_t sent;                /* streams with tools: bytes of text sent as content */
    size_t text_offset;         /* completions logprobs: bytes of text so far */
    json_t *error;              /* finish_reason "error": why (the output failed its schema) */
    char *stop_string;          /* the stop string that finished it (owned), or NULL */
} tram_api_choice;

typedef struct {
    long long prompt_tokens, completion_tokens, cached_tokens;
} tram_api_usage;

/* The fields every body and chunk starts with. */
typedef struct {
    tram_api_kind kind;
    const char *id;
    long long created;
    const char *model;
} tram_api_envelope;

/* Writes a fresh id: prefix (at most 20 bytes) and 24 random hex digits. */
void tram_api_random_id(const char *prefix, char out[48]);
/* A response's id: "chatcmpl-" or "cmpl-" and 24 random hex digits. */
void tram_api_make_id(tram_api_kind kind, char out[48]);

int tram_api_choice_append(tram_api_choice *c, const char *text, size_t len);
void tram_api_choice_free(tram_api_choice *c);

/* An empty logprobs object of the endpoint's shape: {"content": []} for chat,
 * {"tokens", "token_logprobs", "top_logprobs", "text_offset"} for completions. */
json_t *tram_api_logprobs_new(tram_api_kind kind);
/* Appends n entries; *text_offset (completions) advances by each token's
 * text length.  Returns -1 when out of memory. */
int tram_api_logprobs_append(json_t *lp, tram_api_kind kind, const struct tram_tokenizer *t,
                             const tram_logprob_entry *entries, int n, size_t *text_offset);

/* The whole non-streamed response. */
json_t *tram_api_response(const tram_api_envelope *env, const tram_api_choice *choices, int n,
                          const tram_api_usage *u);
/* A finished choice's "error" object (finish_reason "error") in a response
 * or chunk choice: error is not stolen. */
void tram_api_choice_set_error(json_t *choice, const json_t *error);
/* What one stream chunk says of one choice.  Zeros are the usual case: no
 * role, content null, no logprobs, still running. */
typedef struct {
    int index;                  /* the choice */
    int role;                   /* chat's first chunk: adds "role": "assistant" */
    const char *text;           /* content text[0..len); NULL: content null */
    size_t len;
    json_t *logprobs;           /* stolen; may be NULL */
    const char *finish_reason;  /* NULL while running */
} tram_api_delta;

/* One stream chunk for one choice; with_usage adds "usage": null as OpenAI
 * does when stream_options.include_usage is set. */
json_t *tram_api_chunk(const tram_api_envelope *env, const tram_api_delta *d, int with_usage);
/* A stream chunk of one tool call, as the OpenAI SDK's stream helpers
 * accumulate them: with id and name (the call's first chunk), index, id,
 * type and name with empty arguments; without, index and the next
 * arguments[0..len). */
json_t *tram_api_tool_call_chunk(const tram_api_envelope *env, int index, int call_index, const char *id,
                                 const char *name, const char *arguments, size_t len, int with_usage);
/* stream_options.continuous_usage_stats (vLLM's): the chunk carries the
 * usage so far. */
void tram_api_chunk_set_usage(json_t *chunk, const tram_api_usage *u);
/* The last chunk when include_usage is set: no choices, the usage. */
json_t *tram_api_usage_chunk(const tram_api_envelope *env, const tram_api_usage *u);

#endif
