/* gemm_blocks.c — block-quantized weight × int8 activation products (see
 * gemm_blocks.h), and the CPU backend's matmul on them (at the end).
 *
 * Weights are repacked at load so that G = 8 rows sit side by side: for each
 * block index, the 8 rows' f16 scales (and Q4_1 mins), then their quants
 * interleaved 4 at a time.  One 256-bit dot instruction then adds 4 products
 * to each of 8 rows, one vcvtph2ps converts 8 scales and one FMA scales 8 block
 * sums: the per-block work that bounded a kernel walking one row at a time (a
 * scalar f16 convert, an int->float convert and an FMA per 32 weights, and a
 * horizontal sum per row) is shared by 8 rows, lanes being rows.  A kernel computes one
 * group against up to NR token rows, unpacking each block once for all of
 * them.  The driver hands the pool (pool.h) chunks of groups, about
 * CHUNK_BYTES of weights per chunk; a chunk stays in L1/L2 while every
 * token tile passes over it.  AVX2 and VNNI kernels carry
 * target attributes, so the file builds for any x86-64 and picks at run time,
 * like int8.c. */
#include "kernels/cpu/gemm_blocks.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"
#include "kernels/dequant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QK TRAM_QK
#define G 8       /* weight rows interleaved in one group */
#define NR 8      /* token rows per kernel call */

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
        out[b].sum = sum;
    }
}

/* ---------------------------------------------------------------- layout */

/* A group block holds block b of the G rows of one group: G f16 scales
 * (d of row i at byte 2i), for Q4_1 then G f16 mins, then the quants.  Q8_0:
 * 8 chunks of 4G bytes, chunk k holding weights 4k..4k+3 of every row (row i
 * at byte 4i).  Q4_0/Q4_1: 4 chunks of 4G bytes, byte 4i + j of chunk c
 * holding weight 8c + j of row i in its low nibble and 8c + 4 + j in its high
 * one, so one AND and one shift give the two 4-weight operands. */
static size_t group_block_bytes(tram_wtype t)
{
    return G * tram_q_block_bytes(t);
}

static size_t header_bytes(tram_wtype t)
{
    return t == TRAM_W_Q4_1 ? 4 * G : 2 * G;
}

size_t tram_q_packed_bytes(tram_wtype t, int rows, int cols)
{
    return (size_t)((rows + G - 1) / G) * (cols / QK) * group_block_bytes(t);
}

/* Where weight j of a block sits: byte and bit shift in the file's block,
 * and in the group block for row i. */
typedef struct {
    size_t file, packed;
    int file_shift, packed_shift;
} quant_place;

static quant_place place_of(tram_wtype t, int i, int j)
{
    if (t == TRAM_W_Q8_0)
        return (quant_place){.file = 2 + j, .packed = header_bytes(t) + (j / 4) * 4 * G + 4 * i + j % 4};
    size_t qs = t == TRAM_W_Q4_1 ? 4 : 2;
    return (quant_place){
        .file = qs + j % (QK / 2),
        .packed = header_bytes(t) + (j / 8) * 4 * G + 4 * i + j % 4,
        .file_shift = j < QK / 2 ? 0 : 4,
        .packed_shift = j % 8 < 4 ? 0 : 4,
    };
}

/* Copies one block of row i between the file's layout and its group block,
 * in the direction to_group says; the destination's quant bytes must be zero.
 * Runs of 4 weights from a multiple of 4 are consecutive bytes with one shift
 * in both layouts. */
static void move_block(tram_wtype t, uint8_t *file, uint8_t *group, int i, int to_group)
{
    int mask = t == TRAM_W_Q8_0 ? 0xff : 0x0f;
    uint8_t *fs = file, *gs = group + 2 * i;
    for (int k = 0; k < (t == TRAM_W_Q4_1 ? 2 : 1); k++, fs += 2, gs += 2 * G)
        memcpy(to_group ? gs : fs, to_group ? fs : gs, 2);
    for (int j = 0; j < QK; j += 4) {
        quant_place p = place_of(t, i, j);
        for (int e = 0; e < 4; e++)
            if (to_group)
                group[p.packed + e] |= (uint8_t)((file[p.file + e] >> p.file_shift & mask) << p.packed_shift);
            else
                file[p.file + e] |= (uint8_t)((group[p.packed + e] >> p.packed_shift & mask) << p.file_shift);
    }
}

