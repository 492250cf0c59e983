#include "server/api_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/utf8.h"

/* Messages and params quote the request (a key, a string, a value cut to
 * fit), whose bytes need not be UTF-8 and whose cut may split a character;
 * JSON cannot carry either, so each invalid byte becomes '?'. */
static void force_utf8(char *s)
{
    for (size_t n = strlen(s), i = 0; (i += tram_utf8_validate(s + i, n - i)) < n; i++)
        s[i] = '?';
}

int tram_api_fail(tram_api_error *e, int status, const char *param, const char *code,
                  const char *fmt, ...)
{
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    e->status = status;
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    force_utf8(e->message);
    force_utf8(e->param);
    e->code = code;
    return -1;
}

int tram_api_missing(tram_api_error *e, const char *param)
{
    return tram_api_fail(e, 400, param, "missing_required_parameter", "Missing required parameter: '%s'.", param);
}

int tram_api_wrong_type(tram_api_error *e, const char *param, const char *expected)
{
    return tram_api_fail(e, 400, param, "invalid_type", "Invalid type for '%s': expected %s.", param, expected);
}

int tram_api_out_of_memory(tram_api_error *e)
{
    return tram_api_fail(e, 500, NULL, NULL, "Out of memory.");
}

/* The OpenAI "type" string for a status: invalid_request_error for 4xx,
 * server_error for 5xx. */
static const char *error_type(int status)
{
    return status >= 500 ? "server_error" : "invalid_request_error";
}

/* A JSON string of s even when something wrote it past tram_api_fail
 * (msgs_request.c renames params inside messages). */
static json_t *utf8_string(const char *s)
{
    char copy[sizeof(((tram_api_error *)0)->message)];
    snprintf(copy, sizeof(copy), "%s", s);
    force_utf8(copy);
    return json_string(copy);
}

json_t *tram_api_error_json(const tram_api_error *e)
{
    json_t *inner = json_pack("{s:o, s:s, s:o, s:o}", "message", utf8_string(e->message), "type",
                              error_type(e->status), "param",
                              e->param[0] ? utf8_string(e->param) : json_null(), "code",
                              e->code ? json_string(e->code) : json_null());
    return inner ? json_pack("{s:o}", "error", inner) : NULL;
}

/* Anthropic's error types by status (its errors page). */
static const char *anthropic_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

json_t *tram_api_error_json_as(const tram_api_error *e, tram_api_protocol protocol)
{
    if (protocol == TRAM_PROTOCOL_OPENAI)
        return tram_api_error_json(e);
    json_t *inner = json_pack("{s:s, s:o}", "type", anthropic_type(e->status), "message", utf8_string(e->message));
    if (inner && e->param[0])
        json_object_set_new(inner, "param", utf8_string(e->param));
    return inner ? json_pack("{s:s, s:o}", "type", "error", "error", inner) : NULL;
}
