/* dequant.c — ggml block formats to f32, and f32 to the 32-element ones.
 *
 * Each format is a loop over whole blocks; the inner loops are plain
 * element-wise arithmetic so the compiler vectorizes them.  The operation
 * order matches ggml's reference dequantizers (scale first, then the
 * quant), so results agree with them bit for bit where no FMA is fused.
 * Loads go through memcpy: tensor data in a caller's buffer may be unaligned.
 * The host is assumed little-endian, as GGUF files are. */
#include "kernels/dequant.h"

#include <math.h>
#include <string.h>

#define QK 32    /* elements per block of the legacy formats */
#define QK_K 256 /* elements per super-block of the k-quants */

typedef void (*dequant_fn)(const uint8_t *restrict src, float *restrict dst, int64_t n_blocks);
typedef void (*quant_fn)(const float *restrict src, uint8_t *restrict dst);

static inline uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* Shifting the half's exponent and mantissa into float position and scaling
 * by 2^112 rebiases the exponent (15 -> 127) and normalizes subnormals in one
 * multiply; infinities and NaNs then only need their exponent forced to all
 * ones.  Branch-free, so loops over it vectorize. */
static inline float half_to_float(uint16_t h)
{
    uint32_t em = h & 0x7fffu;
    uint32_t bits = f32_to_bits(bits_to_f32(em << 13) * 0x1p112f);
    bits |= em >= 0x7c00u ? 0x7f800000u : 0u;
    return bits_to_f32(bits | (uint32_t)(h & 0x8000u) << 16);
}

float tram_f16_to_f32(uint16_t h) { return half_to_float(h); }
float tram_bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

static void dq_f32(const uint8_t *restrict src, float *restrict dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/* Plain types convert in runs of 32 so that the inner loop has a constant
 * trip count, which GCC's -O2 cost model requires to vectorize. */
#define RUN 32

/* f16 and bf16: each element to f32 by `convert`.  Always inlined, so that
 * each caller's conversion is inlined into the loop too. */
static inline __attribute__((always_inline)) void dq_16bit(const uint8_t *restrict src, float *restrict dst,
                                                           int64_t n, float (*convert)(uint16_t))
{
    int64_t i = 0;
    for (; i + RUN <= n; i += RUN)
        for (int l = 0; l < RUN; l++)
            dst[i + l] = convert(load_u16(src + 2 * (i + l)));
    for (; i < n; i++)
        dst[i] = convert(load_u16(src + 2 * i));
}

static void dq_f16(const uint8_t *restrict src, float *restrict dst, int64_t n)
{
    dq_16bit(src, dst, n, half_to_float);
}

static void dq_bf16(const uint8_t *restrict src, float *restrict dst, int64_t n)
{
    dq_16bit(src, dst, n, tram_bf16_to_f32);
}

static void dq_i8(const uint8_t *restrict src, float *restrict dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = (float)(int8_t)src[i];
}

/* Q8_0: f16 d, int8 q[32]; x = q * d. */
static void dq_q8_0(const uint8_t *restrict src, float *restrict dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 2 + QK, dst += QK) {
        float d = half_to_float(load_u16(src));
        const int8_t *q = (const int8_t *)(src + 2);
        for (int l = 0; l < QK; l++)
            dst[l] = (float)q[l] * d;
    }
}

/* Q4_0: f16 d, 16 bytes of nibbles (low nibbles are elements 0..15, high
 * nibbles 16..31); x = (q - 8) * d. */
static void dq_q4_0(const uint8_t *restrict src, float *restrict dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 2 + QK / 2, dst += QK) {
        float d = half_to_float(load_u16(src));
        const uint8_t *q = src + 2;
        for (int l = 0; l < QK / 2; l++) {
            dst[l] = d * (float)((q[l] & 0x0f) - 8);
            dst[l + QK / 2] = d * (float)((q[l] >> 4) - 8);
        }
    }
}

/* Q4_1: f16 d, f16 m, nibbles as Q4_0; x = q * d + m. */
static void dq_q4_1(const uint8_t *restrict src, float *restrict dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 4 + QK / 2, dst += QK) {
        float d = half_to_float(load_u16(src));
        float m = half_to_float(load_u16(src + 2));
        const uint8_t *q = src + 4;
        for (int l = 0; l < QK / 2; l++) {
            dst[l] = d * (float)(q[l] & 0x0f) + m;
            dst[l + QK / 2] = d * (float)(q[l] >> 4) + m;
        }
    }
}

