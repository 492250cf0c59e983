/* sparse_gemm.c — the 2:4 sparse products against the dense ones on the
 * same pruned matrix: f32 (kernels/cpu/sparse24.c against sgemm), then
 * int8 W8A8 (kernels/cpu/sparse24_int8.c against kernels/cpu/int8.c, both
 * from the same quantized activations, as the model's norms hand them
 * over), at the default model's layer shapes and Llama-3.1-8B's, for a
 * decode step (1 token) and a small batch (16).  Best of REPS runs each;
 * prints two markdown tables.
 *   build/bench/sparse_gemm [-t THREADS]     (run by bench/compress.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matmul_time.h"
#include "kernels/backend.h"
#include "models/prune.h"

enum { REPS = 5, MAX_N = 16 };

/* The shape's rows: dense_type against sparse_type. */
static void shape(tram_backend *be, const char *what, int rows, int cols, tram_wtype dense_type,
                  tram_wtype sparse_type)
{
    bench_operands o = bench_operands_make(rows, cols, MAX_N);
    float *w = o.w, *x = o.x, *y = o.y;
    double *ones = malloc((size_t)cols * sizeof(double));
    for (int c = 0; c < cols; c++)
        ones[c] = 1.0;
    tram_prune_24(w, rows, cols, ones); /* by magnitude: the speed does not depend on which */
    tram_qact qa = bench_qact_make(x, MAX_N, cols);
    const void *in = tram_wtype_takes_qact(dense_type) ? (const void *)&qa : x;
    tram_weight dense, sparse;
    be->upload_weight(be, &dense, w, rows, cols, dense_type);
    be->upload_weight(be, &sparse, w, rows, cols, sparse_type);
    for (int n = 1; n <= MAX_N; n *= 16) {
        double d = bench_matmul_ms("sparse_gemm", be, y, in, &dense, n, REPS);
        double sp = bench_matmul_ms("sparse_gemm", be, y, in, &sparse, n, REPS);
        printf("| %-22s | %5d x %-5d | %2d | %9.3f | %9.3f | %5.2fx |\n", what, rows, cols, n, d, sp, d / sp);
        fflush(stdout);
    }
    be->free_weight(be, &dense);
    be->free_weight(be, &sparse);
    bench_operands_free(&o);
    free(ones);
    bench_qact_free(&qa);
}

int main(int argc, char **argv)
{
    tram_backend *be = bench_cpu_backend("sparse_gemm", argc, argv);
    static const struct { const char *what; int rows, cols; } shapes[] = {
        {"SmolLM2-135M q/k/v", 960, 576},   {"SmolLM2-135M o_proj", 576, 576},
        {"SmolLM2-135M gate/up", 3072, 576}, {"SmolLM2-135M down", 576, 1536},
        {"Llama-3.1-8B o_proj", 4096, 4096}, {"Llama-3.1-8B gate", 14336, 4096},
        {"Llama-3.1-8B down", 4096, 14336},
    };
    static const struct { const char *dense, *sparse; tram_wtype dense_type, sparse_type; } formats[] = {
        {"dense ms ", "2:4 ms   ", TRAM_W_F32, TRAM_W_S24},
        {"int8 ms  ", "2:4 i8 ms", TRAM_W_INT8, TRAM_W_S24_INT8},
    };
    for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
        printf("%s| matrix                 | rows x cols   |  n | %s | %s | speedup |\n", f ? "\n" : "",
               formats[f].dense, formats[f].sparse);
        printf("|------------------------|---------------|---:|----------:|----------:|--------:|\n");
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
            shape(be, shapes[i].what, shapes[i].rows, shapes[i].cols, formats[f].dense_type, formats[f].sparse_type);
    }
    be->destroy(be);
    return 0;
}
