/* sparse24_int8.h — the 2:4 sparse W8A8 product's kernels
 * (kernels/cpu/sparse24_int8.c), callable with a chosen kernel so that
 * tests can hold each against the dense int8 product.  The generic kernel
 * is the reference; the AVX2 one gathers a row's activation bytes through
 * its 2-bit positions with byte shuffles, 64 columns a step for up to 4
 * tokens at once, and multiplies them with the kept values by the dense
 * kernel's vpmaddubsw sign trick.  Both sum in int32, exactly, and scale as
 * the dense int8 product does, so all of them give its bits. */
#ifndef TRAM_CPU_SPARSE24_INT8_H
#define TRAM_CPU_SPARSE24_INT8_H

#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/features.h"
#include "kernels/cpu/pool.h"

/* Whether kernel k runs here (AVX2: avx2 and bmi2, for pdep), and the
 * fastest that does. */
int tram_s24i8_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_s24i8_kernel_best(void);

/* y[n][w->rows] = (xq[n][w->cols] · Qᵀ) * x_scales[t] * w->scales[r] for a
 * TRAM_W_S24_INT8 weight, on pool (NULL: the caller alone); xq's rows are
 * tram_qact_stride(w->cols) bytes apart. */
void tram_s24i8_gemm(tram_cpu_kernel k, tram_cpu_pool *pool, float *y, const int8_t *xq, const float *x_scales,
                     const tram_weight *w, int n);

#endif
