/* stream.c — the machine's floors for `make compare`: main-memory bandwidth
 * (STREAM-style copy and triad over arrays far larger than the last-level
 * cache, on all cores with OpenMP) and the OpenBLAS sgemm peak.  Decode
 * speed is bounded by the first (weights are streamed once per step),
 * prefill and large batches by the second.  Prints one JSON object.
 *   build/bench/stream [--mib N] [--reps N]
 * (--mib: MiB per array; by default 256 or twice the last-level cache,
 * whichever is larger, so that no array stays in a large L3.) */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_floors.h"
#include "kernels/base.h"

typedef struct {
    double copy, triad; /* bytes per second, best of reps */
    double sgemm;       /* FLOP/s, best of reps */
} floors;

/* STREAM counts the bytes the program names: copy reads a and writes c (2
 * arrays), triad reads b and c and writes a (3 arrays).  Each thread touches
 * its own slice first, so pages land near the core that streams them. */
static void stream(double *a, double *b, double *c, size_t n, int reps, floors *f)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.0;
    }
    double bytes = (double)n * sizeof(double);
    for (int r = 0; r < reps; r++) {
        double t0 = tram_now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            c[i] = a[i];
        double t1 = tram_now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
        double t2 = tram_now();
        f->copy = TRAM_MAX(f->copy, 2 * bytes / (t1 - t0));
        f->triad = TRAM_MAX(f->triad, 3 * bytes / (t2 - t1));
    }
}

/* C = A·Bᵀ with the layout the engine uses for weights (rows of W are
 * output channels), on the threads OpenBLAS chose; the first call warms up. */
static int sgemm_peak(int n, int reps, floors *f, tram_error *err)
{
    size_t nn = (size_t)n * n;
    float *a = tram_calloc(nn, sizeof(float), err), *b = tram_calloc(nn, sizeof(float), err);
    float *c = tram_calloc(nn, sizeof(float), err);
    int ok = a && b && c;
    for (size_t i = 0; ok && i < nn; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
    }
    for (int r = 0; ok && r <= reps; r++) {
        double t0 = tram_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = tram_now() - t0;
        if (r > 0)
            f->sgemm = TRAM_MAX(f->sgemm, 2.0 * n * n * n / t);
    }
    free(a);
    free(b);
    free(c);
    return ok ? 0 : -1;
}

static int parse(int argc, char **argv, long *mib, long *reps)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        long *dst = !strcmp(argv[i], "--mib") ? mib : !strcmp(argv[i], "--reps") ? reps : NULL;
        char *end;
        long v = dst ? strtol(argv[i + 1], &end, 10) : 0;
        if (!dst || *end || v < 1 || v > 1 << 16) {
            fprintf(stderr, "usage: stream [--mib N (per array; 256 or twice the LLC)] [--reps N (10)]\n");
            return -1;
        }
        *dst = v;
    }
    return argc % 2 ? 0 : -1;
}

int main(int argc, char **argv)
{
    long mib = TRAM_MAX(256, (long)(2 * tram_bench_llc_bytes() >> 20)), reps = 10;
    if (parse(argc, argv, &mib, &reps))
        return 2;
    tram_error err = {{0}};
    size_t n = (size_t)mib * (1 << 20) / sizeof(double);
    double *a = tram_calloc(n, sizeof(double), &err), *b = tram_calloc(n, sizeof(double), &err);
    double *c = tram_calloc(n, sizeof(double), &err);
    floors f = {0};
    int rc = a && b && c ? 0 : -1;
    if (!rc)
        stream(a, b, c, n, (int)reps, &f);
    free(a);
    free(b);
    free(c);
    if (!rc)
        rc = sgemm_peak(2048, 3, &f, &err);
    if (rc) {
        fprintf(stderr, "stream: %s\n", err.msg);
        return 1;
    }
    printf("{\"threads\": %d, \"array_mib\": %ld, \"copy_gbs\": %.2f, \"triad_gbs\": %.2f, "
           "\"sgemm_gflops\": %.2f}\n",
           omp_get_max_threads(), mib, f.copy * 1e-9, f.triad * 1e-9, f.sgemm * 1e-9);
    return 0;
}
