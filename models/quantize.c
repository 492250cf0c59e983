/* quantize.c — W8A8 models: calibration statistics, SmoothQuant's factors
 * folded into each layer (the factors themselves: models/smoothquant.c), and
 * the int8 or FP8 GGUF (formats in quantize.h).
 *
 * SmoothQuant moves activation outliers into the weights through a factor s_j
 * per input channel of a linear layer, X·Wᵀ = (X / s)·(W * s)ᵀ, and X / s is
 * paid for by whatever produced X:
 *   q/k/v and gate/up: X = rmsnorm(x) * g, so g / s (norm weight);
 *   o_proj: X is attention's output, per channel a weighted sum of V's rows,
 *     so V's output rows / s (one s per KV channel, shared by its query heads);
 *   down_proj: X = silu(gate) * up, linear in up, so up's output rows / s.
 * Every fold is exact in real arithmetic, so the f32 model computes the same
 * function before quantization (tested). */
#include "models/quantize.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fp8_format.h"
#include "kernels/int8_format.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/smoothquant.h"
#include "models/sparsity.h"
#include "models/window.h"

/* ---------------------------------------------------------------- calibration */

static float *site_stats(tram_calib_stats *st, int layer, tram_act_site site)
{
    switch (site) {
    case TRAM_ACT_ATTN_IN: return st->attn_in + (size_t)layer * st->dim;
    case TRAM_ACT_ATTN_OUT: return st->attn_out + (size_t)layer * st->qd;
    case TRAM_ACT_FFN_IN: return st->ffn_in + (size_t)layer * st->dim;
    case TRAM_ACT_FFN_HIDDEN: return st->ffn_hidden + (size_t)layer * st->ffn;
    default: return st->head_in;
    }
}

static int site_width(const tram_calib_stats *st, tram_act_site site)
{
    return site == TRAM_ACT_ATTN_OUT ? st->qd : site == TRAM_ACT_FFN_HIDDEN ? st->ffn : st->dim;
}

/* Every stride-th calibration token's row, while there is room. */
static void keep_rows(tram_calib_stats *st, int layer, tram_act_site site, const float *x, int n, int dim)
{
    int64_t first = (st->tokens + st->stride - 1) / st->stride * st->stride;  /* next kept token */
    float *base = st->rows[site] + (size_t)(site == TRAM_ACT_HEAD_IN ? 0 : layer) * st->samples * dim;
    for (int64_t t = first; t < st->tokens + n && t / st->stride < st->samples; t += st->stride)
        memcpy(base + (size_t)(t / st->stride) * dim, x + (size_t)(t - st->tokens) * dim, dim * sizeof(float));
}

static void calib_observe(void *ctx, int layer, tram_act_site site, const void *act, int n, int dim)
{
    tram_calib_stats *st = ctx;
    float *amax = site_stats(st, layer, site);
    const float *x = act;  /* the CPU backend: f32 host rows */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++)
            amax[j] = fmaxf(amax[j], fabsf(x[(size_t)i * dim + j]));
    double *ss = st->sumsq[site] + (size_t)(site == TRAM_ACT_HEAD_IN ? 0 : layer) * dim;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++)
            ss[j] += (double)x[(size_t)i * dim + j] * x[(size_t)i * dim + j];
    if (st->samples)
        keep_rows(st, layer, site, x, n, dim);
    if (site != TRAM_ACT_HEAD_IN && st->xtx[site])
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, dim, n, 1.0f, x, dim, 1.0f,
                    st->xtx[site] + (size_t)layer * dim * dim, dim);
    if (site == TRAM_ACT_HEAD_IN)
        st->tokens += n;  /* the last site of a pass */
}

