/* pool.h — the CPU backend's worker threads: a loop over items split into
 * fixed chunks that whoever is running claims one at a time.
 *
 * Why not OpenMP: a parallel region gives each thread its share up front and
 * joins at a barrier every thread must reach.  When the cores are shared
 * (a CPU quota, a build beside us), one descheduled thread holds every op of
 * the forward pass for a whole time slice, ~200 times a token: decode fell
 * 16x with one competing process per core.  Here a late thread finds the
 * chunks taken and does nothing, the caller works too, and a job is over when
 * its chunks are done, not when every thread has checked in.  Idle workers
 * spin for a bounded time (a few tens of microseconds: the gap between two
 * ops of one token), then sleep on a futex; the caller waits the same way.
 *
 * Chunk boundaries depend only on the job, never on the thread count or on
 * timing, so a kernel that computes each chunk the same way gives the same
 * bits whatever the schedule. */
#ifndef TRAM_CPU_POOL_H
#define TRAM_CPU_POOL_H

#include "kernels/base.h"

typedef struct tram_cpu_pool tram_cpu_pool;

/* Computes items [begin, end) of a job; chunks never overlap. */
typedef void (*tram_pool_fn)(void *ctx, int begin, int end);

/* A pool of `threads` in all: the caller and threads - 1 workers. */
int tram_cpu_pool_create(tram_cpu_pool **out, int threads, tram_error *err);
void tram_cpu_pool_destroy(tram_cpu_pool *p);
int tram_cpu_pool_threads(const tram_cpu_pool *p);

/* fn over items [0, items) in chunks of `chunk` items (the last one shorter),
 * each chunk run exactly once, by the caller or a worker; returns when all
 * are done.  One caller at a time, and fn must not call the pool itself.
 * A NULL pool is the caller alone (one thread). */
void tram_cpu_pool_run(tram_cpu_pool *p, int items, int chunk, tram_pool_fn fn, void *ctx);

#endif
