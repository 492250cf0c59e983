/* cmd_perplexity.c — `tram perplexity`: perplexity over non-overlapping
 * windows of a text, reported the way llama.cpp's llama-perplexity does
 * (running value per window, then PPL ± its standard error), and with
 * --compare the KL divergence and top-1 agreement against a reference model
 * over the same positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/cli.h"
#include "models/perplexity.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- scoring */

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
    int32_t *ids, *pos, *rows, *table;
    float *logits, *ref_logits;
} ppl_bufs;

/* The window in ids[ctx] as one sequence; logits of positions first..ctx-2. */
static int window_logits(tram_model *m, const ppl_bufs *b, const tram_ppl_opts *o, float *logits,
                         tram_error *err)
{
    int32_t qs[2] = {0, o->ctx}, len = o->ctx;
    tram_batch batch = {.num_tokens = o->ctx, .num_seqs = 1, .token_ids = b->ids, .positions = b->pos,
                        .slot_mapping = b->pos, .query_start = qs, .seq_lens = &len,
                        .block_tables = b->table, .max_blocks_per_seq = (o->ctx + 15) / 16,
                        .num_logits = o->ctx - 1 - o->first, .logits_rows = b->rows};
    return tram_model_forward(m, &batch, logits, err);
}

static int bufs_alloc(ppl_bufs *b, const tram_ppl_opts *o, int vocab, int with_ref, tram_error *err)
{
    size_t rows = (size_t)(o->ctx - 1 - o->first), blocks = (o->ctx + 15) / 16;
    b->ids = tram_calloc(3 * (size_t)o->ctx + blocks, sizeof(int32_t), err);
    b->logits = b->ids ? tram_calloc(rows * vocab, sizeof(float), err) : NULL;
    b->ref_logits = b->logits && with_ref ? tram_calloc(rows * vocab, sizeof(float), err) : NULL;
    if (!b->logits || (with_ref && !b->ref_logits))
        return -1;
    b->pos = b->ids + o->ctx, b->rows = b->pos + o->ctx, b->table = b->rows + o->ctx;
    for (int i = 0; i < o->ctx; i++)
        b->pos[i] = i, b->rows[i] = o->first + i;
    for (size_t i = 0; i < blocks; i++)
        b->table[i] = (int32_t)i;
    return 0;
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
    int vocab = tram_model_config_of(m)->vocab_size, windows = n / o->ctx;
    if (o->max_windows > 0)
        windows = TRAM_MIN(windows, o->max_windows);
    ppl_bufs b = {0};
    int rc = bufs_alloc(&b, o, vocab, ref != NULL, err);
    for (int w = 0; !rc && w < windows; w++) {
        memcpy(b.ids, tokens + (size_t)w * o->ctx, o->ctx * sizeof(int32_t));
        if (o->bos >= 0)
            b.ids[0] = o->bos;
        rc = window_logits(m, &b, o, b.logits, err) || (ref && window_logits(ref, &b, o, b.ref_logits, err));
        for (int r = 0; !rc && r < o->ctx - 1 - o->first; r++)
            score_row(b.logits + (size_t)r * vocab, ref ? b.ref_logits + (size_t)r * vocab : NULL, vocab,
                      b.ids[o->first + 1 + r], st);
        if (!rc && o->progress)
            o->progress(o->progress_ctx, w + 1, windows, st);
    }
    free(b.ids);
    free(b.logits);
    free(b.ref_logits);
    return rc;
}