static int stats_alloc(tram_calib_stats *st, const tram_model_config *c, int n, int samples, int hessians,
                       tram_error *err)
{
    memset(st, 0, sizeof(*st));
    st->n_layers = c->n_layers, st->dim = c->dim, st->qd = c->n_heads * c->head_dim, st->ffn = c->ffn_dim;
    st->attn_in = tram_calloc((size_t)c->n_layers * st->dim, sizeof(float), err);
    st->attn_out = tram_calloc((size_t)c->n_layers * st->qd, sizeof(float), err);
    st->ffn_in = tram_calloc((size_t)c->n_layers * st->dim, sizeof(float), err);
    st->ffn_hidden = tram_calloc((size_t)c->n_layers * st->ffn, sizeof(float), err);
    st->head_in = tram_calloc(st->dim, sizeof(float), err);
    if (!st->attn_in || !st->attn_out || !st->ffn_in || !st->ffn_hidden || !st->head_in)
        return -1;
    for (int site = 0; site <= TRAM_ACT_HEAD_IN; site++) {
        size_t layers = site == TRAM_ACT_HEAD_IN ? 1 : (size_t)c->n_layers;
        if (!(st->sumsq[site] = tram_calloc(layers * site_width(st, site), sizeof(double), err)))
            return -1;
    }
    for (int site = 0; hessians && site < TRAM_ACT_HEAD_IN; site++) {
        size_t width = (size_t)site_width(st, site);
        if (!(st->xtx[site] = tram_calloc((size_t)c->n_layers * width * width, sizeof(float), err)))
            return -1;
    }
    if (samples < 1)
        return 0;
    st->stride = (n + samples - 1) / samples;
    st->samples = samples;
    st->n_samples = (n + st->stride - 1) / st->stride;
    for (int site = 0; site <= TRAM_ACT_HEAD_IN; site++) {
        size_t layers = site == TRAM_ACT_HEAD_IN ? 1 : (size_t)c->n_layers;
        if (!(st->rows[site] = tram_calloc(layers * samples * site_width(st, site), sizeof(float), err)))
            return -1;
    }
    return 0;
}

void tram_calib_stats_free(tram_calib_stats *st)
{
    TRAM_FREE_ALL(st->attn_in, st->attn_out, st->ffn_in, st->ffn_hidden, st->head_in);
    for (int site = 0; site <= TRAM_ACT_HEAD_IN; site++)
        free(st->rows[site]), free(st->sumsq[site]);
    for (int site = 0; site < TRAM_ACT_HEAD_IN; site++)
        free(st->xtx[site]);
    memset(st, 0, sizeof(*st));
}

