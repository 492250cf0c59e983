/* smoothquant.c — SmoothQuant's factors, and α chosen per layer input.
 *
 * One α for the whole model is a compromise: the inputs of the first layers'
 * q/k/v carry the residual stream's massive outlier channels and want most of
 * them moved into the weights, while elsewhere a strong migration only makes
 * the weight rows' int8 steps coarse.  So for each input the search tries
 * every α of a grid on the calibration rows and keeps the one whose W8A8
 * product, computed by the very kernel the model runs, is closest to the f32
 * product (the auto-scale search of SmoothQuant's and AWQ's code, with the
 * int8 kernel as the judge). */
#include "models/smoothquant.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_int8.h"

/* ---------------------------------------------------------------- the factors */

void tram_smooth_factors(const float *x_amax, const float *w_amax, int n, float alpha, float *s)
{
    for (int j = 0; j < n; j++) {
        if (!(x_amax[j] > 0.0f) || !(w_amax[j] > 0.0f)) {
            s[j] = 1.0f;
            continue;
        }
        float v = powf(x_amax[j], alpha) / powf(w_amax[j], 1.0f - alpha);
        s[j] = fminf(fmaxf(v, 1e-5f), 1e5f);
    }
}

void tram_col_amax(const float *w, int rows, int cols, float *amax)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            amax[j] = fmaxf(amax[j], fabsf(w[(size_t)i * cols + j]));
}

void tram_scale_cols(float *w, int rows, int cols, const float *s)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            w[(size_t)i * cols + j] *= s[j];
}

void tram_unscale_rows(float *w, int rows, int cols, const float *s)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            w[(size_t)i * cols + j] /= s[i];
}

/* ---------------------------------------------------------------- the α search */

typedef struct {
    const tram_smooth_group *g;
    int threads, max_rows, rows_total, kp;
    tram_cpu_pool *pool;  /* the W8A8 products' threads */
    float *ref;        /* [n][rows_total] f32 products, matrices side by side */
    float *y;          /* [n][max_rows] one matrix's W8A8 product */
    float *xs;         /* [n][cin] X / s */
    int8_t *xq;        /* [n][kp] */
    float *x_scales;   /* [n] */
    float *ws;         /* [max_rows][cin] W * s */
    float *w_scales;   /* [max_rows] */
    void *packed;      /* tram_i8_matrix of max_rows × cin */
    float *s_full;     /* [cin] */
    float *w_amax;     /* [ns] */
    float *cand;       /* [ns] factors being tried */
} search_ctx;

static void ctx_free(search_ctx *c)
{
    tram_cpu_pool_destroy(c->pool); /* first: a late worker may still read the buffers */
    free(c->ref), free(c->y), free(c->xs), free(c->xq), free(c->x_scales);
    free(c->ws), free(c->w_scales), free(c->packed), free(c->s_full), free(c->w_amax), free(c->cand);
}

/* What every group needs: its weights' column maxima. */
static int ctx_init(search_ctx *c, const tram_smooth_group *g, int threads, tram_error *err)
{
    memset(c, 0, sizeof(*c));
    c->g = g;
    c->threads = threads > 0 ? threads : omp_get_max_threads();
    c->s_full = tram_calloc(g->cin, sizeof(float), err);
    c->w_amax = c->s_full ? tram_calloc(g->ns, sizeof(float), err) : NULL;
    return c->w_amax ? 0 : -1;
}

/* What the search needs besides. */
static int ctx_alloc_search(search_ctx *c, tram_error *err)
{
    const tram_smooth_group *g = c->g;
    c->kp = (g->cin + 3) & ~3;
    for (int m = 0; m < g->n_mats; m++) {
        c->max_rows = TRAM_MAX(c->max_rows, g->mats[m].rows);
        c->rows_total += g->mats[m].rows;
    }
    size_t n = g->n, cin = g->cin, rows = c->max_rows;
    c->ref = tram_calloc(n * c->rows_total, sizeof(float), err);
    c->y = tram_calloc(n * rows, sizeof(float), err);
    c->xs = tram_calloc(n * cin, sizeof(float), err);
    c->xq = tram_calloc(n * c->kp, 1, err);
    c->x_scales = tram_calloc(n, sizeof(float), err);
    c->ws = tram_calloc(rows * cin, sizeof(float), err);
    c->w_scales = tram_calloc(rows, sizeof(float), err);
    c->cand = tram_calloc(g->ns, sizeof(float), err);
    if (tram_cpu_pool_create(&c->pool, c->threads, err))
        return -1;
    c->packed = aligned_alloc(64, (tram_i8_matrix_bytes((int)rows, (int)cin) + 63) & ~(size_t)63);
    if (!c->packed)
        return tram_fail(err, "out of memory for a %d x %d int8 matrix", (int)rows, (int)cin);
    return c->ref && c->y && c->xs && c->xq && c->x_scales && c->ws && c->w_scales && c->cand ? 0 : -1;
}

