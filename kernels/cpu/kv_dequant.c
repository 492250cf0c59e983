/* kv_dequant.c — see kv_dequant.h. */
#include "kernels/cpu/kv_dequant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static float slot_scale(const tram_kv_chunk *c, const uint8_t *slot)
{
    return ((const float *)(slot + tram_kv_scales_offset(c->n_kv_heads, c->head_dim)))[c->kv_head];
}

/* Values [d0, head_dim) of one slot's head, one at a time. */
static void generic_tail(float *o, const uint8_t *codes, float scale, int d0, const tram_kv_chunk *c,
                         const float *fp8_lut)
{
    if (c->dtype == TRAM_KV_INT8)
        for (int d = d0; d < c->head_dim; d++)
            o[d] = (float)(int8_t)codes[d] * scale;
    else
        for (int d = d0; d < c->head_dim; d++)
            o[d] = fp8_lut[codes[d]] * scale;
}

static void generic_dequantize(float *out, const tram_kv_chunk *c, const float *fp8_lut)
{
    for (int j = 0; j < c->nk; j++) {
        const uint8_t *slot = c->slots + j * c->slot_bytes;
        generic_tail(out + (size_t)j * c->head_dim, slot + (size_t)c->kv_head * c->head_dim, slot_scale(c, slot), 0,
                     c, fp8_lut);
    }
}

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,f16c"

/* 8 E4M3 codes as f16 bit patterns: the sign to bit 15, exponent and
 * mantissa (4 + 3 bits) to bits 13..7, so an f16 reads 2^-8 times the E4M3
 * value (f16's exponent bias is 15, E4M3's 7), subnormals too.  The NaN
 * codes (all seven bits set) get f16's NaN exponent. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 fp8_to_f32_x8(const uint8_t *codes,
                                                                                       __m256 scale_256)
{
    __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)codes));
    __m128i em = _mm_and_si128(x, _mm_set1_epi16(0x7f));
    __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x80)), 8), _mm_slli_epi16(em, 7));
    __m128i nan = _mm_and_si128(_mm_cmpeq_epi16(em, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7e00));
    return _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(h, nan)), scale_256);
}

__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 int8_to_f32_x8(const uint8_t *codes,
                                                                                        __m256 scale)
{
    __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)codes));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
}

/* The f16 values are 2^-8 of E4M3's, so the scale takes the 2^8 back: both
 * products are exact, and (v 2^-8)(s 2^8) rounds as v s does. */
__attribute__((target(AVX2_TARGET))) static void avx2_dequantize(float *out, const tram_kv_chunk *c,
                                                                 const float *fp8_lut)
{
    int hd = c->head_dim, vec = hd & ~7;
    for (int j = 0; j < c->nk; j++) {
        const uint8_t *slot = c->slots + j * c->slot_bytes, *codes = slot + (size_t)c->kv_head * hd;
        float scale = slot_scale(c, slot), *o = out + (size_t)j * hd;
        if (c->dtype == TRAM_KV_INT8) {
            __m256 s = _mm256_set1_ps(scale);
            for (int d = 0; d < vec; d += 8)
                _mm256_storeu_ps(o + d, int8_to_f32_x8(codes + d, s));
        } else {
            __m256 s = _mm256_set1_ps(scale * 256.0f);
            for (int d = 0; d < vec; d += 8)
                _mm256_storeu_ps(o + d, fp8_to_f32_x8(codes + d, s));
        }
        generic_tail(o, codes, scale, vec, c, fp8_lut);
    }
}
#endif

int tram_kv_kernel_available(tram_cpu_kernel k)
{
    tram_cpu_features f = tram_cpu_features_detect();
    if (k == TRAM_CPU_AVX2)
        return f.avx2 && f.f16c;
    return k == TRAM_CPU_GENERIC;
}

tram_cpu_kernel tram_kv_kernel_best(void) { return tram_cpu_kernel_best(tram_kv_kernel_available); }

void tram_kv_dequantize(tram_cpu_kernel k, float *out, const tram_kv_chunk *c, const float *fp8_lut)
{
#if defined(__x86_64__)
    if (k == TRAM_CPU_AVX2) {
        avx2_dequantize(out, c, fp8_lut);
        return;
    }
#endif
    (void)k;
    generic_dequantize(out, c, fp8_lut);
}
