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

#endif
