/* api_error.h — errors as the OpenAI API shapes them:
 *   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
 * or, on Anthropic's endpoints, as Anthropic's do:
 *   {"type": "error", "error": {"type": ..., "message": ...}}
 * with the HTTP status that goes with them.  Messages are written for the
 * client: they name the field and what is wrong, never a file path or any
 * internal state. */
#ifndef TRAM_API_ERROR_H
#define TRAM_API_ERROR_H

#include <jansson.h>

typedef struct {
    int status;          /* HTTP status code; 0 while there is no error */
    char message[512];
    char param[128];     /* the offending request field's path; "" is JSON null */
    const char *code;    /* a static machine-readable code, or NULL */
} tram_api_error;

/* Fills e and returns -1, so a parser can `return tram_api_fail(...)`.
 * param and code may be NULL. */
int tram_api_fail(tram_api_error *e, int status, const char *param, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The failures every parser words alike, so that each reads the same on
 * every endpoint: a required field absent, a field of another type than
 * `expected` ("an object", "a string": api_request.h's tram_api_type_error
 * also names what came), and memory running out.  Each returns -1. */
int tram_api_missing(tram_api_error *e, const char *param);
int tram_api_wrong_type(tram_api_error *e, const char *param, const char *expected);
int tram_api_out_of_memory(tram_api_error *e);

/* The 503s' messages, worded once for every place that turns work away. */
#define TRAM_API_MSG_LOADING "The model is still loading."
#define TRAM_API_MSG_SHUTTING_DOWN "The server is shutting down."
#define TRAM_API_MSG_OVERLOADED "The server is overloaded: too many requests are waiting. Retry later."

/* Whose API an endpoint speaks, and so how its errors are shaped. */
typedef enum { TRAM_PROTOCOL_OPENAI, TRAM_PROTOCOL_ANTHROPIC } tram_api_protocol;

/* The error body; NULL only when out of memory. */
json_t *tram_api_error_json(const tram_api_error *e);
/* The same in the protocol's shape (Anthropic's names no param: its message
 * does, and it is kept in "param" beside it as vLLM does). */
json_t *tram_api_error_json_as(const tram_api_error *e, tram_api_protocol protocol);

#endif
