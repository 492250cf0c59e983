/* prep_pool.h — the request-preparation threads.
 *
 * Work whose cost grows with the request (the JSON parse of a body, the
 * field checks past the first level, chat templates, tokenizing, grammar
 * compilation, response-cache keys) runs on a few threads of this pool, so
 * the event loop only does I/O and a bomb of a request delays no one else.
 *
 * A task is embedded in its owner's object.  The loop thread submits it; a
 * pool thread runs task->run(task), then pushes it onto a stack the loop
 * thread empties with one exchange, and calls notify() when the stack was
 * empty (the server writes the eventfd the engine thread writes too); the
 * loop thread takes the finished tasks and calls task->done(task).  The
 * queue of tasks not yet started is bounded: submit refuses one more. */
#ifndef TRAM_PREP_POOL_H
#define TRAM_PREP_POOL_H

#include "kernels/base.h"

typedef struct tram_prep_task {
    struct tram_prep_task *next;
    void (*run)(struct tram_prep_task *t);   /* on a pool thread */
    void (*done)(struct tram_prep_task *t);  /* on the loop thread, by whoever takes it */
} tram_prep_task;

typedef struct tram_prep_pool tram_prep_pool;

typedef struct {
    int threads;              /* 2 by default (--prep-threads) */
    int max_queue;            /* tasks allowed to wait for a thread */
    void (*notify)(void *arg);  /* any thread: a finished task waits */
    void *notify_arg;
} tram_prep_pool_config;

/* A pool thread's stack: renders and compilers recurse within bounds sized
 * for at least the 8 MiB a process's main thread has. */
#define TRAM_PREP_STACK_SIZE (32u << 20)

int tram_prep_pool_start(tram_prep_pool **out, const tram_prep_pool_config *c, tram_error *err);
/* Waits for the tasks running now, then stops the threads; tasks queued and
 * not started are never run, and finished ones not taken are not returned:
 * their owners free them. */
void tram_prep_pool_stop(tram_prep_pool *p);

/* Queues t; -1 when max_queue tasks already wait (the caller answers 503). */
int tram_prep_pool_submit(tram_prep_pool *p, tram_prep_task *t);
/* Every finished task, oldest first (linked by next). */
tram_prep_task *tram_prep_pool_take_done(tram_prep_pool *p);
/* Any thread: tasks waiting for a thread, and being run. */
void tram_prep_pool_counts(tram_prep_pool *p, int *queued, int *running);

#endif
