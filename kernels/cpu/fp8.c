/* fp8.c — FP8 (E4M3) W8A8 products on the CPU (see cpu_fp8.h), and the CPU
 * backend's FP8 weights (at the end), as kernels/cuda/int8.cu holds CUDA's.
 *
 * A kernel computes, for one weight row, up to MT token rows at once: the
 * row's codes are decoded 8 at a time and each feeds MT multiply-adds, so a
 * decode is paid once per MT tokens; below MT tokens (decode steps), four
 * rows at a time for each token.  Rows are split over the pool's threads;
 * each output is one kernel call over all of K, so the split never changes
 * its bits. */
#include "kernels/cpu/cpu_fp8.h"

#include <pthread.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"
#include "kernels/fp8_format.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define LANES 8
#define MT 8 /* token rows per kernel call */

/* E4M3 code → value, built once (the reference's decoder). */
static float lut[256];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void lut_init(void)
{
    for (int c = 0; c < 256; c++)
        lut[c] = tram_fp8_e4m3_decode((uint8_t)c);
}

const float *tram_fp8_decode_table(void)
{
    pthread_once(&lut_once, lut_init);
    return lut;
}

/* The reference: each value's code through the encoder, back through the table. */
static void generic_round(float *out, const float *x, int cols, float inv)
{
    for (int j = 0; j < cols; j++)
        out[j] = lut[tram_fp8_e4m3_encode(x[j] * inv)];
}

/* The fixed reduction of the 8 lanes (cpu_fp8.h). */
static float lanes_sum(const float *l)
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

typedef struct {
    float *y;
    const float *xd, *xs;
    const tram_weight *w;
    int n;
    tram_cpu_kernel k;
} fp8_job;

static void store(const fp8_job *j, int t, int r, float acc)
{
    j->y[(size_t)t * j->w->rows + r] = acc * j->xs[t] * j->w->scales[r];
}

/* The reference: every output's lanes summed in plain C. */
static void generic_rows(const fp8_job *j, int r0, int r1)
{
    int kp = tram_fp8_stride(j->w->cols);
    for (int r = r0; r < r1; r++) {
        const uint8_t *wr = (const uint8_t *)j->w->data + (size_t)r * kp;
        for (int t = 0; t < j->n; t++) {
            const float *x = j->xd + (size_t)t * kp;
            float l[LANES] = {0};
            for (int c = 0; c < kp; c++)
                l[c % LANES] += lut[wr[c]] * x[c];
            store(j, t, r, lanes_sum(l));
        }
    }
}

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,fma"

/* 8 codes → their values: normal codes (exponent field e > 0) as f32 bits,
 * the exponent rebiased by 127 - 7; subnormal ones m * 2^-9 (exact, and no
 * f32 denormal on the way); the sign bit moved to f32's.  A weight never
 * holds the NaN code (cpu_fp8_upload_codes refuses it). */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256 decode8(const uint8_t *p)
{
    __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
    __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23)));
    __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(0x1p-9f));
    __m256 is_sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    return _mm256_or_ps(_mm256_blendv_ps(normal, sub, is_sub), _mm256_castsi256_ps(sign));
}

__attribute__((target(AVX2_TARGET))) static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* l0+l4 .. l3+l7 */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                          /* (0+2), (1+3) */
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* v rounded to the nearest E4M3 value, ties to even, saturated at ±448: the
 * value of tram_fp8_e4m3_encode(v)'s code, 8 at a time.  A normal value
 * keeps 3 of f32's 23 mantissa bits (adding 0x7ffff and the kept lowest bit
 * rounds half to even, a carry steps the exponent); below 2^-6 the step is
 * E4M3's subnormal 2^-9.  NaN stays NaN (minps returns its second operand). */
__attribute__((target(AVX2_TARGET))) static inline __m256 round8(__m256 v)
{
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign_bit, v);
    __m256i bits = _mm256_castps_si256(a);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 20), _mm256_set1_epi32(1));
    __m256i kept = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), lsb));
    __m256 normal = _mm256_castsi256_ps(_mm256_and_si256(kept, _mm256_set1_epi32(~0xfffff)));
    __m256 sub = _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(0x1p9f)),
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                               _mm256_set1_ps(0x1p-9f));
    __m256 r = _mm256_blendv_ps(normal, sub, _mm256_cmp_ps(a, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ));
    return _mm256_or_ps(_mm256_min_ps(_mm256_set1_ps(TRAM_FP8_MAX), r), _mm256_and_ps(v, sign_bit));
}

