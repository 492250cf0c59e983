#include "server/api_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    e->code = code;
    return -1;
}

/* The OpenAI "type" string for a status: invalid_request_error for 4xx,
 * server_error for 5xx. */
static const char *error_type(int status)
{
    return status >= 500 ? "server_error" : "invalid_request_error";
}

json_t *tram_api_error_json(const tram_api_error *e)
{
    json_t *inner = json_pack("{s:s, s:s, s:o, s:o}", "message", e->message, "type",
                              error_type(e->status), "param",
                              e->param[0] ? json_string(e->param) : json_null(), "code",
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
    json_t *inner = json_pack("{s:s, s:s}", "type", anthropic_type(e->status), "message", e->message);
    if (inner && e->param[0])
        json_object_set_new(inner, "param", json_string(e->param));
    return inner ? json_pack("{s:s, s:o}", "type", "error", "error", inner) : NULL;
}
