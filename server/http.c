/* http.c — replies and SSE streams. */
#include "server/http.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/log.h"

const char *tram_http_method_name(enum evhttp_cmd_type m)
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

const char *tram_http_path(struct evhttp_request *req)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    return path ? path : "";
}

void tram_http_send_text(struct evhttp_request *req, int status, const char *content_type,
                         const char *text, size_t len)
{
    tram_log(TRAM_LOG_DEBUG, "%s %.200s %d",
             tram_http_method_name(evhttp_request_get_command(req)), tram_http_path(req), status);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", content_type);
    /* HEAD: GET's headers, its Content-Length included, and no body, or a
     * keep-alive client would read the body as the next response */
    int head = evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
    if (head) {
        char length[24];
        snprintf(length, sizeof(length), "%zu", len);
        evhttp_add_header(h, "Content-Length", length);
    }
    struct evbuffer *b = evbuffer_new();
    if (b && !head)
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

void tram_http_send_error_as(struct evhttp_request *req, const tram_api_error *e,
                             tram_api_protocol protocol)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (e->status == 503)
        evhttp_add_header(h, "Retry-After", "1");
    if (e->status == 401)
        evhttp_add_header(h, "WWW-Authenticate", "Bearer");
    tram_http_send_json(req, e->status, tram_api_error_json_as(e, protocol));
}

void tram_http_send_error(struct evhttp_request *req, const tram_api_error *e)
{
    tram_http_send_error_as(req, e, TRAM_PROTOCOL_OPENAI);
}

void tram_http_release_closed(struct evhttp_request *req)
{
    if (req && !evhttp_request_get_connection(req))
        evhttp_send_reply_end(req);
}

struct evbuffer *tram_http_take_body(struct evhttp_request *req)
{
    struct evbuffer *body = evbuffer_new();
    if (body && evbuffer_add_buffer(body, evhttp_request_get_input_buffer(req))) {
        evbuffer_free(body);
        return NULL;
    }
    return body;
}

const char *tram_http_body_text(struct evbuffer *body, size_t *len)
{
    *len = evbuffer_get_length(body);
    if (evbuffer_add(body, "", 1))
        return NULL;
    return (const char *)evbuffer_pullup(body, -1);
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

/* The connections' read timeout (evhttp_set_timeout), remembered so that a
 * stream can lift it and put it back. */
static struct timeval read_timeout;

void tram_http_set_timeout(struct evhttp *http, int seconds)
{
    evhttp_set_timeout(http, seconds);
    read_timeout = (struct timeval){.tv_sec = seconds};
}

/* libevent keeps reading a connection while it writes a reply, to see a
 * hang-up, and every chunk re-arms that read with its timeout: a stream
 * whose next chunk is longer in coming than the timeout (a long prefill
 * beside it in the batch, tool-call tokens held back) would be cut, though
 * the client is waiting as it should.  The read timeout guards the request
 * while it arrives; during the reply only the write timeout applies, and
 * the end of the stream restores both for the next request on the
 * connection. */
static void stream_timeouts(struct evhttp_request *req, int streaming)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    if (bev && read_timeout.tv_sec > 0)
        bufferevent_set_timeouts(bev, streaming ? NULL : &read_timeout, &read_timeout);
}

void tram_http_sse_start(struct evhttp_request *req)
{
    send_without_delay(req);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, NULL);
    stream_timeouts(req, 1);
}

static void sse_write_event(struct evhttp_request *req, const char *event, const char *data)
{
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return;
    if (event)
        evbuffer_add_printf(b, "event: %s\n", event);
    evbuffer_add_printf(b, "data: %s\n\n", data);
    evhttp_send_reply_chunk(req, b);
    evbuffer_free(b);
}

void tram_http_sse_event(struct evhttp_request *req, const char *event, const json_t *data)
{
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    if (text)
        sse_write_event(req, event, text);
    free(text);
}

void tram_http_sse_send(struct evhttp_request *req, const json_t *chunk)
{
    tram_http_sse_event(req, NULL, chunk);
}

void tram_http_sse_end(struct evhttp_request *req)
{
    stream_timeouts(req, 0);
    evhttp_send_reply_end(req);
}

void tram_http_sse_done(struct evhttp_request *req)
{
    sse_write_event(req, NULL, "[DONE]");
    tram_http_sse_end(req);
}

void tram_http_poll_hangup(struct evhttp_request *req)
{
    struct evhttp_connection *conn = req ? evhttp_request_get_connection(req) : NULL;
    if (!conn)
        return;
    struct pollfd pfd = {.fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn)), .events = POLLRDHUP};
    if (pfd.fd >= 0 && poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        evhttp_connection_free(conn);  /* runs the close callback */
}
