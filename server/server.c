/* server.c — tram_server_run: the event loop, the engine's wake-ups,
 * signals and the graceful drain. */
#include "server/server.h"

#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/auth.h"
#include "server/completion.h"
#include "server/embeddings.h"
#include "server/http.h"
#include "server/log.h"
#include "server/output_check.h"
#include "server/metrics.h"
#include "server/endpoints.h"
#include "server/preload.h"
#include "server/prep_pool.h"
#include "server/response_store.h"
#include "server/router.h"
#include "server/state.h"
#include "server/worker.h"
#include "chat/chat_template.h"

/* How often idle clients are polled and the drain deadline checked. */
#define TICK_USEC 100000
/* After the drain deadline, aborted requests get this long to report. */
#define ABORT_GRACE_S 5.0

void tram_server_config_init(tram_server_config *c)
{
    *c = (tram_server_config){
        .host = "127.0.0.1",
        .port = 8000,
        .max_queue = 256,
        .prep_threads = 2,
        .max_body_size = 4u << 20,
        .drain_timeout = 30,
        .read_timeout = 30,
        .metrics_prefix = "tram",
        .response_cache = TRAM_RCACHE_OFF,
        .response_cache_size = 256u << 20,
        .response_cache_ttl = 600,
        .responses_store_size = 64u << 20,
        .responses_store_count = 10000,
        .responses_store_ttl = 3600,
        .cost_window = 300,
    };
    tram_engine_config_init(&c->engine);
}

static void on_warm(tram_server *s)
{
    s->ready = 1;
    if (s->cfg.job) {
        tram_log(TRAM_LOG_INFO, "ready: '%s', %.2f s after start", s->model_name, tram_now() - s->started);
        s->cfg.job->ready(s, s->cfg.job->arg);
        return;
    }
    tram_log(TRAM_LOG_INFO, "ready: serving '%s' (max_model_len %d) on http://%s:%d, %.2f s after "
             "start", s->model_name, tram_engine_max_model_len(s->engine), s->cfg.host,
             s->cfg.port, tram_now() - s->started);
}

static void on_warm_up_failed(tram_server *s)
{
    tram_log(TRAM_LOG_ERROR, "the server cannot become ready; shutting down");
    s->exit_code = 1;
    event_base_loopexit(s->base, NULL);
}

/* Without a template it knows, the model gets ChatML (and a warning).  The
 * server is ready only after the warm-up and the preload. */
static void on_ready(tram_server *s)
{
    tram_error err = {{0}};
    const tram_engine *e = tram_worker_engine(s->worker);
    if (tram_chat_template_for(&s->chat, tram_engine_tokenizer(e), s->cfg.chat_template, 1, &err)) {
        tram_log(TRAM_LOG_ERROR, "chat template: %s", err.msg);
        s->exit_code = 1;
        event_base_loopexit(s->base, NULL);
        return;
    }
    if (tram_chat_template_warning(s->chat))
        tram_log(TRAM_LOG_WARNING, "%s", tram_chat_template_warning(s->chat));
    s->engine = e;
    snprintf(s->model_name, sizeof(s->model_name), "%s",
             s->cfg.num_served_model_names ? s->cfg.served_model_names[0]
                                           : tram_engine_model_name(s->engine));
    tram_log(TRAM_LOG_INFO, "loaded in %.2f s; warming up%s", tram_now() - s->started,
             s->cfg.response_cache_preload ? " and preloading the response cache" : "");
    tram_preload_run(s->preload, s, on_warm, on_warm_up_failed);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    tram_server *s = arg;
    uint64_t count;
    if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
        tram_log(TRAM_LOG_WARNING, "reading the engine's wake-up: %s", strerror(errno));
    tram_event *taken = tram_worker_take_events(s->worker);
    for (tram_event *ev = taken; ev; ev = ev->next) {
        if (ev->kind == TRAM_EV_READY) {
            on_ready(s);
        } else if (ev->kind == TRAM_EV_FAILED) {
            tram_log(TRAM_LOG_ERROR, "%s; shutting down",
                     s->engine ? "the engine failed" : "the model could not be loaded");
            s->exit_code = 1;
            s->draining = 1;  /* a job's done callbacks submit nothing more */
            tram_completions_fail_all(s);
            tram_embeddings_fail_all(s);
            event_base_loopexit(s->base, NULL);
        } else if (tram_embedding_owns(ev->request_id)) {
            tram_embedding_on_event(ev);
        } else {
            tram_completion_on_event(ev);
        }
    }
    tram_worker_give_back(s->worker, taken);
    for (tram_prep_task *t = tram_prep_pool_take_done(s->prep), *next; t; t = next) {
        next = t->next;
        t->done(t);
    }
}

