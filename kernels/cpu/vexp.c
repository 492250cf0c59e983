/* vexp.c — see vexp.h. */
#include "kernels/cpu/vexp.h"

#include <math.h>

static void generic_silu_mul(float *out, const float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static double generic_exp_row(float *x, int n, float scale, float shift, float least)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] * scale - shift);
        if (x[i] >= least)
            sum += x[i];
    }
    return sum;
}

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,fma"

/* Eight lanes of each row's arithmetic, shared by its full vectors and its
 * tail (n % 8 elements, through a zero-padded copy), so every element sees
 * the same polynomial. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 silu_mul8(__m256 g, __m256 u)
{
    __m256 e = tram_exp8_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* The product rounded before the shift, as the generic kernel's (the best
 * token's e^0 is then exactly 1). */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 numerator8(__m256 x, __m256 scale,
                                                                                   __m256 shift)
{
    return tram_exp8_avx2(_mm256_sub_ps(_mm256_mul_ps(x, scale), shift));
}

/* x[i, n) (fewer than 8) into a zero-padded vector's lanes. */
static void pad8(float *lanes, const float *x, int i, int n)
{
    for (int j = 0; j < 8; j++)
        lanes[j] = i + j < n ? x[i + j] : 0.0f;
}

__attribute__((target(AVX2_TARGET))) static void avx2_silu_mul(float *out, const float *gate, const float *up,
                                                               int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i == n)
        return;
    float g[8], u[8], y[8];
    pad8(g, gate, i, n);
    pad8(u, up, i, n);
    _mm256_storeu_ps(y, silu_mul8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
    for (int j = 0; i + j < n; j++)
        out[i + j] = y[j];
}

/* Sums in double lanes: a vocabulary's worth of float partial sums would
 * lose the small terms. */
__attribute__((target(AVX2_TARGET))) static double avx2_exp_row(float *x, int n, float scale, float shift,
                                                                float least)
{
    __m256 sc = _mm256_set1_ps(scale), sh = _mm256_set1_ps(shift), lo = _mm256_set1_ps(least);
    __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = numerator8(_mm256_loadu_ps(x + i), sc, sh);
        _mm256_storeu_ps(x + i, e);
        __m256 kept = _mm256_and_ps(e, _mm256_cmp_ps(e, lo, _CMP_GE_OQ));
        acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(kept)));
        acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(kept, 1)));
    }
    double lanes[4], sum = 0;
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
    for (int j = 0; j < 4; j++)
        sum += lanes[j];
    if (i == n)
        return sum;
    float tail[8];
    pad8(tail, x, i, n);
    _mm256_storeu_ps(tail, numerator8(_mm256_loadu_ps(tail), sc, sh));
    for (int j = 0; i + j < n; j++) {
        x[i + j] = tail[j];
        sum += tail[j] >= least ? tail[j] : 0.0;
    }
    return sum;
}
#endif

int tram_vexp_kernel_available(tram_cpu_kernel k) { return tram_cpu_fma_kernel_available(k); }

tram_cpu_kernel tram_vexp_kernel_best(void) { return tram_cpu_kernel_best(tram_vexp_kernel_available); }

void tram_silu_mul_row(tram_cpu_kernel k, float *out, const float *gate, const float *up, int n)
{
#if defined(__x86_64__)
    if (k == TRAM_CPU_AVX2) {
        avx2_silu_mul(out, gate, up, n);
        return;
    }
#endif
    (void)k;
    generic_silu_mul(out, gate, up, n);
}

double tram_exp_row(tram_cpu_kernel k, float *x, int n, float scale, float shift, float least)
{
#if defined(__x86_64__)
    if (k == TRAM_CPU_AVX2)
        return avx2_exp_row(x, n, scale, shift, least);
#endif
    (void)k;
    return generic_exp_row(x, n, scale, shift, least);
}