int tram_calibrate(tram_model_file *f, const int32_t *tokens, int n, int ctx, int threads, int samples,
                   int hessians, tram_calib_stats *st, tram_error *err)
{
    if (n < 1 || ctx < 1)
        return tram_fail(err, "calibration needs at least one token and a window of one");
    if (stats_alloc(st, tram_model_file_config(f), n, samples, hessians, err)) {
        tram_calib_stats_free(st);
        return -1;
    }
    ctx = TRAM_MIN(ctx, n);
    tram_model_limits lim = tram_window_limits(ctx, 1);  /* no logits wanted */
    tram_window w = {0};
    tram_backend *be = NULL;
    tram_model *m = NULL;
    int rc = tram_window_init(&w, ctx, err) || tram_backend_cpu_create(&be, threads, err) ||
             tram_model_create(&m, f, be, &lim, err);
    if (!rc)
        tram_model_set_observer(m, calib_observe, st);
    for (int i = 0; !rc && i * ctx < n; i++)
        rc = tram_window_forward(m, &w, tokens + (size_t)i * ctx, TRAM_MIN(ctx, n - i * ctx), NULL, err);
    tram_model_destroy(m);
    if (be)
        be->destroy(be);
    tram_window_free(&w);
    if (rc)
        tram_calib_stats_free(st);
    return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- a layer in f32 */

enum { T_ATTN_NORM, T_Q, T_K, T_V, T_O, T_FFN_NORM, T_GATE, T_UP, T_DOWN, T_BV, N_LAYER_TENSORS };
static const char *const layer_suffix[N_LAYER_TENSORS] = {
    "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
    "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_v.bias"};
static const int is_matrix[N_LAYER_TENSORS] = {0, 1, 1, 1, 1, 0, 1, 1, 1, 0};

typedef struct {
    tram_model_file *f;
    const tram_model_config *c;
    const tram_quant_opts *o;
    int tied;
    int layer;                        /* the layer in buf, or -1 */
    float *buf[N_LAYER_TENSORS];      /* NULL for a bias the model lacks */
    int rows[N_LAYER_TENSORS], cols[N_LAYER_TENSORS];
    float *tmp[3];                    /* SmoothQuant scratch, widest channel count each */
    int *kv_map;                      /* [qd] query channel → its KV channel */
    int untie;                        /* a smoothed output.weight beside token_embd */
    float *head_s;                    /* [dim] the lm_head's factors when untie */
    float *big;                       /* one whole tensor in f32 */
    int8_t *q;                        /* its int8 values */
    float *scales;                    /* its row scales */
} quant_job;

/* Index of `name` among a layer's tensors (and its layer), or -1. */
static int layer_tensor(const char *name, int *layer)
{
    int used = 0;
    if (sscanf(name, "blk.%d.%n", layer, &used) != 1 || !used)
        return -1;
    for (int i = 0; i < N_LAYER_TENSORS; i++)
        if (!strcmp(name + used, layer_suffix[i]))
            return i;
    return -1;
}

static void layer_shapes(quant_job *j)
{
    const tram_model_config *c = j->c;
    int dim = c->dim, qd = c->n_heads * c->head_dim, kd = c->n_kv_heads * c->head_dim, ffn = c->ffn_dim;
    const int shape[N_LAYER_TENSORS][2] = {{1, dim}, {qd, dim}, {kd, dim}, {kd, dim}, {dim, qd},
                                           {1, dim}, {ffn, dim}, {ffn, dim}, {dim, ffn}, {1, kd}};
    for (int i = 0; i < N_LAYER_TENSORS; i++)
        j->rows[i] = shape[i][0], j->cols[i] = shape[i][1];
}

/* Factors for one input: at the fixed α, or searched (and shown). */
static int choose(quant_job *j, tram_act_site site, int l, const float *x_amax, const tram_smooth_mat *mats,
                  int n, const int *map, int ns, float *s, tram_error *err)
{
    static const char *const what[] = {"q/k/v", "o_proj", "gate/up", "down", "lm_head"};
    const tram_calib_stats *st = j->o->stats;
    int cin = map ? st->qd : ns;
    size_t layer = site == TRAM_ACT_HEAD_IN ? 0 : (size_t)l;
    tram_smooth_group g = {.x = st->rows[site] ? st->rows[site] + layer * st->samples * cin : NULL,
                           .n = st->n_samples, .cin = cin, .x_amax = x_amax, .mats = mats, .n_mats = n,
                           .map = map, .ns = ns};
    float alpha = j->o->alpha;
    double rel;
    if (tram_smooth_choose(&g, j->o->threads, &alpha, s, &rel, err))
        return -1;
    if (j->o->verbose && j->o->alpha < 0 && site == TRAM_ACT_HEAD_IN)
        fprintf(stderr, "quantize: lm_head: alpha %.1f, relative error %.2e\n", alpha, rel);
    else if (j->o->verbose && j->o->alpha < 0)
        fprintf(stderr, "quantize: layer %d %s: alpha %.1f, relative error %.2e\n", l, what[site], alpha, rel);
    return 0;
}

/* V rows / s and o_proj columns * s, one s per KV channel shared by the
 * query heads of its group. */
static int smooth_v_o(quant_job *j, int l, tram_error *err)
{
    const tram_model_config *c = j->c;
    int qd = c->n_heads * c->head_dim, kd = c->n_kv_heads * c->head_dim;
    float *xa = j->tmp[0], *s = j->tmp[1], *s_q = j->tmp[2];
    const float *att = j->o->stats->attn_out + (size_t)l * qd;
    memset(xa, 0, kd * sizeof(float));
    for (int q = 0; q < qd; q++)
        xa[j->kv_map[q]] = fmaxf(xa[j->kv_map[q]], att[q]);
    tram_smooth_mat wo = {.w = j->buf[T_O], .rows = c->dim};
    if (choose(j, TRAM_ACT_ATTN_OUT, l, xa, &wo, 1, j->kv_map, kd, s, err))
        return -1;
    for (int q = 0; q < qd; q++)
        s_q[q] = s[j->kv_map[q]];
    tram_unscale_rows(j->buf[T_V], kd, c->dim, s);
    if (j->buf[T_BV])
        tram_unscale_rows(j->buf[T_BV], kd, 1, s);
    tram_scale_cols(j->buf[T_O], c->dim, qd, s_q);
    return 0;
}

/* One input shared by `n` matrices (q/k/v, gate/up, or down alone), produced
 * by `producer`: a norm weight (rows = channels, cols = 1) or the rows of a
 * matrix (up, for down_proj). */
static int smooth_input(quant_job *j, tram_act_site site, int l, const float *x_amax, const int *mats, int n,
                        int producer, tram_error *err)
{
    int ch = j->cols[mats[0]];
    float *s = j->tmp[1];
    tram_smooth_mat m[3];
    for (int i = 0; i < n; i++)
        m[i] = (tram_smooth_mat){.w = j->buf[mats[i]], .rows = j->rows[mats[i]]};
    if (choose(j, site, l, x_amax, m, n, NULL, ch, s, err))
        return -1;
    tram_unscale_rows(j->buf[producer], ch, j->rows[producer] == 1 ? 1 : j->cols[producer], s);
    for (int i = 0; i < n; i++)
        tram_scale_cols(j->buf[mats[i]], j->rows[mats[i]], ch, s);
    return 0;
}

/* V and up rows change first, so that the column maxima q/k/v and gate/up
 * are smoothed against are those of the matrices that get quantized. */
static int smooth_layer(quant_job *j, int l, tram_error *err)
{
    const tram_calib_stats *st = j->o->stats;
    static const int down[] = {T_DOWN}, qkv[] = {T_Q, T_K, T_V}, gate_up[] = {T_GATE, T_UP};
    return smooth_v_o(j, l, err) ||
           smooth_input(j, TRAM_ACT_FFN_HIDDEN, l, st->ffn_hidden + (size_t)l * st->ffn, down, 1, T_UP, err) ||
           smooth_input(j, TRAM_ACT_ATTN_IN, l, st->attn_in + (size_t)l * st->dim, qkv, 3, T_ATTN_NORM, err) ||
           smooth_input(j, TRAM_ACT_FFN_IN, l, st->ffn_in + (size_t)l * st->dim, gate_up, 2, T_FFN_NORM, err)
               ? -1 : 0;
}

/* The untied lm_head's factors, from the table it starts as (in j->big). */
static int smooth_head(quant_job *j, tram_error *err)
{
    int vocab = j->c->vocab_size, dim = j->c->dim;
    if (tram_model_file_read_f32(j->f, "token_embd.weight", j->big, (int64_t)vocab * dim, err))
        return -1;
    tram_smooth_mat head = {.w = j->big, .rows = vocab};
    return choose(j, TRAM_ACT_HEAD_IN, j->c->n_layers, j->o->stats->head_in, &head, 1, NULL, dim, j->head_s, err);
}

static int load_layer(quant_job *j, int l, tram_error *err)
{
    if (j->layer == l)
        return 0;
    j->layer = -1;
    for (int i = 0; i < N_LAYER_TENSORS; i++) {
        char name[64];
        snprintf(name, sizeof(name), "blk.%d.%s", l, layer_suffix[i]);
        if (j->buf[i] && tram_model_file_read_f32(j->f, name, j->buf[i], (int64_t)j->rows[i] * j->cols[i], err))
            return -1;
    }
    if (j->o->stats && smooth_layer(j, l, err))
        return -1;
    j->layer = l;
    return 0;
}

/* ---------------------------------------------------------------- the int8 and FP8 GGUFs */

typedef enum { OUT_RAW, OUT_F32, OUT_I8 } out_kind;

/* A tied table is also the lm_head, quantized as it; except in FP8, which
 * has no lookup: the table stays, the head with it. */
static int is_global_matrix(const quant_job *j, const char *name)
{
    int tied_head = j->tied && !j->untie && !j->o->fp8;
    return !strcmp(name, "output.weight") || (tied_head && !strcmp(name, "token_embd.weight"));
}

static out_kind tensor_kind(const quant_job *j, const char *name)
{
    int layer, idx = layer_tensor(name, &layer);
    int matrix = idx >= 0 ? is_matrix[idx] : is_global_matrix(j, name);
    if (matrix && !j->o->keep_f32 && !tram_quant_excluded(j->o->exclude, name))
        return OUT_I8;
    if (j->untie && (!strcmp(name, "output_norm.weight") || !strcmp(name, "output.weight")))
        return OUT_F32;
    return idx >= 0 && j->o->stats ? OUT_F32 : OUT_RAW;  /* smoothing changes every layer tensor */
}

/* Declares a tensor and, for an int8 one, its scales. */
static int declare_tensor(quant_job *j, tram_gguf_writer *w, const char *name, tram_ggml_type raw_type,
                          int n_dims, const int64_t *ne, tram_error *err)
{
    out_kind k = tensor_kind(j, name);
    tram_ggml_type type = k == OUT_RAW ? raw_type : k == OUT_F32 ? TRAM_GGML_F32 : TRAM_GGML_I8;
    char scale[sizeof(((tram_gguf_tensor *)0)->name) + 12];
    int64_t rows = ne[1];  /* an OUT_I8 tensor is a matrix (check_source) */
    snprintf(scale, sizeof(scale), "%s.%s", name, j->o->fp8 ? "fp8_scale" : "scale");
    return tram_gguf_writer_add_tensor(w, name, type, n_dims, ne, err) ||
                   (k == OUT_I8 && tram_gguf_writer_add_tensor(w, scale, TRAM_GGML_F32, 1, &rows, err))
               ? -1 : 0;
}

static int declare(quant_job *j, tram_gguf_writer *w, const tram_gguf *g, tram_error *err)
{
    if (tram_gguf_writer_copy_kvs(w, g, err) || tram_sparsity_copy(w, g, err))
        return -1;
    if (!j->o->keep_f32 && tram_gguf_writer_add_str(w, "tram.quantization", j->o->fp8 ? "fp8" : "w8a8", err))
        return -1;
    float alpha = j->o->alpha < 0 ? -1.0f : j->o->alpha;  /* -1: searched per input */
    if (j->o->stats && tram_gguf_writer_add_f32(w, "tram.smoothquant_alpha", alpha, err))
        return -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        if (declare_tensor(j, w, t->name, t->type, (int)t->n_dims, t->ne, err))
            return -1;
    }
    int64_t head[2] = {j->c->dim, j->c->vocab_size};
    return j->untie ? declare_tensor(j, w, "output.weight", TRAM_GGML_F32, 2, head, err) : 0;
}

