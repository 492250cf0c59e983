/* quant_gemm.c — block-quantized weight × int8 activation products (see
 * quant_gemm.h).
 *
 * A kernel computes one weight row against up to NR token rows, unpacking
 * each weight block once for all of them.  The driver hands threads chunks of
 * ROWS weight rows; a chunk stays in L1/L2 while every token tile passes over
 * it.  AVX2 and VNNI kernels carry target attributes, so the file builds for
 * any x86-64 and picks at run time, like int8_gemm.c. */
#include "kernels/cpu/quant_gemm.h"

#include <math.h>
#include <string.h>

#include "models/dequant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QK TRAM_QK
#define NR 8      /* token rows per kernel call */
#define ROWS 32   /* weight rows per work item */

size_t tram_q_block_bytes(tram_wtype t)
{
    switch (t) {
    case TRAM_W_Q8_0: return 2 + QK;
    case TRAM_W_Q4_0: return 2 + QK / 2;
    case TRAM_W_Q4_1: return 4 + QK / 2;
    default: return 0;
    }
}

static uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* d = max|x| / 127 keeps every q within [-127, 127].  Rounding is to
 * nearest even (nearbyintf, one vector instruction; roundf would be a libm
 * call per element), as llama.cpp's SIMD quantizers round. */
void tram_q8_quantize_row(const float *x, int cols, tram_q8_block *out)
{
    for (int b = 0; b < cols / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
#pragma omp simd reduction(max : amax)
        for (int j = 0; j < QK; j++) /* not fmaxf: its NaN rules keep it a libm call */
            amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < QK; j++) {
            out[b].q[j] = (int8_t)nearbyintf(xb[j] * id);
            sum += out[b].q[j];
        }
        out[b].d = d;
        out[b].s = d * (float)sum;
    }
}

/* ---------------------------------------------------------------- kernels */

/* out[r] = Σ_blocks (weight row w) · (token row r of x), r < nr; x rows are
 * ldx blocks apart. */
typedef void (*rows_fn)(tram_wtype t, int nr, float *out, const uint8_t *w, int nb,
                        const tram_q8_block *x, int ldx);

/* Weight j of a block as an integer, and the block's d and m (m = 0 unless Q4_1). */
static int generic_weight(tram_wtype t, const uint8_t *blk, int j)
{
    if (t == TRAM_W_Q8_0)
        return (int8_t)blk[2 + j];
    const uint8_t *qs = blk + (t == TRAM_W_Q4_1 ? 4 : 2);
    return j < QK / 2 ? qs[j] & 0x0f : qs[j - QK / 2] >> 4;
}

static void generic_rows(tram_wtype t, int nr, float *out, const uint8_t *w, int nb,
                         const tram_q8_block *x, int ldx)
{
    size_t bb = tram_q_block_bytes(t);
    for (int r = 0; r < nr; r++) {
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = w + b * bb;
            const tram_q8_block *xb = x + (size_t)r * ldx + b;
            int isum = 0;
            for (int j = 0; j < QK; j++)
                isum += generic_weight(t, blk, j) * xb->q[j];
            float d = tram_f16_to_f32(load_u16(blk));
            sum += d * xb->d * (float)isum;
            if (t == TRAM_W_Q4_0)
                sum -= 8.0f * d * xb->s;
            else if (t == TRAM_W_Q4_1)
                sum += tram_f16_to_f32(load_u16(blk + 2)) * xb->s;
        }
        out[r] = sum;
    }
}

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,fma,f16c"
#define VNNI_TARGET "avx2,fma,f16c,avx512vl,avx512vnni"

/* 16 bytes of nibbles as 32 unsigned bytes in element order: low nibbles are
 * elements 0..15, high nibbles 16..31. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i unpack_nibbles(const uint8_t *qs)
{
    __m128i b = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

__attribute__((target(AVX2_TARGET), always_inline)) static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* Eight int32 sums of 4 products each, unsigned u times signed s bytes.
 * AVX2: pairs of products stay within int16 (2 * 255 * 127 would not, but our
 * u is at most 128: a nibble or |int8|), then widen against ones. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i avx2_dot(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

__attribute__((target(VNNI_TARGET), always_inline)) static inline __m256i vnni_dot(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

/* One body for both instruction sets; t and nr are constants at every call,
 * so each instance compiles to straight-line code for its type. */
#define ROWS_BODY(TARGET, NAME, DOT)                                                                   \
    __attribute__((target(TARGET), always_inline)) static inline void NAME(                            \
        tram_wtype t, int nr, float *out, const uint8_t *w, int nb, const tram_q8_block *x, int ldx)   \
    {                                                                                                  \
        size_t bb = tram_q_block_bytes(t);                                                             \
        __m256 acc[NR];                                                                                \
        float off[NR] = {0};                                                                           \
        for (int r = 0; r < nr; r++)                                                                   \
            acc[r] = _mm256_setzero_ps();                                                              \
        for (int b = 0; b < nb; b++) {                                                                 \
            const uint8_t *blk = w + b * bb;                                                           \
            float d = _cvtsh_ss(load_u16(blk)), m = 0.0f;                                              \
            __m256i wq;                                                                                \
            if (t == TRAM_W_Q8_0) {                                                                    \
                wq = _mm256_loadu_si256((const __m256i *)(blk + 2));                                   \
            } else if (t == TRAM_W_Q4_0) {                                                             \
                wq = unpack_nibbles(blk + 2);                                                          \
            } else {                                                                                   \
                m = _cvtsh_ss(load_u16(blk + 2));                                                      \
                wq = unpack_nibbles(blk + 4);                                                          \
            }                                                                                          \
            /* signed weights: |w| times x carrying w's sign */                                        \
            __m256i wu = t == TRAM_W_Q8_0 ? _mm256_sign_epi8(wq, wq) : wq;                             \
            for (int r = 0; r < nr; r++) {                                                             \
                const tram_q8_block *xb = x + (size_t)r * ldx + b;                                     \
                __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);                               \
                if (t == TRAM_W_Q8_0)                                                                  \
                    xv = _mm256_sign_epi8(xv, wq);                                                     \
                __m256 p = _mm256_cvtepi32_ps(DOT(wu, xv));                                            \
                acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(d * xb->d), acc[r]);                        \
                if (t == TRAM_W_Q4_0)                                                                  \
                    off[r] -= 8.0f * d * xb->s;                                                        \
                else if (t == TRAM_W_Q4_1)                                                             \
                    off[r] += m * xb->s;                                                               \
            }                                                                                          \
        }                                                                                              \
        for (int r = 0; r < nr; r++)                                                                   \
            out[r] = hsum(acc[r]) + off[r];                                                            \
    }

