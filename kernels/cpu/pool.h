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
 * A thread descheduled inside its chunk still holds an ordinary job; a
 * stealable one (below) the caller finishes without it.
 *
 * Chunk boundaries depend only on the job, never on the thread count or on
 * timing, so a kernel that computes each chunk the same way gives the same
 * bits whatever the schedule. */
#ifndef TRAM_CPU_POOL_H
#define TRAM_CPU_POOL_H

#include <stddef.h>

#include "kernels/base.h"

typedef struct tram_cpu_pool tram_cpu_pool;

/* Computes items [begin, end) of a job; chunks never overlap. */
typedef void (*tram_pool_fn)(void *ctx, int begin, int end);

/* A pool of `threads` in all: the caller and threads - 1 workers. */
int tram_cpu_pool_create(tram_cpu_pool **out, int threads, tram_error *err);
void tram_cpu_pool_destroy(tram_cpu_pool *p);
int tram_cpu_pool_threads(const tram_cpu_pool *p);

/* fn over items [0, items) in chunks of `chunk` items (or more: at most
 * TRAM_POOL_MAX_RUN_CHUNKS chunks; the last one shorter), each chunk run
 * exactly once, by the caller or a worker; returns when all are done.  fn
 * must not call the pool itself.  A NULL pool, or one another thread's job
 * is using, is the caller alone (one thread). */
#define TRAM_POOL_MAX_RUN_CHUNKS 65535 /* a job's chunk count fits its ticket's 16 bits */
void tram_cpu_pool_run(tram_cpu_pool *p, int items, int chunk, tram_pool_fn fn, void *ctx);

/* A stealable job.  The caller cannot finish an ordinary job while a
 * descheduled worker holds one of its chunks; a stealable one it can: after a
 * short wait the caller computes every chunk not yet committed itself, and
 * whichever thread finishes a chunk first commits it, the others' results
 * being dropped.  So a chunk is computed into the thread's scratch
 * (compute), and only the committing thread writes the output (commit).
 * The job's bytes are copied: a worker may still be computing from them, on
 * inputs the caller has moved on from, after the run returned; it reads
 * them but writes nothing outside its scratch.  Memory a job reads must
 * therefore not be freed before tram_cpu_pool_quiesce. */
#define TRAM_POOL_JOB_BYTES 128       /* the most a job's struct may take */
#define TRAM_POOL_SCRATCH_BYTES 65536 /* a thread's scratch for one chunk */
#define TRAM_POOL_MAX_CHUNKS 4096     /* more items are cut into larger chunks */

typedef void (*tram_pool_compute_fn)(const void *job, int begin, int end, void *scratch);
typedef void (*tram_pool_commit_fn)(const void *job, int begin, int end, const void *scratch);

typedef struct {
    tram_pool_compute_fn compute;
    tram_pool_commit_fn commit;
    const void *job;  /* job_bytes <= TRAM_POOL_JOB_BYTES, copied */
    size_t job_bytes;
} tram_pool_stealable;

/* j over items [0, items) in chunks of `chunk` (or more: at most
 * TRAM_POOL_MAX_CHUNKS chunks), each chunk's output committed exactly once,
 * its compute possibly run more than once. */
void tram_cpu_pool_run_stealable(tram_cpu_pool *p, int items, int chunk, const tram_pool_stealable *j);

/* Waits until no worker is computing a chunk of a finished stealable job:
 * before freeing memory such a job may read. */
void tram_cpu_pool_quiesce(tram_cpu_pool *p);

#endif
