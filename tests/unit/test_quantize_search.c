/* SmoothQuant's α search (models/smoothquant.c) against a plain
 * reference: every α of the grid scored by a W8A8 product written out here
 * in double precision, independent of the int8 kernels. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/smoothquant.h"

#define N 48
#define CIN 64
#define ROWS_A 40
#define ROWS_B 24

static float urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* Symmetric per-row quantization, dequantized: round half to even of
 * v · 127 / max|v|. */
static void fake_quant(const double *v, int n, double *out)
{
    double amax = 0;
    for (int j = 0; j < n; j++)
        amax = fmax(amax, fabs(v[j]));
    for (int j = 0; j < n; j++)
        out[j] = amax > 0 ? nearbyint(v[j] * 127.0 / amax) * amax / 127.0 : 0.0;
}

/* Σ‖X·Wᵀ − Q(X/s)·Q(W*s)ᵀ‖² over one matrix. */
static double reference_error(const float *x, const float *w, int rows, const float *s)
{
    static double xs[N][CIN], ws[ROWS_A][CIN], row[CIN];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < CIN; j++)
            row[j] = x[i * CIN + j] / (double)s[j];
        fake_quant(row, CIN, xs[i]);
    }
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < CIN; j++)
            row[j] = w[r * CIN + j] * (double)s[j];
        fake_quant(row, CIN, ws[r]);
    }
    double e = 0;
    for (int i = 0; i < N; i++)
        for (int r = 0; r < rows; r++) {
            double exact = 0, q = 0;
            for (int j = 0; j < CIN; j++) {
                exact += (double)x[i * CIN + j] * w[r * CIN + j];
                q += xs[i][j] * ws[r][j];
            }
            e += (q - exact) * (q - exact);
        }
    return e;
}

/* Activations with three outlier channels (up to 60x), like a residual
 * stream's, and weights whose columns vary 10x. */
static void make_group(float *x, float *x_amax, float *wa, float *wb)
{
    unsigned seed = 11;
    memset(x_amax, 0, CIN * sizeof(float));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < CIN; j++) {
            float v = urand(&seed) * (j == 3 ? 60.0f : j == 17 ? 25.0f : j == 40 ? 8.0f : 1.0f);
            x[i * CIN + j] = v;
            x_amax[j] = fmaxf(x_amax[j], fabsf(v));
        }
    for (int r = 0; r < ROWS_A; r++)
        for (int j = 0; j < CIN; j++)
            wa[r * CIN + j] = urand(&seed) * (j % 7 == 0 ? 1.0f : 0.1f);
    for (int r = 0; r < ROWS_B; r++)
        for (int j = 0; j < CIN; j++)
            wb[r * CIN + j] = urand(&seed) * 0.2f;
}

static void factors_at(float alpha, const float *x_amax, const float *wa, const float *wb, float *s)
{
    float w_amax[CIN] = {0};
    tram_col_amax(wa, ROWS_A, CIN, w_amax);
    tram_col_amax(wb, ROWS_B, CIN, w_amax);
    tram_smooth_factors(x_amax, w_amax, CIN, alpha, s);
}