void tram_q_pack(tram_wtype t, int rows, int cols, const void *blocks, void *out)
{
    size_t bb = tram_q_block_bytes(t), nb = (size_t)cols / QK;
    memset(out, 0, tram_q_packed_bytes(t, rows, cols)); /* padding rows: d = 0, no contribution */
    for (int r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++)
            move_block(t, (uint8_t *)blocks + ((size_t)r * nb + b) * bb,
                       (uint8_t *)out + ((size_t)(r / G) * nb + b) * group_block_bytes(t), r % G, 1);
}

/* ---------------------------------------------------------------- kernels */

/* out[r * G + i] = Σ_blocks (row i of the group at g) · (token row r of x),
 * r < nr; x rows are ldx blocks apart. */
typedef void (*group_fn)(tram_wtype t, int nr, float *out, const uint8_t *g, int nb,
                         const tram_q8_block *x, int ldx);

/* Weight j of row i of a group block as an integer. */
static int packed_weight(tram_wtype t, const uint8_t *gb, int i, int j)
{
    quant_place p = place_of(t, i, j);
    if (t == TRAM_W_Q8_0)
        return (int8_t)gb[p.packed];
    return gb[p.packed] >> p.packed_shift & 0x0f;
}

static void generic_group(tram_wtype t, int nr, float *out, const uint8_t *g, int nb,
                          const tram_q8_block *x, int ldx)
{
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < G; i++) {
            float sum = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *gb = g + b * group_block_bytes(t);
                const tram_q8_block *xb = x + (size_t)r * ldx + b;
                int isum = 0;
                for (int j = 0; j < QK; j++)
                    isum += packed_weight(t, gb, i, j) * xb->q[j];
                float d = tram_f16_to_f32(load_u16(gb + 2 * i));
                sum += d * xb->d * (float)isum;
                if (t == TRAM_W_Q4_0)
                    sum -= 8.0f * d * xb->s;
                else if (t == TRAM_W_Q4_1)
                    sum += tram_f16_to_f32(load_u16(gb + 2 * G + 2 * i)) * xb->s;
            }
            out[r * G + i] = sum;
        }
}

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,fma,f16c"
#define VNNI_TARGET "avx2,fma,f16c,avx512vl,avx512vnni"

/* acc + eight int32 sums of 4 products each, unsigned u times signed s bytes.
 * AVX2: pairs of products stay within int16 (2 * 255 * 127 would not, but our
 * u is at most 128: a nibble or |int8|), then widen against ones. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i
avx2_dot(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

__attribute__((target(VNNI_TARGET), always_inline)) static inline __m256i
vnni_dot(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(acc, u, s);
}

/* The 8 weight operands of a group block, operand k holding weights
 * 4k..4k+3 of each row.  The dot instructions take one unsigned side, so Q8_0
 * weights go in biased (w + 128, the product corrected by 128 Σq per block)
 * where the sums cannot saturate (VNNI), else as magnitudes with the signed
 * bytes in sgn for x_operand (AVX2's int16 pairs would overflow on 255 * 127). */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void
load_quants(tram_wtype t, int biased, const uint8_t *q, __m256i *u, __m256i *sgn)
{
    const __m256i low = _mm256_set1_epi8(0x0f);
    if (t == TRAM_W_Q8_0) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            sgn[k] = _mm256_loadu_si256((const __m256i *)(q + k * 4 * G));
            u[k] = biased ? _mm256_xor_si256(sgn[k], _mm256_set1_epi8(-128)) /* w + 128 */
                          : _mm256_sign_epi8(sgn[k], sgn[k]);
        }
        return;
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(q + c * 4 * G));
        u[2 * c] = _mm256_and_si256(v, low);
        u[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    }
}

/* Activations 4k..4k+3 in every lane, carrying the weights' signs for
 * unbiased Q8_0. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i
x_operand(tram_wtype t, int biased, const tram_q8_block *xb, int k, __m256i sgn)
{
    int32_t four;
    memcpy(&four, xb->q + 4 * k, 4);
    __m256i x = _mm256_set1_epi32(four);
    return t == TRAM_W_Q8_0 && !biased ? _mm256_sign_epi8(x, sgn) : x;
}

/* How far ahead of the block being multiplied its weights are prefetched:
 * the hardware prefetchers alone left a decode GEMV from memory at a third
 * of the kernel's in-cache speed (measured on the 2-core Xeon, one thread:
 * 20% faster with 1-2 KiB, less at 512 B or 4 KiB).  The stream runs on
 * through the groups of a chunk; past its end the lines fetched are the
 * next chunk's, read soon by whichever thread claims it. */
