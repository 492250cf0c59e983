/* router.c — routing and the checks every request passes before its
 * handler runs. */
#include "server/router.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>
#include <strings.h>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/completion.h"
#include "server/embeddings.h"
#include "server/endpoints.h"
#include "server/http.h"
#include "server/msgs.h"
#include "server/responses.h"
#include "server/state.h"

typedef struct {
    const char *path;
    int prefix;    /* path ends in "/": it matches the path followed by one more segment, an id */
    const char *suffix;   /* with prefix: what follows the id ("/cancel"); NULL: nothing */
    enum evhttp_cmd_type method;
    int open;   /* answered without an API key (probes and scrapers) */
    int metrics;   /* open, unless --metrics-api-key is given: then that key only */
    tram_api_protocol protocol;   /* the shape of its errors */
    void (*handle)(tram_server *s, struct evhttp_request *req);
} route;

static void handle_responses(tram_server *s, struct evhttp_request *req)
{
    tram_handle_dialect(s, req, &tram_responses_dialect);
}

static void handle_messages(tram_server *s, struct evhttp_request *req)
{
    tram_handle_dialect(s, req, &tram_msgs_dialect);
}

static void handle_count_tokens(tram_server *s, struct evhttp_request *req)
{
    tram_handle_dialect(s, req, &tram_msgs_count_dialect);
}

static const route routes[] = {
    {.path = "/v1/chat/completions", .method = EVHTTP_REQ_POST, .handle = tram_handle_chat},
    {.path = "/v1/responses", .method = EVHTTP_REQ_POST, .handle = handle_responses},
    {.path = "/v1/responses/", .prefix = 1, .method = EVHTTP_REQ_GET, .handle = tram_handle_response_get},
    {.path = "/v1/responses/", .prefix = 1, .method = EVHTTP_REQ_DELETE, .handle = tram_handle_response_delete},
    {.path = "/v1/responses/", .prefix = 1, .suffix = "/cancel", .method = EVHTTP_REQ_POST,
     .handle = tram_handle_response_cancel},
    {.path = "/v1/completions", .method = EVHTTP_REQ_POST, .handle = tram_handle_completion},
    {.path = "/v1/messages", .method = EVHTTP_REQ_POST, .protocol = TRAM_PROTOCOL_ANTHROPIC,
     .handle = handle_messages},
    {.path = "/v1/messages/count_tokens", .method = EVHTTP_REQ_POST, .protocol = TRAM_PROTOCOL_ANTHROPIC,
     .handle = handle_count_tokens},
    {.path = "/v1/embeddings", .method = EVHTTP_REQ_POST, .handle = tram_handle_embeddings},
    {.path = "/v1/models", .method = EVHTTP_REQ_GET, .handle = tram_handle_models},
    {.path = "/v1/load_lora_adapter", .method = EVHTTP_REQ_POST, .handle = tram_handle_load_lora},
    {.path = "/v1/unload_lora_adapter", .method = EVHTTP_REQ_POST, .handle = tram_handle_unload_lora},
    {.path = "/tokenize", .method = EVHTTP_REQ_POST, .handle = tram_handle_tokenize},
    {.path = "/detokenize", .method = EVHTTP_REQ_POST, .handle = tram_handle_detokenize},
    {.path = "/health", .method = EVHTTP_REQ_GET, .open = 1, .handle = tram_handle_health},
    {.path = "/readyz", .method = EVHTTP_REQ_GET, .open = 1, .handle = tram_handle_health},
    {.path = "/livez", .method = EVHTTP_REQ_GET, .open = 1, .handle = tram_handle_live},
    {.path = "/metrics", .method = EVHTTP_REQ_GET, .open = 1, .metrics = 1, .handle = tram_handle_metrics},
    {.path = "/version", .method = EVHTTP_REQ_GET, .open = 1, .handle = tram_handle_version},
};

/* application/json, with or without parameters; a missing type is taken as
 * JSON since some clients leave it out. */
static int is_json(const char *content_type)
{
    if (!content_type)
        return 1;
    while (*content_type == ' ')
        content_type++;
    size_t n = strlen("application/json");
    return !strncasecmp(content_type, "application/json", n) &&
           (content_type[n] == 0 || content_type[n] == ';' || content_type[n] == ' ');
}

static int allows(const route *r, enum evhttp_cmd_type m)
{
    return m == r->method || (m == EVHTTP_REQ_HEAD && r->method == EVHTTP_REQ_GET);
}

/* The checks before a handler runs; -1 with e filled when one fails. */
static int admit(tram_server *s, struct evhttp_request *req, const route *r, tram_api_error *e)
{
    const char *path = tram_http_path(req);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    if (!r)
        return tram_api_fail(e, 404, NULL, "unknown_url", "Invalid URL (%s %.200s)",
                             tram_http_method_name(m), path);
    if (!allows(r, m)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          tram_http_method_name(r->method));
        return tram_api_fail(e, 405, NULL, "method_not_allowed",
                             "Method %s is not allowed for %s; use %s.", tram_http_method_name(m),
                             r->path, tram_http_method_name(r->method));
    }
    const char *authorization = evhttp_find_header(in, "Authorization");
    if (r->open ? r->metrics && !tram_auth_ok(s->cfg.metrics_api_key, authorization)
                : !tram_api_keys_tenant(s->keys, authorization, evhttp_find_header(in, "X-Api-Key")))
        return tram_api_fail(e, 401, NULL, "invalid_api_key",
                             "Incorrect or missing API key: pass it as 'Authorization: Bearer "
                             "KEY' (or 'X-Api-Key: KEY').");
    if (r->method != EVHTTP_REQ_POST)
        return 0;
    if (!is_json(evhttp_find_header(in, "Content-Type")))
        return tram_api_fail(e, 415, NULL, "unsupported_media_type",
                             "Unsupported Content-Type: the body must be application/json.");
    size_t len = evbuffer_get_length(evhttp_request_get_input_buffer(req));
    if (len > s->cfg.max_body_size)
        return tram_api_fail(e, 413, NULL, "request_too_large",
                             "The request body has %zu bytes; at most %zu are allowed.", len,
                             s->cfg.max_body_size);
    return 0;
}

static int matches(const route *r, const char *path)
{
    size_t n = strlen(r->path);
    if (!r->prefix)
        return !strcmp(path, r->path);
    if (strncmp(path, r->path, n) || !path[n] || path[n] == '/')
        return 0;
    const char *after_id = strchr(path + n, '/');
    return r->suffix ? after_id && !strcmp(after_id, r->suffix) : !after_id;
}

/* The route of path for method m; else one of path's (a 405 names its
 * method), else NULL. */
static const route *find_route(const char *path, enum evhttp_cmd_type m)
{
    const route *other = NULL;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (!matches(&routes[i], path))
            continue;
        if (allows(&routes[i], m))
            return &routes[i];
        other = &routes[i];
    }
    return other;
}

void tram_router_dispatch(struct evhttp_request *req, void *arg)
{
    tram_server *s = arg;
    const route *r = find_route(tram_http_path(req), evhttp_request_get_command(req));
    tram_api_error e = {0};
    if (admit(s, req, r, &e)) {
        tram_http_send_error_as(req, &e, r ? r->protocol : TRAM_PROTOCOL_OPENAI);
        return;
    }
    r->handle(s, req);
}

