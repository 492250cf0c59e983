/* Attention's chunk kernels (kernels/cpu/attn_chunk.h): every kernel this
 * CPU runs against the generic reference, over a run of chunks (so the
 * running max grows and what was accumulated is rescaled), at head widths
 * that are and are not multiples of the 8-float vectors, with rows that see
 * all, part or none of a chunk.  The vector kernel sums in another order and
 * takes its own exponentials, so it agrees to within 2e-6 relative (what a
 * few roundings of floats near 1 give), not bit for bit; and the reference
 * itself is checked against the softmax written out in doubles. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"
#include "kernels/cpu/attn_chunk.h"

enum { ROWS = 5, CHUNKS = 6, MAX_HD = 136 };
#define KERNEL_TOL 2e-6

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* Keys and values of CHUNKS chunks of TRAM_ATTN_CHUNK_KEYS rows, stride
 * floats apart (wider than the head, as in a cache of several KV heads);
 * spread lets the scores span a wide range, so the max moves. */
typedef struct {
    float k[CHUNKS][TRAM_ATTN_CHUNK_KEYS][MAX_HD + 8], v[CHUNKS][TRAM_ATTN_CHUNK_KEYS][MAX_HD + 8];
    float q[ROWS][MAX_HD];
} chunk_data;

static void fill(chunk_data *c, unsigned seed, float spread)
{
    for (int i = 0; i < CHUNKS; i++)
        for (int j = 0; j < TRAM_ATTN_CHUNK_KEYS; j++)
            for (int d = 0; d < MAX_HD + 8; d++) {
                c->k[i][j][d] = frand(&seed) * spread * (float)(i + 1) / CHUNKS;
                c->v[i][j][d] = frand(&seed);
            }
    for (int r = 0; r < ROWS; r++)
        for (int d = 0; d < MAX_HD; d++)
            c->q[r][d] = frand(&seed);
}

/* Row r sees nk_of(r, i) keys of chunk i: all, a part, or none. */
static int nk_of(int r, int i, int nk) { return r == 0 ? nk : r == 1 ? (i == 2 ? 0 : nk) : TRAM_MIN(nk, r + i * 5); }

/* The chunks folded into ROWS rows by kernel k; out[r] is row r's result. */
static void run_kernel(tram_cpu_kernel k, const chunk_data *c, int hd, int nk, float out[ROWS][MAX_HD],
                       float max[ROWS], float sum[ROWS])
{
    tram_attn_row rows[ROWS];
    for (int r = 0; r < ROWS; r++) {
        memset(out[r], 0, sizeof(out[r]));
        rows[r] = (tram_attn_row){.q = c->q[r], .out = out[r], .max = -INFINITY, .sum = 0.0f};
    }
    for (int i = 0; i < CHUNKS; i++) {
        for (int r = 0; r < ROWS; r++)
            rows[r].nk = nk_of(r, i, nk);
        tram_attn_keys keys = {.k = &c->k[i][0][0], .v = &c->v[i][0][0], .stride = MAX_HD + 8, .nk = nk,
                               .head_dim = hd, .scale = 1.0f / sqrtf((float)hd)};
        tram_attn_chunk(k, rows, ROWS, &keys);
    }
    for (int r = 0; r < ROWS; r++)
        max[r] = rows[r].max, sum[r] = rows[r].sum;
}

static void expect_near(double got, double want, double tol, const char *what, int hd, int nk, int r)
{
    cr_assert(fabs(got - want) <= tol * (1.0 + fabs(want)), "%s, head_dim %d, %d keys, row %d: %.9g vs %.9g", what,
              hd, nk, r, got, want);
}

/* Row r's softmax attention over every key it saw, in doubles. */
static void softmax_in_doubles(const chunk_data *c, int hd, int nk, int r, double *out)
{
    double m = -INFINITY, sum = 0, s[CHUNKS][TRAM_ATTN_CHUNK_KEYS];
    for (int i = 0; i < CHUNKS; i++)
        for (int j = 0; j < nk_of(r, i, nk); j++) {
            double dot = 0;
            for (int d = 0; d < hd; d++)
                dot += (double)c->q[r][d] * c->k[i][j][d];
            s[i][j] = dot / sqrt((double)hd);
            m = fmax(m, s[i][j]);
        }
    memset(out, 0, hd * sizeof(double));
    for (int i = 0; i < CHUNKS; i++)
        for (int j = 0; j < nk_of(r, i, nk); j++) {
            double p = exp(s[i][j] - m);
            sum += p;
            for (int d = 0; d < hd; d++)
                out[d] += p * c->v[i][j][d];
        }
    for (int d = 0; d < hd; d++)
        out[d] /= sum;
}