/* Column maxima of all matrices, then the largest per smoothing channel. */
static void weight_amax(search_ctx *c)
{
    const tram_smooth_group *g = c->g;
    memset(c->s_full, 0, g->cin * sizeof(float));
    for (int m = 0; m < g->n_mats; m++)
        tram_col_amax(g->mats[m].w, g->mats[m].rows, g->cin, c->s_full);
    for (int j = 0; j < g->cin; j++) {
        int k = g->map ? g->map[j] : j;
        c->w_amax[k] = fmaxf(c->w_amax[k], c->s_full[j]);
    }
}

static void reference_products(search_ctx *c)
{
    const tram_smooth_group *g = c->g;
    for (int m = 0, off = 0; m < g->n_mats; off += g->mats[m++].rows)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->n, g->mats[m].rows, g->cin, 1.0f, g->x, g->cin,
                    g->mats[m].w, g->cin, 0.0f, c->ref + off, c->rows_total);
}

/* Σ‖X·Wᵀ − Q(X/s)·Q(W*s)ᵀ‖² for factors s[ns]. */
static double quantized_error(search_ctx *c, const float *s)
{
    const tram_smooth_group *g = c->g;
    int n = g->n, cin = g->cin;
    for (int j = 0; j < cin; j++)
        c->s_full[j] = s[g->map ? g->map[j] : j];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < cin; j++)
            c->xs[(size_t)i * cin + j] = g->x[(size_t)i * cin + j] / c->s_full[j];
        c->x_scales[i] = tram_i8_quantize(c->xs + (size_t)i * cin, cin, c->kp, c->xq + (size_t)i * c->kp);
    }
    double e = 0;
    for (int m = 0, off = 0; m < g->n_mats; off += g->mats[m++].rows) {
        int rows = g->mats[m].rows;
        memcpy(c->ws, g->mats[m].w, (size_t)rows * cin * sizeof(float));
        tram_scale_cols(c->ws, rows, cin, c->s_full);
        const tram_i8_matrix *w = tram_i8_matrix_pack(c->packed, c->ws, rows, cin, c->w_scales);
        tram_i8_gemm_f32(tram_i8_kernel_best(), c->y, c->xq, c->x_scales, n, w, c->w_scales, c->pool);
        for (int i = 0; i < n; i++)
            for (int r = 0; r < rows; r++) {
                double d = c->y[(size_t)i * rows + r] - c->ref[(size_t)i * c->rows_total + off + r];
                e += d * d;
            }
    }
    return e;
}

/* Tries every α of the grid; the best one's factors into s, its error
 * relative to ‖X·Wᵀ‖² into *rel. */
static void search(search_ctx *c, float *alpha, float *s, double *rel)
{
    const tram_smooth_group *g = c->g;
    double best = INFINITY, norm = 0;
    reference_products(c);
    for (size_t i = 0; i < (size_t)g->n * c->rows_total; i++)
        norm += (double)c->ref[i] * c->ref[i];
    for (int a = 0; a < TRAM_SMOOTH_GRID; a++) {
        float try = (float)a / (TRAM_SMOOTH_GRID - 1);
        tram_smooth_factors(g->x_amax, c->w_amax, g->ns, try, c->cand);
        double e = quantized_error(c, c->cand);
        if (e < best) {
            best = e, *alpha = try;
            memcpy(s, c->cand, g->ns * sizeof(float));
        }
    }
    *rel = norm > 0 ? best / norm : 0;
}

int tram_smooth_choose(const tram_smooth_group *g, int threads, float *alpha, float *s, double *rel_error,
                       tram_error *err)
{
    search_ctx c;
    double rel = 0;
    int rc = ctx_init(&c, g, threads, err);
    if (!rc)
        weight_amax(&c);
    if (!rc && *alpha >= 0)
        tram_smooth_factors(g->x_amax, c.w_amax, g->ns, *alpha, s);
    else if (!rc && g->n < 1)
        rc = tram_fail(err, "the α search needs calibration rows");
    else if (!rc && !(rc = ctx_alloc_search(&c, err)))
        search(&c, alpha, s, &rel);
    if (rel_error)
        *rel_error = rel;
    ctx_free(&c);
    return rc;
}
