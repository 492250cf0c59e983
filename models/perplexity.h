/* perplexity.h — perplexity of a model over a text's token ids, and the
 * agreement of two models' next-token distributions over it (`tram
 * perplexity`). */
#ifndef TRAM_PERPLEXITY_H
#define TRAM_PERPLEXITY_H

#include <stdint.h>

#include "kernels/base.h"
#include "models/model.h"

typedef struct {
    int64_t scored;         /* tokens predicted */
    double nll, nll2;       /* Σ -log p(token) and Σ of its square, the model */
    double ref_nll, ref_nll2;   /* the same for the reference model */
    double kl, kl2;         /* Σ KL(reference ‖ model) over the scored positions, and of squares */
    int64_t top1_same;      /* positions where the two models' argmax agree */
} tram_ppl_stats;

/* Called after each window (1-based) with the running totals. */
typedef void (*tram_ppl_progress)(void *ctx, int window, int windows, const tram_ppl_stats *st);

typedef struct {
    int ctx;                /* window length */
    int first;              /* logits of positions first..ctx-2 are scored (they predict
                               tokens first+1..ctx-1); llama-perplexity's ctx/2 */
    int max_windows;        /* 0: all */
    int32_t bos;            /* >= 0: replaces each window's first token, as llama-perplexity */
    tram_ppl_progress progress;
    void *progress_ctx;
} tram_ppl_opts;

/* Runs tokens[n] in non-overlapping windows of o->ctx tokens (a last partial
 * window is dropped), each as one sequence on model m, and on ref too when it
 * is not NULL.  Both models need the limits tram_window_limits(ctx, ...)
 * gives (models/window.h). */
int tram_perplexity(tram_model *m, tram_model *ref, const int32_t *tokens, int n, const tram_ppl_opts *o,
                    tram_ppl_stats *st, tram_error *err);

/* The figures `tram perplexity` reports, each a mean over the scored
 * positions with its standard error. */
typedef struct {
    double ppl, ppl_err;          /* exp(mean NLL) of the model */
    double ref_ppl, ref_ppl_err;  /* the same for the reference */
    double ratio;                 /* ppl / ref_ppl */
    double kl, kl_err;            /* mean KL(reference ‖ model) */
    double top1, top1_err;        /* fraction of positions where the argmaxes agree */
} tram_ppl_summary;

void tram_ppl_summarize(const tram_ppl_stats *st, tram_ppl_summary *out);

#endif
