/* sparse24.h — the 2:4 sparse product's kernels (kernels/cpu/sparse24.c),
 * callable with a chosen kernel so that tests can hold each against the
 * dense product.  The generic kernel is the reference; the AVX2 one gathers
 * a row's inputs through its 2-bit positions 8 values per instruction for up
 * to 7 tokens, and from 8 tokens on reads the inputs transposed (8 tokens of
 * one column side by side), so that each stored value is one broadcast and
 * one FMA per 8 tokens. */
#ifndef TRAM_CPU_SPARSE24_H
#define TRAM_CPU_SPARSE24_H

#include <stddef.h>

#include "kernels/backend.h"
#include "kernels/cpu/features.h"
#include "kernels/cpu/pool.h"

/* Whether kernel k runs here (AVX2: avx2 and fma), and the fastest that does. */
int tram_s24_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_s24_kernel_best(void);

/* Floats of scratch tram_s24_gemm needs for n tokens of cols inputs (0 when
 * kernel k reads x as it is). */
size_t tram_s24_scratch_floats(tram_cpu_kernel k, int n, int cols);

/* y[n][w->rows] = x[n][w->cols] · Wᵀ for a TRAM_W_S24 weight, on pool (NULL:
 * the caller alone); scratch holds tram_s24_scratch_floats(k, n, cols). */
void tram_s24_gemm(tram_cpu_kernel k, tram_cpu_pool *pool, float *y, const float *x, float *scratch,
                   const tram_weight *w, int n);

#endif
