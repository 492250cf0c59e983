/* sparse24_int8.c — 2:4 sparse W8A8 weights on the CPU (TRAM_W_S24_INT8,
 * backend.h): the 2:4 layout of sparse24.c with int8 values, quantized per
 * output row exactly as the dense int8 weights are (kernels/int8_format.h),
 * multiplied with the activations the dense W8A8 path quantizes per token.
 * The kept values and their positions are 5/8 of the dense int8 matrix's
 * bytes, and the zeros are skipped, not multiplied.
 *
 * Layout, one allocation: values [rows][cols/2] int8, then positions
 * [rows][cols/8] bytes as sparse24.c packs them (a byte holds two groups,
 * group 2b in its low nibble, a group's nibble i0 | i1 << 2); w->scales
 * holds the rows' scales.  The kernels: sparse24_int8.h. */
#include "kernels/cpu/sparse24_int8.h"

#include <string.h>

#include "kernels/cpu/cpu_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static size_t value_bytes(int rows, int cols) { return (size_t)rows * cols / 2; }

static const int8_t *row_values(const tram_weight *w, int r) { return (const int8_t *)w->data + (size_t)r * w->cols / 2; }

static const uint8_t *row_positions(const tram_weight *w, int r)
{
    return (const uint8_t *)w->data + value_bytes(w->rows, w->cols) + (size_t)r * w->cols / 8;
}

/* One row's kept values, quantized with the scale of the whole row (the
 * zeros do not change max|w|), and their positions. */
static int pack_row(const float *host, int cols, int8_t *values, uint8_t *positions, float *scale)
{
    float inv;
    *scale = tram_i8_row_scale(host, cols, &inv);
    for (int g = 0; g < cols / 4; g++) {
        int nib = cpu_s24_group_nibble(host + 4 * g);
        if (nib < 0)
            return -1;
        values[2 * g] = tram_i8_round(host[4 * g + (nib & 3)], inv);
        values[2 * g + 1] = tram_i8_round(host[4 * g + (nib >> 2)], inv);
        positions[g / 2] = g % 2 ? (uint8_t)(positions[g / 2] | nib << 4) : (uint8_t)nib;
    }
    return 0;
}

void cpu_s24i8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    if (cols % 8 || cols > TRAM_I8_MAX_COLS) {
        cpu_fail(be, "a 2:4 sparse int8 matrix needs a multiple of 8 columns, at most 65536");
        return;
    }
    uint8_t *data = cpu_alloc(be, value_bytes(rows, cols) + (size_t)rows * cols / 8);
    float *scales = data ? cpu_alloc(be, (size_t)rows * sizeof(float)) : NULL;
    if (!scales) {
        free(data);
        return;
    }
    *w = (tram_weight){.type = TRAM_W_S24_INT8, .rows = rows, .cols = cols, .data = data, .scales = scales};
    for (int r = 0; r < rows; r++)
        if (pack_row(host + (size_t)r * cols, cols, (int8_t *)row_values(w, r), (uint8_t *)row_positions(w, r),
                     scales + r)) {
            free(data), free(scales);
            memset(w, 0, sizeof(*w));
            cpu_fail(be, "a matrix loaded as 2:4 sparse int8 has a group of 4 with more than 2 nonzeros");
            return;
        }
}

typedef struct {
    float *y;
    const int8_t *xq; /* [n][kp] */
    const float *x_scales;
    const tram_weight *w;
    int n, kp;
} s24i8_job;

/* The dense int8 product's epilogue (int8.c's store_tile), so the bits agree. */
static float dequant(int32_t acc, float x_scale, float w_scale) { return (float)acc * x_scale * w_scale; }

/* Bytes [0, bytes) of a row's positions (8 columns each) against one token. */
static int32_t s24i8_dot(const int8_t *v, const uint8_t *p, const int8_t *x, int bytes)
{
    int32_t acc = 0;
    for (int b = 0; b < bytes; b++, v += 4, x += 8) {
        int lo = p[b] & 15, hi = p[b] >> 4;
        acc += v[0] * x[lo & 3] + v[1] * x[lo >> 2] + v[2] * x[4 + (hi & 3)] + v[3] * x[4 + (hi >> 2)];
    }
    return acc;
}

static void generic_rows(void *arg, int r0, int r1)
{
    const s24i8_job *j = arg;
    const tram_weight *w = j->w;
    for (int r = r0; r < r1; r++)
        for (int t = 0; t < j->n; t++) {
            int32_t acc = s24i8_dot(row_values(w, r), row_positions(w, r), j->xq + (size_t)t * j->kp, w->cols / 8);
            j->y[(size_t)t * w->rows + r] = dequant(acc, j->x_scales[t], w->scales[r]);
        }
}

#define STEP 64  /* columns of one AVX2 step: 16 groups, 32 kept values, 8 bytes of positions */
#define TILE 4   /* tokens one pass over a row serves */

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,bmi2"

