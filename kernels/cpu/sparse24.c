/* sparse24.c — 2:4 sparse weights on the CPU (TRAM_W_S24, backend.h): of
 * every 4 consecutive weights along a row at most 2 are nonzero, and only
 * those are stored, with their positions in 2 bits each.  The product reads
 * half the weights' bytes (plus 1/16 for the positions) and does half the
 * multiply-adds of the dense one: the zeros are skipped, not multiplied.
 *
 * Layout, one allocation: values [rows][cols/2] f32, then positions
 * [rows][cols/8] bytes; a byte holds two groups, group 2b in its low nibble,
 * and a group's nibble is i0 | i1 << 2 (i0 < i1, the positions within the
 * group of its first and second stored value).  A group with fewer than two
 * nonzeros stores zeros at unused positions.  The kernels: sparse24.h. */
#include "kernels/cpu/sparse24.h"

#include <string.h>

#include "kernels/cpu/cpu_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static size_t s24_value_count(int rows, int cols) { return (size_t)rows * cols / 2; }

static const uint8_t *s24_positions(const tram_weight *w)
{
    return (const uint8_t *)((const float *)w->data + s24_value_count(w->rows, w->cols));
}

/* One group's two kept positions, or -1 when more than two are nonzero. */
int cpu_s24_group_nibble(const float *g)
{
    int pos[4], n = 0;
    for (int i = 0; i < 4; i++)
        if (g[i] != 0.0f) {
            if (n == 2)
                return -1;
            pos[n++] = i;
        }
    for (int i = 0; n < 2; i++) /* pad with zero positions not already taken */
        if (n == 0 || pos[0] != i)
            pos[n++] = i;
    if (pos[0] > pos[1])
        pos[0] ^= pos[1], pos[1] ^= pos[0], pos[0] ^= pos[1];
    return pos[0] | pos[1] << 2;
}

void cpu_s24_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    if (cols % 8) {
        cpu_fail(be, "a 2:4 sparse matrix needs a multiple of 8 columns");
        return;
    }
    size_t nv = s24_value_count(rows, cols);
    uint8_t *data = cpu_alloc(be, nv * sizeof(float) + (size_t)rows * cols / 8);
    if (!data)
        return;
    float *values = (float *)data;
    uint8_t *positions = data + nv * sizeof(float);
    for (size_t g = 0; g < (size_t)rows * cols / 4; g++) {
        const float *x = host + g * 4;
        int nib = cpu_s24_group_nibble(x);
        if (nib < 0) {
            free(data);
            cpu_fail(be, "a matrix loaded as 2:4 sparse has a group of 4 with more than 2 nonzeros");
            return;
        }
        values[2 * g] = x[nib & 3];
        values[2 * g + 1] = x[nib >> 2];
        if (g % 2 == 0)
            positions[g / 2] = (uint8_t)nib;
        else
            positions[g / 2] |= (uint8_t)(nib << 4);
    }
    *w = (tram_weight){.type = TRAM_W_S24, .rows = rows, .cols = cols, .data = data};
}

typedef struct {
    tram_cpu_kernel k;
    float *y;
    const float *x;  /* [n][cols] */
    const float *xt; /* [n / 8 rounded up][cols][8]: x transposed, zero past n; NULL below XT_MIN_TOKENS */
    const tram_weight *w;
    int n;
} s24_job;

/* One token's product with one row: a byte of positions covers two groups,
 * and four sums (fixed, so the result does not depend on threads) keep the
 * adds from waiting on each other. */
