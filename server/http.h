/* http.h — replies on an evhttp request: JSON, errors, plain text and SSE
 * streams, each also writing the request's log line at debug level. */
#ifndef TRAM_HTTP_H
#define TRAM_HTTP_H

#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>

#include "server/api_error.h"

void tram_http_send_json(struct evhttp_request *req, int status, json_t *body);  /* steals */
void tram_http_send_error(struct evhttp_request *req, const tram_api_error *e);
/* The same in the shape of the endpoint's protocol (api_error.h). */
void tram_http_send_error_as(struct evhttp_request *req, const tram_api_error *e,
                             tram_api_protocol protocol);
void tram_http_send_text(struct evhttp_request *req, int status, const char *content_type,
                         const char *text, size_t len);
/* For a connection's close callback, with the request it was serving (or
 * NULL): libevent 2.1 has already detached req from a connection that
 * failed (EOF, write error), and ending it is what frees it; when the
 * server frees the connection itself, libevent frees req after the
 * callback.  The caller forgets req either way. */
void tram_http_release_closed(struct evhttp_request *req);
/* The body of req, moved (not copied) into a buffer of its own, which the
 * caller frees: it outlives req, so a pool thread may read it after the
 * client left.  NULL when out of memory. */
struct evbuffer *tram_http_take_body(struct evhttp_request *req);
/* A taken body as contiguous, NUL-terminated text (its length in *len, the
 * NUL not counted), or NULL when out of memory. */
const char *tram_http_body_text(struct evbuffer *body, size_t *len);

/* evhttp_set_timeout, remembered for the streams below. */
void tram_http_set_timeout(struct evhttp *http, int seconds);

/* Streams: starts an SSE response, sends one event, and ends it. */
void tram_http_sse_start(struct evhttp_request *req);
void tram_http_sse_send(struct evhttp_request *req, const json_t *chunk);
void tram_http_sse_done(struct evhttp_request *req);
/* The typed events of the Responses and Anthropic streams: "event: NAME"
 * before the data, and an end without OpenAI's "data: [DONE]". */
void tram_http_sse_event(struct evhttp_request *req, const char *event, const json_t *data);
void tram_http_sse_end(struct evhttp_request *req);

/* For messages and logs: "GET", "POST", ...; the request's path ("" if none). */
/* While a request waits, nothing reads its socket: frees the connection
 * (running its close callback) when the client has hung up. */
void tram_http_poll_hangup(struct evhttp_request *req);

const char *tram_http_method_name(enum evhttp_cmd_type m);
const char *tram_http_path(struct evhttp_request *req);

#endif
