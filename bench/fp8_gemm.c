/* fp8_gemm.c — the CPU's FP8 W8A8 product (kernels/cpu/fp8.c, the emulation
 * of cuBLASLt's) against the f32 and int8 W8A8 products of the same matrix,
 * at the default model's layer shapes and Llama-3.1-8B's, for a decode step
 * (1 token) and a small batch (16).  Best of REPS runs each; FP8's
 * activations are quantized inside its product, int8's before it (as the
 * model's norms hand them over); prints markdown table rows.
 *   build/bench/fp8_gemm [-t THREADS]     (run by bench/compress.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matmul_time.h"
#include "kernels/backend.h"

enum { REPS = 5, MAX_N = 16 };

static void shape(tram_backend *be, const char *what, int rows, int cols)
{
    bench_operands o = bench_operands_make(rows, cols, MAX_N);
    float *w = o.w, *x = o.x, *y = o.y;
    tram_qact qa = bench_qact_make(x, MAX_N, cols);
    tram_weight f32, i8, f8;
    be->upload_weight(be, &f32, w, rows, cols, TRAM_W_F32);
    be->upload_weight(be, &i8, w, rows, cols, TRAM_W_INT8);
    be->upload_weight(be, &f8, w, rows, cols, TRAM_W_FP8);
    for (int n = 1; n <= MAX_N; n *= 16) {
        double a = bench_matmul_ms("fp8_gemm", be, y, x, &f32, n, REPS);
        double b = bench_matmul_ms("fp8_gemm", be, y, &qa, &i8, n, REPS);
        double c = bench_matmul_ms("fp8_gemm", be, y, x, &f8, n, REPS);
        printf("| %-22s | %5d x %-5d | %2d | %9.3f | %9.3f | %9.3f | %5.2fx |\n", what, rows, cols, n, a, b, c, a / c);
        fflush(stdout);
    }
    be->free_weight(be, &f32);
    be->free_weight(be, &i8);
    be->free_weight(be, &f8);
    bench_operands_free(&o);
    bench_qact_free(&qa);
}

int main(int argc, char **argv)
{
    tram_backend *be = bench_cpu_backend("fp8_gemm", argc, argv);
    printf("| matrix                 | rows x cols   |  n | f32 ms    | int8 ms   | FP8 ms    | FP8 vs f32 |\n");
    printf("|------------------------|---------------|---:|----------:|----------:|----------:|--------:|\n");
    static const struct { const char *what; int rows, cols; } shapes[] = {
        {"SmolLM2-135M q/k/v", 960, 576},   {"SmolLM2-135M o_proj", 576, 576},
        {"SmolLM2-135M gate/up", 3072, 576}, {"SmolLM2-135M down", 576, 1536},
        {"Llama-3.1-8B o_proj", 4096, 4096}, {"Llama-3.1-8B gate", 14336, 4096},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        shape(be, shapes[i].what, shapes[i].rows, shapes[i].cols);
    be->destroy(be);
    return 0;
}
