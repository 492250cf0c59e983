/* verify_gemm.c — what a verification of speculative drafts costs in the
 * f32 product (kernels/cpu/gemm.c): y = x · Wᵀ for n = 1 .. 16 token rows
 * (1 + k drafts of one sequence) at the default model's layer shapes and
 * its lm_head.  Best of REPS runs each, in ms; prints markdown table rows
 * (bench/results/verify-gemm.md).
 *   build/bench/verify_gemm [-t THREADS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matmul_time.h"
#include "kernels/backend.h"

enum { REPS = 9, MAX_N = 16 };

static void shape(tram_backend *be, const char *what, int rows, int cols)
{
    bench_operands o = bench_operands_make(rows, cols, MAX_N);
    float *w = o.w, *x = o.x, *y = o.y;
    tram_weight dense;
    be->upload_weight(be, &dense, w, rows, cols, TRAM_W_F32);
    printf("| %-20s | %5d x %-4d |", what, rows, cols);
    static const int ns[] = {1, 2, 5, 9, 12, 13, 16};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        printf(" %7.3f |", bench_matmul_ms("verify_gemm", be, y, x, &dense, ns[i], REPS));
    printf("\n");
    fflush(stdout);
    be->free_weight(be, &dense);
    bench_operands_free(&o);
}

int main(int argc, char **argv)
{
    tram_backend *be = bench_cpu_backend("verify_gemm", argc, argv);
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