Test(quantize, alpha_search_picks_the_grid_point_of_least_error)
{
    static float x[N * CIN], wa[ROWS_A * CIN], wb[ROWS_B * CIN];
    float x_amax[CIN], s[CIN], ref_s[CIN];
    make_group(x, x_amax, wa, wb);
    tram_smooth_mat mats[2] = {{wa, ROWS_A}, {wb, ROWS_B}};
    tram_smooth_group g = {.x = x, .n = N, .cin = CIN, .x_amax = x_amax, .mats = mats, .n_mats = 2, .ns = CIN};
    float alpha = -1;
    tram_error err;
    cr_assert(!tram_smooth_choose(&g, 2, &alpha, s, NULL, &err), "%s", err.msg);

    double errors[TRAM_SMOOTH_GRID], least = INFINITY, most = 0, chosen = NAN;
    for (int a = 0; a < TRAM_SMOOTH_GRID; a++) {
        float try = (float)a / (TRAM_SMOOTH_GRID - 1);
        factors_at(try, x_amax, wa, wb, ref_s);
        errors[a] = reference_error(x, wa, ROWS_A, ref_s) + reference_error(x, wb, ROWS_B, ref_s);
        least = fmin(least, errors[a]), most = fmax(most, errors[a]);
        if (try == alpha) {
            chosen = errors[a];
            for (int j = 0; j < CIN; j++)
                cr_assert_eq(s[j], ref_s[j], "factor %d of the chosen alpha %.1f", j, alpha);
        }
    }
    cr_assert(!isnan(chosen), "alpha %g is not on the grid", alpha);
    cr_assert(most > 2 * least, "the grid must matter for this data (%g .. %g)", least, most);
    /* the kernel's f32 epilogue and this double reference may order near-ties
     * differently, never by more than rounding */
    cr_assert(chosen <= least * 1.001, "alpha %.1f: error %g, least on the grid %g", alpha, chosen, least);
}

Test(quantize, fixed_alpha_gives_the_plain_factors)
{
    static float x[N * CIN], wa[ROWS_A * CIN], wb[ROWS_B * CIN];
    float x_amax[CIN], s[CIN], ref_s[CIN];
    make_group(x, x_amax, wa, wb);
    tram_smooth_mat mats[2] = {{wa, ROWS_A}, {wb, ROWS_B}};
    tram_smooth_group g = {.x = NULL, .n = 0, .cin = CIN, .x_amax = x_amax, .mats = mats, .n_mats = 2, .ns = CIN};
    float alpha = 0.7f;
    tram_error err;
    cr_assert(!tram_smooth_choose(&g, 2, &alpha, s, NULL, &err), "%s", err.msg);
    factors_at(0.7f, x_amax, wa, wb, ref_s);
    cr_assert(!memcmp(s, ref_s, sizeof(s)));
    alpha = -1;
    cr_assert(tram_smooth_choose(&g, 2, &alpha, s, NULL, &err), "a search without calibration rows must fail");
}

/* o_proj's factors are per KV channel: the map sends each query channel to
 * its KV channel, and the weight maxima are taken over the channels mapped. */
Test(quantize, mapped_channels_share_one_factor)
{
    static float x[N * CIN], wa[ROWS_A * CIN], wb[ROWS_B * CIN];
    float x_amax[CIN], s[CIN / 2];
    int map[CIN];
    make_group(x, x_amax, wa, wb);
    float xa_kv[CIN / 2] = {0}, wa_kv[CIN / 2] = {0}, w_amax[CIN] = {0}, ref[CIN / 2];
    tram_col_amax(wa, ROWS_A, CIN, w_amax);
    for (int j = 0; j < CIN; j++) {
        map[j] = j % (CIN / 2);
        xa_kv[map[j]] = fmaxf(xa_kv[map[j]], x_amax[j]);
        wa_kv[map[j]] = fmaxf(wa_kv[map[j]], w_amax[j]);
    }
    tram_smooth_mat mat = {wa, ROWS_A};
    tram_smooth_group g = {.x = x, .n = N, .cin = CIN, .x_amax = xa_kv, .mats = &mat, .n_mats = 1,
                           .map = map, .ns = CIN / 2};
    float alpha = 0.5f;
    tram_error err;
    cr_assert(!tram_smooth_choose(&g, 2, &alpha, s, NULL, &err), "%s", err.msg);
    tram_smooth_factors(xa_kv, wa_kv, CIN / 2, 0.5f, ref);
    cr_assert(!memcmp(s, ref, sizeof(s)));
    alpha = -1;
    cr_assert(!tram_smooth_choose(&g, 2, &alpha, s, NULL, &err), "%s", err.msg);
    cr_assert(alpha >= 0 && alpha <= 1);
}
