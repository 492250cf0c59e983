/* The request-preparation pool (server/prep_pool.c): every task submitted
 * is run once on a pool thread and comes back to the taker, the threads run
 * tasks side by side, a full queue refuses the next task, and stopping
 * waits for the tasks running. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server/prep_pool.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wakes;
    int open;          /* the gate: blocking tasks wait for it */
    int inside;        /* blocking tasks waiting at the gate */
} gate;

static gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

typedef struct {
    tram_prep_task task;   /* first: the task is the item */
    int block;             /* waits at the gate */
    atomic_int runs;
    pthread_t thread;
} item;

static void run(tram_prep_task *t)
{
    item *it = (item *)t;
    it->thread = pthread_self();
    atomic_fetch_add(&it->runs, 1);
    pthread_mutex_lock(&g.mu);
    if (it->block) {
        g.inside++;
        pthread_cond_broadcast(&g.cv);
        while (!g.open)
            pthread_cond_wait(&g.cv, &g.mu);
    }
    pthread_mutex_unlock(&g.mu);
}

static void wake(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g.mu);
    g.wakes++;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
}

static void wait_until(int *value, int at_least)
{
    pthread_mutex_lock(&g.mu);
    while (*value < at_least)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
}

static void open_gate(void)
{
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
}

static tram_prep_pool *start(int threads, int max_queue)
{
    g.wakes = g.open = g.inside = 0;
    tram_prep_pool *p = NULL;
    tram_error err = {{0}};
    tram_prep_pool_config c = {.threads = threads, .max_queue = max_queue, .notify = wake};
    cr_assert_eq(tram_prep_pool_start(&p, &c, &err), 0, "%s", err.msg);
    return p;
}

/* Takes finished tasks until n have come back; each must be one of items. */
static void take(tram_prep_pool *p, item *items, int n)
{
    int got = 0;
    while (got < n) {
        wait_until(&g.wakes, 1);
        pthread_mutex_lock(&g.mu);
        g.wakes = 0;  /* before taking: a task finishing after the take wakes us again */
        pthread_mutex_unlock(&g.mu);
        for (tram_prep_task *t = tram_prep_pool_take_done(p); t; t = t->next) {
            cr_assert((item *)t >= items && (item *)t < items + n);
            got++;
        }
    }
    cr_assert_eq(got, n);
}

Test(server_prep_pool, every_task_runs_once_and_comes_back)
{
    enum { N = 200 };
    static item items[N];
    tram_prep_pool *p = start(3, N);
    for (int i = 0; i < N; i++) {
        items[i] = (item){.task = {.run = run}};
        cr_assert_eq(tram_prep_pool_submit(p, &items[i].task), 0);
    }
    take(p, items, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(atomic_load(&items[i].runs), 1, "task %d ran %d times", i, items[i].runs);
    tram_prep_pool_stop(p);
}

Test(server_prep_pool, a_long_task_holds_one_thread_and_a_full_queue_refuses)
{
    static item items[4];
    tram_prep_pool *p = start(2, 1);
    for (int i = 0; i < 2; i++) {  /* both threads held at the gate */
        items[i] = (item){.task = {.run = run}, .block = 1};
        cr_assert_eq(tram_prep_pool_submit(p, &items[i].task), 0);
        wait_until(&g.inside, i + 1);
    }
    cr_assert(!pthread_equal(items[0].thread, items[1].thread));
    items[2] = (item){.task = {.run = run}};
    items[3] = (item){.task = {.run = run}};
    cr_assert_eq(tram_prep_pool_submit(p, &items[2].task), 0);
    cr_assert_eq(tram_prep_pool_submit(p, &items[3].task), -1, "a second task waits beyond max_queue 1");
    int queued, running;
    tram_prep_pool_counts(p, &queued, &running);
    cr_assert_eq(queued, 1);
    cr_assert_eq(running, 2);
    open_gate();
    take(p, items, 3);
    cr_assert_eq(atomic_load(&items[3].runs), 0);
    tram_prep_pool_stop(p);
}

Test(server_prep_pool, stop_waits_for_the_running_task)
{
    static item it;
    tram_prep_pool *p = start(1, 4);
    it = (item){.task = {.run = run}, .block = 1};
    cr_assert_eq(tram_prep_pool_submit(p, &it.task), 0);
    wait_until(&g.inside, 1);
    open_gate();
    tram_prep_pool_stop(p);  /* joins: the task has run to its end */
    cr_assert_eq(atomic_load(&it.runs), 1);
}
