/* prune.c — 2:4 pruning with Wanda's score (prune.h) into the file of
 * sparsity.h. */
#include "models/prune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/sparsity.h"

void tram_prune_24(float *w, int rows, int cols, const double *sumsq)
{
    for (size_t g = 0; g < (size_t)rows * cols / 4; g++) {
        float *x = w + g * 4;
        int c0 = (int)(g * 4 % (size_t)cols);
        float score[4];
        for (int i = 0; i < 4; i++)
            score[i] = fabsf(x[i]) * (float)sqrt(sumsq[c0 + i]);
        for (int drop = 0; drop < 2; drop++) { /* the smallest score left, the later of equals */
            int lo = -1;
            for (int i = 0; i < 4; i++)
                if (score[i] >= 0 && (lo < 0 || score[i] <= score[lo]))
                    lo = i;
            x[lo] = 0.0f;
            score[lo] = -1.0f;
        }
    }
}

/* The Σx² of the input channels of the pruned matrix `name`. */
static const double *input_sumsq(const tram_calib_stats *st, const char *name)
{
    int layer, used = 0;
    sscanf(name, "blk.%d.%n", &layer, &used);
    const char *m = name + used;
    if (!strncmp(m, "attn_output", 11))
        return st->sumsq[TRAM_ACT_ATTN_OUT] + (size_t)layer * st->qd;
    if (!strncmp(m, "attn_", 5))
        return st->sumsq[TRAM_ACT_ATTN_IN] + (size_t)layer * st->dim;
    if (!strncmp(m, "ffn_down", 8))
        return st->sumsq[TRAM_ACT_FFN_HIDDEN] + (size_t)layer * st->ffn;
    return st->sumsq[TRAM_ACT_FFN_IN] + (size_t)layer * st->dim;
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

static int write_tensors(tram_model_file *f, tram_gguf_writer *w, const tram_gguf *g, const tram_prune_opts *o,
                         float *buf, tram_error *err)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        int64_t numel = tram_gguf_tensor_numel(t);
        if (!pruned(o, t->name)) {
            if (tram_gguf_writer_write(w, t->data, t->nbytes, err))
                return -1;
            continue;
        }
        if (tram_model_file_read_f32(f, t->name, buf, numel, err))
            return -1;
        tram_prune_24(buf, (int)(numel / t->ne[0]), (int)t->ne[0], input_sumsq(o->stats, t->name));
        if (tram_gguf_writer_write(w, buf, (size_t)numel * sizeof(float), err))
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
    tram_gguf_writer *w = NULL;
    float *buf = NULL;
    int rc = check_source(f, g, o, err) || !(buf = tram_calloc((size_t)biggest, sizeof(float), err)) ||
             tram_gguf_writer_create(&w, o->out_path, err) || declare(w, g, o, err) ||
             write_tensors(f, w, g, o, buf, err);
    free(buf);
    if (rc) {
        tram_gguf_writer_abort(w);
        return -1;
    }
    return tram_gguf_writer_finish(w, err);
}
