/* vexp.h — exponentials over whole rows on the CPU: SiLU·mul (the FFN's
 * activation) and a sampler's softmax numerators, each a libm expf per
 * element in the generic kernel, the reference, and eight at a time in the
 * AVX2 + FMA one (tram_exp8_avx2 below, also attention's: attn_chunk.c).
 * The polynomial is within 2 ulp of expf, so the two kernels agree to
 * rounding, not bit for bit (tests/unit/test_vexp.c states how close). */
#ifndef TRAM_CPU_VEXP_H
#define TRAM_CPU_VEXP_H

#include "kernels/cpu/features.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* e^x for 8 lanes: x = n ln2 + r with |r| <= ln2 / 2 (ln 2 in two parts, so
 * n ln2 is exact), e^r by Cephes' expf polynomial, times 2^n built in the
 * exponent bits.  Below -88 (where expf is subnormal) it gives 0, -INFINITY
 * included; above 88 it gives e^88; a NaN stays NaN. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 tram_exp8_avx2(__m256 x)
{
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-88.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n = -127 makes the exponent field 0: the factor is 0 */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
#endif

/* Whether kernel k runs here (AVX2: avx2 and fma), and the fastest that does. */
int tram_vexp_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_vexp_kernel_best(void);

/* out[i] = silu(gate[i]) · up[i] = gate[i] / (1 + e^-gate[i]) · up[i]. */
void tram_silu_mul_row(tram_cpu_kernel k, float *out, const float *gate, const float *up, int n);

/* x[i] = e^(x[i]·scale − shift) in place; returns Σ of the results that are
 * >= least, in double. */
double tram_exp_row(tram_cpu_kernel k, float *x, int n, float scale, float shift, float least);

#endif