static float s24_dot(const float *v, const uint8_t *p, const float *x, int cols)
{
    float acc[4] = {0};
    for (int b = 0; b < cols / 8; b++, v += 4, x += 8) {
        int lo = p[b] & 15, hi = p[b] >> 4, k = b & 1;
        acc[2 * k] += v[0] * x[lo & 3] + v[1] * x[lo >> 2];
        acc[2 * k + 1] += v[2] * x[4 + (hi & 3)] + v[3] * x[4 + (hi >> 2)];
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static const float *row_values(const tram_weight *w, int r) { return (const float *)w->data + (size_t)r * w->cols / 2; }
static const uint8_t *row_positions(const tram_weight *w, int r) { return s24_positions(w) + (size_t)r * w->cols / 8; }

static void generic_rows(const s24_job *j, int r0, int r1)
{
    int cols = j->w->cols;
    for (int r = r0; r < r1; r++)
        for (int t = 0; t < j->n; t++)
            j->y[(size_t)t * j->w->rows + r] = s24_dot(row_values(j->w, r), row_positions(j->w, r),
                                                       j->x + (size_t)t * cols, cols);
}

/* From this many tokens the AVX2 kernel reads x transposed. */
#define XT_MIN_TOKENS 8
#define XT_TILE 8  /* tokens side by side in the transposed copy */
#define XT_GROUP 3 /* tiles of 8 tokens one pass over a row serves (12 sums in registers) */
#define X_TILE 4  /* tokens one gathered row serves below XT_MIN_TOKENS */

#if defined(__x86_64__)
#define AVX2_TARGET "avx2,fma"

__attribute__((target(AVX2_TARGET), always_inline)) static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* A step is 16 columns: 4 groups, 8 stored values, 16 bits of positions.
 * Value k's position in its group is bits 2k..2k+1; values 0-3 read columns
 * 0-7 of the step, 4-7 columns 8-15, each half one permute away. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline __m256i step_lanes(const uint8_t *p)
{
    uint16_t bits;
    memcpy(&bits, p, sizeof(bits));
    __m256i pos = _mm256_srlv_epi32(_mm256_set1_epi32(bits), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_add_epi32(_mm256_and_si256(pos, _mm256_set1_epi32(3)), _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4));
}

/* acc[t] += the step's values times token t's inputs at their positions. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void
gather_step(__m256 *acc, int mt, const float *x, size_t ldx, const float *v, const uint8_t *p)
{
    __m256i lanes = step_lanes(p);
    __m256 vals = _mm256_loadu_ps(v);
    for (int t = 0; t < mt; t++) {
        __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + t * ldx), lanes);
        __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + t * ldx + 8), lanes);
        acc[t] = _mm256_fmadd_ps(vals, _mm256_blend_ps(lo, hi, 0xf0), acc[t]);
    }
}

/* Tokens [t0, t0 + mt) of row r, x read as it is: each step's positions and
 * values are decoded once for all mt tokens; even and odd steps keep their
 * own sums so that consecutive FMAs do not wait on each other.  mt is a
 * constant at each call (avx2_rows), so the sums stay in registers. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void
avx2_gather_tile(const s24_job *j, int r, int t0, int mt)
{
    int cols = j->w->cols, steps = cols / 16;
    const float *v = row_values(j->w, r), *x = j->x + (size_t)t0 * cols;
    const uint8_t *p = row_positions(j->w, r);
    __m256 even[X_TILE], odd[X_TILE];
    for (int t = 0; t < mt; t++)
        even[t] = odd[t] = _mm256_setzero_ps();
    int s = 0;
    for (; s + 2 <= steps; s += 2) {
        gather_step(even, mt, x + 16 * s, cols, v + 8 * s, p + 2 * s);
        gather_step(odd, mt, x + 16 * s + 16, cols, v + 8 * s + 8, p + 2 * s + 2);
    }
    if (s < steps)
        gather_step(even, mt, x + 16 * s, cols, v + 8 * s, p + 2 * s);
    for (int t = 0; t < mt; t++) {
        const float *xt = x + (size_t)t * cols + 16 * steps;
        float tail = cols % 16 ? s24_dot(v + 8 * steps, p + 2 * steps, xt, 8) : 0.0f;
        j->y[(size_t)(t0 + t) * j->w->rows + r] = hsum(_mm256_add_ps(even[t], odd[t])) + tail;
    }
}

/* acc[i][k] += value k of a byte (2 groups, 4 values) times its column's 8
 * tokens of tile i in the transposed x: the position is decoded and the
 * value broadcast once for the nt tiles, then one FMA per tile. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void
transposed_byte(__m256 acc[][4], int nt, const float *xt, size_t tile_floats, int c0, const float *v, int bits)
{
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        int c = c0 + (k >> 1) * 4 + ((bits >> 2 * k) & 3);
        __m256 vk = _mm256_broadcast_ss(v + k);
        for (int i = 0; i < nt; i++)
            acc[i][k] = _mm256_fmadd_ps(vk, _mm256_loadu_ps(xt + i * tile_floats + (size_t)c * XT_TILE), acc[i][k]);
    }
}

/* Tiles [tile, tile + nt) of 8 tokens each, of row r, from the transposed x:
 * 4 sums per tile (4 nt chains of FMAs in flight).  nt is a constant at each
 * call (avx2_rows): the more tiles, the less decoding per FMA. */
__attribute__((target(AVX2_TARGET), always_inline)) static inline void
avx2_transposed_tiles(const s24_job *j, int r, int tile, int nt)
{
    int cols = j->w->cols;
    size_t tile_floats = (size_t)cols * XT_TILE;
    const float *v = row_values(j->w, r), *xt = j->xt + tile * tile_floats;
    const uint8_t *p = row_positions(j->w, r);
    __m256 acc[XT_GROUP][4];
    for (int i = 0; i < nt; i++)
        for (int k = 0; k < 4; k++)
            acc[i][k] = _mm256_setzero_ps();
    for (int b = 0; b < cols / 8; b++)
        transposed_byte(acc, nt, xt, tile_floats, 8 * b, v + 4 * b, p[b]);
    for (int i = 0; i < nt; i++) {
        float out[XT_TILE];
        _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3])));
        for (int t = 0, t0 = (tile + i) * XT_TILE; t < XT_TILE && t0 + t < j->n; t++)
            j->y[(size_t)(t0 + t) * j->w->rows + r] = out[t];
    }
}