static void check_shape(const chunk_data *c, int hd, int nk)
{
    static float ref[ROWS][MAX_HD], got[ROWS][MAX_HD];
    float ref_max[ROWS], ref_sum[ROWS], max[ROWS], sum[ROWS];
    double want[MAX_HD];
    run_kernel(TRAM_CPU_GENERIC, c, hd, nk, ref, ref_max, ref_sum);
    for (int r = 0; r < ROWS; r++) {
        softmax_in_doubles(c, hd, nk, r, want);
        for (int d = 0; d < hd; d++)
            expect_near(ref[r][d] / ref_sum[r], want[d], 1e-5, "generic against doubles", hd, nk, r);
    }
    for (tram_cpu_kernel k = TRAM_CPU_AVX2; k <= TRAM_CPU_VNNI; k++) {
        if (!tram_attn_kernel_available(k))
            continue;
        run_kernel(k, c, hd, nk, got, max, sum);
        for (int r = 0; r < ROWS; r++) {
            expect_near(max[r], ref_max[r], KERNEL_TOL, tram_cpu_kernel_name(k), hd, nk, r);
            expect_near(sum[r], ref_sum[r], KERNEL_TOL, tram_cpu_kernel_name(k), hd, nk, r);
            for (int d = 0; d < hd; d++)
                expect_near(got[r][d] / sum[r], ref[r][d] / ref_sum[r], KERNEL_TOL, tram_cpu_kernel_name(k), hd,
                            nk, r);
        }
    }
}

Test(attn_chunk, every_kernel_agrees_with_the_reference)
{
    static chunk_data c;
    static const int widths[] = {8, 12, 64, 72, 128, 136}, keys[] = {1, 7, 8, 16, 19, 32};
    for (int spread = 1; spread <= 16; spread *= 4) {
        fill(&c, 3u + (unsigned)spread, (float)spread);
        for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
            for (size_t n = 0; n < sizeof(keys) / sizeof(keys[0]); n++)
                check_shape(&c, widths[w], keys[n]);
    }
}

/* A row whose scores are all far below its running max gets weights that
 * vanish (the vector exponential's floor at -88 included), never NaN. */
Test(attn_chunk, far_below_the_max_weighs_nothing)
{
    static chunk_data c;
    fill(&c, 9u, 1.0f);
    for (tram_cpu_kernel k = TRAM_CPU_GENERIC; k <= TRAM_CPU_VNNI; k++) {
        if (!tram_attn_kernel_available(k))
            continue;
        float out[64] = {0};
        tram_attn_row row = {.q = c.q[0], .out = out, .max = 1000.0f, .sum = 1.0f, .nk = 16};
        out[0] = 1.0f;
        tram_attn_keys keys = {.k = &c.k[0][0][0], .v = &c.v[0][0][0], .stride = MAX_HD + 8, .nk = 16,
                               .head_dim = 64, .scale = 0.125f};
        tram_attn_chunk(k, &row, 1, &keys);
        cr_assert(row.max == 1000.0f && row.sum == 1.0f && out[0] == 1.0f && out[1] == 0.0f,
                  "%s: max %g sum %g out %g %g", tram_cpu_kernel_name(k), row.max, row.sum, out[0], out[1]);
    }
}

/* The vector kernel is the one the backend picks wherever the CPU has AVX2
 * and FMA (and the tests above then compared it, not the reference with
 * itself). */
Test(attn_chunk, avx2_is_picked_where_the_cpu_has_it)
{
    tram_cpu_features f = tram_cpu_features_detect();
    cr_assert_eq(tram_attn_kernel_best() != TRAM_CPU_GENERIC, f.avx2 && f.fma);
}
