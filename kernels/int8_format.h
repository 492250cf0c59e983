/* int8_format.h — the int8 format both backends share, for weights (per output row)
 * and activations (per token row): symmetric, x ≈ q * scale with
 * scale = max|x| / 127 and q = x / scale rounded half to even, in [-127, 127]
 * (never -128: the CPU's AVX2 sign trick and TRAM_I8_MAX_COLS rely on it).
 *
 * kernels/cpu/int8.c packs and multiplies it on the CPU, kernels/cuda/int8.cu
 * on the GPU (whose kernels quantize bf16 rows the same way, quant_row.cuh),
 * and models/quantize.c writes it into files, so every path forms the same
 * int8 values and the same int32 sums. */
#ifndef TRAM_INT8_FORMAT_H
#define TRAM_INT8_FORMAT_H

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The widest int8 row: 255 * 127 * cols must fit in int32 (the CPU's VNNI
 * kernel adds 128 to every activation). */
#define TRAM_I8_MAX_COLS 65536

/* max|x| / 127, and its inverse for the multiply (0 for a zero row). */
static inline float tram_i8_row_scale(const float *x, int n, float *inv)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    *inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

/* x * inv rounded to nearest even; the clamp only guards against x*inv
 * landing a rounding error above 127. */
static inline int8_t tram_i8_round(float x, float inv)
{
    float v = nearbyintf(x * inv);
    return (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
}

/* Quantizes x[cols] into q[kp] (zeros after cols); returns the scale. */
float tram_i8_quantize(const float *x, int cols, int kp, int8_t *q);

#ifdef __cplusplus
}
#endif

#endif
