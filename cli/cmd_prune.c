/* cmd_prune.c — `tram prune --sparsity 2:4`: a 2:4 sparse GGUF from a model,
 * pruned by Wanda's score or SparseGPT's update calibrated on a text
 * (models/prune.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "cli/text_file.h"
#include "models/prune.h"

typedef struct {
    const char *model, *out, *calib, *exclude, *sparsity, *method;
    int calib_tokens, ctx, threads;
} prune_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram prune [-m MODEL] -o OUT.gguf --sparsity 2:4 --calib TEXT [--method M]\n"
            "       [--exclude LIST] [--calib-tokens N] [--ctx N] [-t N]\n\n"
            "Writes MODEL (a GGUF) with every layer's q/k/v/o and gate/up/down matrices 2:4 sparse:\n"
            "in each group of 4 consecutive weights of a row, 2 are zero.  The CPU runs those\n"
            "matrices sparse, skipping the zeros; `tram quantize` over the file keeps the pattern\n"
            "(2:4 + int8, sparse W8A8).\n"
            "  --sparsity 2:4          the pattern (the only one)\n"
            "  --calib TEXT            text the layers' inputs are measured on\n"
            "  --method M              wanda (the default): the 2 of smallest |w| * ||x|| go (||x||\n"
            "                          the norm of the weight's input channel over TEXT's tokens);\n"
            "                          sparsegpt: chosen a column at a time, each pruned weight's\n"
            "                          error compensated in the rest of its row through the inputs'\n"
            "                          Hessian X^T X (slower; holds every layer's X^T X in memory)\n"
            "  --exclude LIST          matrices left dense, comma-separated: layers.0.mlp,\n"
            "                          layers.3.self_attn.o_proj, blk.3.ffn_down, ... (none)\n"
            "  --calib-tokens N        calibration tokens used from TEXT (8192)\n"

            "  --ctx N                 calibration window (512)\n");
}

#define FIELD(name) offsetof(prune_args, name)

static const tram_flag prune_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--output", .alias = "-o", .kind = TRAM_FLAG_STRING, .field = FIELD(out), .required = 1},
    {.name = "--sparsity", .kind = TRAM_FLAG_STRING, .field = FIELD(sparsity), .required = 1,
     .choices = (const char *const[]){"2:4", NULL}},
    {.name = "--calib", .kind = TRAM_FLAG_STRING, .field = FIELD(calib), .required = 1},
    {.name = "--method", .kind = TRAM_FLAG_STRING, .field = FIELD(method),
     .choices = (const char *const[]){"wanda", "sparsegpt", NULL}},
    {.name = "--exclude", .kind = TRAM_FLAG_STRING, .field = FIELD(exclude)},

    {.name = "--calib-tokens", .kind = TRAM_FLAG_INT, .field = FIELD(calib_tokens), .lo = 1, .hi = 1 << 24},
    {.name = "--ctx", .kind = TRAM_FLAG_INT, .field = FIELD(ctx), .lo = 1, .hi = 1 << 24},
    {.name = "--threads", .alias = "-t", .kind = TRAM_FLAG_INT, .field = FIELD(threads), .lo = 1, .hi = 1 << 24},
};

static int run(const prune_args *a)
{
    tram_model_file *f = NULL;
    tram_calib_stats st = {0};
    tram_error err;
    double t0 = tram_now();
    tram_prune_method method = strcmp(a->method, "sparsegpt") ? TRAM_PRUNE_WANDA : TRAM_PRUNE_SPARSEGPT;
    int rc = tram_model_file_open(&f, a->model, &err) ||
             tram_calibrate_file(f, a->calib, a->calib_tokens, a->ctx, a->threads,
                                 0, method == TRAM_PRUNE_SPARSEGPT, "prune", &st, &err);
    if (!rc) {
        tram_prune_opts o = {.out_path = a->out, .exclude = a->exclude, .stats = &st, .method = method,
                             .threads = a->threads};
        rc = tram_prune_model(f, &o, &err);
    }
    if (!rc)
        fprintf(stderr, "prune: wrote %s (2:4, %s) in %.1f s\n", a->out,
                method == TRAM_PRUNE_SPARSEGPT ? "SparseGPT" : "Wanda", tram_now() - t0);
    tram_calib_stats_free(&st);
    tram_model_file_close(f);
    return tram_exit_status("tram prune", rc, &err);
}

static int prune(int argc, char **argv)
{
    prune_args a = {.model = TRAM_DEFAULT_MODEL, .method = "wanda", .calib_tokens = 8192, .ctx = 512};
    const tram_flag_table table = TRAM_FLAG_TABLE(prune_flags, &a);
    return tram_flags_parse(&table, 1, argc, argv, NULL, 0) < 0 ? TRAM_EXIT_USAGE : run(&a);
}

const tram_command tram_cmd_prune = {
    .name = "prune", .run = prune, .usage = usage,
    .summary = "write a 2:4 sparse GGUF, pruned by Wanda or SparseGPT calibrated on a text"};