/* The tensor in f32: from the (smoothed) layer, or read whole; the untied
 * head's tensors with its factors folded in. */
static const float *tensor_f32(quant_job *j, const char *name, int64_t numel, tram_error *err)
{
    int layer, idx = layer_tensor(name, &layer), dim = j->c->dim;
    if (idx >= 0 && j->o->stats)
        return load_layer(j, layer, err) ? NULL : j->buf[idx];
    int head = j->untie && !strcmp(name, "output.weight");
    if (tram_model_file_read_f32(j->f, head ? "token_embd.weight" : name, j->big, numel, err))
        return NULL;
    if (head)
        tram_scale_cols(j->big, (int)(numel / dim), dim, j->head_s);
    else if (j->untie && !strcmp(name, "output_norm.weight"))
        tram_unscale_rows(j->big, dim, 1, j->head_s);
    return j->big;
}

static int write_tensor(quant_job *j, tram_gguf_writer *w, const char *name, int64_t numel, int64_t cols,
                        const tram_gguf_tensor *raw, tram_error *err)
{
    out_kind k = tensor_kind(j, name);
    int64_t rows = numel / cols;
    if (k == OUT_RAW)
        return tram_gguf_writer_write(w, raw->data, raw->nbytes, err);
    const float *x = tensor_f32(j, name, numel, err);
    if (!x)
        return -1;
    if (k == OUT_F32)
        return tram_gguf_writer_write(w, x, (size_t)numel * sizeof(float), err);
    for (int64_t r = 0; r < rows; r++)
        j->scales[r] = j->o->fp8 ? tram_fp8_quantize_row(x + r * cols, (int)cols, (int)cols, (uint8_t *)j->q + r * cols)
                                 : tram_i8_quantize(x + r * cols, (int)cols, (int)cols, j->q + r * cols);
    return tram_gguf_writer_write(w, j->q, (size_t)numel, err) ||
           tram_gguf_writer_write(w, j->scales, (size_t)rows * sizeof(float), err);
}

