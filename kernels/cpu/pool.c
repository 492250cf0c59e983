/* pool.c — the CPU backend's worker threads (see pool.h).
 *
 * A job is published as a ticket, (generation << 32) | next chunk, that the
 * caller and the workers advance by compare-and-swap: a thread owns a chunk
 * when its swap succeeds while the generation is still the job's, so a worker
 * waking after its job is over cannot take a chunk of the next one with the
 * old job's function.  `done` counts finished chunks; the caller returns when
 * it reaches the job's count.  Waiting, on either side, spins for SPIN_NS and
 * then sleeps on a futex, the waker paying the system call only when it
 * knows someone sleeps (the seq_cst pairs below are that handshake). */
#include "kernels/cpu/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
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

struct tram_cpu_pool {
    int threads;
    pthread_t *workers;
    /* the job, written by the caller before it publishes the ticket */
    _Atomic(tram_pool_fn) fn;
    _Atomic(void *) ctx;
    atomic_int items, chunk, chunks;
    _Atomic uint64_t ticket;    /* (generation << 32) | next chunk to claim */
    atomic_uint generation;     /* the ticket's high half: the workers' futex word */
    atomic_int done;            /* chunks finished in this generation: the caller's futex word */
    atomic_int sleepers;        /* workers asleep on `generation` */
    atomic_int caller_asleep;
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

/* Claims and runs chunks of generation g until none is left. */
static void work(tram_cpu_pool *p, unsigned g)
{
    for (;;) {
        uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
        int next = (int)(uint32_t)t, chunks = atomic_load_explicit(&p->chunks, memory_order_relaxed);
        if ((unsigned)(t >> 32) != g || next >= chunks)
            return;
        /* read before the swap: a successful swap proves they were this job's */
        tram_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        int items = atomic_load_explicit(&p->items, memory_order_relaxed);
        int chunk = atomic_load_explicit(&p->chunk, memory_order_relaxed);
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        int begin = next * chunk;
        fn(ctx, begin, begin + chunk < items ? begin + chunk : items);
        if (atomic_fetch_add(&p->done, 1) + 1 == chunks && atomic_load(&p->caller_asleep))
            futex_wake(&p->done);
    }
}

static void *worker_main(void *arg)
{
    tram_cpu_pool *p = arg;
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
        work(p, g);
    }
    return NULL;
}

/* Waits until every chunk of the job is done: spin, then sleep. */
static void wait_done(tram_cpu_pool *p, int chunks)
{
    int64_t until = now_ns() + SPIN_NS;
    for (int i = 0;; i++) {
        int d = atomic_load_explicit(&p->done, memory_order_acquire);
        if (d >= chunks)
            return;
        if (i % 64 || now_ns() < until) {
            cpu_relax();
            continue;
        }
        atomic_store(&p->caller_asleep, 1);
        if ((d = atomic_load(&p->done)) < chunks)
            futex_wait(&p->done, (unsigned)d);
        atomic_store(&p->caller_asleep, 0);
    }
}

void tram_cpu_pool_run(tram_cpu_pool *p, int items, int chunk, tram_pool_fn fn, void *ctx)
{
    if (items <= 0)
        return;
    chunk = chunk < 1 ? 1 : chunk;
    int chunks = (int)(((int64_t)items + chunk - 1) / chunk);
    if (!p || p->threads == 1 || chunks == 1) {
        for (int b = 0; b < items; b += chunk)
            fn(ctx, b, b + chunk < items ? b + chunk : items);
        return;
    }
    unsigned g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->items, items, memory_order_relaxed);
    atomic_store_explicit(&p->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&p->chunks, chunks, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ticket, (uint64_t)g << 32, memory_order_release);
    atomic_store(&p->generation, g);
    if (atomic_load(&p->sleepers))
        futex_wake(&p->generation);
    work(p, g);
    wait_done(p, chunks);
}

int tram_cpu_pool_threads(const tram_cpu_pool *p) { return p ? p->threads : 1; }

int tram_cpu_pool_create(tram_cpu_pool **out, int threads, tram_error *err)
{
    tram_cpu_pool *p = tram_calloc(1, sizeof(*p), err);
    if (!p)
        return -1;
    p->threads = threads < 1 ? 1 : threads;
    p->workers = tram_calloc(p->threads, sizeof(pthread_t), err);
    if (!p->workers) {
        free(p);
        return -1;
    }
    for (int i = 1; i < p->threads; i++)
        if (pthread_create(&p->workers[i], NULL, worker_main, p)) {
            p->threads = i; /* the ones started are stopped by destroy */
            tram_cpu_pool_destroy(p);
            return tram_fail(err, "cannot start CPU worker thread %d", i);
        }
    *out = p;
    return 0;
}

void tram_cpu_pool_destroy(tram_cpu_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->generation, 1);
    futex_wake(&p->generation);
    for (int i = 1; i < p->threads; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p);
}
