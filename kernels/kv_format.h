/* kv_format.h — how the KV cache stores a token's keys or values
 * (--kv-cache-dtype).
 *
 * TRAM_KV_AUTO keeps the activations' type (f32 on the CPU, bf16 on CUDA):
 * a slot is n_kv_heads * head_dim of them.  The two one-byte formats store a
 * slot as one code per value followed by one f32 scale per KV head, written
 * when the token's K/V are stored and read back inside attention:
 *
 *   [head 0 codes | head 1 codes | ... | pad to 4 | scale 0 | scale 1 | ...]
 *
 *   int8: x ≈ q * scale, scale = max|x| / 127 over the head's values, q
 *         rounded half to even (kernels/int8_format.h, as W8A8 rounds);
 *   fp8:  x ≈ e4m3(x / scale) * scale, scale = max|x| / 448, the code the
 *         OCP E4M3 format (float8_e4m3fn: no infinities, 448 the largest)
 *         rounds to nearest even, saturating, as CUDA's __NV_SATFINITE
 *         conversion does, so the GPU can be checked against this code.
 *
 * A scale per token and head keeps one outlier from flattening the rest of
 * the cache, and needs no calibration. */
#ifndef TRAM_KV_FORMAT_H
#define TRAM_KV_FORMAT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/int8_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TRAM_KV_AUTO = 0,
    TRAM_KV_INT8 = 1,
    TRAM_KV_FP8 = 2,
} tram_kv_dtype;

#define TRAM_FP8_MAX 448.0f
/* The widest head a quantized cache takes (the CPU dequantizes a chunk of
 * keys into tiles of this width on the stack). */
#define TRAM_KV_MAX_HEAD_DIM 256

/* "auto", "int8", "fp8" → the dtype; -1 for anything else. */
static inline int tram_kv_dtype_parse(const char *name)
{
    static const char *const names[] = {"auto", "int8", "fp8"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

/* Offset of the scales within a quantized slot: codes padded to 4 bytes. */
static inline size_t tram_kv_scales_offset(int n_kv_heads, int head_dim)
{
    return ((size_t)n_kv_heads * head_dim + 3) & ~(size_t)3;
}

/* Bytes of one slot (one token's K, or its V, on one rank). */
static inline size_t tram_kv_slot_bytes(tram_kv_dtype t, int n_kv_heads, int head_dim, int act_bytes)
{
    if (t == TRAM_KV_AUTO)
        return (size_t)n_kv_heads * head_dim * act_bytes;
    return tram_kv_scales_offset(n_kv_heads, head_dim) + (size_t)n_kv_heads * sizeof(float);
}

/* The E4M3 code nearest |x| (ties to even), saturated at 448, with x's sign;
 * NaN becomes the NaN code.  Codes of one sign are ordered like their values,
 * so a subnormal rounding up to 2^-6 lands on the smallest normal code, and a
 * mantissa rounding up to 2 on the next exponent's first code. */
static inline uint8_t tram_fp8_e4m3_encode(float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    if (isnan(a))
        return sign | 0x7f;
    if (a >= TRAM_FP8_MAX)
        return sign | 0x7e;
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): a's binary exponent is e - 1 */
    if (a < 0x1p-6f) /* subnormal: m * 2^-9, m in 0..8 */
        return sign | (uint8_t)nearbyintf(a * 0x1p9f);
    /* normal: (8 + m) * 2^(e-1-3), exponent field e - 1 + 7 */
    int q = (int)nearbyintf(ldexpf(a, 4 - e)); /* 8..16, exact before rounding */
    int code = (e + 5) * 8 + q;                /* (e - 1 + 7) * 8 + (q - 8) */
    return sign | (uint8_t)(code > 0x7e ? 0x7e : code);
}

static inline float tram_fp8_e4m3_decode(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    float a = e ? ldexpf((float)(8 + m), e - 10) : (float)m * 0x1p-9f;
    if (e == 15 && m == 7)
        a = NAN;
    return c & 0x80 ? -a : a;
}

/* Writes x[n_kv_heads * head_dim] (one token's K or V) into slot. */
static inline void tram_kv_quantize_slot(tram_kv_dtype t, uint8_t *slot, const float *x, int n_kv_heads,
                                         int head_dim)
{
    float *scales = (float *)(slot + tram_kv_scales_offset(n_kv_heads, head_dim));
    for (int h = 0; h < n_kv_heads; h++) {
        const float *xh = x + (size_t)h * head_dim;
        uint8_t *codes = slot + (size_t)h * head_dim;
        float amax = 0.0f;
        for (int d = 0; d < head_dim; d++)
            amax = fmaxf(amax, fabsf(xh[d]));
        float top = t == TRAM_KV_INT8 ? 127.0f : TRAM_FP8_MAX;
        float inv = amax > 0.0f ? top / amax : 0.0f;
        scales[h] = amax / top;
        for (int d = 0; d < head_dim; d++)
            codes[d] = t == TRAM_KV_INT8 ? (uint8_t)tram_i8_round(xh[d], inv)
                                         : tram_fp8_e4m3_encode(xh[d] * inv);
    }
}

#ifdef __cplusplus
}
#endif

#endif
