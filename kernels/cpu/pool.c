/* pool.c — the CPU backend's worker threads (see pool.h).
 *
 * A job is published as a ticket, (generation << 32) | (chunks << 16) | next
 * chunk, that the caller and the workers advance by compare-and-swap: a
 * thread owns a chunk when its swap succeeds while the ticket is still the
 * job's and its next chunk is below its count.  Both tests read the one word
 * the swap checks, so a worker waking after its job is over can take no chunk
 * of it nor of the next one: had the count lived elsewhere, a worker could
 * read the next job's count beside the old job's spent ticket, win the swap
 * before the new ticket was stored, and run a chunk that was never its own
 * (twice-run items; a `done` counted for no chunk, letting the caller return
 * while a real chunk still read its stack).  `done` counts finished chunks;
 * the caller returns when it reaches the job's count.  Waiting, on either side, spins for SPIN_NS and
 * then sleeps on a futex, the waker paying the system call only when it
 * knows someone sleeps (the seq_cst pairs below are that handshake). */
#include "kernels/cpu/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a waiting thread spins before it sleeps: longer than the serial
 * gap between two ops of a decode step (so a busy step pays no wake-ups),
 * short enough that a thread with nothing to do gives its core back at once
 * when the cores are shared. */
#define SPIN_NS 50000
/* How long the caller of a stealable job waits for chunks others hold
 * before computing them itself: many times a chunk's work, so a running
 * thread is not raced, far less than a time slice of a descheduled one. */
#define STEAL_NS 20000

enum { PHASE_COMMITTING = 1, PHASE_DONE = 2 };

struct tram_cpu_pool {
    int threads;
    pthread_t *workers;
    /* the job, written by the caller before it publishes the ticket */
    _Atomic(tram_pool_fn) fn;
    _Atomic(void *) ctx;
    atomic_int items, chunk;
    /* a stealable job: its functions and a copy of its bytes, which a thread
     * copies again before it claims a chunk (a late one then never reads the
     * caller's stack) */
    _Atomic(tram_pool_compute_fn) compute;
    _Atomic(tram_pool_commit_fn) commit;
    _Atomic uint64_t job[TRAM_POOL_JOB_BYTES / 8];
    _Atomic uint64_t state[TRAM_POOL_MAX_CHUNKS]; /* (generation << 2) | phase of each chunk */
    unsigned char *scratch;     /* TRAM_POOL_SCRATCH_BYTES per thread, the caller's first */
    struct worker_arg *args;    /* each worker's pool and index */
    _Atomic uint64_t ticket;    /* (generation << 32) | (chunks << 16) | next chunk to claim */
    atomic_uint generation;     /* the ticket's high half: the workers' futex word */
    atomic_int done;            /* chunks finished in this generation: the caller's futex word */
    atomic_int busy;            /* workers inside a job (quiesce waits for none) */
    atomic_int sleepers;        /* workers asleep on `generation` */
    atomic_int caller_asleep;
    atomic_int in_use;          /* a caller is running a job: a second one runs its own alone */
    atomic_int stop;
};

