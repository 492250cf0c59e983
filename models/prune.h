/* prune.h — `tram prune --sparsity 2:4`: 2:4 structured sparsity chosen by
 * Wanda's score (Sun et al., 2023): weight W[r][c] matters as |W[r][c]| ·
 * ‖x_c‖, its magnitude times the norm of its input channel over calibration
 * tokens (tram_calibrate's sumsq), and in every group of 4 consecutive
 * weights of a row the 2 that matter least become zero; or SparseGPT's
 * choice and weight update (models/sparsegpt.h).  The file it writes:
 * models/sparsity.h. */
#ifndef TRAM_PRUNE_H
#define TRAM_PRUNE_H

#include "kernels/base.h"
#include "models/model.h"
#include "models/quantize.h"

typedef enum {
    TRAM_PRUNE_WANDA,     /* the 2 of smallest |w| · ‖x‖ go, the rest stay as they were */
    TRAM_PRUNE_SPARSEGPT, /* models/sparsegpt.h: the kept weights compensate the pruned ones */
} tram_prune_method;

typedef struct {
    const char *out_path;
    const char *exclude;            /* NULL or a list of matrices left dense (quantize.h's names) */
    const tram_calib_stats *stats;  /* from tram_calibrate on the same model (with hessians for SparseGPT) */
    tram_prune_method method;
    int threads;                    /* SparseGPT's rows in parallel (0: OpenMP's default) */
} tram_prune_opts;

/* Zeroes, in every group of 4 consecutive weights of each row of w[rows][cols]
 * (cols a multiple of 4), the 2 of smallest |w| · sqrt(sumsq[col]); of equal
 * scores the later goes. */
void tram_prune_24(float *w, int rows, int cols, const double *sumsq);

/* Reads f (a GGUF), prunes its layer matrices 2:4, writes o->out_path. */
int tram_prune_model(tram_model_file *f, const tram_prune_opts *o, tram_error *err);

#endif
