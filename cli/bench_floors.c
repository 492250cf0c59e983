/* bench_floors.c — what this machine allows, measured by the benchmarks in
 * the same run as the engine (bench_floors.h). */
#include "cli/bench_floors.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Best of a few large sgemm products, in FLOP/s: one single-threaded sgemm
 * per thread on its slice of rows, the way the CPU backend threads its
 * matmuls around OpenBLAS. */
double tram_bench_sgemm_peak(int threads, tram_error *err)
{
    enum { N = 2048, REPS = 4 };
    float *a = tram_calloc((size_t)N * N, sizeof(float), err);
    float *b = tram_calloc((size_t)N * N, sizeof(float), err);
    float *c = tram_calloc((size_t)N * N, sizeof(float), err);
    int ok = a && b && c, rows = (N + threads - 1) / threads;
    double best = 1e30;
    for (size_t i = 0; ok && i < (size_t)N * N; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
    }
    for (int r = 0; ok && r < REPS; r++) { /* the first product warms up */
        double t0 = tram_now();
#pragma omp parallel for num_threads(threads)
        for (int t = 0; t < threads; t++) {
            int r0 = t * rows, n = TRAM_MIN(N, r0 + rows) - r0;
            if (n > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, N, N, 1.0f,
                            a + (size_t)r0 * N, N, b, N, 0.0f, c + (size_t)r0 * N, N);
        }
        double t = tram_now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    TRAM_FREE_ALL(a, b, c);
    return ok ? 2.0 * N * N * N / best : 0;
}

/* Best of a few copies of a buffer larger than any cache, in bytes moved
 * (read + written) per second. */
double tram_bench_copy_bandwidth(tram_error *err)
{
    enum { REPS = 4 };
    size_t bytes = (size_t)256 << 20;
    char *src = tram_calloc(bytes, 1, err), *dst = tram_calloc(bytes, 1, err);
    double best = 1e30;
    for (int r = 0; src && dst && r < REPS; r++) {
        memset(src, r, bytes);
        double t0 = tram_now();
        memcpy(dst, src, bytes);
        double t = tram_now() - t0;
        if (t < best)
            best = t;
    }
    int ok = src && dst;
    free(src);
    free(dst);
    return ok ? 2.0 * bytes / best : 0;
}

size_t tram_bench_llc_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return (size_t)TRAM_MAX(TRAM_MAX(l3, l2), 0);
}

/* STREAM's triad a = b + 3c on every thread over arrays far larger than the
 * last-level cache: the bandwidth a decode step's weight stream can reach
 * from memory, in bytes (two read, one written) per second, best of a few.
 * Each array is at least twice the cache, so that none of them stays in it
 * whatever its replacement policy. */
double tram_bench_triad_bandwidth(int threads, tram_error *err)
{
    enum { REPS = 4 };
    size_t n = TRAM_MAX((size_t)256 << 20, 2 * tram_bench_llc_bytes()) / sizeof(double);
    /* the pages the engine's weights get (huge where THP allows), so that the
     * floor and the GEMMs pay the same TLB misses */
    double *a = tram_alloc_stream(n * sizeof(double), err);
    double *b = a ? tram_alloc_stream(n * sizeof(double), err) : NULL;
    double *c = b ? tram_alloc_stream(n * sizeof(double), err) : NULL, best = 1e30;
    if (!c) {
        free(a);
        free(b);
        return 0;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) { /* each thread's pages first touched by it */
        b[i] = 1.0;
        c[i] = 2.0;
    }
    for (int r = 0; r < REPS; r++) {
        double t0 = tram_now();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
        double t = tram_now() - t0;
        if (t < best)
            best = t;
    }
    TRAM_FREE_ALL(a, b, c);
    return 3.0 * n * sizeof(double) / best;
}