/* Round to nearest even, as a float-to-half instruction does: below the
 * half's normal range one float add does the rounding (0.5 + x puts x's
 * bits at the half subnormal's ulp, 2^-24); above it the mantissa's cut
 * bits round by an add with the kept bit's parity. */
static inline uint16_t float_to_half(float f)
{
    uint32_t x = f32_to_bits(f), sign = x >> 16 & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* infinity, or a quiet NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) /* below 2^-14 */
        return (uint16_t)(sign | (f32_to_bits(bits_to_f32(ax) + 0.5f) - 0x3f000000u));
    ax += 0xc8000fffu + (ax >> 13 & 1u); /* exponent rebiased 127 -> 15, rounding carried in */
    return (uint16_t)(sign | ax >> 13);
}

static inline void store_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, sizeof(v)); }

/* ggml's reference quantizers, one block of 32 each: the inverses of the
 * dequantizers above up to rounding. */
static void q_q8_0(const float *restrict x, uint8_t *restrict dst)
{
    float amax = 0.0f;
    for (int l = 0; l < QK; l++)
        amax = fabsf(x[l]) > amax ? fabsf(x[l]) : amax;
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, float_to_half(d));
    for (int l = 0; l < QK; l++)
        dst[2 + l] = (uint8_t)(int8_t)roundf(x[l] * id);
}

/* d from the value of largest magnitude, which maps to -8 exactly. */
static void q_q4_0(const float *restrict x, uint8_t *restrict dst)
{
    float amax = 0.0f, max = 0.0f;
    for (int l = 0; l < QK; l++)
        if (fabsf(x[l]) > amax) {
            amax = fabsf(x[l]);
            max = x[l];
        }
    float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, float_to_half(d));
    for (int l = 0; l < QK / 2; l++) {
        int lo = (int)(x[l] * id + 8.5f), hi = (int)(x[l + QK / 2] * id + 8.5f);
        dst[2 + l] = (uint8_t)(TRAM_MIN(15, lo) | TRAM_MIN(15, hi) << 4);
    }
}

static void q_q4_1(const float *restrict x, uint8_t *restrict dst)
{
    float min = x[0], max = x[0];
    for (int l = 1; l < QK; l++) {
        min = x[l] < min ? x[l] : min;
        max = x[l] > max ? x[l] : max;
    }
    float d = (max - min) / 15.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, float_to_half(d));
    store_u16(dst + 2, float_to_half(min));
    for (int l = 0; l < QK / 2; l++) {
        int lo = (int)((x[l] - min) * id + 0.5f), hi = (int)((x[l + QK / 2] - min) * id + 0.5f);
        dst[4 + l] = (uint8_t)(TRAM_MIN(15, lo) | TRAM_MIN(15, hi) << 4);
    }
}

/* Q4_K's 12 scale bytes hold eight 6-bit scales and eight 6-bit mins: the
 * first four of each in the low 6 bits of bytes 0-3 / 4-7, the last four
 * split between bytes 8-11 (low 4 bits) and the top 2 bits of bytes 0-7. */
static void q4_k_scales(const uint8_t *s, uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0x0f) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* Q4_K super-block (144 bytes): f16 d, f16 dmin, 12 scale bytes, 128 bytes
 * of nibbles.  Sub-block j (32 elements) uses byte group j/2, low nibbles
 * for even j and high for odd; x = d*sc[j] * q - dmin*mn[j]. */
static void dq_q4_k(const uint8_t *restrict src, float *restrict dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 144, dst += QK_K) {
        float d = half_to_float(load_u16(src));
        float dmin = half_to_float(load_u16(src + 2));
        uint8_t sc[8], mn[8];
        q4_k_scales(src + 4, sc, mn);
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = src + 16 + 32 * (j / 2);
            int shift = 4 * (j & 1);
            float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
            float *y = dst + 32 * j;
            for (int l = 0; l < 32; l++)
                y[l] = dl * (float)((q[l] >> shift) & 0x0f) - ml;
        }
    }
}

/* Q6_K super-block (210 bytes): ql[128] low nibbles, qh[64] high 2-bit
 * pairs, int8 scales[16], f16 d.  Each half of 128 elements uses 64 ql
 * bytes and 32 qh bytes; element 32*k + l of a half takes its low nibble
 * from ql[l + 32*(k&1)] (high nibble for k >= 2) and its high bits from
 * qh[l] >> 2k.  x = d*scale[e/16] * (q - 32). */
