/* state.h — the one tram_server of the process: the state that server.c,
 * the router, the endpoints and the completions share on the event-loop
 * thread. */
#ifndef TRAM_SERVER_STATE_H
#define TRAM_SERVER_STATE_H

#include "engine/tram.h"
#include "kernels/list.h"
#include "server/api_error.h"
#include "server/cost.h"
#include "server/metrics.h"
#include "server/response_cache.h"
#include "server/server.h"
#include "server/worker.h"

#define TRAM_SERVER_VERSION "0.1.0"

struct event_base;
struct evhttp;
struct evhttp_bound_socket;
struct event;
struct tram_chat_template;
struct tram_preload;
struct tram_api_keys;
typedef struct tram_completion tram_completion;
struct tram_embedding;

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
    struct event *sighup;            /* reloads --api-key-file (NULL without one) */
    struct tram_api_keys *keys;      /* the API keys now (auth.h); NULL: none */
    tram_worker *worker;
    struct tram_output_checker *checker;  /* schema checks of finished outputs (output_check.h) */
    struct tram_prep_pool *prep;     /* the request-preparation threads; NULL once stopped */
    TRAM_LIST_OF(struct tram_endpoint_job) jobs;  /* /tokenize and /detokenize requests on the pool (endpoints.c) */
    const tram_engine *engine;       /* NULL until loaded */
    int ready;                       /* loaded, warmed up and preloaded: taking requests */
    struct tram_chat_template *chat; /* the model's, made when it is loaded */
    TRAM_LIST_OF(tram_completion) completions;  /* requests in flight, being prepared too (completion.c) */
    TRAM_LIST_OF(struct tram_embedding) embeddings;  /* /v1/embeddings requests in flight (embeddings.c) */
    int num_flushing;                /* final replies not yet fully written */
    int draining;
    double drain_deadline;           /* tram_now() time */
    int exit_code;
    double started;                  /* tram_now() when tram_server_run began */
    tram_sampling_params defaults;   /* the engine's, for parsing requests */
    tram_metrics metrics;
    tram_metrics_info metrics_info;
    tram_rcache *cache;              /* NULL with --response-cache off */
    struct tram_rstore *responses;   /* the stored /v1/responses (response_store.h); NULL: none */
    tram_cost cost;
    struct tram_preload *preload;    /* the start-up requests (preload.h) */
} tram_server;

/* The 503 message of a server that takes no new request now (still
 * loading, or draining), NULL while it takes them. */
static inline const char *tram_server_unready(const tram_server *s)
{
    return s->draining ? TRAM_API_MSG_SHUTTING_DOWN : !s->ready ? TRAM_API_MSG_LOADING : NULL;
}

#endif
