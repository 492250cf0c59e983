/* smoothquant.h — SmoothQuant's math: Y = X·Wᵀ = (X / s)·(W * s)ᵀ for any
 * s > 0 per input channel, the factors s, and α chosen per layer input on
 * calibration rows.  models/quantize.c folds the factors into a model. */
#ifndef TRAM_SMOOTHQUANT_H
#define TRAM_SMOOTHQUANT_H

#include "kernels/base.h"

/* s_j = max|X_j|^α / max|W_j|^(1-α), clamped to [1e-5, 1e5]; channels never
 * seen (x_amax 0) or empty weight columns get 1. */
void tram_smooth_factors(const float *x_amax, const float *w_amax, int n, float alpha, float *s);
/* amax[j] = max(amax[j], max_i |w[i][j]|) over rows of w[rows][cols]. */
void tram_col_amax(const float *w, int rows, int cols, float *amax);
/* w[i][j] *= s[j] */
void tram_scale_cols(float *w, int rows, int cols, const float *s);
/* w[i][j] /= s[i] (also a vector: rows = n, cols = 1) */
void tram_unscale_rows(float *w, int rows, int cols, const float *s);

/* ---- α searched per layer input, on the calibration rows ---- */

#define TRAM_SMOOTH_GRID 11  /* α = 0, 0.1, ..., 1 */

typedef struct {
    const float *w;  /* [rows][cin] */
    int rows;
} tram_smooth_mat;

/* One input X shared by n_mats matrices.  Smoothing channels may be fewer than
 * input channels (o_proj: one factor per KV channel): map[c] names channel c's
 * factor, or map is NULL and ns = cin. */
typedef struct {
    const float *x;          /* [n][cin] calibration rows */
    int n, cin;
    const float *x_amax;     /* [ns] over all calibration tokens */
    const tram_smooth_mat *mats;
    int n_mats;
    const int *map;
    int ns;
} tram_smooth_group;

/* SmoothQuant factors s[ns] for the group at *alpha when it is >= 0; else
 * the α of the grid (written to *alpha) whose factors minimize
 * Σ ‖X·Wᵀ − Q(X/s)·Q(W*s)ᵀ‖² over the group's matrices, with Q the W8A8
 * quantization the model runs (per token, per output row); rel_error (may be
 * NULL) gets that error over Σ ‖X·Wᵀ‖² (0 at a fixed α). */
int tram_smooth_choose(const tram_smooth_group *g, int threads, float *alpha, float *s, double *rel_error,
                       tram_error *err);

#endif