static void futex_wait(void *word, unsigned expected)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(void *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins until *word != seen, for SPIN_NS at most; returns its last value. */
static unsigned spin_while(atomic_uint *word, unsigned seen)
{
    int64_t until = 0;
    for (int i = 0;; i++) {
        unsigned v = atomic_load_explicit(word, memory_order_acquire);
        if (v != seen)
            return v;
        if (i % 64 == 0) {
            int64_t t = now_ns();
            if (!until)
                until = t + SPIN_NS;
            else if (t > until)
                return v;
        }
        cpu_relax();
    }
}

/* A chunk of job g is finished: count it, waking the caller at the last. */
static void finish(tram_cpu_pool *p, int chunks)
{
    if (atomic_fetch_add(&p->done, 1) + 1 == chunks && atomic_load(&p->caller_asleep))
        futex_wake(&p->done);
}

/* Chunk c of stealable job g computed into this thread's scratch, then
 * committed by whichever thread first claims its state: the others' results
 * are dropped.  A chunk whose state is of job g or a later one is no longer
 * job g's to commit. */
static void steal_chunk(tram_cpu_pool *p, unsigned g, int chunks, int c, int begin, int end,
                        const tram_pool_stealable *j, int self)
{
    void *scratch = p->scratch + (size_t)self * TRAM_POOL_SCRATCH_BYTES;
    j->compute(j->job, begin, end, scratch);
    uint64_t v = atomic_load(&p->state[c]);
    do
        if ((int32_t)((unsigned)(v >> 2) - g) >= 0)
            return;
    while (!atomic_compare_exchange_weak(&p->state[c], &v, (uint64_t)g << 2 | PHASE_COMMITTING));
    j->commit(j->job, begin, end, scratch);
    atomic_store(&p->state[c], (uint64_t)g << 2 | PHASE_DONE);
    finish(p, chunks);
}

/* Claims and runs chunks of generation g until none is left; self is the
 * thread's index (0: the caller). */
static void work(tram_cpu_pool *p, unsigned g, int self)
{
    uint64_t job[TRAM_POOL_JOB_BYTES / 8];
    for (;;) {
        uint64_t t = atomic_load(&p->ticket);
        int next = (int)(t & 0xffff), chunks = (int)(t >> 16 & 0xffff);
        if ((unsigned)(t >> 32) != g || next >= chunks)
            return;
        /* All of the job read before the swap, with acquire: a successful
         * swap proves they were this job's, since the caller writes the next
         * job's only after its own claims have spent this ticket, and a load
         * that saw such a write would make the swap see that and fail.  Read
         * after it, a stealable job's functions could be the next job's
         * (the caller may have taken this chunk over and gone on). */
        tram_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_acquire);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_acquire);
        int items = atomic_load_explicit(&p->items, memory_order_acquire);
        int chunk = atomic_load_explicit(&p->chunk, memory_order_acquire);
        tram_pool_stealable st = {.compute = atomic_load_explicit(&p->compute, memory_order_acquire),
                                  .commit = atomic_load_explicit(&p->commit, memory_order_acquire),
                                  .job = job, .job_bytes = sizeof(job)};
        if (!fn)
            for (size_t i = 0; i < TRAM_ARRAY_LEN(job); i++)
                job[i] = atomic_load_explicit(&p->job[i], memory_order_acquire);
        if (!atomic_compare_exchange_weak(&p->ticket, &t, t + 1))
            continue;
        int begin = next * chunk, end = begin + chunk < items ? begin + chunk : items;
        if (fn) {
            fn(ctx, begin, end);
            finish(p, chunks);
        } else {
            steal_chunk(p, g, chunks, next, begin, end, &st, self);
        }
    }
}

typedef struct worker_arg {
    tram_cpu_pool *p;
    int self;
} worker_arg;

static void *worker_main(void *arg)
{
    tram_cpu_pool *p = ((worker_arg *)arg)->p;
    int self = ((worker_arg *)arg)->self;
    unsigned seen = 0; /* the generation at creation: a job published before we ran is still ours */
    while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
        unsigned g = spin_while(&p->generation, seen);
        if (g == seen) {
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                futex_wait(&p->generation, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            continue;
        }
        seen = g;
        atomic_fetch_add(&p->busy, 1);
        work(p, g, self);
        atomic_fetch_sub(&p->busy, 1);
    }
    return NULL;
}

/* Waits until `done` reaches chunks, or (when steal_after is set) until
 * that many nanoseconds passed: spin, then sleep.  Returns 1 when done. */
static int wait_done(tram_cpu_pool *p, int chunks, int64_t steal_after)
{
    int64_t start = now_ns();
    for (int i = 0;; i++) {
        int d = atomic_load_explicit(&p->done, memory_order_acquire);
        if (d >= chunks)
            return 1;
        if (i % 64) {
            cpu_relax();
            continue;
        }
        int64_t waited = now_ns() - start;
        if (steal_after && waited > steal_after)
            return 0;
        if (steal_after || waited < SPIN_NS) {
            cpu_relax();
            continue;
        }
        atomic_store(&p->caller_asleep, 1);
        if ((d = atomic_load(&p->done)) < chunks)
            futex_wait(&p->done, (unsigned)d);
        atomic_store(&p->caller_asleep, 0);
    }
}

/* Publishes job generation g of `chunks` chunks: the ticket last, so that a
 * thread seeing it sees the job. */
static void publish(tram_cpu_pool *p, unsigned g, int items, int chunk, int chunks)
{
    atomic_store_explicit(&p->items, items, memory_order_release);
    atomic_store_explicit(&p->chunk, chunk, memory_order_release);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store(&p->ticket, (uint64_t)g << 32 | (uint64_t)chunks << 16);
    atomic_store(&p->generation, g);
    if (atomic_load(&p->sleepers))
        futex_wake(&p->generation);
}

/* The number of chunks of `items` (> 0), and *chunk raised so that there
 * are at most max_chunks of them (and at least one item each). */
static int count_chunks(int items, int *chunk, int max_chunks)
{
    *chunk = TRAM_MAX(*chunk < 1 ? 1 : *chunk, (int)(((int64_t)items + max_chunks - 1) / max_chunks));
    return (int)(((int64_t)items + *chunk - 1) / *chunk);
}