#define PREFETCH_BYTES 1024

/* One body for both instruction sets; t and nr are constants at every call,
 * so each instance compiles to straight-line code for its type (unrolled, so
 * that the arrays of vectors live in registers).  Two integer accumulators
 * halve the chain of dependent dot instructions. */
#define UNROLLED _Pragma("GCC unroll 8")
#define GROUP_BODY(TARGET, NAME, DOT, BIASED)                                                          \
    __attribute__((target(TARGET), always_inline)) static inline void NAME(                            \
        tram_wtype t, int nr, float *out, const uint8_t *g, int nb, const tram_q8_block *x, int ldx)   \
    {                                                                                                  \
        __m256 acc[NR];                                                                                \
        UNROLLED for (int r = 0; r < nr; r++)                                                          \
            acc[r] = _mm256_setzero_ps();                                                              \
        for (int b = 0; b < nb; b++) {                                                                 \
            const uint8_t *gb = g + b * group_block_bytes(t);                                          \
            UNROLLED for (size_t o = 0; o < group_block_bytes(t); o += 64)                              \
                _mm_prefetch((const char *)gb + PREFETCH_BYTES + o, _MM_HINT_T0);                        \
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb));                          \
            /* the block's offset per Σq: Q4_0's nibbles are q + 8, Q4_1 adds m per weight */         \
            __m256 m = t == TRAM_W_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 2 * G))) \
                                        : _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));                     \
            __m256i u[8], sgn[8];                                                                      \
            load_quants(t, BIASED, gb + header_bytes(t), u, sgn);                                      \
            UNROLLED for (int r = 0; r < nr; r++) {                                                    \
                const tram_q8_block *xb = x + (size_t)r * ldx + b;                                     \
                __m256i s0 = _mm256_setzero_si256(), s1 = s0;                                          \
                UNROLLED for (int k = 0; k < 8; k += 2) {                                              \
                    s0 = DOT(s0, u[k], x_operand(t, BIASED, xb, k, sgn[k]));                           \
                    s1 = DOT(s1, u[k + 1], x_operand(t, BIASED, xb, k + 1, sgn[k + 1]));               \
                }                                                                                      \
                __m256i isum = _mm256_add_epi32(s0, s1);                                               \
                if (t == TRAM_W_Q8_0 && BIASED)                                                        \
                    isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(128 * xb->sum));                   \
                __m256 p = _mm256_cvtepi32_ps(isum);                                                   \
                acc[r] = _mm256_fmadd_ps(p, _mm256_mul_ps(d, _mm256_set1_ps(xb->d)), acc[r]);          \
                if (t != TRAM_W_Q8_0)                                                                  \
                    acc[r] = _mm256_fmadd_ps(m, _mm256_set1_ps(xb->s), acc[r]);                        \
            }                                                                                          \
        }                                                                                              \
        UNROLLED for (int r = 0; r < nr; r++)                                                          \
            _mm256_storeu_ps(out + r * G, acc[r]);                                                     \
    }

GROUP_BODY(AVX2_TARGET, avx2_body, avx2_dot, 0)
GROUP_BODY(VNNI_TARGET, vnni_body, vnni_dot, 1)

#define CASE_NR(BODY, T)                                                                               \
    switch (nr) {                                                                                      \
    case 8: BODY(T, 8, out, g, nb, x, ldx); return;                                                    \
    case 7: BODY(T, 7, out, g, nb, x, ldx); return;                                                    \
    case 6: BODY(T, 6, out, g, nb, x, ldx); return;                                                    \
    case 5: BODY(T, 5, out, g, nb, x, ldx); return;                                                    \
    case 4: BODY(T, 4, out, g, nb, x, ldx); return;                                                    \
    case 3: BODY(T, 3, out, g, nb, x, ldx); return;                                                    \
    case 2: BODY(T, 2, out, g, nb, x, ldx); return;                                                    \
    default: BODY(T, 1, out, g, nb, x, ldx); return;                                                   \
    }

