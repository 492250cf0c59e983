#include "server/worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/list.h"
#include "server/output_copy.h"

struct tram_worker {
    tram_engine_config engine_cfg;
    char *model_path;
    const char *const *lora_modules;
    int num_lora_modules;
    int max_queue;
    void (*notify)(void *arg);
    void *notify_arg;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* signalled on new submissions and on stop */
    tram_submission *subs;      /* under mu, oldest first */
    tram_submission **subs_tail;
    int stopping;               /* under mu */
    atomic_int inbox;           /* set under mu with subs or stopping: a busy engine
                                   thread reads it instead of taking mu every step */

    /* The engine thread never takes a lock the loop thread holds: it pushes
     * events onto a stack the loop thread empties in one exchange, and wakes
     * the loop only when the stack was empty (the loop takes all at once). */
    _Atomic(tram_event *) events;  /* newest first */
    _Atomic(tram_event *) spare;   /* events the loop thread gave back */
    tram_event *cache;          /* engine thread only: spare events to reuse */

    tram_engine *engine;        /* engine thread only */
    _Atomic(const tram_engine *) ready;  /* published once loaded */
    _Atomic uint64_t busy_us;   /* time spent in engine steps, for utilization */
};

/* ------------------------------------------------------------ events */

typedef struct {
    tram_event *head;
    tram_event **tail;
} event_list;

static void list_push(event_list *l, tram_event *ev)
{
    if (!ev)
        return;
    ev->next = NULL;
    *l->tail = ev;
    l->tail = &ev->next;
}

/* Payload bytes every event is given at least, so that most outputs (a
 * token's ids and text) fit in a reused one. */
#define EVENT_MIN_PAYLOAD 256

static void free_events(tram_event *ev)
{
    while (ev) {
        tram_event *next = ev->next;
        free(ev);
        ev = next;
    }
}

/* An event with room for payload bytes: a spare one when one is big enough,
 * so a step allocates only while the pool grows to what is in flight. */
static tram_event *event_new(tram_worker *w, tram_event_kind kind, uint64_t id, size_t payload)
{
    if (!w->cache)
        w->cache = atomic_exchange(&w->spare, NULL);
    tram_event *ev = w->cache;
    if (ev)
        w->cache = ev->next;
    if (ev && ev->cap < payload) {
        free(ev);
        ev = NULL;
    }
    if (!ev) {
        size_t cap = TRAM_MAX(payload, EVENT_MIN_PAYLOAD);
        ev = malloc(sizeof(*ev) + cap);
        if (!ev) {
            fprintf(stderr, "tram: out of memory posting an engine event\n");
            return NULL;
        }
        ev->cap = cap;
    }
    *ev = (tram_event){.kind = kind, .request_id = id, .cap = ev->cap};
    return ev;
}

/* A deep copy of o in one event, so it outlives the step. */
static tram_event *event_from_output(tram_worker *w, const tram_output *o)
{
    tram_event *ev = event_new(w, TRAM_EV_OUTPUT, o->request_id, tram_output_copy_size(o));
    if (ev)
        tram_output_copy(&ev->out, o, ev + 1);
    return ev;
}

/* Hands the list to the loop thread, newest first on the stack. */
static void post(tram_worker *w, event_list *l)
{
    tram_event *newest = NULL;
    for (tram_event *ev = l->head, *next; ev; ev = next) {
        next = ev->next;
        ev->next = newest;
        newest = ev;
    }
    if (!newest)
        return;
    tram_event *oldest = l->head, *seen = atomic_load(&w->events);
    do
        oldest->next = seen;
    while (!atomic_compare_exchange_weak(&w->events, &seen, newest));
    l->head = NULL;
    l->tail = &l->head;
    if (!seen)  /* else a wake-up is pending, and the loop takes everything */
        w->notify(w->notify_arg);
}

static tram_event *error_event(tram_worker *w, tram_event_kind kind, uint64_t id, int status,
                               const char *msg)
{
    tram_event *ev = event_new(w, kind, id, 0);
    if (ev)
        tram_api_fail(&ev->error, status, NULL, NULL, "%s", msg);
    return ev;
}

