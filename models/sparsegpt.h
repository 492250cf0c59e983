/* sparsegpt.h — 2:4 pruning with SparseGPT's weight update (Frantar and
 * Alistarh, 2023), beside prune.h's Wanda: a layer's weights are pruned a
 * column at a time, and each pruned weight's error is compensated in the
 * weights of its row still to come, the optimal brain surgeon's update for
 * the layer's calibration inputs X:
 *     H = XᵀX (+ 1 % of its mean diagonal, for a positive definite H),
 *     U = the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU),
 *     column i pruned: err = w[i] / U[i][i], w[j] -= err · U[i][j] for j > i;
 * which 2 of each group of 4 go is chosen when the row reaches the group,
 * from the updated weights: the 2 smallest w[j]² / U[j][j]².  Every row is
 * independent, so the rows run in parallel. */
#ifndef TRAM_SPARSEGPT_H
#define TRAM_SPARSEGPT_H

#include "kernels/base.h"

/* u[cols][cols] (upper triangle; the lower is zeroed) from xtx[cols][cols]
 * (lower triangle), XᵀX of the calibration inputs; fails when H is not
 * positive definite. */
int tram_sparsegpt_factor(const float *xtx, int cols, float *u, tram_error *err);

/* Prunes w[rows][cols] 2:4 (cols a multiple of 4) with the update, on
 * `threads` threads (0: OpenMP's default). */
void tram_sparsegpt_prune(float *w, int rows, int cols, const float *u, int threads);

#endif