int tram_tokenize_file(const struct tram_tokenizer *t, const char *path, int32_t **ids, int *n,
                       tram_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return tram_fail(err, "%s: cannot open the file", path);
    size_t cap = 1 << 16, len = 0, got;
    char *text = malloc(cap);
    while (text && (got = fread(text + len, 1, cap - len, fp)) > 0) {
        len += got;
        char *bigger = len == cap ? realloc(text, cap *= 2) : text;
        if (!bigger)
            free(text);
        text = bigger;
    }
    int read_error = ferror(fp);
    fclose(fp);
    if (!text || read_error) {
        free(text);
        return tram_fail(err, "%s: %s", path, read_error ? "read error" : "out of memory");
    }
    int rc = tram_tokenizer_encode(t, text, len, 1, 0, ids, n, err);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- command */

typedef struct {
    const char *model, *text, *compare, *exclude;
    int ctx, chunks, threads, int8;
} ppl_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram perplexity [-m MODEL] -f TEXT [--ctx N] [--chunks N] [--compare OTHER_MODEL]\n"
            "       [--quantization none|int8] [--exclude LIST] [-t N]\n\n"
            "Perplexity over non-overlapping windows of N tokens (512), each scored on its second\n"
            "half as llama.cpp's llama-perplexity does.  --compare also runs OTHER_MODEL (as stored,\n"
            "the reference) and reports the KL divergence and top-1 agreement of the two models'\n"
            "next-token distributions.  --quantization int8 quantizes MODEL's matrices at load,\n"
            "except those --exclude names (lm_head, layers.0.mlp, ...; see tram quantize).\n");
}

static int int_arg(const char *flag, const char *v, long lo, int *out)
{
    long x;
    if (tram_cli_int(flag, v, lo, 1 << 20, &x))
        return -1;
    *out = (int)x;
    return 0;
}

static int parse_args(ppl_args *a, int argc, char **argv)
{
    *a = (ppl_args){.model = TRAM_DEFAULT_MODEL, .ctx = 512};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help"))
            return usage(stdout), 1;
        if (!v) {
            fprintf(stderr, "tram perplexity: %s needs a value\n", f);
            return -1;
        }
        i++;
        int bad = 0;
        if (!strcmp(f, "-m") || !strcmp(f, "--model"))
            a->model = v;
        else if (!strcmp(f, "-f") || !strcmp(f, "--file"))
            a->text = v;
        else if (!strcmp(f, "--compare"))
            a->compare = v;
        else if (!strcmp(f, "--exclude"))
            a->exclude = v;
        else if (!strcmp(f, "--quantization") && (!strcmp(v, "int8") || !strcmp(v, "none")))
            a->int8 = !strcmp(v, "int8");
        else if (!strcmp(f, "--ctx"))
            bad = int_arg(f, v, 4, &a->ctx);
        else if (!strcmp(f, "--chunks"))
            bad = int_arg(f, v, 1, &a->chunks);
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads"))
            bad = int_arg(f, v, 1, &a->threads);
        else {
            fprintf(stderr, "tram perplexity: unknown option or bad value: %s %s\n\n", f, v);
            usage(stderr);
            return -1;
        }
        if (bad)
            return -1;
    }
    if (!a->text) {
        usage(stderr);
        return -1;
    }
    return 0;
}

typedef struct {
    double start;
    int printed_eta;
} progress_state;

static void print_progress(void *ctx, int window, int windows, const tram_ppl_stats *st)
{
    progress_state *p = ctx;
    if (!p->printed_eta) {
        double per = tram_now() - p->start;
        fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.0f seconds\n", per, per * (windows - 1));
        p->printed_eta = 1;
    }
    printf("[%d]%.4f,", window, exp(st->nll / st->scored));
    fflush(stdout);
}

/* mean and its standard error of a sum s and sum of squares s2 over n samples */
static void mean_err(double s, double s2, int64_t n, double *mean, double *err)
{
    *mean = s / n;
    *err = n > 1 ? sqrt(fmax(s2 / n - *mean * *mean, 0.0) / (n - 1)) : 0.0;
}