/* ------------------------------------------------------------ engine thread */

/* Adds or aborts what was submitted.  Requests beyond max_queue waiting ones
 * are rejected here, where the count is exact, rather than piling up. */
static void admit(tram_worker *w, tram_submission *s, event_list *evs)
{
    tram_engine_stats st;
    tram_engine_stats_get(w->engine, &st);
    int waiting = st.num_waiting;
    while (s) {
        tram_submission *next = s->next;
        tram_error err = {{0}};
        if (s->abort) {
            tram_engine_abort(w->engine, s->request_id);
        } else if (waiting >= w->max_queue) {
            list_push(evs, error_event(w, TRAM_EV_REJECTED, s->request_id, 503,
                                       TRAM_API_MSG_OVERLOADED));
        } else if (s->embed ? tram_engine_add_embedding(w->engine, s->request_id, &s->prompt, s->embed,
                                                        s->priority, &err)
                            : tram_engine_add_request(w->engine, s->request_id, &s->prompt, s->params,
                                                      s->priority, &err)) {
            list_push(evs, error_event(w, TRAM_EV_REJECTED, s->request_id, 400, err.msg));
        } else {
            waiting++;
            list_push(evs, event_new(w, TRAM_EV_ACCEPTED, s->request_id, 0));
        }
        free(s);
        s = next;
    }
}

static int step(tram_worker *w, event_list *evs)
{
    const tram_output *outs;
    int n;
    tram_error err = {{0}};
    double start = tram_now();
    int rc = tram_engine_step(w->engine, &outs, &n, &err);
    atomic_fetch_add(&w->busy_us, (uint64_t)((tram_now() - start) * 1e6));
    if (rc) {
        /* the cause goes to the log, never to clients */
        fprintf(stderr, "tram: engine step failed: %s\n", err.msg);
        list_push(evs, error_event(w, TRAM_EV_FAILED, 0, 500, "The engine failed."));
        return -1;
    }
    for (int i = 0; i < n; i++)
        list_push(evs, event_from_output(w, &outs[i]));
    return 0;
}

static void free_submissions(tram_submission *s)
{
    while (s) {
        tram_submission *next = s->next;
        free(s);
        s = next;
    }
}

tram_submission *tram_worker_new_submissions(int n)
{
    tram_submission *list = NULL;
    for (int i = 0; i < n; i++) {
        tram_submission *s = calloc(1, sizeof(*s));
        if (!s) {
            free_submissions(list);
            return NULL;
        }
        s->next = list;
        list = s;
    }
    return list;
}

/* Takes the submissions; waits for work first when there is nothing to run.
 * Returns 0 when asked to stop. */
static int wait_for_work(tram_worker *w, int idle, tram_submission **subs)
{
    *subs = NULL;
    if (!idle && !atomic_load(&w->inbox))
        return 1;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping && !w->subs && idle)
        pthread_cond_wait(&w->cv, &w->mu);
    int running = !w->stopping;
    *subs = w->subs;
    w->subs = NULL;
    w->subs_tail = &w->subs;
    atomic_store(&w->inbox, w->stopping);
    pthread_mutex_unlock(&w->mu);
    return running;
}

static void run(tram_worker *w)
{
    event_list evs = {.tail = &evs.head};
    int failed = 0;
    for (;;) {
        tram_submission *subs;
        int idle = failed || !tram_engine_has_unfinished(w->engine);
        if (!wait_for_work(w, idle, &subs)) {
            free_submissions(subs);
            return;
        }
        if (failed) {  /* the loop thread knows; it submits nothing more */
            free_submissions(subs);
            continue;
        }
        admit(w, subs, &evs);
        if (tram_engine_has_unfinished(w->engine) && step(w, &evs))
            failed = 1;
        post(w, &evs);
    }
}

/* --lora-modules name=path: each adapter read and registered, or the model
 * fails to load as a whole (an adapter the operator named must serve). */
