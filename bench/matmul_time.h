/* matmul_time.h — the best of `reps` timed be->matmul calls, in ms, for the
 * GEMM benches (sparse_gemm.c, fp8_gemm.c): x is f32 rows, or a tram_qact
 * for a weight that takes int8 activations (timed through matmul_q, as the
 * model's norms hand them over); a backend error exits 1 naming the bench. */
#ifndef TRAM_BENCH_MATMUL_TIME_H
#define TRAM_BENCH_MATMUL_TIME_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/int8_format.h"

/* n rows of x (cols wide) as int8 activations, for a weight that takes
 * them (tram_wtype_takes_qact); free with bench_qact_free. */
static inline tram_qact bench_qact_make(const float *x, int n, int cols)
{
    tram_qact qa = {.cols = cols, .kp = tram_qact_stride(cols)};
    qa.q = malloc((size_t)n * qa.kp), qa.scales = malloc((size_t)n * sizeof(float));
    for (int t = 0; t < n; t++)
        qa.scales[t] = tram_i8_quantize(x + (size_t)t * cols, cols, qa.kp, qa.q + (size_t)t * qa.kp);
    return qa;
}

static inline void bench_qact_free(tram_qact *qa) { free(qa->q), free(qa->scales); }

/* A shape's operands: W [rows][cols] from a fixed pseudo-random sequence
 * (every bench times the same matrix), max_n rows of x, room for y. */
typedef struct {
    float *w, *x, *y;
} bench_operands;

static inline bench_operands bench_operands_make(int rows, int cols, int max_n)
{
    bench_operands o = {malloc((size_t)rows * cols * sizeof(float)), malloc((size_t)max_n * cols * sizeof(float)),
                        malloc((size_t)max_n * rows * sizeof(float))};
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        o.w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < max_n * cols; i++)
        o.x[i] = (float)i / (max_n * cols) - 0.5f;
    return o;
}

static inline void bench_operands_free(bench_operands *o) { free(o->w), free(o->x), free(o->y); }

/* The CPU backend, with the threads of a `-t THREADS` command line (else
 * the backend's default); a failure exits 1 naming the bench. */
static inline tram_backend *bench_cpu_backend(const char *bench, int argc, char **argv)
{
    int threads = argc == 3 && !strcmp(argv[1], "-t") ? atoi(argv[2]) : 0;
    tram_backend *be;
    tram_error err;
    if (tram_backend_cpu_create(&be, threads, &err)) {
        fprintf(stderr, "%s: %s\n", bench, err.msg);
        exit(1);
    }
    return be;
}

static inline double bench_matmul_ms(const char *bench, tram_backend *be, float *y, const void *x,
                                     const tram_weight *w, int n, int reps)
{
    double best = 1e30;
    tram_error err;
    for (int r = 0; r < reps; r++) {
        double t0 = tram_now();
        if (tram_wtype_takes_qact(w->type))
            be->matmul_q(be, y, x, w, n);
        else
            be->matmul(be, y, x, w, n);
        if (be->sync(be, &err)) {
            fprintf(stderr, "%s: %s\n", bench, err.msg);
            exit(1);
        }
        double ms = (tram_now() - t0) * 1e3;
        best = ms < best ? ms : best;
    }
    return best;
}

#endif
