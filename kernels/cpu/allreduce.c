/* allreduce.c — the CPU backend's tensor-parallel group: the ranks of one
 * process, one thread each, add up their partial sums through shared memory.
 *
 * Each rank publishes its buffer and waits at a barrier; then rank r adds
 * element i of every buffer for the i in its share, always in rank order
 * (x0 + x1 + ... + x(N-1)), and writes the sum back into every buffer; a
 * second barrier lets no rank read its buffer before all shares are written.
 * The order of the additions never depends on thread timing, so a pass gives
 * the same bits every time, and every rank holds the same sum. */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_impl.h"

struct tram_cpu_group {
    int world_size;
    pthread_barrier_t barrier;
    float *bufs[TRAM_CPU_MAX_RANKS];
    size_t counts[TRAM_CPU_MAX_RANKS];
};

void tram_cpu_group_destroy(tram_cpu_group *g)
{
    if (!g)
        return;
    pthread_barrier_destroy(&g->barrier);
    free(g);
}

int tram_cpu_group_create(tram_cpu_group **out, int world_size, tram_error *err)
{
    if (world_size < 1 || world_size > TRAM_CPU_MAX_RANKS)
        return tram_fail(err, "a CPU tensor-parallel group has 1 to %d ranks, not %d", TRAM_CPU_MAX_RANKS,
                         world_size);
    tram_cpu_group *g = tram_calloc(1, sizeof(*g), err);
    if (!g)
        return -1;
    g->world_size = world_size;
    if (pthread_barrier_init(&g->barrier, NULL, (unsigned)world_size)) {
        free(g);
        return tram_fail(err, "cannot create the barrier of %d CPU ranks", world_size);
    }
    *out = g;
    return 0;
}

int cpu_group_size(const tram_cpu_group *g) { return g->world_size; }

/* Every rank must call this with buffers of the same n; a rank that was given
 * another n fails, and so do all the others, instead of reading past an end. */
int cpu_group_all_reduce(tram_cpu_group *g, int rank, float *x, size_t n)
{
    int world = g->world_size;
    g->bufs[rank] = x;
    g->counts[rank] = n;
    pthread_barrier_wait(&g->barrier);
    int same = 1;
    for (int k = 0; k < world; k++)
        same &= g->counts[k] == n;
    if (same) {
        size_t lo = n * rank / world, hi = n * (rank + 1) / world;
        for (size_t i = lo; i < hi; i++) {
            float sum = g->bufs[0][i];
            for (int k = 1; k < world; k++)
                sum += g->bufs[k][i];
            for (int k = 0; k < world; k++)
                g->bufs[k][i] = sum;
        }
    }
    pthread_barrier_wait(&g->barrier);
    return same ? 0 : -1;
}