void tram_cpu_pool_run(tram_cpu_pool *p, int items, int chunk, tram_pool_fn fn, void *ctx)
{
    if (items <= 0)
        return;
    int chunks = count_chunks(items, &chunk, TRAM_POOL_MAX_RUN_CHUNKS);
    if (!p || p->threads == 1 || chunks == 1 || atomic_exchange(&p->in_use, 1)) {
        for (int b = 0; b < items; b += chunk)
            fn(ctx, b, b + chunk < items ? b + chunk : items);
        return;
    }
    unsigned g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->fn, fn, memory_order_release);
    atomic_store_explicit(&p->ctx, ctx, memory_order_release);
    publish(p, g, items, chunk, chunks);
    work(p, g, 0);
    wait_done(p, chunks, 0);
    atomic_store(&p->in_use, 0);
}

/* The caller's part of a stealable job once every chunk is claimed: after
 * STEAL_NS, each chunk not yet committed is computed here too. */
static void steal_late_chunks(tram_cpu_pool *p, unsigned g, int items, int chunk, int chunks,
                              const tram_pool_stealable *j)
{
    if (wait_done(p, chunks, STEAL_NS))
        return;
    for (int c = 0; c < chunks && atomic_load(&p->done) < chunks; c++)
        if ((unsigned)(atomic_load(&p->state[c]) >> 2) != g)
            steal_chunk(p, g, chunks, c, c * chunk, c * chunk + chunk < items ? c * chunk + chunk : items, j, 0);
    wait_done(p, chunks, 0); /* chunks being committed by others */
}

void tram_cpu_pool_run_stealable(tram_cpu_pool *p, int items, int chunk, const tram_pool_stealable *j)
{
    if (items <= 0)
        return;
    int chunks = count_chunks(items, &chunk, TRAM_POOL_MAX_CHUNKS);
    if (!p || p->threads == 1 || chunks == 1 || atomic_exchange(&p->in_use, 1)) {
        for (int b = 0; b < items; b += chunk) {
            int e = b + chunk < items ? b + chunk : items;
            unsigned char scratch[TRAM_POOL_SCRATCH_BYTES];
            j->compute(j->job, b, e, scratch);
            j->commit(j->job, b, e, scratch);
        }
        return;
    }
    uint64_t job[TRAM_POOL_JOB_BYTES / 8] = {0};
    memcpy(job, j->job, j->job_bytes);
    unsigned g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->fn, NULL, memory_order_release);
    atomic_store_explicit(&p->compute, j->compute, memory_order_release);
    atomic_store_explicit(&p->commit, j->commit, memory_order_release);
    for (size_t i = 0; i < TRAM_ARRAY_LEN(job); i++)
        atomic_store_explicit(&p->job[i], job[i], memory_order_release);
    publish(p, g, items, chunk, chunks);
    work(p, g, 0);
    tram_pool_stealable own = {.compute = j->compute, .commit = j->commit, .job = job, .job_bytes = sizeof(job)};
    steal_late_chunks(p, g, items, chunk, chunks, &own);
    atomic_store(&p->in_use, 0);
}

void tram_cpu_pool_quiesce(tram_cpu_pool *p)
{
    while (p && atomic_load(&p->busy))
        sched_yield();
}

int tram_cpu_pool_threads(const tram_cpu_pool *p) { return p ? p->threads : 1; }

void tram_cpu_pool_destroy(tram_cpu_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->generation, 1);
    futex_wake(&p->generation);
    for (int i = 1; i < p->threads; i++)
        pthread_join(p->workers[i], NULL);
    TRAM_FREE_ALL(p->workers, p->args, p->scratch, p);
}

int tram_cpu_pool_create(tram_cpu_pool **out, int threads, tram_error *err)
{
    tram_cpu_pool *p = tram_calloc(1, sizeof(*p), err);
    if (!p)
        return -1;
    p->threads = threads < 1 ? 1 : threads;
    p->workers = tram_calloc(p->threads, sizeof(pthread_t), err);
    p->args = p->workers ? tram_calloc(p->threads, sizeof(worker_arg), err) : NULL;
    p->scratch = p->args ? tram_calloc(p->threads, TRAM_POOL_SCRATCH_BYTES, err) : NULL;
    if (!p->scratch) {
        TRAM_FREE_ALL(p->workers, p->args, p);
        return -1;
    }
    for (int i = 1; i < p->threads; i++) {
        p->args[i] = (worker_arg){p, i};
        if (pthread_create(&p->workers[i], NULL, worker_main, &p->args[i])) {
            p->threads = i; /* the ones started are stopped by destroy */
            tram_cpu_pool_destroy(p);
            return tram_fail(err, "cannot start CPU worker thread %d", i);
        }
    }
    *out = p;
    return 0;
}
