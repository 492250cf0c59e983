/* server.h — the OpenAI-compatible HTTP server (`tram serve`): what the CLI
 * needs to configure, start and drain it.
 *
 * Threads: the event-loop thread runs libevent (every evhttp call, every
 * completion, the metrics), the engine thread runs the engine (worker.h),
 * and a few preparation threads (prep_pool.h) parse, render, tokenize and
 * compile the requests.  They meet only in the worker's and the pool's
 * queues.  What the server's own modules
 * share is in server/state.h. */
#ifndef TRAM_SERVER_H
#define TRAM_SERVER_H

#include <jansson.h>
#include <stddef.h>

#include "engine/tram.h"
#include "server/api_request.h"
#include "server/response_cache.h"

#define TRAM_MAX_LORA_MODULES 64
#define TRAM_MAX_SERVED_NAMES 8

typedef struct tram_server tram_server;

/* An offline job (`tram generate --input`): the server runs without a
 * listener, and once it is ready (loaded and warmed up) it calls
 * ready(s, arg), which submits bodies with tram_server_submit. */
typedef struct {
    void (*ready)(tram_server *s, void *arg);
    void *arg;
} tram_server_job;

/* How a submitted body ended: the HTTP status and the body `tram serve`
 * would have answered (a response, or {"error": ...}; NULL only when out of
 * memory).  Called on the event-loop thread; body lives until it returns. */
typedef void (*tram_server_done)(void *arg, int status, const json_t *body);

typedef struct {
    const char *model_path;
    const char *host;
    int port;
    const char *served_model_names[TRAM_MAX_SERVED_NAMES];  /* none: the model file's name;
                                        the first is the one responses and metrics carry */
    int num_served_model_names;
    const char *lora_modules[TRAM_MAX_LORA_MODULES];  /* --lora-modules NAME=PATH */
    int num_lora_modules;
    int enable_lora_runtime_updates; /* POST /v1/load_lora_adapter and /v1/unload_lora_adapter */
    const char *chat_template;       /* Jinja source used instead of the model's template, or NULL */
    const char *const *api_keys;     /* --api-key, repeatable (or TRAM_API_KEY): key1, key2, ... */
    int num_api_keys;                /* none, and no file: no authentication */
    const char *api_key_file;        /* `KEY [TENANT]` lines, read again on SIGHUP, or NULL */
    const char *metrics_api_key;     /* NULL: /metrics is open */
    int max_queue;                   /* requests allowed to wait (256), for the engine and
                                        for a preparation thread each */
    int prep_threads;                /* threads preparing requests (2) */
    size_t max_body_size;            /* bytes (4 MiB) */
    double drain_timeout;            /* seconds running requests get on SIGTERM (30) */
    int read_timeout;                /* seconds a client may take to send a request (30) */
    const char *metrics_prefix;      /* "tram" or "vllm" */
    tram_rcache_mode response_cache; /* off */
    size_t response_cache_size;      /* bytes of ready entries (256 MiB) */
    double response_cache_ttl;       /* seconds; 0: no expiry (600) */
    const char *response_cache_preload;  /* JSONL of requests computed before ready, or NULL */
    size_t responses_store_size;     /* bytes of stored /v1/responses (64 MiB); 0: none stored */
    int responses_store_count;       /* stored responses at most (10000) */
    double responses_store_ttl;      /* seconds one is kept; 0: until evicted (3600) */
    double cost_per_hour;            /* dollars; 0: no cost metrics */
    double cost_window;              /* seconds of the cost gauges' sliding window (300) */
    tram_engine_config engine;
    const tram_server_job *job;      /* NULL: serve HTTP on host:port; else run the job */
} tram_server_config;

void tram_server_config_init(tram_server_config *c);

/* Serves until SIGTERM / SIGINT and the drain that follows; returns the exit
 * code (0 after a clean drain, 1 when the model cannot be loaded or the
 * engine fails). */
int tram_server_run(const tram_server_config *c);

/* A job's request: body[0..len) run exactly as a client's request to the
 * endpoint (parsed, rendered, generated, answered); done is called once,
 * perhaps before this returns (a refused body, a cache hit). */
void tram_server_submit(tram_server *s, tram_api_kind kind, const char *body, size_t len,
                        tram_server_done done, void *arg);
/* The job ends: the server drains what is in flight, then tram_server_run
 * returns.  A signal starts the same drain; tram_server_stopping tells. */
void tram_server_stop(tram_server *s);
int tram_server_stopping(const tram_server *s);

#endif
