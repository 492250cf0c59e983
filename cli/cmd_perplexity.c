/* cmd_perplexity.c — `tram perplexity`: perplexity over non-overlapping
 * windows of a text, reported the way llama.cpp's llama-perplexity does
 * (running value per window, then PPL ± its standard error), and with
 * --compare the KL divergence and top-1 agreement against a reference model
 * over the same positions (computed in models/perplexity.c). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "cli/text_file.h"
#include "models/perplexity.h"
#include "models/window.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model, *text, *compare, *exclude;
    int ctx, chunks, threads, quant; /* --quantization: 0 none, 1 int8, 2 fp8 */
    int kv_dtype; /* tram_kv_dtype: the choices below are in its order */
} ppl_args;

#define FIELD(name) offsetof(ppl_args, name)

static const tram_flag perplexity_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--file", .alias = "-f", .kind = TRAM_FLAG_STRING, .field = FIELD(text), .required = 1},
    {.name = "--compare", .kind = TRAM_FLAG_STRING, .field = FIELD(compare)},
    {.name = "--exclude", .kind = TRAM_FLAG_STRING, .field = FIELD(exclude)},
    {.name = "--quantization", .kind = TRAM_FLAG_CHOICE, .field = FIELD(quant),
     .choices = (const char *const[]){"none", "int8", "fp8", NULL}},
    {.name = "--kv-cache-dtype", .kind = TRAM_FLAG_CHOICE, .field = FIELD(kv_dtype),
     .choices = (const char *const[]){"auto", "int8", "fp8", NULL}},
    {.name = "--ctx", .kind = TRAM_FLAG_INT, .field = FIELD(ctx), .lo = 4, .hi = 1 << 20},
    {.name = "--chunks", .kind = TRAM_FLAG_INT, .field = FIELD(chunks), .lo = 1, .hi = 1 << 20},
    {.name = "--threads", .alias = "-t", .kind = TRAM_FLAG_INT, .field = FIELD(threads), .lo = 1, .hi = 1 << 20},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram perplexity [-m MODEL] -f TEXT [--ctx N] [--chunks N] [--compare OTHER_MODEL]\n"
            "       [--quantization none|int8|fp8] [--exclude LIST] [--kv-cache-dtype auto|int8|fp8] [-t N]\n\n"
            "Perplexity over non-overlapping windows of N tokens (512), each scored on its second\n"
            "half as llama.cpp's llama-perplexity does.  --compare also runs OTHER_MODEL (as stored,\n"
            "the reference) and reports the KL divergence and top-1 agreement of the two models'\n"
            "next-token distributions.  --quantization int8|fp8 quantizes MODEL's matrices at load,\n"
            "except those --exclude names (lm_head, layers.0.mlp, ...; see tram quantize).\n"
            "--kv-cache-dtype int8|fp8 stores MODEL's KV cache in one byte a value (the reference's\n"
            "stays f32): --compare MODEL itself measures what the cache's format costs.\n");
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

static void report(const tram_ppl_stats *st, int compare)
{
    tram_ppl_summary s;
    tram_ppl_summarize(st, &s);
    printf("\nFinal estimate: PPL = %.4f +/- %.5f  (%lld tokens scored)\n", s.ppl, s.ppl_err,
           (long long)st->scored);
    if (!compare)
        return;
    printf("\n====== compared with the reference model ======\n"
           "PPL (this model)      : %.4f +/- %.5f\n"
           "PPL (reference)       : %.4f +/- %.5f\n"
           "PPL ratio             : %.5f  (%+.3f%%)\n"
           "Mean KLD (ref || this): %.6f +/- %.6f\n"
           "Same top-1 token      : %.3f +/- %.3f %%\n",
           s.ppl, s.ppl_err, s.ref_ppl, s.ref_ppl_err, s.ratio, 100.0 * (s.ratio - 1.0), s.kl, s.kl_err,
           100.0 * s.top1, 100.0 * s.top1_err);
}

/* MODEL takes the flags' formats; the reference (reference = 1) is run as stored. */
static int open_model(tram_model_file **f, tram_model **m, tram_backend *be, const char *path, const ppl_args *a,
                      int reference, tram_error *err)
{
    tram_model_limits lim = tram_window_limits(a->ctx, TRAM_MIN(a->ctx, 64));
    lim.quantize_int8 = !reference && a->quant == 1;
    lim.quantize_fp8 = !reference && a->quant == 2;
    lim.int8_exclude = lim.quantize_int8 || lim.quantize_fp8 ? a->exclude : NULL;
    lim.kv_dtype = reference ? TRAM_KV_AUTO : (tram_kv_dtype)a->kv_dtype;
    return tram_model_file_open(f, path, err) || tram_model_create(m, *f, be, &lim, err);
}

static int score(tram_model *m, tram_model *ref, const tram_tokenizer *tok, const int32_t *ids, int n,
                 const ppl_args *a, tram_error *err)
{
    progress_state p = {.start = tram_now()};
    tram_ppl_opts o = {.ctx = a->ctx, .first = a->ctx / 2, .max_windows = a->chunks,
                       .bos = tram_tokenizer_adds_bos(tok) ? tram_tokenizer_bos(tok) : -1,
                       .progress = print_progress, .progress_ctx = &p};
    tram_ppl_stats st;
    fprintf(stderr, "perplexity: %d tokens, %d windows of %d, scoring the last %d of each\n", n,
            a->chunks ? TRAM_MIN(n / a->ctx, a->chunks) : n / a->ctx, a->ctx, a->ctx - 1 - o.first);
    if (tram_perplexity(m, ref, ids, n, &o, &st, err))
        return -1;
    report(&st, ref != NULL);
    return 0;
}

static int run(const ppl_args *a)
{
    tram_model_file *f = NULL, *rf = NULL;
    tram_model *m = NULL, *ref = NULL;
    tram_backend *be = NULL;
    tram_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int n = 0;
    tram_error err;
    int rc = tram_backend_cpu_create(&be, a->threads, &err) || open_model(&f, &m, be, a->model, a, 0, &err) ||
             (a->compare && open_model(&rf, &ref, be, a->compare, a, 1, &err)) ||
             tram_tokenizer_load(&tok, a->model, &err) || tram_tokenize_file(tok, a->text, &ids, &n, &err) ||
             score(m, ref, tok, ids, n, a, &err);
    free(ids);
    tram_tokenizer_free(tok);
    tram_model_destroy(ref);
    tram_model_destroy(m);
    tram_model_file_close(rf);
    tram_model_file_close(f);
    if (be)
        be->destroy(be);
    return tram_exit_status("tram perplexity", rc, &err);
}

static int perplexity(int argc, char **argv)
{
    ppl_args a = {.model = TRAM_DEFAULT_MODEL, .ctx = 512};
    const tram_flag_table table = TRAM_FLAG_TABLE(perplexity_flags, &a);
    return tram_flags_parse(&table, 1, argc, argv, NULL, 0) < 0 ? TRAM_EXIT_USAGE : run(&a);
}

const tram_command tram_cmd_perplexity = {
    .name = "perplexity", .run = perplexity, .usage = usage,
    .summary = "perplexity over a text; KL and top-1 agreement with another model"};