__attribute__((target(AVX2_TARGET))) static void avx2_round(float *out, const float *x, int cols, float inv)
{
    int j = 0;
    for (; j + LANES <= cols; j += LANES)
        _mm256_storeu_ps(out + j, round8(_mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(inv))));
    generic_round(out + j, x + j, cols - j, inv);
}

/* Row r against tokens [t0, t0 + mt). */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void avx2_tile(const fp8_job *j, int r, int t0,
                                                                                  int mt)
{
    int kp = tram_fp8_stride(j->w->cols);
    const uint8_t *wr = (const uint8_t *)j->w->data + (size_t)r * kp;
    const float *x = j->xd + (size_t)t0 * kp;
    __m256 acc[MT];
    /* unrolled, so that the accumulators live in registers */
#pragma GCC unroll 8
    for (int i = 0; i < mt; i++)
        acc[i] = _mm256_setzero_ps();
    for (int c = 0; c < kp; c += LANES) {
        __m256 wv = decode8(wr + c);
#pragma GCC unroll 8
        for (int i = 0; i < mt; i++)
            acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)i * kp + c), acc[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < mt; i++)
        store(j, t0 + i, r, hsum(acc[i]));
}

/* Rows r..r+3 against token t: with fewer than MT tokens a row's sums would
 * wait on each other's FMA latency; four rows' are independent. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void avx2_rows4(const fp8_job *j, int r, int t)
{
    int kp = tram_fp8_stride(j->w->cols);
    const uint8_t *wr = (const uint8_t *)j->w->data + (size_t)r * kp;
    const float *x = j->xd + (size_t)t * kp;
    __m256 acc[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        acc[q] = _mm256_setzero_ps();
    for (int c = 0; c < kp; c += LANES) {
        __m256 xv = _mm256_loadu_ps(x + c);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
            acc[q] = _mm256_fmadd_ps(decode8(wr + (size_t)q * kp + c), xv, acc[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        store(j, t, r + q, hsum(acc[q]));
}

__attribute__((target(AVX2_TARGET))) static void avx2_rows(const fp8_job *j, int r0, int r1)
{
    int r = r0;
    if (j->n < MT) /* a decode step: rows four at a time */
        for (; r + 4 <= r1; r += 4)
            for (int t = 0; t < j->n; t++)
                avx2_rows4(j, r, t);
    for (; r < r1; r++) {
        int t = 0;
        for (; t + MT <= j->n; t += MT)
            avx2_tile(j, r, t, MT);
        for (; t < j->n; t++)
            avx2_tile(j, r, t, 1);
    }
}
#endif

void tram_fp8_quantize_acts(tram_cpu_kernel k, float *xd, float *xs, const float *x, int n, int cols,
                            float act_max)
{
    int kp = tram_fp8_stride(cols);
    tram_fp8_decode_table();
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * cols;
        float amax = 0.0f;
        for (int j = 0; j < cols; j++)
            amax = fmaxf(amax, fabsf(xr[j]));
        if (act_max > 0.0f)
            amax = fminf(amax, act_max);
        float inv = amax > 0.0f ? TRAM_FP8_MAX / amax : 0.0f, *out = xd + (size_t)i * kp;
#if defined(__x86_64__)
        if (k != TRAM_CPU_GENERIC)
            avx2_round(out, xr, cols, inv);
        else
#endif
            generic_round(out, xr, cols, inv);
        memset(out + cols, 0, (size_t)(kp - cols) * sizeof(float));
        xs[i] = amax / TRAM_FP8_MAX;
    }
}

static void fp8_rows(void *arg, int r0, int r1)
{
    const fp8_job *j = arg;
#if defined(__x86_64__)
    if (j->k != TRAM_CPU_GENERIC) {
        avx2_rows(j, r0, r1);
        return;
    }
#endif
    generic_rows(j, r0, r1);
}

