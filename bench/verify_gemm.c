/* verify_gemm.c — what a verification of speculative drafts costs in the
 * f32 product (kernels/cpu/gemm.c): y = x · Wᵀ for n = 1 .. 16 token rows
 * (1 + k drafts of one sequence) at the default model's layer shapes and
 * its lm_head.  Best of REPS runs each, in ms; prints markdown table rows
 * (bench/results/verify-gemm.md).
 *   build/bench/verify_gemm [-t THREADS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"

enum { REPS = 9, MAX_N = 16 };

static double best_ms(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    double best = 1e30;
    tram_error err;
    for (int r = 0; r < REPS; r++) {
        double t0 = tram_now();
        be->matmul(be, y, x, w, n);
        if (be->sync(be, &err)) {
            fprintf(stderr, "verify_gemm: %s\n", err.msg);
            exit(1);
        }
        double ms = (tram_now() - t0) * 1e3;
        best = ms < best ? ms : best;
    }
    return best;
}

static void shape(tram_backend *be, const char *what, int rows, int cols)
{
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = malloc((size_t)MAX_N * cols * sizeof(float));
    float *y = malloc((size_t)MAX_N * rows * sizeof(float));
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < MAX_N * cols; i++)
        x[i] = (float)i / (MAX_N * cols) - 0.5f;
    tram_weight dense;
    be->upload_weight(be, &dense, w, rows, cols, TRAM_W_F32);
    printf("| %-20s | %5d x %-4d |", what, rows, cols);
    static const int ns[] = {1, 2, 5, 9, 12, 13, 16};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        printf(" %7.3f |", best_ms(be, y, x, &dense, ns[i]));
    printf("\n");
    fflush(stdout);
    be->free_weight(be, &dense);
    free(w), free(x), free(y);
}

int main(int argc, char **argv)
{
    int threads = argc == 3 && !strcmp(argv[1], "-t") ? atoi(argv[2]) : 0;
    tram_backend *be;
    tram_error err;
    if (tram_backend_cpu_create(&be, threads, &err)) {
        fprintf(stderr, "verify_gemm: %s\n", err.msg);
        return 1;
    }
    printf("| matrix               | rows x cols  |  1 row  | 2 rows  | 5 rows  | 9 rows  | 12 rows | 13 rows | "
           "16 rows |\n");
    printf("|----------------------|--------------|--------:|--------:|--------:|--------:|--------:|--------:|"
           "--------:|\n");
    static const struct { const char *what; int rows, cols; } shapes[] = {
        {"SmolLM2-135M q/k/v", 960, 576},   {"SmolLM2-135M gate/up", 3072, 576},
        {"SmolLM2-135M down", 576, 1536}, {"SmolLM2-135M lm_head", 49152, 576},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        shape(be, shapes[i].what, shapes[i].rows, shapes[i].cols);
    be->destroy(be);
    return 0;
}
