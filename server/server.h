/* server.h — the OpenAI-compatible HTTP server (`tram serve`).
 *
 * Threads: the event-loop thread runs libevent (every evhttp call, every
 * tram_gen, the metrics) and the engine thread runs the engine (worker.h).
 * They meet only in the worker's two queues. */
#ifndef TRAM_SERVER_H
#define TRAM_SERVER_H

#include <jansson.h>
#include <stddef.h>

#include "engine/tram.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/worker.h"

#define TRAM_SERVER_VERSION "0.1.0"

typedef struct {
    const char *model_path;
    const char *host;
    int port;
    const char *served_model_name;   /* NULL: the model file's name */
    const char *api_key;             /* NULL or "": no authentication */
    int max_queue;                   /* requests allowed to wait (256) */
    size_t max_body_size;            /* bytes (4 MiB) */
    double drain_timeout;            /* seconds running requests get on SIGTERM (30) */
    int read_timeout;                /* seconds a client may take to send a request (30) */
    const char *metrics_prefix;      /* "tram" or "vllm" */
    tram_engine_config engine;
} tram_server_config;

void tram_server_config_init(tram_server_config *c);

/* Serves until SIGTERM / SIGINT and the drain that follows; returns the exit
 * code (0 after a clean drain, 1 when the model cannot be loaded or the
 * engine fails). */
int tram_server_run(const tram_server_config *c);

/* ---- shared by the server's own modules ---- */

struct event_base;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;
struct event;
typedef struct tram_gen tram_gen;

typedef struct tram_server {
    tram_server_config cfg;
    char model_name[256];            /* what clients call the model */
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *listener;
    struct event *wake;              /* reads wake_fd */
    int wake_fd;                     /* eventfd the engine thread writes */
    struct event *tick;              /* disconnect polling and the drain deadline */
    struct event *sigterm, *sigint;
    tram_worker *worker;
    const tram_engine *engine;       /* NULL until loaded */
    struct tram_chat_template *chat; /* the model's, made when it is loaded */
    tram_gen *gens;                  /* requests in flight */
    int num_gens;
    int num_flushing;                /* final replies not yet fully written */
    int draining;
    double drain_deadline;           /* tram_now() time */
    int exit_code;
    tram_sampling_params defaults;   /* the engine's, for parsing requests */
    tram_metrics metrics;
    tram_metrics_info metrics_info;
} tram_server;

/* server.c: ends the loop once draining and every reply is written. */
void tram_server_check_drained(tram_server *s);

/* http.c: replies (each also writes the request's log line at debug level) */
void tram_http_send_json(struct evhttp_request *req, int status, json_t *body);  /* steals */
void tram_http_send_error(struct evhttp_request *req, const tram_api_error *e);
void tram_http_send_text(struct evhttp_request *req, int status, const char *content_type,
                         const char *text, size_t len);
/* A body for the endpoints that take JSON: contiguous and NUL-terminated. */
const char *tram_http_body(struct evhttp_request *req, size_t *len);
/* Routes every request; installed with evhttp_set_gencb. */
void tram_http_dispatch(struct evhttp_request *req, void *srv);
/* Streams: starts an SSE response, sends one event, and ends it. */
void tram_http_sse_start(struct evhttp_request *req);
void tram_http_sse_send(struct evhttp_request *req, const json_t *chunk);
void tram_http_sse_done(struct evhttp_request *req);

/* endpoints.c */
void tram_handle_models(tram_server *s, struct evhttp_request *req);
void tram_handle_health(tram_server *s, struct evhttp_request *req);
void tram_handle_version(tram_server *s, struct evhttp_request *req);
void tram_handle_metrics(tram_server *s, struct evhttp_request *req);
void tram_handle_tokenize(tram_server *s, struct evhttp_request *req);
void tram_handle_detokenize(tram_server *s, struct evhttp_request *req);
/* 404 with OpenAI's message when the request names a model we do not serve. */
int tram_check_model(const tram_server *s, const char *model, tram_api_error *e);

/* gen.c: chat and text completions */
void tram_handle_chat(tram_server *s, struct evhttp_request *req);
void tram_handle_completion(tram_server *s, struct evhttp_request *req);
void tram_gen_on_event(tram_server *s, const tram_event *ev);
/* Aborts every request in flight (the drain deadline passed). */
void tram_gen_abort_all(tram_server *s);
/* Fails every request in flight without waiting for the engine (it is gone). */
void tram_gen_fail_all(tram_server *s);
/* Notices clients that went away while their request waits or runs. */
void tram_gen_poll_disconnects(tram_server *s);

#endif
