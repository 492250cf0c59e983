/* cmd_quantize.c — `tram quantize`: W8A8 GGUF (int8 or FP8) from a model,
 * int8 with SmoothQuant calibrated on a text (see models/quantize.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "cli/text_file.h"
#include "models/gguf.h"
#include "models/quantize.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model, *out, *calib, *exclude;
    double alpha;  /* < 0: searched per layer input */
    int calib_tokens, ctx, threads, samples;
    int fp8;       /* --format fp8 */
} quant_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram quantize [-m MODEL] -o OUT.gguf [--format int8|fp8] [--calib TEXT]\n"
            "       [--smoothquant-alpha A|auto] [--exclude LIST] [--calib-tokens N] [--calib-samples N]\n"
            "       [--ctx N] [-t N]\n\n"
            "Writes MODEL (a GGUF) with its matrices in int8, one scale per output row (W8A8: the\n"
            "activations are quantized per token when the model runs).\n"
            "  --format F              int8 (the default) or fp8: E4M3 codes, one scale per output\n"
            "                          row, activations quantized per token to E4M3 (no smoothing,\n"
            "                          so no --calib; a tied embedding and head stay as they are)\n"
            "  --calib TEXT            run TEXT through the model to measure each input channel's\n"
            "                          range and apply SmoothQuant (without it: no smoothing)\n"
            "  --smoothquant-alpha A   migration strength in [0, 1], or auto (the default): for\n"
            "                          each layer input the α of 0, 0.1, ..., 1 whose W8A8 product\n"
            "                          is closest to f32 on calibration rows\n"
            "  --exclude LIST          matrices kept as they are, comma-separated: lm_head,\n"
            "                          layers.0.mlp, layers.3.self_attn.o_proj, blk.3.ffn_down, ...\n"
            "                          or none (lm_head: an int8 head costs as much perplexity as\n"
            "                          all the layers together, see bench/results/int8.md)\n"
            "  --calib-tokens N        calibration tokens used from TEXT (8192)\n"
            "  --calib-samples N       calibration rows the auto search measures on (256)\n"
            "  --ctx N                 calibration window (512)\n");
}

/* auto (-1: searched per layer input) or a number in [0, 1] */
static int alpha_flag(const char *flag, const char *value, void *field)
{
    if (!strcmp(value, "auto")) {
        *(double *)field = -1;
        return 0;
    }
    return tram_flag_number(flag, value, 0.0, 1.0, field);
}

/* a list, or none */
static int exclude_flag(const char *flag, const char *value, void *field)
{
    (void)flag;
    *(const char **)field = strcmp(value, "none") ? value : NULL;
    return 0;
}

#define FIELD(name) offsetof(quant_args, name)

static const char *const formats[] = {"int8", "fp8", NULL}; /* the index is quant_args.fp8 */

static const tram_flag quantize_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--output", .alias = "-o", .kind = TRAM_FLAG_STRING, .field = FIELD(out), .required = 1},
    {.name = "--format", .kind = TRAM_FLAG_CHOICE, .field = FIELD(fp8), .choices = formats},
    {.name = "--calib", .kind = TRAM_FLAG_STRING, .field = FIELD(calib)},
    {.name = "--exclude", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(exclude), .parse = exclude_flag},
    {.name = "--smoothquant-alpha", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(alpha), .parse = alpha_flag},
    {.name = "--calib-tokens", .kind = TRAM_FLAG_INT, .field = FIELD(calib_tokens), .lo = 1, .hi = 1 << 24},
    {.name = "--calib-samples", .kind = TRAM_FLAG_INT, .field = FIELD(samples), .lo = 1, .hi = 1 << 24},
    {.name = "--ctx", .kind = TRAM_FLAG_INT, .field = FIELD(ctx), .lo = 1, .hi = 1 << 24},
    {.name = "--threads", .alias = "-t", .kind = TRAM_FLAG_INT, .field = FIELD(threads), .lo = 1, .hi = 1 << 24},
};

static int run(const quant_args *a)
{
    tram_model_file *f = NULL;
    tram_calib_stats st = {0};
    tram_error err;
    double t0 = tram_now();
    int rc = tram_model_file_open(&f, a->model, &err) ||
             (a->exclude && tram_quant_check_exclude(a->exclude, f, &err));
    if (!rc && !tram_model_file_gguf(f))
        rc = tram_fail(&err, "%s: quantize reads GGUF files only", a->model);
    if (!rc && a->fp8 && a->calib)
        rc = tram_fail(&err, "--calib smooths int8 files (SmoothQuant); --format fp8 takes none");
    if (!rc && a->calib)
        rc = tram_calibrate_file(f, a->calib, a->calib_tokens, a->ctx, a->threads, a->alpha < 0 ? a->samples : 0, 0,
                                 "quantize", &st, &err);
    if (!rc) {
        tram_quant_opts o = {.out_path = a->out, .exclude = a->exclude, .stats = a->calib ? &st : NULL,
                             .alpha = (float)a->alpha, .threads = a->threads, .verbose = 1, .fp8 = a->fp8};
        rc = tram_quantize_model(f, &o, &err);
    }
    if (!rc)
        fprintf(stderr, "quantize: wrote %s (%s, %s) in %.1f s\n", a->out, a->fp8 ? "FP8 W8A8" : "W8A8",
                !a->calib ? "no smoothing" : a->alpha < 0 ? "SmoothQuant, α searched" : "SmoothQuant",
                tram_now() - t0);
    tram_calib_stats_free(&st);
    tram_model_file_close(f);
    return tram_exit_status("tram quantize", rc, &err);
}

static int quantize(int argc, char **argv)
{
    quant_args a = {.model = TRAM_DEFAULT_MODEL, .exclude = "lm_head", .alpha = -1, .calib_tokens = 8192,
                    .ctx = 512, .samples = 256};
    const tram_flag_table table = TRAM_FLAG_TABLE(quantize_flags, &a);
    return tram_flags_parse(&table, 1, argc, argv, NULL, 0) < 0 ? TRAM_EXIT_USAGE : run(&a);
}

const tram_command tram_cmd_quantize = {
    .name = "quantize", .run = quantize, .usage = usage,
    .summary = "write a W8A8 (int8 or FP8) GGUF, int8 with SmoothQuant calibrated on a text"};