/* The shuffle indices of a step's 32 kept values.  Each 16 columns' 16 bits
 * of positions spread to 8 bytes (pdep), plus each value's group offset in
 * the 16 columns, index one 128-bit lane of the inputs.  Columns 0-31 (one
 * load: lanes of 0-15 and 16-31) fill bytes 0-7 of each lane (lo), columns
 * 32-63 bytes 8-15 (hi); a set top bit zeroes the other half, so lo | hi
 * holds values 0-7, 16-23 | 8-15, 24-31, the order step_values loads. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void step_masks(const uint8_t *p, __m256i *lo,
                                                                                  __m256i *hi)
{
    const uint64_t two_bits = 0x0303030303030303ull, groups = 0x0c0c080804040000ull;
    const long long zero = (long long)0x8080808080808080ull;
    uint64_t bits;
    memcpy(&bits, p, sizeof(bits));
    __m256i m = _mm256_setr_epi64x((long long)(_pdep_u64(bits & 0xffff, two_bits) + groups),
                                   (long long)(_pdep_u64(bits >> 32 & 0xffff, two_bits) + groups),
                                   (long long)(_pdep_u64(bits >> 16 & 0xffff, two_bits) + groups),
                                   (long long)(_pdep_u64(bits >> 48, two_bits) + groups));
    *lo = _mm256_or_si256(m, _mm256_setr_epi64x(0, zero, 0, zero));
    *hi = _mm256_or_si256(m, _mm256_setr_epi64x(zero, 0, zero, 0));
}

/* A step's 32 kept values in the order the gathered inputs come in. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i step_values(const int8_t *v)
{
    return _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)v), _MM_SHUFFLE(3, 1, 2, 0));
}

/* acc += the step's products with one token's inputs x[0..63], in int32:
 * |w| (u8, the same for every token) times sign(x, w) (s8) is x*w, and
 * vpmaddubsw's pairs stay within int16 (2 * 127 * 127 < 32768), the sign
 * trick of int8.c's AVX2 kernel with the operands' roles swapped. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i
step_dot(__m256i acc, const int8_t *x, __m256i lo, __m256i hi, __m256i vals, __m256i abs_vals)
{
    __m256i g = _mm256_or_si256(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)x), lo),
                                _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(x + 32)), hi));
    __m256i prod = _mm256_maddubs_epi16(abs_vals, _mm256_sign_epi8(g, vals));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(prod, _mm256_set1_epi16(1)));
}

__attribute__((target(AVX2_TARGET), always_inline)) static inline int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1))));
}

/* Tokens [t0, t0 + mt) of row r: each step's shuffles and values are made
 * once for the mt tokens; the columns past the last whole step go through
 * the generic dot. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void avx2_tile(const s24i8_job *j, int r, int t0,
                                                                                 int mt)
{
    const tram_weight *w = j->w;
    int steps = w->cols / STEP;
    const int8_t *v = row_values(w, r), *x = j->xq + (size_t)t0 * j->kp;
    const uint8_t *p = row_positions(w, r);
    __m256i acc[TILE];
    for (int t = 0; t < mt; t++)
        acc[t] = _mm256_setzero_si256();
    for (int s = 0; s < steps; s++) {
        __m256i lo, hi, vals = step_values(v + 32 * s), abs_vals = _mm256_abs_epi8(vals);
        step_masks(p + 8 * s, &lo, &hi);
        for (int t = 0; t < mt; t++)
            acc[t] = step_dot(acc[t], x + (size_t)t * j->kp + STEP * s, lo, hi, vals, abs_vals);
    }
    for (int t = 0; t < mt; t++) {
        int32_t tail = s24i8_dot(v + 32 * steps, p + 8 * steps, x + (size_t)t * j->kp + STEP * steps,
                                 w->cols % STEP / 8);
        j->y[(size_t)(t0 + t) * w->rows + r] = dequant(hsum_epi32(acc[t]) + tail, j->x_scales[t0 + t], w->scales[r]);
    }
}

/* Whole tiles of TILE tokens, then the rest one token at a time (a
 * constant mt at each call, for the registers). */
__attribute__((target(AVX2_TARGET))) static void avx2_rows(void *arg, int r0, int r1)
{
    const s24i8_job *j = arg;
    for (int r = r0; r < r1; r++) {
        int t0 = 0;
        for (; t0 + TILE <= j->n; t0 += TILE)
            avx2_tile(j, r, t0, TILE);
        for (; t0 < j->n; t0++)
            avx2_tile(j, r, t0, 1);
    }
}
#endif

/* Output columns [r0, r1) for every token, by kernel k. */
static tram_pool_fn rows_of(tram_cpu_kernel k)
{
#if defined(__x86_64__)
    if (k == TRAM_CPU_AVX2)
        return avx2_rows;
#endif
    (void)k;
    return generic_rows;
}

int tram_s24i8_kernel_available(tram_cpu_kernel k)
{
    tram_cpu_features f = tram_cpu_features_detect();
    if (k == TRAM_CPU_AVX2)
        return f.avx2 && f.bmi2;
    return k == TRAM_CPU_GENERIC;
}

tram_cpu_kernel tram_s24i8_kernel_best(void) { return tram_cpu_kernel_best(tram_s24i8_kernel_available); }

void tram_s24i8_gemm(tram_cpu_kernel k, tram_cpu_pool *pool, float *y, const int8_t *xq, const float *x_scales,
                     const tram_weight *w, int n)
{
    s24i8_job j = {.y = y, .xq = xq, .x_scales = x_scales, .w = w, .n = n, .kp = tram_qact_stride(w->cols)};
    int chunk = TRAM_MAX(16, 65536 / (w->cols / 2)); /* about 64 KiB of values */
    tram_cpu_pool_run(pool, w->rows, chunk, rows_of(k), &j);
}