/* Called on the engine thread and the preparation threads: a write to an
 * eventfd the loop polls, not event_active(), which takes the lock of the
 * loop's base, held by a loop thread that may be preempted. */
static void notify(void *arg)
{
    tram_server *s = arg;
    uint64_t one = 1;
    if (write(s->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        fprintf(stderr, "tram: waking the event loop: %s\n", strerror(errno));
}

static void start_drain(tram_server *s)
{
    s->draining = 1;
    s->drain_deadline = tram_now() + s->cfg.drain_timeout;
    if (s->listener)
        evhttp_del_accept_socket(s->http, s->listener);
    s->listener = NULL;
    tram_log(TRAM_LOG_INFO, "draining: %d request(s) in flight, waiting up to %.0f s",
             s->completions.count, s->cfg.drain_timeout);
    tram_completions_check_drained(s);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    tram_server *s = arg;
    if (!s->draining) {
        tram_log(TRAM_LOG_INFO, "received signal %d", (int)sig);
        start_drain(s);
    } else {
        s->drain_deadline = tram_now();  /* a second signal: stop waiting */
    }
}

/* SIGHUP: the key file again, the command line's keys with it; a file
 * that does not load leaves the keys as they were. */
static void on_reload(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    tram_server *s = arg;
    tram_api_keys *keys;
    tram_error err = {{0}};
    if (tram_api_keys_load(&keys, s->cfg.api_keys, s->cfg.num_api_keys, s->cfg.api_key_file, &err)) {
        tram_log(TRAM_LOG_WARNING, "api keys not reloaded, the %d loaded before still hold: %s",
                 tram_api_keys_count(s->keys), err.msg);
        return;
    }
    tram_api_keys_free(s->keys);
    s->keys = keys;
    tram_log(TRAM_LOG_INFO, "api keys reloaded: %d keys, %d tenants", tram_api_keys_count(keys),
             tram_api_keys_tenants(keys));
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    tram_server *s = arg;
    tram_completions_poll_disconnects(s);
    tram_embeddings_poll_disconnects(s);
    if (s->cache)
        tram_rcache_expire(s->cache, tram_now());
    tram_cost_observe(&s->cost, tram_now(), s->metrics.served_tokens,
                      tram_metrics_requests(&s->metrics));
    if (s->draining)  /* a /tokenize job's end does not check it */
        tram_completions_check_drained(s);
    if (!s->draining || tram_now() < s->drain_deadline)
        return;
    tram_completions_abort_all(s);
    tram_embeddings_abort_all(s);
    if (tram_now() > s->drain_deadline + ABORT_GRACE_S) {
        tram_log(TRAM_LOG_WARNING, "drain: %d request(s) did not finish; exiting", s->completions.count);
        event_base_loopexit(s->base, NULL);
    }
}

static int setup_http(tram_server *s)
{
    if (s->cfg.job)  /* offline: nothing listens */
        return 0;
    s->http = evhttp_new(s->base);
    if (!s->http)
        return -1;
    /* every method reaches the router, which answers 405 in JSON */
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    /* Bodies up to 4x the limit are read and answered 413 in JSON; beyond that
     * libevent refuses them while reading, so no client can make us buffer more. */
    evhttp_set_max_body_size(s->http, (ev_ssize_t)s->cfg.max_body_size * 4 + 4096);
    evhttp_set_max_headers_size(s->http, 64 << 10);
    tram_http_set_timeout(s->http, s->cfg.read_timeout);
    evhttp_set_gencb(s->http, tram_router_dispatch, s);
    s->listener = evhttp_bind_socket_with_handle(s->http, s->cfg.host, (ev_uint16_t)s->cfg.port);
    if (!s->listener) {
        tram_log(TRAM_LOG_ERROR, "cannot listen on %s:%d", s->cfg.host, s->cfg.port);
        return -1;
    }
    return 0;
}

static int setup_events(tram_server *s)
{
    struct timeval tick = {.tv_usec = TICK_USEC};
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->wake = s->wake_fd < 0 ? NULL : event_new(s->base, s->wake_fd, EV_READ | EV_PERSIST, on_wake, s);
    s->tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
    s->sigterm = evsignal_new(s->base, SIGTERM, on_signal, s);
    s->sigint = evsignal_new(s->base, SIGINT, on_signal, s);
    if (!s->wake || !s->tick || !s->sigterm || !s->sigint || event_add(s->wake, NULL) ||
        event_add(s->tick, &tick) ||
        event_add(s->sigterm, NULL) || event_add(s->sigint, NULL))
        return -1;
    if (s->cfg.api_key_file &&
        (!(s->sighup = evsignal_new(s->base, SIGHUP, on_reload, s)) || event_add(s->sighup, NULL)))
        return -1;
    return 0;
}

static int load_keys(tram_server *s)
{
    tram_error err = {{0}};
    if (tram_api_keys_load(&s->keys, s->cfg.api_keys, s->cfg.num_api_keys, s->cfg.api_key_file, &err)) {
        tram_log(TRAM_LOG_ERROR, "api keys: %s", err.msg);
        return -1;
    }
    return 0;
}

/* The response cache and the start-up requests, before anything listens: a
 * bad preload file stops the server at once. */
static int setup_cache(tram_server *s)
{
    tram_rcache_config rc = {.max_bytes = s->cfg.response_cache_size,
                             .ttl = s->cfg.response_cache_ttl};
    if (s->cfg.response_cache != TRAM_RCACHE_OFF && !(s->cache = tram_rcache_new(&rc))) {
        tram_log(TRAM_LOG_ERROR, "out of memory creating the response cache");
        return -1;
    }
    if (tram_preload_read(&s->preload, s->cfg.response_cache_preload)) {
        tram_rcache_free(s->cache);
        return -1;
    }
    return 0;
}

/* The stored /v1/responses (none with --responses-store-size 0). */
static int setup_responses_store(tram_server *s)
{
    tram_rstore_config c = {.max_bytes = s->cfg.responses_store_size,
                            .max_count = (size_t)s->cfg.responses_store_count,
                            .ttl = s->cfg.responses_store_ttl};
    if (c.max_bytes && c.max_count && !(s->responses = tram_rstore_new(&c))) {
        tram_log(TRAM_LOG_ERROR, "out of memory creating the responses store");
        return -1;
    }
    return 0;
}

static int start_worker(tram_server *s)
{
    tram_error err = {{0}};
    if (tram_output_checker_start(s->base, &s->checker, &err)) {
        tram_log(TRAM_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    tram_prep_pool_config pc = {.threads = s->cfg.prep_threads,
                                .max_queue = s->cfg.max_queue,
                                .notify = notify,
                                .notify_arg = s};
    tram_worker_config wc = {.engine = &s->cfg.engine,
                             .model_path = s->cfg.model_path,
                             .lora_modules = s->cfg.lora_modules,
                             .num_lora_modules = s->cfg.num_lora_modules,
                             .max_queue = s->cfg.max_queue,
                             .notify = notify,
                             .notify_arg = s};
    if (tram_prep_pool_start(&s->prep, &pc, &err) || tram_worker_start(&s->worker, &wc, &err)) {
        tram_log(TRAM_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (s->cfg.job)
        tram_log(TRAM_LOG_INFO, "loading %s", s->cfg.model_path);
    else
        tram_log(TRAM_LOG_INFO, "loading %s; listening on http://%s:%d", s->cfg.model_path,
                 s->cfg.host, s->cfg.port);
    return 0;
}

/* The preparation threads and the engine thread are stopped first, so no
 * task or event can arrive for a request freed here; the connections go
 * last. */
static void teardown(tram_server *s)
{
    tram_prep_pool_stop(s->prep);
    s->prep = NULL;
    tram_worker_stop(s->worker);
    s->draining = 1;
    tram_completions_fail_all(s);
    tram_embeddings_fail_all(s);
    tram_output_checker_stop(s->checker); /* after the completions: they cancel their checks */
    tram_endpoint_jobs_free(s);
    tram_rcache_free(s->cache);
    tram_rstore_free(s->responses);
    tram_preload_free(s->preload);
    tram_chat_template_free(s->chat);
    if (s->http)
        evhttp_free(s->http);
    tram_api_keys_free(s->keys);
    struct event *evs[] = {s->wake, s->tick, s->sigterm, s->sigint, s->sighup};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
        if (evs[i])
            event_free(evs[i]);
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    event_base_free(s->base);
}

void tram_server_submit(tram_server *s, tram_api_kind kind, const char *body, size_t len,
                        tram_server_done done, void *arg)
{
    tram_api_error e = {0};
    if (s->draining)
        tram_api_fail(&e, 503, NULL, NULL, TRAM_API_MSG_SHUTTING_DOWN);
    if (!e.status && !tram_completion_start_internal(s, kind, body, len, 0, done, arg, &e))
        return;
    json_t *error = tram_api_error_json(&e);
    done(arg, e.status, error);
    json_decref(error);
}

void tram_server_stop(tram_server *s)
{
    if (!s->draining)
        start_drain(s);
}

int tram_server_stopping(const tram_server *s)
{
    return s->draining;
}

int tram_server_run(const tram_server_config *c)
{
    static tram_server srv;  /* one per process, reachable from signal events */
    tram_server *s = &srv;
    *s = (tram_server){.cfg = *c, .wake_fd = -1, .started = tram_now()};
    tram_sampling_params_init(&s->defaults);
    struct timeval now;
    gettimeofday(&now, NULL);
    tram_metrics_init(&s->metrics);
    s->metrics_info = (tram_metrics_info){.prefix = c->metrics_prefix,
                                          .model_name = s->model_name,
                                          .version = TRAM_SERVER_VERSION,
                                          .backend = s->cfg.engine.device,
                                          .start_time = now.tv_sec + now.tv_usec * 1e-6};
    tram_cost_init(&s->cost, c->cost_per_hour, c->cost_window, s->started);
    if (load_keys(s))
        return 1;
    if (setup_cache(s)) {
        tram_api_keys_free(s->keys);
        return 1;
    }
    if (setup_responses_store(s)) {
        tram_rcache_free(s->cache);
        tram_preload_free(s->preload);
        tram_api_keys_free(s->keys);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (evthread_use_pthreads() || !(s->base = event_base_new())) {
        tram_log(TRAM_LOG_ERROR, "cannot start the event loop");
        return 1;
    }
    if (setup_events(s) || setup_http(s) || start_worker(s)) {
        teardown(s);
        return 1;
    }
    event_base_dispatch(s->base);
    teardown(s);
    tram_log(TRAM_LOG_INFO, "stopped");
    return s->exit_code;
}