#define DISPATCH(TARGET, NAME, BODY)                                                                   \
    __attribute__((target(TARGET))) static void NAME(tram_wtype t, int nr, float *out, const uint8_t *g, \
                                                     int nb, const tram_q8_block *x, int ldx)          \
    {                                                                                                  \
        if (t == TRAM_W_Q8_0)                                                                          \
            CASE_NR(BODY, TRAM_W_Q8_0)                                                                 \
        if (t == TRAM_W_Q4_0)                                                                          \
            CASE_NR(BODY, TRAM_W_Q4_0)                                                                 \
        CASE_NR(BODY, TRAM_W_Q4_1)                                                                     \
    }

DISPATCH(AVX2_TARGET, avx2_group, avx2_body)
DISPATCH(VNNI_TARGET, vnni_group, vnni_body)
#endif

static group_fn kernel_fn(tram_cpu_kernel k)
{
#if defined(__x86_64__)
    if (k == TRAM_CPU_VNNI)
        return vnni_group;
    if (k == TRAM_CPU_AVX2)
        return avx2_group;
#endif
    (void)k;
    return generic_group;
}

int tram_q_kernel_available(tram_cpu_kernel k)
{
    tram_cpu_features f = tram_cpu_features_detect();
    int avx2 = f.avx2 && f.fma && f.f16c;
    if (k == TRAM_CPU_VNNI)
        return avx2 && f.avx512vl && f.avx512vnni;
    if (k == TRAM_CPU_AVX2)
        return avx2;
    return k == TRAM_CPU_GENERIC;
}

tram_cpu_kernel tram_q_kernel_best(void) { return tram_cpu_kernel_best(tram_q_kernel_available); }

/* ---------------------------------------------------------------- driver */

/* Weight bytes a chunk of work should cover: a few microseconds of streaming,
 * far above the cost of claiming it, small enough that a thread arriving late
 * still finds chunks to take. */
#define CHUNK_BYTES 32768

typedef struct {
    group_fn fn;
    float *y;
    const tram_q8_block *xq;
    int n, nb;
    const tram_weight *w;
    size_t group_bytes;
} q_gemm_job;

/* Groups [g0, g1) of W against every token tile, row i of the products at
 * out + i * ld (ld: y's row length, or the chunk's own in a scratch). */
static void q_gemm_into(const q_gemm_job *j, int g0, int g1, float *out, size_t ld, int col0)
{
    const tram_weight *w = j->w;
    const uint8_t *data = w->data;
    for (int i0 = 0; i0 < j->n; i0 += NR) {
        int nr = j->n - i0 < NR ? j->n - i0 : NR;
        for (int g = g0; g < g1; g++) {
            float tile[NR * G];
            int valid = w->rows - g * G < G ? w->rows - g * G : G; /* the last group's padding */
            j->fn(w->type, nr, tile, data + g * j->group_bytes, j->nb, j->xq + (size_t)i0 * j->nb, j->nb);
            for (int i = 0; i < nr; i++)
                memcpy(out + (size_t)(i0 + i) * ld + g * G - col0, tile + i * G, valid * sizeof(float));
        }
    }
}

static void q_gemm_groups(void *arg, int g0, int g1)
{
    const q_gemm_job *j = arg;
    q_gemm_into(j, g0, g1, j->y, (size_t)j->w->rows, 0);
}

/* The stealable form (pool.h): a chunk's products into the scratch, rows of
 * its own width, then copied into y by the thread that commits it. */
static int chunk_rows(const q_gemm_job *j, int g0, int g1)
{
    return TRAM_MIN(g1 * G, j->w->rows) - g0 * G;
}

static void q_gemm_compute(const void *arg, int g0, int g1, void *scratch)
{
    const q_gemm_job *j = arg;
    q_gemm_into(j, g0, g1, scratch, (size_t)chunk_rows(j, g0, g1), g0 * G);
}

static void q_gemm_commit(const void *arg, int g0, int g1, const void *scratch)
{
    const q_gemm_job *j = arg;
    int rows = chunk_rows(j, g0, g1);
    for (int i = 0; i < j->n; i++)
        memcpy(j->y + (size_t)i * j->w->rows + g0 * G, (const float *)scratch + (size_t)i * rows,
               rows * sizeof(float));
}

