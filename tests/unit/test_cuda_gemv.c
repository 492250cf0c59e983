/* gemm variant 2's GEMV (kernels/cuda/gemm_v2.cu), host side: the split-K
 * partition (tram_cuda_gemv_splits / _cols) and the kernel's walk — blocks
 * of warps over row pairs, lanes over 8-column vectors of their split, the
 * partials laid out [split][n][rows] and summed in split order — replayed
 * on the CPU against a plain product. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/launch_plan.h"

Test(cuda_gemv, splits_cover_the_columns_in_whole_vectors)
{
    static const int sms[] = {1, 78, 132};
    for (size_t m = 0; m < 3; m++)
        for (int rows = 1; rows <= 70000; rows = rows * 3 + 1)
            for (int cols = 8; cols <= 20000; cols += cols < 64 ? 8 : 1032) {
                int s = tram_cuda_gemv_splits(rows, cols, sms[m]);
                cr_assert(s >= 1 && s <= TRAM_CUDA_GEMV_MAX_SPLITS, "rows %d cols %d: %d splits", rows, cols, s);
                cr_assert(s == 1 || cols / s >= TRAM_CUDA_GEMV_MIN_COLS, "cols %d in %d splits", cols, s);
                int next = 0;
                for (int i = 0; i < s; i++) {
                    int lo, hi;
                    tram_cuda_gemv_cols(cols, s, i, &lo, &hi);
                    cr_assert(lo <= hi && lo % 8 == 0, "cols %d split %d: [%d, %d)", cols, i, lo, hi);
                    cr_assert(lo == hi || lo == next, "cols %d split %d starts at %d, want %d", cols, i, lo, next);
                    next = hi > next ? hi : next;
                }
                cr_assert_eq(next, cols, "cols %d: the splits end at %d", cols, next);
            }
    /* Llama-3.1-8B at batch 1 on an H200: down_proj (4096 rows of 14336) splits,
     * gate_up (28672 rows) fills the chip without */
    cr_assert_gt(tram_cuda_gemv_splits(4096, 14336, 132), 1);
    cr_assert_eq(tram_cuda_gemv_splits(28672, 4096, 132), 1);
}

/* kernel_gemv then kernel_gemv_sum, as the device runs them. */
static void gemv_walk(float *y, const float *w, const float *x, int n, int rows, int cols, int splits)
{
    float *part = calloc((size_t)splits * n * rows, sizeof(float));
    int per_block = TRAM_CUDA_GEMV_WARPS * TRAM_CUDA_GEMV_ROWS;
    for (int bx = 0; bx < tram_ceil_div(rows, per_block); bx++)
        for (int by = 0; by < splits; by++)
            for (int warp = 0; warp < TRAM_CUDA_GEMV_WARPS; warp++) {
                int r0 = (bx * TRAM_CUDA_GEMV_WARPS + warp) * TRAM_CUDA_GEMV_ROWS, lo, hi;
                if (r0 >= rows)
                    continue;
                tram_cuda_gemv_cols(cols, splits, by, &lo, &hi);
                for (int r = 0; r < TRAM_CUDA_GEMV_ROWS && r0 + r < rows; r++)
                    for (int j = 0; j < n; j++) {
                        float acc = 0.0f;
                        for (int lane = 0; lane < 32; lane++)
                            for (int k = lo + lane * 8; k < hi; k += 32 * 8)
                                for (int e = 0; e < 8; e++)
                                    acc += w[(size_t)(r0 + r) * cols + k + e] * x[(size_t)j * cols + k + e];
                        part[((size_t)by * n + j) * rows + r0 + r] += acc;
                    }
            }
    for (size_t i = 0; i < (size_t)n * rows; i++) {
        y[i] = 0.0f;
        for (int s = 0; s < splits; s++)
            y[i] += part[(size_t)s * n * rows + i];
    }
    free(part);
}

Test(cuda_gemv, the_walk_computes_the_product)
{
    static const int shapes[][3] = {{1, 33, 8}, {3, 17, 2056}, {8, 4096, 1024}, {5, 41, 9000}, {2, 1, 16}};
    for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
        int n = shapes[c][0], rows = shapes[c][1], cols = shapes[c][2];
        float *w = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * n * cols);
        float *y = malloc(sizeof(float) * n * rows);
        for (int i = 0; i < rows * cols; i++)
            w[i] = (float)((i * 31) % 17) - 8.0f;
        for (int i = 0; i < n * cols; i++)
            x[i] = (float)((i * 7) % 5) - 2.0f;
        for (int splits = 1; splits <= TRAM_CUDA_GEMV_MAX_SPLITS; splits += 3) {
            gemv_walk(y, w, x, n, rows, cols, splits);
            for (int j = 0; j < n; j++)
                for (int r = 0; r < rows; r++) {
                    double want = 0.0;
                    for (int k = 0; k < cols; k++)
                        want += (double)w[(size_t)r * cols + k] * x[(size_t)j * cols + k];
                    cr_assert_float_eq(y[(size_t)j * rows + r], want, 1e-3 * (1.0 + fabs(want)),
                                       "n %d rows %d cols %d splits %d: y[%d][%d] %g, want %g", n, rows, cols, splits,
                                       j, r, y[(size_t)j * rows + r], want);
                }
        }
        free(w), free(x), free(y);
    }
}
