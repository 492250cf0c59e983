/* sparsegpt.c — SparseGPT's 2:4 pruning with the OBS update (sparsegpt.h). */
#include "models/sparsegpt.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "models/sparsity.h"

/* a[n][n] = L Lᵀ, L written over the lower triangle; -1 when a is not
 * positive definite.  Row-major, so every inner loop runs along rows. */
static int cholesky(double *a, int n)
{
    for (int j = 0; j < n; j++) {
        double *aj = a + (size_t)j * n, d = aj[j];
        for (int k = 0; k < j; k++)
            d -= aj[k] * aj[k];
        if (!(d > 0))
            return -1;
        aj[j] = d = sqrt(d);
        for (int i = j + 1; i < n; i++) {
            double *ai = a + (size_t)i * n, s = ai[j];
            for (int k = 0; k < j; k++)
                s -= ai[k] * aj[k];
            ai[j] = s / d;
        }
    }
    return 0;
}

/* h (lower triangle) = XᵀX plus 1 % of its mean diagonal (a tiny constant
 * when every input was zero), so that it is positive definite. */
static void damped_hessian(const float *xtx, int cols, double *h)
{
    double mean = 0;
    for (size_t i = 0; i < (size_t)cols * cols; i++)
        h[i] = xtx[i];
    for (int i = 0; i < cols; i++)
        mean += h[(size_t)i * cols + i] / cols;
    for (int i = 0; i < cols; i++)
        h[(size_t)i * cols + i] += mean > 0 ? 0.01 * mean : 1e-6;
}

int tram_sparsegpt_factor(const float *xtx, int cols, float *u, tram_error *err)
{
    size_t nn = (size_t)cols * cols;
    double *h = tram_calloc(nn, sizeof(double), err), *v = h ? tram_calloc(nn, sizeof(double), err) : NULL;
    int rc = -1;
    if (!v)
        goto out;
    damped_hessian(xtx, cols, h);
    if (cholesky(h, cols)) /* H = L Lᵀ */
        goto singular;
    for (int i = 0; i < cols; i++)
        v[(size_t)i * cols + i] = 1.0;
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, cols, cols, 1.0, h, cols, v, cols);
    /* H⁻¹ = L⁻ᵀ L⁻¹ = Vᵀ V, then H⁻¹ = L₂ L₂ᵀ and U = L₂ᵀ */
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, cols, cols, 1.0, v, cols, 0.0, h, cols);
    if (cholesky(h, cols))
        goto singular;
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++)
            u[(size_t)i * cols + j] = j >= i ? (float)h[(size_t)j * cols + i] : 0.0f;
    rc = 0;
    goto out;
singular:
    tram_fail(err, "sparsegpt: the calibration inputs' Hessian is not positive definite");
out:
    free(h), free(v);
    return rc;
}

/* One row, column by column: a group's 2 weights of smallest w² / U[j][j]²
 * go when the row reaches the group, and each one's error is spread over
 * the weights right of it. */
static void prune_row(float *w, int cols, const float *u)
{
    for (int g = 0; g < cols; g += 4) {
        float score[4];
        for (int i = 0; i < 4; i++) {
            float d = u[(size_t)(g + i) * cols + g + i];
            score[i] = w[g + i] * w[g + i] / (d * d);
        }
        int dropped = tram_sparsity_drop_two(score);
        for (int i = 0; i < 4; i++) {
            if (!(dropped >> i & 1))
                continue;
            const float *ui = u + (size_t)(g + i) * cols;
            float e = w[g + i] / ui[g + i];
            for (int j = g + i + 1; j < cols; j++)
                w[j] -= e * ui[j];
            w[g + i] = 0.0f;
        }
    }
}

void tram_sparsegpt_prune(float *w, int rows, int cols, const float *u, int threads)
{
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (int r = 0; r < rows; r++)
        prune_row(w + (size_t)r * cols, cols, u);
}