static void report(const tram_ppl_stats *st, int compare)
{
    double nll, e;
    mean_err(st->nll, st->nll2, st->scored, &nll, &e);
    printf("\nFinal estimate: PPL = %.4f +/- %.5f  (%lld tokens scored)\n", exp(nll), exp(nll) * e,
           (long long)st->scored);
    if (!compare)
        return;
    double ref, ref_e, kl, kl_e, same = (double)st->top1_same / st->scored;
    mean_err(st->ref_nll, st->ref_nll2, st->scored, &ref, &ref_e);
    mean_err(st->kl, st->kl2, st->scored, &kl, &kl_e);
    printf("\n====== compared with the reference model ======\n"
           "PPL (this model)      : %.4f +/- %.5f\n"
           "PPL (reference)       : %.4f +/- %.5f\n"
           "PPL ratio             : %.5f  (%+.3f%%)\n"
           "Mean KLD (ref || this): %.6f +/- %.6f\n"
           "Same top-1 token      : %.3f +/- %.3f %%\n",
           exp(nll), exp(nll) * e, exp(ref), exp(ref) * ref_e, exp(nll - ref), 100.0 * (exp(nll - ref) - 1.0),
           kl, kl_e, 100.0 * same, 100.0 * sqrt(same * (1.0 - same) / TRAM_MAX(st->scored - 1, 1)));
}

static int open_model(tram_model_file **f, tram_model **m, tram_backend *be, const char *path, const ppl_args *a,
                      int int8, tram_error *err)
{
    int blocks = (a->ctx + 15) / 16;
    tram_model_limits lim = {.max_tokens = a->ctx, .max_seqs = TRAM_MIN(a->ctx, 64),
                             .max_blocks_per_seq = blocks, .num_blocks = blocks, .block_size = 16,
                             .weight_type = TRAM_W_F32, .quantize_int8 = int8,
                             .int8_exclude = int8 ? a->exclude : NULL};
    return tram_model_file_open(f, path, err) || tram_model_create(m, *f, be, &lim, err);
}

static int run(const ppl_args *a, tram_error *err)
{
    tram_model_file *f = NULL, *rf = NULL;
    tram_model *m = NULL, *ref = NULL;
    tram_backend *be = NULL;
    tram_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int n = 0;
    int rc = tram_backend_cpu_create(&be, a->threads, err) || open_model(&f, &m, be, a->model, a, a->int8, err) ||
             (a->compare && open_model(&rf, &ref, be, a->compare, a, 0, err)) ||
             tram_tokenizer_load(&tok, a->model, err) || tram_tokenize_file(tok, a->text, &ids, &n, err);
    if (!rc) {
        progress_state p = {tram_now(), 0};
        tram_ppl_opts o = {.ctx = a->ctx, .first = a->ctx / 2, .max_windows = a->chunks,
                           .bos = tram_tokenizer_adds_bos(tok) ? tram_tokenizer_bos(tok) : -1,
                           .progress = print_progress, .progress_ctx = &p};
        tram_ppl_stats st;
        fprintf(stderr, "perplexity: %d tokens, %d windows of %d, scoring the last %d of each\n", n,
                a->chunks ? TRAM_MIN(n / a->ctx, a->chunks) : n / a->ctx, a->ctx, a->ctx - 1 - o.first);
        rc = tram_perplexity(m, ref, ids, n, &o, &st, err);
        if (!rc)
            report(&st, ref != NULL);
    }
    free(ids);
    tram_tokenizer_free(tok);
    tram_model_destroy(ref);
    tram_model_destroy(m);
    tram_model_file_close(rf);
    tram_model_file_close(f);
    if (be)
        be->destroy(be);
    return rc ? -1 : 0;
}

int tram_cmd_perplexity(int argc, char **argv)
{
    ppl_args a;
    int p = parse_args(&a, argc, argv);
    if (p)
        return p > 0 ? 0 : TRAM_EXIT_USAGE;
    tram_error err;
    if (run(&a, &err)) {
        fprintf(stderr, "tram perplexity: %s\n", err.msg);
        return 1;
    }
    return 0;
}
