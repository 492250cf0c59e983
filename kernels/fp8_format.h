/* fp8_format.h — the FP8 W8A8 format both backends share (TRAM_W_FP8):
 * OCP E4M3 codes (kernels/kv_format.h's encoder and decoder) with one f32
 * scale per row, for weights (per output row) and activations (per token
 * row): x ≈ e4m3(q) * scale.  A row quantized here gets scale = max|x| / 448
 * and q = the E4M3 code of x * (448 / max|x|), rounded to nearest even and
 * saturating, which is what kernels/cuda/int8.cu's activation kernel does
 * on the device (__nv_cvt_float_to_fp8 with __NV_SATFINITE).
 *
 * A weight may bound its activations' scales (act_max, FBGEMM's
 * activation_scale_ub): a token's max|x| is then clamped to it first, and
 * the values beyond it saturate at ±448.
 *
 * A product sums e4m3(qx) * e4m3(qw) in f32 and scales the sum by
 * x_scale[token] * w_scale[row], in that order.  Each product of two E4M3
 * values is exact in f32 (4 significant bits times 4), so only the order of
 * the additions is the kernel's: kernels/cpu/fp8.c fixes one. */
#ifndef TRAM_FP8_FORMAT_H
#define TRAM_FP8_FORMAT_H

#include <math.h>
#include <stdint.h>

#include "kernels/kv_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The NaN codes, which no finite input is encoded to. */
static inline int tram_fp8_is_nan(uint8_t c) { return (c & 0x7f) == 0x7f; }

/* Quantizes x[cols] into q[kp] (zeros after cols); returns the row's scale. */
static inline float tram_fp8_quantize_row(const float *x, int cols, int kp, uint8_t *q)
{
    float amax = 0.0f;
    for (int j = 0; j < cols; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    float inv = amax > 0.0f ? TRAM_FP8_MAX / amax : 0.0f;
    for (int j = 0; j < kp; j++)
        q[j] = j < cols ? tram_fp8_e4m3_encode(x[j] * inv) : 0;
    return amax / TRAM_FP8_MAX;
}

#ifdef __cplusplus
}
#endif

#endif