__attribute__((target(AVX2_TARGET))) static void avx2_rows(const s24_job *j, int r0, int r1)
{
    for (int r = r0; r < r1; r++) {
        if (j->xt)
            for (int tile = 0, tiles = (j->n + XT_TILE - 1) / XT_TILE; tile < tiles; tile += XT_GROUP)
                switch (TRAM_MIN(XT_GROUP, tiles - tile)) { /* constants, for the registers */
                case 3: avx2_transposed_tiles(j, r, tile, 3); break;
                case 2: avx2_transposed_tiles(j, r, tile, 2); break;
                default: avx2_transposed_tiles(j, r, tile, 1); break;
                }
        else
            for (int t0 = 0; t0 < j->n; t0 += X_TILE)
                switch (TRAM_MIN(X_TILE, j->n - t0)) { /* constants, for the registers */
                case 4: avx2_gather_tile(j, r, t0, 4); break;
                case 3: avx2_gather_tile(j, r, t0, 3); break;
                case 2: avx2_gather_tile(j, r, t0, 2); break;
                default: avx2_gather_tile(j, r, t0, 1); break;
                }
    }
}
#endif

/* Output columns [r0, r1) for every token. */
static void s24_rows(void *arg, int r0, int r1)
{
    const s24_job *j = arg;
#if defined(__x86_64__)
    if (j->k == TRAM_CPU_AVX2) {
        avx2_rows(j, r0, r1);
        return;
    }
#endif
    generic_rows(j, r0, r1);
}

int tram_s24_kernel_available(tram_cpu_kernel k) { return tram_cpu_fma_kernel_available(k); }

tram_cpu_kernel tram_s24_kernel_best(void) { return tram_cpu_kernel_best(tram_cpu_fma_kernel_available); }

size_t tram_s24_scratch_floats(tram_cpu_kernel k, int n, int cols)
{
    if (k != TRAM_CPU_AVX2 || n < XT_MIN_TOKENS)
        return 0;
    return (size_t)(n + XT_TILE - 1) / XT_TILE * XT_TILE * cols;
}

/* x[n][cols] as tiles of 8 tokens side by side per column, zero past n. */
static void transpose_tokens(float *xt, const float *x, int n, int cols)
{
    for (int tile = 0; tile * XT_TILE < n; tile++)
        for (int c = 0; c < cols; c++)
            for (int t = 0; t < XT_TILE; t++) {
                int tok = tile * XT_TILE + t;
                xt[((size_t)tile * cols + c) * XT_TILE + t] = tok < n ? x[(size_t)tok * cols + c] : 0.0f;
            }
}

void tram_s24_gemm(tram_cpu_kernel k, tram_cpu_pool *pool, float *y, const float *x, float *scratch,
                   const tram_weight *w, int n)
{
    s24_job j = {.k = k, .y = y, .x = x, .w = w, .n = n};
    if (tram_s24_scratch_floats(k, n, w->cols)) {
        transpose_tokens(scratch, x, n, w->cols);
        j.xt = scratch;
    }
    int chunk = TRAM_MAX(16, 65536 / (w->cols * 2)); /* about 64 KiB of values */
    tram_cpu_pool_run(pool, w->rows, chunk, s24_rows, &j);
}

void cpu_s24_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    cpu_state *s = cpu_of(be);
    size_t floats = tram_s24_scratch_floats(s->s24_kernel, n, w->cols);
    if (floats && cpu_reserve(be, (void **)&s->s24_xt, &s->s24_xt_cap, floats * sizeof(float)))
        return;
    tram_s24_gemm(s->s24_kernel, s->pool, y, x, s->s24_xt, w, n);
}