void tram_q_gemm(tram_cpu_kernel k, float *y, const tram_q8_block *xq, int n, const tram_weight *w,
                 tram_cpu_pool *pool)
{
    int nb = w->cols / QK, groups = (w->rows + G - 1) / G, tiles = (n + NR - 1) / NR;
    q_gemm_job j = {.fn = kernel_fn(k), .y = y, .xq = xq, .n = n, .nb = nb, .w = w,
                    .group_bytes = (size_t)nb * group_block_bytes(w->type)};
    /* a chunk passes over its groups once per token tile, so more tiles, fewer groups */
    size_t per_chunk = CHUNK_BYTES / (j.group_bytes * (size_t)tiles);
    int chunk = per_chunk < 1 ? 1 : (int)TRAM_MIN(per_chunk, (size_t)groups);
    /* a few token rows (decode): stealable, so a descheduled thread holding
     * a chunk does not hold the step */
    int max_chunk = TRAM_MAX(chunk, (groups + TRAM_POOL_MAX_CHUNKS - 1) / TRAM_POOL_MAX_CHUNKS);
    if ((size_t)n * max_chunk * G * sizeof(float) <= TRAM_POOL_SCRATCH_BYTES) {
        tram_pool_stealable s = {.compute = q_gemm_compute, .commit = q_gemm_commit, .job = &j,
                                 .job_bytes = sizeof(j)};
        tram_cpu_pool_run_stealable(pool, groups, chunk, &s);
        return;
    }
    tram_cpu_pool_run(pool, groups, chunk, q_gemm_groups, &j);
}

static tram_ggml_type ggml_type_of(tram_wtype t)
{
    return t == TRAM_W_Q8_0 ? TRAM_GGML_Q8_0 : t == TRAM_W_Q4_0 ? TRAM_GGML_Q4_0 : TRAM_GGML_Q4_1;
}

/* Block by block back to the file's layout, then the one dequantizer. */
void tram_q_row_f32(const tram_weight *w, int row, float *out)
{
    size_t nb = (size_t)w->cols / QK;
    const uint8_t *group = (const uint8_t *)w->data + (size_t)(row / G) * nb * group_block_bytes(w->type);
    for (size_t b = 0; b < nb; b++) {
        uint8_t blk[2 + QK] = {0};
        move_block(w->type, blk, (uint8_t *)group + b * group_block_bytes(w->type), row % G, 0);
        /* the type was checked at upload, so this cannot fail */
        tram_dequantize(ggml_type_of(w->type), blk, out + b * QK, QK, NULL);
    }
}

/* ---------------------------------------------------------------- backend ops */

/* GGUF blocks as stored, regrouped by 8 rows for the kernels (tram_q_pack):
 * the rows of a block weight are whole blocks. */
void cpu_upload_weight_blocks(tram_backend *be, tram_weight *w, const void *blocks, int rows, int cols,
                              tram_wtype type)
{
    memset(w, 0, sizeof(*w));
    if (!tram_q_block_bytes(type) || cols % TRAM_QK || rows < 1) {
        cpu_fail(be, "block weights need a GGUF block type and a multiple of 32 columns");
        return;
    }
    w->data = cpu_alloc(be, tram_q_packed_bytes(type, rows, cols));
    if (!w->data)
        return;
    tram_q_pack(type, rows, cols, blocks, w->data);
    w->type = type;
    w->rows = rows;
    w->cols = cols;
}

typedef struct {
    const float *x;
    tram_q8_block *xb;
    int cols;
} quantize_job;

static void quantize_chunk(void *arg, int i0, int i1)
{
    const quantize_job *j = arg;
    for (int i = i0; i < i1; i++)
        tram_q8_quantize_row(j->x + (size_t)i * j->cols, j->cols, j->xb + (size_t)i * (j->cols / QK));
}

/* Block weights: activations quantized per 32 like the weights, then integer
 * block dots.  Only a new largest batch allocates. */
void cpu_blocks_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    cpu_state *s = cpu_of(be);
    int nb = w->cols / TRAM_QK;
    if (cpu_reserve(be, (void **)&s->xb, &s->xb_cap, (size_t)n * nb * sizeof(tram_q8_block)))
        return;
    quantize_job j = {.x = x, .xb = s->xb, .cols = w->cols};
    cpu_rows(be, n, quantize_chunk, &j);
    tram_q_gemm(s->q_kernel, y, s->xb, n, w, s->pool);
}