static int add_lora_modules(tram_worker *w, tram_error *err)
{
    for (int i = 0; i < w->num_lora_modules; i++) {
        const char *spec = w->lora_modules[i], *eq = strchr(spec, '=');
        char name[TRAM_LORA_NAME_MAX];
        if (!eq || eq == spec || eq - spec >= (int)sizeof(name) || !eq[1])
            return tram_fail(err, "--lora-modules: '%s' is not NAME=PATH", spec);
        snprintf(name, sizeof(name), "%.*s", (int)(eq - spec), spec);
        if (tram_engine_add_lora(w->engine, name, eq + 1, err))
            return -1;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    tram_worker *w = arg;
    event_list evs = {.tail = &evs.head};
    tram_error err = {{0}};
    if (tram_engine_create(&w->engine, &w->engine_cfg, w->model_path, &err) || add_lora_modules(w, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        tram_engine_destroy(w->engine);
        w->engine = NULL;
        list_push(&evs, error_event(w, TRAM_EV_FAILED, 0, 500, "The model could not be loaded."));
        post(w, &evs);
        return NULL;
    }
    atomic_store(&w->ready, w->engine);
    list_push(&evs, event_new(w, TRAM_EV_READY, 0, 0));
    post(w, &evs);
    run(w);
    return NULL;
}

/* ------------------------------------------------------------ loop thread */

int tram_worker_start(tram_worker **out, const tram_worker_config *c, tram_error *err)
{
    tram_worker *w = tram_calloc(1, sizeof(*w), err);
    if (!w)
        return -1;
    w->engine_cfg = *c->engine;
    w->model_path = strdup(c->model_path);
    w->lora_modules = c->lora_modules;
    w->num_lora_modules = c->num_lora_modules;
    w->max_queue = c->max_queue;
    w->notify = c->notify;
    w->notify_arg = c->notify_arg;
    w->subs_tail = &w->subs;
    atomic_init(&w->ready, NULL);
    atomic_init(&w->inbox, 0);
    atomic_init(&w->events, NULL);
    atomic_init(&w->spare, NULL);
    atomic_init(&w->busy_us, 0);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (!w->model_path || pthread_create(&w->thread, NULL, worker_main, w)) {
        free(w->model_path);
        free(w);
        return tram_fail(err, "cannot start the engine thread");
    }
    *out = w;
    return 0;
}

void tram_worker_stop(tram_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    atomic_store(&w->inbox, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    tram_engine_destroy(w->engine);
    free_submissions(w->subs);
    free_events(atomic_load(&w->events));
    free_events(atomic_load(&w->spare));
    free_events(w->cache);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->model_path);
    free(w);
}

const tram_engine *tram_worker_engine(const tram_worker *w)
{
    return atomic_load(&((tram_worker *)w)->ready);
}

void tram_worker_submit(tram_worker *w, tram_submission *list)
{
    if (!list)
        return;
    tram_submission *last = list;
    while (last->next)
        last = last->next;
    pthread_mutex_lock(&w->mu);
    *w->subs_tail = list;
    w->subs_tail = &last->next;
    atomic_store(&w->inbox, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int tram_worker_abort(tram_worker *w, uint64_t request_id)
{
    tram_submission *s = malloc(sizeof(*s));
    if (!s)
        return -1;
    *s = (tram_submission){.abort = 1, .request_id = request_id};
    tram_worker_submit(w, s);
    return 0;
}

tram_event *tram_worker_take_events(tram_worker *w)
{
    tram_event *events = atomic_exchange(&w->events, NULL);
    TRAM_CHAIN_REVERSE(tram_event, events, next);
    return events;
}

void tram_worker_give_back(tram_worker *w, tram_event *list)
{
    if (!list)
        return;
    tram_event *last = list, *seen = atomic_load(&w->spare);
    while (last->next)
        last = last->next;
    do
        last->next = seen;
    while (!atomic_compare_exchange_weak(&w->spare, &seen, list));
}

double tram_worker_busy_seconds(const tram_worker *w)
{
    return (double)atomic_load(&((tram_worker *)w)->busy_us) * 1e-6;
}
