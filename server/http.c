/* http.c — routing, the checks every request passes, replies and SSE. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "server/auth.h"
#include "server/log.h"
#include "server/server.h"

typedef struct {
    const char *path;
    enum evhttp_cmd_type method;
    int open;   /* answered without an API key (probes and scrapers) */
    void (*handle)(tram_server *s, struct evhttp_request *req);
} route;

static const route routes[] = {
    {"/v1/chat/completions", EVHTTP_REQ_POST, 0, tram_handle_chat},
    {"/v1/completions", EVHTTP_REQ_POST, 0, tram_handle_completion},
    {"/v1/models", EVHTTP_REQ_GET, 0, tram_handle_models},
    {"/tokenize", EVHTTP_REQ_POST, 0, tram_handle_tokenize},
    {"/detokenize", EVHTTP_REQ_POST, 0, tram_handle_detokenize},
    {"/health", EVHTTP_REQ_GET, 1, tram_handle_health},
    {"/metrics", EVHTTP_REQ_GET, 1, tram_handle_metrics},
    {"/version", EVHTTP_REQ_GET, 1, tram_handle_version},
};

static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "?";
}

static const char *request_path(struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    return path ? path : "";
}

void tram_http_send_text(struct evhttp_request *req, int status, const char *content_type,
                         const char *text, size_t len)
{
    tram_log(TRAM_LOG_DEBUG, "%s %.200s %d", method_name(evhttp_request_get_command(req)),
             request_path(req), status);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", content_type);
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, text, len);
    evhttp_send_reply(req, status, NULL, b);
    if (b)
        evbuffer_free(b);
}

void tram_http_send_json(struct evhttp_request *req, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"message\":\"Out of memory.\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        tram_http_send_text(req, 500, "application/json", oom, sizeof(oom) - 1);
        return;
    }
    tram_http_send_text(req, status, "application/json", text, strlen(text));
    free(text);
}

void tram_http_send_error(struct evhttp_request *req, const tram_api_error *e)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (e->status == 503)
        evhttp_add_header(h, "Retry-After", "1");
    if (e->status == 401)
        evhttp_add_header(h, "WWW-Authenticate", "Bearer");
    tram_http_send_json(req, e->status, tram_api_error_json(e));
}

const char *tram_http_body(struct evhttp_request *req, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    *len = evbuffer_get_length(in);
    evbuffer_add(in, "", 1);
    return (const char *)evbuffer_pullup(in, -1);
}

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

/* The checks before a handler runs; -1 with e filled when one fails. */
static int admit(tram_server *s, struct evhttp_request *req, const route *r, tram_api_error *e)
{
    const char *path = request_path(req);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    if (!r)
        return tram_api_fail(e, 404, NULL, "unknown_url", "Invalid URL (%s %.200s)",
                             method_name(m), path);
    if (m != r->method && !(m == EVHTTP_REQ_HEAD && r->method == EVHTTP_REQ_GET)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          method_name(r->method));
        return tram_api_fail(e, 405, NULL, "method_not_allowed",
                             "Method %s is not allowed for %s; use %s.", method_name(m), r->path,
                             method_name(r->method));
    }
    if (!r->open && !tram_auth_ok(s->cfg.api_key, evhttp_find_header(in, "Authorization")))
        return tram_api_fail(e, 401, NULL, "invalid_api_key",
                             "Incorrect or missing API key: pass it as 'Authorization: Bearer "
                             "KEY'.");
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

void tram_http_dispatch(struct evhttp_request *req, void *arg)
{
    tram_server *s = arg;
    const char *path = request_path(req);
    const route *r = NULL;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (!strcmp(path, routes[i].path))
            r = &routes[i];
    tram_api_error e = {0};
    if (admit(s, req, r, &e)) {
        tram_http_send_error(req, &e);
        return;
    }
    r->handle(s, req);
}

/* A stream writes one small chunk per token: without TCP_NODELAY, Nagle's
 * algorithm may hold a chunk back until the client acknowledges the one
 * before, which a delayed ACK can stretch to tens of milliseconds. */
static void send_without_delay(struct evhttp_request *req)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    evutil_socket_t fd = conn ? bufferevent_getfd(evhttp_connection_get_bufferevent(conn)) : -1;
    int on = 1;
    if (fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)))
        tram_log(TRAM_LOG_DEBUG, "TCP_NODELAY not set on a stream's socket");
}

void tram_http_sse_start(struct evhttp_request *req)
{
    send_without_delay(req);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, NULL);
}

static void sse_write(struct evhttp_request *req, const char *data)
{
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return;
    evbuffer_add_printf(b, "data: %s\n\n", data);
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
}

void tram_http_sse_send(struct evhttp_request *req, const json_t *chunk)
{
    char *text = chunk ? json_dumps(chunk, JSON_COMPACT) : NULL;
    if (text)
        sse_write(req, text);
    free(text);
}

void tram_http_sse_done(struct evhttp_request *req)
{
    sse_write(req, "[DONE]");
    evhttp_send_reply_end(req);
}
