/* prep_pool.c — the request-preparation threads (see prep_pool.h). */
#include "server/prep_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/list.h"

struct tram_prep_pool {
    tram_prep_pool_config cfg;
    pthread_t *threads;
    int num_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* signalled on a new task and on stop */
    tram_prep_task *queue;      /* under mu, oldest first */
    tram_prep_task **queue_tail;
    int queued, running;        /* under mu */
    int stopping;               /* under mu */
    /* finished tasks, newest first: the loop thread takes them all at once,
     * so a pool thread never waits on the loop */
    _Atomic(tram_prep_task *) finished;
};

/* The next task, or NULL when stopping. */
static tram_prep_task *next_task(tram_prep_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && !p->queue)
        pthread_cond_wait(&p->cv, &p->mu);
    tram_prep_task *t = p->stopping ? NULL : p->queue;
    if (t) {
        p->queue = t->next;
        if (!p->queue)
            p->queue_tail = &p->queue;
        p->queued--;
        p->running++;
    }
    pthread_mutex_unlock(&p->mu);
    return t;
}

static void post(tram_prep_pool *p, tram_prep_task *t)
{
    tram_prep_task *seen = atomic_load(&p->finished);
    do
        t->next = seen;
    while (!atomic_compare_exchange_weak(&p->finished, &seen, t));
    pthread_mutex_lock(&p->mu);
    p->running--;
    pthread_mutex_unlock(&p->mu);
    if (!seen)  /* else a wake-up is pending, and the loop takes everything */
        p->cfg.notify(p->cfg.notify_arg);
}

static void *thread_main(void *arg)
{
    tram_prep_pool *p = arg;
    for (tram_prep_task *t; (t = next_task(p));) {
        t->run(t);
        post(p, t);
    }
    return NULL;
}

static void join_all(tram_prep_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->num_started; i++)
        pthread_join(p->threads[i], NULL);
}

static void pool_free(tram_prep_pool *p)
{
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int tram_prep_pool_start(tram_prep_pool **out, const tram_prep_pool_config *c, tram_error *err)
{
    tram_prep_pool *p = tram_calloc(1, sizeof(*p), err);
    if (!p)
        return -1;
    p->cfg = *c;
    p->queue_tail = &p->queue;
    atomic_init(&p->finished, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_attr_t attr;
    int ok = (p->threads = calloc((size_t)c->threads, sizeof(*p->threads))) != NULL &&
             !pthread_attr_init(&attr);
    if (ok) {
        ok = !pthread_attr_setstacksize(&attr, TRAM_PREP_STACK_SIZE);
        while (ok && p->num_started < c->threads &&
               !pthread_create(&p->threads[p->num_started], &attr, thread_main, p))
            p->num_started++;
        pthread_attr_destroy(&attr);
    }
    if (!ok || p->num_started < c->threads) {
        join_all(p);
        pool_free(p);
        return tram_fail(err, "cannot start %d request-preparation threads", c->threads);
    }
    *out = p;
    return 0;
}

void tram_prep_pool_stop(tram_prep_pool *p)
{
    if (!p)
        return;
    join_all(p);
    pool_free(p);
}

int tram_prep_pool_submit(tram_prep_pool *p, tram_prep_task *t)
{
    pthread_mutex_lock(&p->mu);
    int full = p->queued >= p->cfg.max_queue;
    if (!full) {
        t->next = NULL;
        *p->queue_tail = t;
        p->queue_tail = &t->next;
        p->queued++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return full ? -1 : 0;
}

tram_prep_task *tram_prep_pool_take_done(tram_prep_pool *p)
{
    tram_prep_task *done = atomic_exchange(&p->finished, NULL);
    TRAM_CHAIN_REVERSE(tram_prep_task, done, next);
    return done;
}

void tram_prep_pool_counts(tram_prep_pool *p, int *queued, int *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = p->queued;
    *running = p->running;
    pthread_mutex_unlock(&p->mu);
}
