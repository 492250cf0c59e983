/* api_fields.h — what happens to every request field of /v1/chat/completions
 * and /v1/completions, in one table (api_fields.c).
 *
 * Each field the OpenAI API defines for these endpoints, and each of vLLM's
 * extras a client may send, is exactly one of:
 *   - honoured: read by api_request.c (or the tool and structured-output
 *     parsers) and acted on;
 *   - ignored: accepted because it cannot change the output (user,
 *     metadata, store, ...), with one warning log line per request;
 *   - rejected: a 400 naming it, because it would change the output and
 *     tram does not implement it, unless its value is the one that changes
 *     nothing (suffix "", best_of equal to n, modalities ["text"], ...).
 * A field in no row is rejected too, as OpenAI itself does ("Unrecognized
 * request argument supplied"), so no field is ever silently dropped. */
#ifndef TRAM_API_FIELDS_H
#define TRAM_API_FIELDS_H

#include <jansson.h>
#include <stddef.h>

#include "server/api_error.h"

typedef enum { TRAM_FIELD_HONOURED, TRAM_FIELD_IGNORED, TRAM_FIELD_REJECTED } tram_field_kind;

/* Endpoint masks. */
#define TRAM_FIELD_CHAT 1u
#define TRAM_FIELD_COMPLETION 2u
#define TRAM_FIELD_BOTH (TRAM_FIELD_CHAT | TRAM_FIELD_COMPLETION)
#define TRAM_FIELD_RESPONSES 4u     /* POST /v1/responses */
#define TRAM_FIELD_MESSAGES 8u      /* POST /v1/messages (Anthropic's) */
#define TRAM_FIELD_EMBEDDINGS 16u   /* POST /v1/embeddings */
#define TRAM_FIELD_COUNT_TOKENS 32u /* POST /v1/messages/count_tokens (Anthropic's) */

typedef struct {
    const char *name;
    unsigned endpoints;
    tram_field_kind kind;
    /* rejected fields: 1 when this value (never null: null is always
     * harmless) leaves the output as tram makes it; NULL: no value does */
    int (*harmless)(const json_t *value, const json_t *body);
    const char *why;      /* rejected: the end of the 400's message */
    /* for the table's test: honoured, a value of the wrong type (its parser
     * must name the field); ignored, any value; rejected, a harmful value */
    const char *example;
    const char *harmless_example;  /* rejected with a harmless value: one (JSON) */
} tram_api_field;

extern const tram_api_field tram_api_fields[];
extern const size_t tram_api_num_fields;

/* Checks every key of body against the table for endpoint (TRAM_FIELD_CHAT
 * or TRAM_FIELD_COMPLETION): -1 with e filled for a rejected or unknown
 * field; else 0, with the ignored fields present written to ignored (comma
 * separated, "" when none). */
int tram_api_check_fields(const json_t *body, unsigned endpoint, char *ignored, size_t cap,
                          tram_api_error *e);

/* The objects nested in a request: each has a table of its own, with the
 * same rule (an unknown key is a 400 naming its path, "tools[0].function.x").
 * The ignored keys found are added to the same list. */
typedef enum {
    TRAM_OBJ_STREAM_OPTIONS,
    TRAM_OBJ_TOOL_CHOICE,           /* the object form */
    TRAM_OBJ_TOOL_CHOICE_FUNCTION,
    TRAM_OBJ_TOOL,
    TRAM_OBJ_TOOL_FUNCTION,
    TRAM_OBJ_MESSAGE,
    TRAM_OBJ_CONTENT_PART,
    TRAM_OBJ_TOOL_CALL,             /* an assistant message's tool_calls[j] */
    TRAM_OBJ_TOOL_CALL_FUNCTION,
    TRAM_OBJ_RESPONSE_FORMAT,
    TRAM_OBJ_JSON_SCHEMA,           /* response_format.json_schema */
    /* /v1/responses */
    TRAM_OBJ_RESP_MESSAGE,          /* an input item: a message */
    TRAM_OBJ_RESP_CONTENT_PART,     /* its content parts */
    TRAM_OBJ_RESP_FUNCTION_CALL,    /* an input item: a function_call */
    TRAM_OBJ_RESP_CALL_OUTPUT,      /* an input item: a function_call_output */
    TRAM_OBJ_RESP_TOOL,
    TRAM_OBJ_RESP_TOOL_CHOICE,      /* the object form */
    TRAM_OBJ_RESP_TEXT,
    TRAM_OBJ_RESP_FORMAT,           /* text.format */
    TRAM_OBJ_RESP_STREAM_OPTIONS,
    /* Anthropic's Messages API (msgs_request.c) */
    TRAM_OBJ_MSGS_MESSAGE,
    TRAM_OBJ_MSGS_TEXT,             /* a text block: in system, messages, tool results */
    TRAM_OBJ_MSGS_TOOL_USE,         /* an assistant's tool_use block */
    TRAM_OBJ_MSGS_TOOL_RESULT,      /* a user's tool_result block */
    TRAM_OBJ_MSGS_TOOL,
    TRAM_OBJ_MSGS_TOOL_CHOICE,
    TRAM_OBJ_MSGS_OUTPUT_CONFIG,
    TRAM_OBJ_MSGS_OUTPUT_FORMAT,    /* output_config.format */
    TRAM_OBJ_COUNT
} tram_api_object_id;

typedef struct {
    const char *path;               /* its place, "[]" for any index: "messages[].tool_calls[]" */
    const tram_api_field *keys;
    size_t num_keys;
    unsigned endpoints;             /* where it is found: TRAM_FIELD_BOTH for chat's objects */
    /* for the tables' test: a valid body of its endpoint holding one, and its path there */
    const char *example_body, *example_path;
} tram_api_object;

extern const tram_api_object tram_api_objects[TRAM_OBJ_COUNT];

/* Checks the keys of o, found at path (with its indices), against object
 * id's table: as tram_api_check_fields, adding ignored keys to ignored
 * (cap 0: the object has no ignored keys). */
int tram_api_check_object(const json_t *o, tram_api_object_id id, const char *path, char *ignored,
                          size_t cap, tram_api_error *e);

#endif
