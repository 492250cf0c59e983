/* attn_chunk.c — see attn_chunk.h. */
#include "kernels/cpu/attn_chunk.h"

#include "kernels/cpu/vexp.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* The reduction lets the compiler split the sum over SIMD lanes. */
static float dot(const float *restrict a, const float *restrict b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

static void axpy(float *restrict y, float a, const float *restrict x, int n)
{
#pragma omp simd
    for (int d = 0; d < n; d++)
        y[d] += a * x[d];
}

/* The row's scores p[0, nk) become softmax weights under the new running
 * max (what the row accumulated rescaled when the max grows). */
static void generic_weights(tram_attn_row *r, float *p, int hd)
{
    float m = r->max;
    for (int j = 0; j < r->nk; j++)
        m = fmaxf(m, p[j]);
    if (m > r->max) {
        float c = expf(r->max - m); /* 0 on the first chunk: out and sum are 0 */
        r->sum *= c;
        for (int d = 0; d < hd; d++)
            r->out[d] *= c;
        r->max = m;
    }
    float sum = 0.0f;
    for (int j = 0; j < r->nk; j++) {
        p[j] = expf(p[j] - m);
        sum += p[j];
    }
    r->sum += sum;
}

static void generic_row(tram_attn_row *r, const tram_attn_keys *c)
{
    float p[TRAM_ATTN_CHUNK_KEYS];
    for (int j = 0; j < r->nk; j++)
        p[j] = dot(r->q, c->k + j * c->stride, c->head_dim) * c->scale;
    generic_weights(r, p, c->head_dim);
    for (int j = 0; j < r->nk; j++)
        axpy(r->out, p[j], c->v + j * c->stride, c->head_dim);
}

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,fma"

/* Σ of each of the 8 vectors, as one vector: hadd pairs them up, the two
 * 128-bit halves are added last. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 sum_each(const __m256 a[8])
{
    __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

__attribute__((target(AVX2_TARGET), always_inline)) static inline float sum_all(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* q's dot products with the 8 keys k, k + stride, ..., k + 7 stride. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 dot_x8(const float *q, const float *k,
                                                                               size_t stride, int hd)
{
    __m256 a[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
        __m256 x = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + j * stride + d), a[j]);
    }
    return sum_each(a);
}

__attribute__((target(AVX2_TARGET), always_inline)) static inline float dot_x1(const float *q, const float *k, int hd)
{
    __m256 a = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a);
    return sum_all(a);
}

/* p[0, nk) = the row's scaled scores, and p[nk, round up to 8) = -INFINITY,
 * whose weights come out 0. */
__attribute__((target(AVX2_TARGET))) static void avx2_scores(const tram_attn_row *r, float *p,
                                                             const tram_attn_keys *c)
{
    __m256 scale = _mm256_set1_ps(c->scale);
    int j = 0;
    for (; j + 8 <= r->nk; j += 8)
        _mm256_storeu_ps(p + j, _mm256_mul_ps(dot_x8(r->q, c->k + j * c->stride, c->stride, c->head_dim), scale));
    for (; j < r->nk; j++)
        p[j] = dot_x1(r->q, c->k + j * c->stride, c->head_dim) * c->scale;
    for (; j % 8; j++)
        p[j] = -INFINITY;
}

/* As generic_weights, 8 weights at a time; returns the factor that rescales
 * what out held (1 when the max did not grow). */
__attribute__((target(AVX2_TARGET))) static float avx2_weights(tram_attn_row *r, float *p)
{
    int n8 = (r->nk + 7) / 8 * 8;
    __m256 mv = _mm256_set1_ps(r->max);
    for (int j = 0; j < n8; j += 8)
        mv = _mm256_max_ps(mv, _mm256_loadu_ps(p + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    float m = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h))), c = 1.0f;
    if (m > r->max) {
        c = expf(r->max - m); /* 0 on the first chunk: out and sum are 0 */
        r->sum *= c;
        r->max = m;
    }
    __m256 s = _mm256_setzero_ps(), m8 = _mm256_set1_ps(m);
    for (int j = 0; j < n8; j += 8) {
        __m256 e = tram_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(p + j), m8));
        _mm256_storeu_ps(p + j, e);
        s = _mm256_add_ps(s, e);
    }
    r->sum += sum_all(s);
    return c;
}

/* out = out·c + Σ p[j]·v[j], 32 lanes of the head at a time, then 8. */
__attribute__((target(AVX2_TARGET))) static void avx2_values(tram_attn_row *r, const float *p, float c,
                                                             const tram_attn_keys *k)
{
    int hd = k->head_dim, d = 0;
    __m256 cv = _mm256_set1_ps(c);
    for (; d + 32 <= hd; d += 32) {
        __m256 o[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            o[i] = _mm256_mul_ps(_mm256_loadu_ps(r->out + d + 8 * i), cv);
        for (int j = 0; j < r->nk; j++) {
            __m256 w = _mm256_set1_ps(p[j]);
            const float *v = k->v + j * k->stride + d;
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                o[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * i), o[i]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            _mm256_storeu_ps(r->out + d + 8 * i, o[i]);
    }
    for (; d < hd; d += 8) {
        __m256 o = _mm256_mul_ps(_mm256_loadu_ps(r->out + d), cv);
        for (int j = 0; j < r->nk; j++)
            o = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(k->v + j * k->stride + d), o);
        _mm256_storeu_ps(r->out + d, o);
    }
}

__attribute__((target(AVX2_TARGET))) static void avx2_row(tram_attn_row *r, const tram_attn_keys *c)
{
    float p[TRAM_ATTN_CHUNK_KEYS];
    avx2_scores(r, p, c);
    avx2_values(r, p, avx2_weights(r, p), c);
}
#endif

int tram_attn_kernel_available(tram_cpu_kernel k)
{
    tram_cpu_features f = tram_cpu_features_detect();
    if (k == TRAM_CPU_AVX2)
        return f.avx2 && f.fma;
    return k == TRAM_CPU_GENERIC;
}

tram_cpu_kernel tram_attn_kernel_best(void) { return tram_cpu_kernel_best(tram_attn_kernel_available); }

void tram_attn_chunk(tram_cpu_kernel k, tram_attn_row *rows, int n, const tram_attn_keys *c)
{
    for (int r = 0; r < n; r++) {
        if (rows[r].nk <= 0)
            continue;
#if defined(__x86_64__)
        if (k == TRAM_CPU_AVX2 && c->head_dim % 8 == 0) {
            avx2_row(&rows[r], c);
            continue;
        }
#endif
        generic_row(&rows[r], c);
    }
}