static void dq_q6_k(const uint8_t *restrict src, float *restrict dst, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 210, dst += QK_K) {
        float d = half_to_float(load_u16(src + 208));
        const int8_t *scales = (const int8_t *)(src + 192);
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = src + 64 * half, *qh = src + 128 + 32 * half;
            for (int k = 0; k < 4; k++) {
                const uint8_t *lo = ql + 32 * (k & 1);
                int lo_shift = 4 * (k >> 1), hi_shift = 2 * k;
                float *y = dst + 128 * half + 32 * k;
                float d0 = d * (float)scales[8 * half + 2 * k];
                float d1 = d * (float)scales[8 * half + 2 * k + 1];
                for (int l = 0; l < 16; l++)
                    y[l] = d0 * (float)((((lo[l] >> lo_shift) & 0x0f) | (((qh[l] >> hi_shift) & 3) << 4)) - 32);
                for (int l = 16; l < 32; l++)
                    y[l] = d1 * (float)((((lo[l] >> lo_shift) & 0x0f) | (((qh[l] >> hi_shift) & 3) << 4)) - 32);
            }
        }
    }
}

static const struct {
    tram_ggml_type type;
    const char *name;
    int64_t block_size, type_size;
    dequant_fn fn;  /* called with the number of blocks */
    quant_fn quantize; /* one block; NULL where tram_quantize_blocks refuses the type */
} traits[] = {
    {TRAM_GGML_F32, "F32", 1, 4, dq_f32, NULL},
    {TRAM_GGML_F16, "F16", 1, 2, dq_f16, NULL},
    {TRAM_GGML_BF16, "BF16", 1, 2, dq_bf16, NULL},
    {TRAM_GGML_I8, "I8", 1, 1, dq_i8, NULL},
    {TRAM_GGML_Q8_0, "Q8_0", QK, 2 + QK, dq_q8_0, q_q8_0},
    {TRAM_GGML_Q4_0, "Q4_0", QK, 2 + QK / 2, dq_q4_0, q_q4_0},
    {TRAM_GGML_Q4_1, "Q4_1", QK, 4 + QK / 2, dq_q4_1, q_q4_1},
    {TRAM_GGML_Q4_K, "Q4_K", QK_K, 144, dq_q4_k, NULL},
    {TRAM_GGML_Q6_K, "Q6_K", QK_K, 210, dq_q6_k, NULL},
};

static int trait_index(tram_ggml_type type)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(traits); i++)
        if (traits[i].type == type)
            return (int)i;
    return -1;
}

int64_t tram_ggml_block_size(tram_ggml_type type)
{
    int i = trait_index(type);
    return i < 0 ? 0 : traits[i].block_size;
}

const char *tram_ggml_type_name(tram_ggml_type type)
{
    int i = trait_index(type);
    return i < 0 ? "unknown" : traits[i].name;
}

int64_t tram_ggml_type_size(tram_ggml_type type, int64_t n_elements)
{
    int i = trait_index(type);
    if (i < 0 || n_elements < 0 || n_elements % traits[i].block_size)
        return -1;
    int64_t n_blocks = n_elements / traits[i].block_size;
    if (n_blocks > INT64_MAX / traits[i].type_size)
        return -1;
    return n_blocks * traits[i].type_size;
}

int tram_dequantize(tram_ggml_type type, const void *src, float *dst, int64_t n, tram_error *err)
{
    int i = trait_index(type);
    if (i < 0)
        return tram_fail(err, "cannot dequantize tensor type %d: unknown type", (int)type);
    if (n < 0 || n % traits[i].block_size)
        return tram_fail(err, "cannot dequantize %lld elements of %s: not a whole number of %lld-element blocks",
                         (long long)n, traits[i].name, (long long)traits[i].block_size);
    traits[i].fn(src, dst, n / traits[i].block_size);
    return 0;
}

int tram_quantize_blocks(tram_ggml_type type, const float *src, void *dst, int64_t n, tram_error *err)
{
    int i = trait_index(type);
    if (i < 0 || !traits[i].quantize)
        return tram_fail(err, "cannot quantize to %s: only Q8_0, Q4_0 and Q4_1 are written", tram_ggml_type_name(type));
    if (n < 0 || n % QK)
        return tram_fail(err, "cannot quantize %lld elements to %s: not a whole number of 32-element blocks",
                         (long long)n, traits[i].name);
    for (int64_t b = 0; b < n / QK; b++)
        traits[i].quantize(src + b * QK, (uint8_t *)dst + b * traits[i].type_size);
    return 0;
}