int tram_fp8_kernel_available(tram_cpu_kernel k) { return tram_cpu_fma_kernel_available(k); }

tram_cpu_kernel tram_fp8_kernel_best(void) { return tram_cpu_kernel_best(tram_cpu_fma_kernel_available); }

void tram_fp8_gemm(tram_cpu_kernel k, tram_cpu_pool *pool, float *y, const float *xd, const float *xs,
                   const tram_weight *w, int n)
{
    tram_fp8_decode_table();
    fp8_job j = {.y = y, .xd = xd, .xs = xs, .w = w, .n = n, .k = k};
    /* chunks of about 64 KiB of codes, in 16-row steps */
    int chunk = TRAM_MAX(16, (65536 / tram_fp8_stride(w->cols) + 15) / 16 * 16);
    tram_cpu_pool_run(pool, w->rows, chunk, fp8_rows, &j);
}

/* ---------------------------------------------------------------- backend ops */

static int fp8_alloc(tram_backend *be, tram_weight *w, int rows, int cols)
{
    size_t kp = (size_t)tram_fp8_stride(cols);
    *w = (tram_weight){.type = TRAM_W_FP8, .rows = rows, .cols = cols};
    w->data = cpu_alloc(be, (size_t)rows * kp);
    w->scales = w->data ? cpu_alloc(be, (size_t)rows * sizeof(float)) : NULL;
    if (w->scales)
        return 0;
    free(w->data);
    memset(w, 0, sizeof(*w));
    return -1;
}

void cpu_fp8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    if (fp8_alloc(be, w, rows, cols))
        return;
    int kp = tram_fp8_stride(cols);
    for (int r = 0; r < rows; r++)
        w->scales[r] = tram_fp8_quantize_row(host + (size_t)r * cols, cols, kp, (uint8_t *)w->data + (size_t)r * kp);
}

void cpu_fp8_upload_codes(tram_backend *be, tram_weight *w, const uint8_t *codes, const float *scales, int rows,
                          int cols)
{
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (tram_fp8_is_nan(codes[i])) {
            cpu_fail(be, "an FP8 weight holds a NaN code");
            return;
        }
    if (fp8_alloc(be, w, rows, cols))
        return;
    int kp = tram_fp8_stride(cols);
    for (int r = 0; r < rows; r++) {
        uint8_t *dst = (uint8_t *)w->data + (size_t)r * kp;
        memcpy(dst, codes + (size_t)r * cols, cols);
        memset(dst + cols, 0, kp - cols);
    }
    memcpy(w->scales, scales, (size_t)rows * sizeof(float));
}

typedef struct {
    float *xd, *xs;
    const float *x;
    int cols;
    float act_max;
    tram_cpu_kernel k;
} acts_job;

static void acts_rows(void *arg, int i0, int i1)
{
    const acts_job *a = arg;
    size_t kp = tram_fp8_stride(a->cols);
    tram_fp8_quantize_acts(a->k, a->xd + i0 * kp, a->xs + i0, a->x + (size_t)i0 * a->cols, i1 - i0, a->cols,
                           a->act_max);
}

/* The activations quantized per token into the backend's scratch, then the
 * product.  Only the first passes of a new largest batch grow the scratch. */
void cpu_fp8_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    cpu_state *s = cpu_of(be);
    size_t kp = tram_fp8_stride(w->cols);
    if (cpu_reserve(be, (void **)&s->fp8_x, &s->fp8_x_cap, (size_t)n * kp * sizeof(float)) ||
        cpu_reserve(be, (void **)&s->fp8_xs, &s->fp8_xs_cap, (size_t)n * sizeof(float)))
        return;
    acts_job a = {.xd = s->fp8_x, .xs = s->fp8_xs, .x = x, .cols = w->cols, .act_max = w->act_max, .k = s->fp8_kernel};
    cpu_rows(be, n, acts_rows, &a);
    tram_fp8_gemm(s->fp8_kernel, s->pool, y, s->fp8_x, s->fp8_xs, w, n);
}