static int check_source(quant_job *j, const tram_gguf *g, tram_error *err)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        if (tram_model_file_is_int8(j->f, t->name) || tram_model_file_is_fp8(j->f, t->name))
            return tram_fail(err, "%s is already quantized to %s (%s)", g->path,
                             tram_model_file_is_fp8(j->f, t->name) ? "FP8" : "int8", t->name);
        if (tensor_kind(j, t->name) == OUT_I8 && (t->n_dims != 2 || t->ne[0] < 1 || t->ne[0] > TRAM_I8_MAX_COLS))
            return tram_fail(err, "%s: %s is not a matrix of at most %d columns", g->path, t->name,
                             TRAM_I8_MAX_COLS);
    }
    return tram_quant_check_exclude(j->o->exclude, j->f, err);
}

static int job_alloc(quant_job *j, const tram_gguf *g, tram_error *err)
{
    const tram_model_config *c = j->c;
    int64_t biggest = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        biggest = TRAM_MAX(biggest, tram_gguf_tensor_numel(&g->tensors[i]));
    int widest = TRAM_MAX(TRAM_MAX(c->dim, c->ffn_dim), c->n_heads * c->head_dim);
    int qd = c->n_heads * c->head_dim, group = c->n_heads / c->n_kv_heads;
    layer_shapes(j);
    if (!(j->kv_map = tram_calloc(qd, sizeof(int), err)) || !(j->head_s = tram_calloc(c->dim, sizeof(float), err)))
        return -1;
    for (int q = 0; q < qd; q++)
        j->kv_map[q] = (q / c->head_dim / group) * c->head_dim + q % c->head_dim;
    for (int i = 0; i < N_LAYER_TENSORS; i++)
        if ((i != T_BV || c->qkv_bias) && !(j->buf[i] = tram_calloc((size_t)j->rows[i] * j->cols[i], 4, err)))
            return -1;
    for (int i = 0; i < 3; i++)
        if (!(j->tmp[i] = tram_calloc(widest, sizeof(float), err)))
            return -1;
    j->big = tram_calloc(biggest, sizeof(float), err);
    j->q = j->big ? tram_calloc(biggest, 1, err) : NULL;
    j->scales = j->q ? tram_calloc(biggest, sizeof(float), err) : NULL;
    return j->scales ? 0 : -1;
}

