/* prune.c — 2:4 pruning with Wanda's score or SparseGPT's update (prune.h)
 * into the file of sparsity.h. */
#include "models/prune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/sparsegpt.h"
#include "models/sparsity.h"

void tram_prune_24(float *w, int rows, int cols, const double *sumsq)
{
    for (size_t g = 0; g < (size_t)rows * cols / 4; g++) {
        float *x = w + g * 4;
        int c0 = (int)(g * 4 % (size_t)cols);
        float score[4];
        for (int i = 0; i < 4; i++)
            score[i] = fabsf(x[i]) * (float)sqrt(sumsq[c0 + i]);
        int dropped = tram_sparsity_drop_two(score);
        for (int i = 0; i < 4; i++)
            if (dropped >> i & 1)
                x[i] = 0.0f;
    }
}

/* The input of the pruned matrix `name`: its site, layer and width. */
static tram_act_site input_site(const tram_calib_stats *st, const char *name, int *layer, int *width)
{
    int used = 0;
    sscanf(name, "blk.%d.%n", layer, &used);
    const char *m = name + used;
    tram_act_site site = !strncmp(m, "attn_output", 11) ? TRAM_ACT_ATTN_OUT
                         : !strncmp(m, "attn_", 5)      ? TRAM_ACT_ATTN_IN
                         : !strncmp(m, "ffn_down", 8)   ? TRAM_ACT_FFN_HIDDEN
                                                        : TRAM_ACT_FFN_IN;
    *width = site == TRAM_ACT_ATTN_OUT ? st->qd : site == TRAM_ACT_FFN_HIDDEN ? st->ffn : st->dim;
    return site;
}

/* The Σx² of the input channels of the pruned matrix `name`. */
static const double *input_sumsq(const tram_calib_stats *st, const char *name)
{
    int layer, width;
    tram_act_site site = input_site(st, name, &layer, &width);
    return st->sumsq[site] + (size_t)layer * width;
}

/* SparseGPT's factor of the input of the pruned matrix `name`, kept for the
 * next matrix of the same input (q, k and v; gate and up). */
typedef struct {
    int layer, site; /* of the factor in u; layer -1: none yet */
    float *u;        /* [width][width] */
} input_factor;

static const float *factor_of(input_factor *c, const tram_calib_stats *st, const char *name, tram_error *err)
{
    int layer, width;
    tram_act_site site = input_site(st, name, &layer, &width);
    if (c->layer == layer && c->site == (int)site)
        return c->u;
    c->layer = -1;
    if (tram_sparsegpt_factor(st->xtx[site] + (size_t)layer * width * width, width, c->u, err))
        return NULL;
    c->layer = layer, c->site = site;
    return c->u;
}

static int pruned(const tram_prune_opts *o, const char *name)
{
    return tram_sparsity_prunable(name) && !tram_quant_excluded(o->exclude, name);
}

static int check_source(tram_model_file *f, const tram_gguf *g, const tram_prune_opts *o, tram_error *err)
{
    if (tram_model_file_config(f)->n_experts)
        return tram_fail(err, "%s: prune does not write mixture-of-experts models", g->path);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        if (tram_model_file_is_int8(f, t->name))
            return tram_fail(err, "%s is quantized to int8 (%s): prune the f32 model, then quantize", g->path,
                             t->name);
        if (pruned(o, t->name) && (t->n_dims != 2 || t->ne[0] % 8))
            return tram_fail(err, "%s: %s is not a matrix of a multiple of 8 columns", g->path, t->name);
    }
    return o->exclude ? tram_quant_check_exclude(o->exclude, f, err) : 0;
}

static int declare(tram_gguf_writer *w, const tram_gguf *g, const tram_prune_opts *o, tram_error *err)
{
    if (tram_gguf_writer_copy_kvs(w, g, err) ||
        tram_sparsity_declare(w, o->exclude, err))
        return -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        tram_ggml_type type = pruned(o, t->name) ? TRAM_GGML_F32 : t->type;
        if (tram_gguf_writer_add_tensor(w, t->name, type, (int)t->n_dims, t->ne, err))
            return -1;
    }
    return 0;
}

/* Prunes buf, the matrix `name` of rows x cols, by o's method. */
static int prune_matrix(const tram_prune_opts *o, input_factor *c, const char *name, float *buf, int rows, int cols,
                        tram_error *err)
{
    if (o->method == TRAM_PRUNE_WANDA) {
        tram_prune_24(buf, rows, cols, input_sumsq(o->stats, name));
        return 0;
    }
    const float *u = factor_of(c, o->stats, name, err);
    if (!u)
        return -1;
    tram_sparsegpt_prune(buf, rows, cols, u, o->threads);
    return 0;
}

static int write_tensors(tram_model_file *f, tram_gguf_writer *w, const tram_gguf *g, const tram_prune_opts *o,
                         float *buf, input_factor *c, tram_error *err)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        int64_t numel = tram_gguf_tensor_numel(t);
        if (!pruned(o, t->name)) {
            if (tram_gguf_writer_write(w, t->data, t->nbytes, err))
                return -1;
            continue;
        }
        if (tram_model_file_read_f32(f, t->name, buf, numel, err) ||
            prune_matrix(o, c, t->name, buf, (int)(numel / t->ne[0]), (int)t->ne[0], err) ||
            tram_gguf_writer_write(w, buf, (size_t)numel * sizeof(float), err))
            return -1;
    }
    return 0;
}

int tram_prune_model(tram_model_file *f, const tram_prune_opts *o, tram_error *err)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    if (!g)
        return tram_fail(err, "%s: prune reads GGUF files only", tram_model_file_path(f));
    int64_t biggest = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        biggest = TRAM_MAX(biggest, tram_gguf_tensor_numel(&g->tensors[i]));
    const tram_calib_stats *st = o->stats;
    size_t widest = (size_t)TRAM_MAX(TRAM_MAX(st->dim, st->qd), st->ffn);
    tram_gguf_writer *w = NULL;
    float *buf = NULL;
    input_factor c = {.layer = -1};
    if (o->method == TRAM_PRUNE_SPARSEGPT && !st->xtx[0])
        return tram_fail(err, "prune: SparseGPT needs the calibration's Hessians (tram_calibrate with hessians)");
    int rc = check_source(f, g, o, err) || !(buf = tram_calloc((size_t)biggest, sizeof(float), err)) ||
             (o->method == TRAM_PRUNE_SPARSEGPT && !(c.u = tram_calloc(widest * widest, sizeof(float), err))) ||
             tram_gguf_writer_create(&w, o->out_path, err) || declare(w, g, o, err) ||
             write_tensors(f, w, g, o, buf, &c, err);
    free(buf);
    free(c.u);
    if (rc) {
        tram_gguf_writer_abort(w);
        return -1;
    }
    return tram_gguf_writer_finish(w, err);
}