ROWS_BODY(AVX2_TARGET, avx2_body, avx2_dot)
ROWS_BODY(VNNI_TARGET, vnni_body, vnni_dot)

#define CASE_NR(BODY, T)                                                                               \
    switch (nr) {                                                                                      \
    case 8: BODY(T, 8, out, w, nb, x, ldx); return;                                                    \
    case 7: BODY(T, 7, out, w, nb, x, ldx); return;                                                    \
    case 6: BODY(T, 6, out, w, nb, x, ldx); return;                                                    \
    case 5: BODY(T, 5, out, w, nb, x, ldx); return;                                                    \
    case 4: BODY(T, 4, out, w, nb, x, ldx); return;                                                    \
    case 3: BODY(T, 3, out, w, nb, x, ldx); return;                                                    \
    case 2: BODY(T, 2, out, w, nb, x, ldx); return;                                                    \
    default: BODY(T, 1, out, w, nb, x, ldx); return;                                                   \
    }

#define DISPATCH(TARGET, NAME, BODY)                                                                   \
    __attribute__((target(TARGET))) static void NAME(tram_wtype t, int nr, float *out, const uint8_t *w, \
                                                     int nb, const tram_q8_block *x, int ldx)          \
    {                                                                                                  \
        if (t == TRAM_W_Q8_0)                                                                          \
            CASE_NR(BODY, TRAM_W_Q8_0)                                                                 \
        if (t == TRAM_W_Q4_0)                                                                          \
            CASE_NR(BODY, TRAM_W_Q4_0)                                                                 \
        CASE_NR(BODY, TRAM_W_Q4_1)                                                                     \
    }

DISPATCH(AVX2_TARGET, avx2_rows, avx2_body)
DISPATCH(VNNI_TARGET, vnni_rows, vnni_body)
#endif

static rows_fn kernel_fn(tram_q_kernel k)
{
#if defined(__x86_64__)
    if (k == TRAM_Q_VNNI)
        return vnni_rows;
    if (k == TRAM_Q_AVX2)
        return avx2_rows;
#endif
    (void)k;
    return generic_rows;
}

int tram_q_kernel_available(tram_q_kernel k)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    if (k == TRAM_Q_VNNI)
        return avx2 && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    if (k == TRAM_Q_AVX2)
        return avx2;
#endif
    return k == TRAM_Q_GENERIC;
}

tram_q_kernel tram_q_kernel_best(void)
{
    if (tram_q_kernel_available(TRAM_Q_VNNI))
        return TRAM_Q_VNNI;
    return tram_q_kernel_available(TRAM_Q_AVX2) ? TRAM_Q_AVX2 : TRAM_Q_GENERIC;
}

const char *tram_q_kernel_name(tram_q_kernel k)
{
    static const char *const names[] = {"generic", "avx2", "avx512-vnni"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "unknown";
}

/* ---------------------------------------------------------------- driver */

void tram_q_gemm(tram_q_kernel k, float *y, const tram_q8_block *xq, int n, const tram_weight *w,
                 int threads)
{
    rows_fn fn = kernel_fn(k);
    int nb = w->cols / QK, chunks = (w->rows + ROWS - 1) / ROWS;
    size_t row_bytes = (size_t)nb * tram_q_block_bytes(w->type);
    const uint8_t *data = w->data;
#pragma omp parallel for num_threads(threads) schedule(static) if (chunks > 1)
    for (int c = 0; c < chunks; c++) {
        int r1 = (c + 1) * ROWS < w->rows ? (c + 1) * ROWS : w->rows;
        for (int i0 = 0; i0 < n; i0 += NR) {
            int nr = n - i0 < NR ? n - i0 : NR;
            for (int r = c * ROWS; r < r1; r++) {
                float out[NR];
                fn(w->type, nr, out, data + r * row_bytes, nb, xq + (size_t)i0 * nb, nb);
                for (int i = 0; i < nr; i++)
                    y[(size_t)(i0 + i) * w->rows + r] = out[i];
            }
        }
    }
}

static tram_ggml_type ggml_type_of(tram_wtype t)
{
    return t == TRAM_W_Q8_0 ? TRAM_GGML_Q8_0 : t == TRAM_W_Q4_0 ? TRAM_GGML_Q4_0 : TRAM_GGML_Q4_1;
}

void tram_q_row_f32(const tram_weight *w, int row, float *out)
{
    size_t row_bytes = (size_t)(w->cols / QK) * tram_q_block_bytes(w->type);
    /* the type and size were checked at upload, so this cannot fail */
    tram_dequantize(ggml_type_of(w->type), (const uint8_t *)w->data + row * row_bytes, out, w->cols, NULL);
}