static void job_free(quant_job *j)
{
    for (int i = 0; i < N_LAYER_TENSORS; i++)
        free(j->buf[i]);
    for (int i = 0; i < 3; i++)
        free(j->tmp[i]);
    TRAM_FREE_ALL(j->kv_map, j->head_s, j->big, j->q, j->scales);
}

int tram_quantize_model(tram_model_file *f, const tram_quant_opts *o, tram_error *err)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    if (!g)
        return tram_fail(err, "%s: quantize reads GGUF files only", tram_model_file_path(f));
    if (o->fp8 && o->stats)
        return tram_fail(err, "FP8 files are not smoothed: SmoothQuant (--calib) is for int8");
    if (tram_model_file_config(f)->n_experts)
        return tram_fail(err, "%s: quantize does not write mixture-of-experts models (--quantization int8 "
                         "quantizes their experts at load)", tram_model_file_path(f));
    quant_job j = {.f = f, .c = tram_model_file_config(f), .o = o, .layer = -1};
    j.tied = j.c->tied_embeddings;
    /* the lookup table cannot take the head's factors: the head gets its own copy */
    j.untie = j.tied && o->stats && !tram_quant_excluded(o->exclude, "output.weight");
    tram_gguf_writer *w = NULL;
    int rc = check_source(&j, g, err) || job_alloc(&j, g, err) || (j.untie && smooth_head(&j, err)) ||
             tram_gguf_writer_create(&w, o->out_path, err) || declare(&j, w, g, err);
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        rc = write_tensor(&j, w, t->name, tram_gguf_tensor_numel(t), t->ne[0], t, err);
    }
    if (!rc && j.untie)
        rc = write_tensor(&j, w, "output.weight", (int64_t)j.c->vocab_size * j.c->dim, j.c->dim, NULL, err);
    job_free(&j);
    if (rc) {
        tram_gguf_writer_abort(w);
        return -1;
    }
    return tram_gguf_writer_finish(w, err);
}
