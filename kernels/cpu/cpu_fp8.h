/* cpu_fp8.h — FP8 (E4M3) W8A8 products on the CPU (TRAM_W_FP8), the
 * emulation of kernels/cuda/int8.cu's FP8 path, so that the GPU can be
 * checked against it and FP8 files run on either.
 *
 * The format is kernels/fp8_format.h's: weights E4M3 codes with one scale per
 * output row, activations quantized per token just before the product, the
 * products summed in f32.  A weight's data holds its codes [rows][kp] (kp:
 * cols rounded up to 8, zeros after cols), its scales [rows].
 *
 * The order of the f32 sums, fixed for every kernel: the products of column
 * k go to lane k % 8, each lane adds them in increasing k, and the lanes are
 * added as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), AVX2's
 * horizontal sum.  Every product is exact, so the generic reference (codes
 * decoded through a 256-entry table) and the AVX2 kernel (codes decoded
 * with integer arithmetic, 8 at a time) give the same bits. */
#ifndef TRAM_CPU_FP8_H
#define TRAM_CPU_FP8_H

#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/features.h"
#include "kernels/cpu/pool.h"

static inline int tram_fp8_stride(int cols) { return (cols + 7) & ~7; }

/* Whether kernel k runs here (AVX2: avx2 and fma), and the fastest that does. */
int tram_fp8_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_fp8_kernel_best(void);
/* E4M3 code -> value, for every code: the one table of the FP8 products
 * and the fp8 KV cache, built on first use. */
const float *tram_fp8_decode_table(void);

/* Token rows x[n][cols] quantized: xd[n][kp] the E4M3 values of their codes
 * (zeros after cols; kp = tram_fp8_stride(cols)), xs[n] their scales; each
 * row's max|x| clamped to act_max when that is positive (fp8_format.h).
 * Kernel k rounds (the generic one through the encoder, AVX2 on the bits:
 * the same values). */
void tram_fp8_quantize_acts(tram_cpu_kernel k, float *xd, float *xs, const float *x, int n, int cols,
                            float act_max);

/* y[n][w->rows] = (xd · e4m3(W)ᵀ) * xs[token] * w->scales[row] for a
 * TRAM_W_FP8 w, on pool (NULL: the caller alone). */
void tram_fp8_gemm(tram_cpu_kernel k, tram_cpu_pool *pool, float *y, const float *xd, const float *xs,
                   const tram_weight *w, int n);

#endif
