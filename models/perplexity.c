/* perplexity.c — perplexity over non-overlapping windows of a text, scored
 * the way llama.cpp's llama-perplexity does, and the KL divergence and top-1
 * agreement against a reference model over the same positions. */
#include "models/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/window.h"

/* log Σ_v exp(x_v) in double, and the argmax. */
static double log_sum_exp(const float *x, int n, int *argmax)
{
    int best = 0;
    for (int v = 1; v < n; v++)
        if (x[v] > x[best])
            best = v;
    double sum = 0.0;
    for (int v = 0; v < n; v++)
        sum += exp((double)x[v] - x[best]);
    *argmax = best;
    return x[best] + log(sum);
}

/* One position: the model's logits lm, the reference's lr (or NULL). */
static void score_row(const float *lm, const float *lr, int vocab, int32_t target, tram_ppl_stats *st)
{
    int am, ar;
    double zm = log_sum_exp(lm, vocab, &am), nll = zm - lm[target];
    st->scored++;
    st->nll += nll;
    st->nll2 += nll * nll;
    if (!lr)
        return;
    double zr = log_sum_exp(lr, vocab, &ar), ref_nll = zr - lr[target], kl = 0.0;
    for (int v = 0; v < vocab; v++) {
        double log_pr = lr[v] - zr;
        kl += exp(log_pr) * (log_pr - (lm[v] - zm));
    }
    st->ref_nll += ref_nll;
    st->ref_nll2 += ref_nll * ref_nll;
    st->kl += kl;
    st->kl2 += kl * kl;
    st->top1_same += am == ar;
}

typedef struct {
    tram_window w;
    int32_t *ids;          /* [ctx] the window, its first token replaced by BOS */
    float *logits, *ref_logits;
} ppl_bufs;

static int bufs_alloc(ppl_bufs *b, const tram_ppl_opts *o, int vocab, int with_ref, tram_error *err)
{
    size_t rows = (size_t)(o->ctx - 1 - o->first);
    if (tram_window_init(&b->w, o->ctx, err))
        return -1;
    b->ids = tram_calloc((size_t)o->ctx, sizeof(int32_t), err);
    b->logits = b->ids ? tram_calloc(rows * vocab, sizeof(float), err) : NULL;
    b->ref_logits = b->logits && with_ref ? tram_calloc(rows * vocab, sizeof(float), err) : NULL;
    return !b->logits || (with_ref && !b->ref_logits) ? -1 : 0;
}

static void bufs_free(ppl_bufs *b)
{
    tram_window_free(&b->w);
    TRAM_FREE_ALL(b->ids, b->logits, b->ref_logits);
}

static int check_opts(tram_model *m, tram_model *ref, int n, const tram_ppl_opts *o, tram_error *err)
{
    if (o->ctx < 2 || o->first < 0 || o->first > o->ctx - 2)
        return tram_fail(err, "perplexity: window of %d tokens scoring from %d is not possible", o->ctx, o->first);
    if (n < o->ctx)
        return tram_fail(err, "perplexity: the text has %d tokens, fewer than one window of %d", n, o->ctx);
    if (ref && tram_model_config_of(ref)->vocab_size != tram_model_config_of(m)->vocab_size)
        return tram_fail(err, "perplexity: the two models have different vocabularies (%d and %d tokens)",
                         tram_model_config_of(m)->vocab_size, tram_model_config_of(ref)->vocab_size);
    return 0;
}

int tram_perplexity(tram_model *m, tram_model *ref, const int32_t *tokens, int n, const tram_ppl_opts *o,
                    tram_ppl_stats *st, tram_error *err)
{
    memset(st, 0, sizeof(*st));
    if (check_opts(m, ref, n, o, err))
        return -1;
    int vocab = tram_model_config_of(m)->vocab_size, windows = n / o->ctx, rows = o->ctx - 1 - o->first;
    if (o->max_windows > 0)
        windows = TRAM_MIN(windows, o->max_windows);
    ppl_bufs b = {0};
    int rc = bufs_alloc(&b, o, vocab, ref != NULL, err);
    for (int w = 0; !rc && w < windows; w++) {
        memcpy(b.ids, tokens + (size_t)w * o->ctx, o->ctx * sizeof(int32_t));
        if (o->bos >= 0)
            b.ids[0] = o->bos;
        const tram_window_logits mine = {o->first, rows, b.logits}, theirs = {o->first, rows, b.ref_logits};
        rc = tram_window_forward(m, &b.w, b.ids, o->ctx, &mine, err) ||
             (ref && tram_window_forward(ref, &b.w, b.ids, o->ctx, &theirs, err));
        for (int r = 0; !rc && r < rows; r++)
            score_row(b.logits + (size_t)r * vocab, ref ? b.ref_logits + (size_t)r * vocab : NULL, vocab,
                      b.ids[o->first + 1 + r], st);
        if (!rc && o->progress)
            o->progress(o->progress_ctx, w + 1, windows, st);
    }
    bufs_free(&b);
    return rc;
}

/* The mean of n samples from their sum s and sum of squares s2, and its
 * standard error. */
static void mean_err(double s, double s2, int64_t n, double *mean, double *err)
{
    *mean = s / n;
    *err = n > 1 ? sqrt(fmax(s2 / n - *mean * *mean, 0.0) / (n - 1)) : 0.0;
}

void tram_ppl_summarize(const tram_ppl_stats *st, tram_ppl_summary *out)
{
    double nll, nll_err, ref, ref_err, same = (double)st->top1_same / st->scored;
    mean_err(st->nll, st->nll2, st->scored, &nll, &nll_err);
    mean_err(st->ref_nll, st->ref_nll2, st->scored, &ref, &ref_err);
    *out = (tram_ppl_summary){.ppl = exp(nll), .ppl_err = exp(nll) * nll_err, .ref_ppl = exp(ref),
                              .ref_ppl_err = exp(ref) * ref_err, .ratio = exp(nll - ref),
                              .top1 = same,
                              .top1_err = sqrt(same * (1.0 - same) / TRAM_MAX(st->scored - 1, 1))};
    mean_err(st->kl, st->kl2, st->scored, &out->kl, &out->kl_err);
}
