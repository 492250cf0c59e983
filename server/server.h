/* server.h — the OpenAI-compatible HTTP server (`tram serve`): what the CLI
 * needs to configure, start and drain it.
 *
 * Threads: the event-loop thread runs libevent (every evhttp call, every
 * completion, the metrics) and the engine thread runs the engine (worker.h).
 * They meet only in the worker's two queues.  What the server's own modules
 * share is in server/state.h. */
#ifndef TRAM_SERVER_H
#define TRAM_SERVER_H

#include <stddef.h>

#include "engine/tram.h"
#include "server/response_cache.h"

#define TRAM_MAX_SERVED_NAMES 8

typedef struct {
    const char *model_path;
    const char *host;
    int port;
    const char *served_model_names[TRAM_MAX_SERVED_NAMES];  /* none: the model file's name;
                                        the first is the one responses and metrics carry */
    int num_served_model_names;
    const char *chat_template;       /* Jinja source used instead of the model's template, or NULL */
    const char *api_key;             /* NULL or "": no authentication */
    int max_queue;                   /* requests allowed to wait (256) */
    size_t max_body_size;            /* bytes (4 MiB) */
    double drain_timeout;            /* seconds running requests get on SIGTERM (30) */
    int read_timeout;                /* seconds a client may take to send a request (30) */
    const char *metrics_prefix;      /* "tram" or "vllm" */
    tram_rcache_mode response_cache; /* off */
    size_t response_cache_size;      /* bytes of ready entries (256 MiB) */
    double response_cache_ttl;       /* seconds; 0: no expiry (600) */
    const char *response_cache_preload;  /* JSONL of requests computed before ready, or NULL */
    double cost_per_hour;            /* dollars; 0: no cost metrics */
    double cost_window;              /* seconds of the cost gauges' sliding window (300) */
    tram_engine_config engine;
} tram_server_config;

void tram_server_config_init(tram_server_config *c);

/* Serves until SIGTERM / SIGINT and the drain that follows; returns the exit
 * code (0 after a clean drain, 1 when the model cannot be loaded or the
 * engine fails). */
int tram_server_run(const tram_server_config *c);

#endif
