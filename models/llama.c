/* llama.c — the Llama-family transformer (Llama 2/3, Mistral, Qwen2, Qwen3,
 * SmolLM2, Mixtral, Qwen2-MoE) written once as calls on the backend op
 * interface, over the unified batch and a paged KV cache; what a family adds
 * to the shared layer comes from its row of models/arch.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/arch.h"
#include "models/lora_slots.h"
#include "models/model.h"
#include "models/moe.h"
#include "models/moe_files.h"
#include "models/quantize.h"
#include "models/shard.h"
#include "models/sparsity.h"

typedef struct {
    tram_weight attn_norm;     /* (1, dim) */
    tram_weight wqkv;          /* (qd + 2*kd, dim): q rows, then k, then v (qd = n_heads*head_dim,
                                  kd = n_kv_heads*head_dim, this rank's heads: models/shard.h) */
    tram_weight bqkv;          /* Qwen2 biases, (1, qd + 2*kd) in the same order, or empty */
    tram_weight q_norm, k_norm;/* Qwen3's per-head norms, (1, head_dim) each, or empty */
    tram_weight wo;            /* (dim, n_heads*head_dim) */
    tram_weight ffn_norm;      /* (1, dim) */
    tram_weight w_gate_up;     /* (2*ffn, dim): gate rows, then up rows (this rank's ffn) */
    tram_weight w_down;        /* (dim, ffn) */
    tram_moe_weights moe;      /* in place of the three above when the model has experts */
    void *k_cache, *v_cache;   /* (num_blocks*block_size, n_kv_heads*head_dim) */
} llama_layer;

/* Activations for at most lim.max_tokens rows, allocated once. */
typedef struct {
    void *x;        /* (tokens, dim) residual stream */
    void *xb;       /* (tokens, dim) normalized */
    void *qkv;      /* (tokens, qd + 2*kd) the fused q/k/v product */
    void *q;        /* (tokens, n_heads*head_dim) */
    void *k, *v;    /* (tokens, n_kv_heads*head_dim) */
    void *att;      /* (tokens, n_heads*head_dim) */
    void *proj;     /* (tokens, dim) output of o_proj / down_proj */
    void *gate_up;  /* (tokens, 2*ffn) */
    void *hidden;   /* (tokens, ffn) */
    void *last;     /* (logits_rows_max, dim) rows whose logits are wanted */
    void *logits;   /* (logits_rows_max, vocab) */
} llama_acts;

/* Backend copies of the batch's int32 arrays (at fixed addresses, which CUDA
 * graphs keep), and the host staging they are uploaded from (backend host
 * memory: pinned on CUDA, so each upload is one asynchronous copy). */
typedef struct {
    int32_t *token_ids, *positions, *slot_mapping, *query_start, *seq_lens, *block_tables, *logits_rows;
    int32_t *host;  /* [4 max_tokens + 2 max_seqs + 1 + max_seqs * max_blocks_per_seq] */
} llama_batch_buf;

struct tram_model {
    tram_model_config cfg;
    const tram_arch *arch;     /* its row: what the forward pass computes beyond the shared layer */
    tram_model_limits lim;
    tram_backend *be;
    tram_shard shard;          /* this rank's heads and FFN slice (all of them at world size 1) */
    tram_attn_shape shape;     /* this rank's heads */
    float *inv_freq;           /* backend copy, (head_dim/2) */
    tram_weight tok_embd;      /* (vocab, dim) */
    tram_weight output_norm;   /* (1, dim) */
    tram_weight output;        /* (vocab, dim); aliases tok_embd when tied; rank 0 only when not */
    llama_layer *layers;
    llama_acts a;
    /* int8 copies of xb and hidden for W8A8 matrices, written by the norm and
     * SiLU ops; NULL arrays when no layer matrix is int8 */
    tram_qact xq_dim, xq_ffn;
    tram_moe_acts moe_acts;    /* models with experts only */
    tram_lora_slots lora;      /* adapter slots and the pass's rows grouped by them */
    llama_batch_buf bb;
    tram_batch prepared;       /* the batch of tram_model_prepare, on the backend */
    tram_act_observer observe;  /* calibration hook, usually NULL */
    void *observe_ctx;
    int kv_borrowed;           /* the KV pool is another model's (tram_model_share_kv) */
    int sparse_runs[2];        /* the backend runs 2:4 TRAM_W_S24 / TRAM_W_S24_INT8 sparse (ask_sparse) */
};

/* ---------------------------------------------------------------- loading */

/* This rank's part of a tensor of the file, split as its row of
 * models/arch.c says. */
static tram_shard_part part(const tram_model *m, const char *name, int rows, int cols)
{
    return tram_shard_part_of(&m->shard, &m->cfg, name, rows, cols);
}

/* A weight every rank holds whole (norms, the embedding, the lm_head). */
static int load_one(tram_model *m, tram_model_file *f, tram_weight *w, const char *name, int rows,
                    int cols, tram_wtype type, tram_shard_scratch *sc, tram_error *err)
{
    tram_shard_part whole = tram_shard_whole(name, rows, cols);
    return tram_shard_load(m->be, f, w, &whole, 1, rows, cols, type, sc, err);
}

/* Whether a matrix the file holds runs as W8A8 int8: stored int8, or
 * quantized at load and not excluded. */
static int takes_int8(const tram_model *m, tram_model_file *f, const char *name)
{
    return tram_model_file_is_int8(f, name) ||
           (m->lim.quantize_int8 && !tram_quant_excluded(m->lim.int8_exclude, name));
}

/* FP8 for a matrix the file stores as FP8 (W8A8 on a backend that runs it);
 * int8 for one takes_int8; FP8 again for one the limits quantize to FP8;
 * else the file's block format when the limits keep blocks and the backend
 * runs them; else the backend's format.  2:4 matrices run sparse where the
 * backend said it runs their kind (ask_sparse), dense elsewhere. */
static tram_wtype matrix_type(const tram_model *m, tram_model_file *f, const char *name)
{
    if (m->be->upload_weight_fp8 && tram_model_file_is_fp8(f, name))
        return TRAM_W_FP8;
    int sparse = tram_sparsity_is_24(tram_model_file_gguf(f), name);
    if (takes_int8(m, f, name))
        return sparse && m->sparse_runs[1] ? TRAM_W_S24_INT8 : TRAM_W_INT8;
    if (m->lim.quantize_fp8 && !tram_quant_excluded(m->lim.int8_exclude, name))
        return TRAM_W_FP8;
    tram_wtype blocks = tram_model_file_block_type(f, name);
    if (m->lim.keep_blocks && m->be->upload_weight_blocks && blocks != TRAM_W_F32)
        return blocks;
    return sparse && m->sparse_runs[0] ? TRAM_W_S24 : m->lim.weight_type;
}

/* Whether the backend runs kind k's matrices of this file ([0] TRAM_W_S24,
 * [1] int8's TRAM_W_S24_INT8) sparse at this rank's shapes: 0 with why
 * naming the first that does not fit.  Parts of a fused matrix (q/k/v,
 * gate/up) are asked one by one: stacking multiples gives a multiple. */
static int sparse_shapes_fit(const tram_model *m, tram_model_file *f, int k, tram_wtype t, tram_error *why)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    for (uint64_t i = 0; m->be->sparse24_fits && i < g->n_tensors; i++) {
        const tram_gguf_tensor *ti = &g->tensors[i];
        if (!tram_sparsity_is_24(g, ti->name) || takes_int8(m, f, ti->name) != k)
            continue;
        tram_shard_part p = part(m, ti->name, (int)ti->ne[1], (int)ti->ne[0]);
        tram_error e = {{0}};
        if (!m->be->sparse24_fits(m->be, t, p.nrows, p.ncols, &e)) {
            tram_fail(why, "%s is %dx%d here, and %s", ti->name, p.nrows, p.ncols, e.msg);
            return 0;
        }
    }
    return 1;
}

/* Asks the backend, before any matrix is loaded, whether it runs the 2:4
 * kinds this file's sparse matrices take ([0] TRAM_W_S24, [1] int8's
 * TRAM_W_S24_INT8), each asked once and only when some matrix takes it (on
 * CUDA the answer loads cuSPARSELt), then whether each such matrix's shape
 * fits.  A kind it runs dense gets one line saying why (rank 0); its
 * matrices load in the dense format. */
static void ask_sparse(tram_model *m, tram_model_file *f)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    static const tram_wtype kinds[2] = {TRAM_W_S24, TRAM_W_S24_INT8};
    int needed[2] = {0, 0};
    for (uint64_t i = 0; g && i < g->n_tensors; i++)
        if (tram_sparsity_is_24(g, g->tensors[i].name))
            needed[takes_int8(m, f, g->tensors[i].name)] = 1;
    for (int k = 0; k < 2; k++) {
        tram_error why = {{0}};
        m->sparse_runs[k] = needed[k] && m->be->sparse24_prepare(m->be, kinds[k], m->lim.max_tokens, &why) &&
                            sparse_shapes_fit(m, f, k, kinds[k], &why);
        if (needed[k] && !m->sparse_runs[k] && !m->shard.rank)
            fprintf(stderr, "tram: %s is 2:4 sparse; the %s backend runs its %smatrices dense: %s\n",
                    tram_model_file_path(f), m->be->name, k ? "int8 " : "", why.msg);
    }
}

/* Matrices fused into one (q/k/v, gate/up) keep a shared format only when
 * all their parts have it; else they run in the backend's format. */
static tram_wtype stacked_type(const tram_model *m, tram_model_file *f, const char *const *names, int n)
{
    tram_wtype t = matrix_type(m, f, names[0]);
    for (int i = 1; i < n; i++)
        if (matrix_type(m, f, names[i]) != t)
            return m->lim.weight_type;
    return t;
}

/* q, k and v are read into one matrix (vLLM's QKVParallelLinear): one product
 * and one pass over the input instead of three.  Every format's rows are
 * independent (int8 rows keep their own scales, GGUF blocks never cross a
 * row), so stacking rows is exact.  Under tensor parallelism each of q, k
 * and v gives this rank's heads' rows, and the biases the same elements. */
static int load_qkv(tram_model *m, tram_model_file *f, int l, tram_shard_scratch *sc, tram_error *err)
{
    const tram_model_config *c = &m->cfg;
    llama_layer *L = &m->layers[l];
    int hd = c->head_dim, qd = c->n_heads * hd, kd = c->n_kv_heads * hd;
    int width = (m->shard.n_heads + 2 * m->shard.n_kv_heads) * hd;  /* this rank's rows */
    char n[6][64];
    static const char *const suffix[6] = {"attn_q.weight", "attn_k.weight", "attn_v.weight",
                                          "attn_q.bias", "attn_k.bias", "attn_v.bias"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof(n[i]), "blk.%d.%s", l, suffix[i]);
    const char *names[3] = {n[0], n[1], n[2]};
    tram_shard_part w[3] = {part(m, n[0], qd, c->dim), part(m, n[1], kd, c->dim), part(m, n[2], kd, c->dim)};
    tram_shard_part b[3] = {part(m, n[3], qd, 1), part(m, n[4], kd, 1), part(m, n[5], kd, 1)};
    if (tram_shard_load(m->be, f, &L->wqkv, w, 3, width, c->dim, stacked_type(m, f, names, 3), sc, err) ||
        (c->qkv_bias && tram_shard_load(m->be, f, &L->bqkv, b, 3, 1, width, TRAM_W_F32, sc, err)))
        return -1;
    if (!m->arch->qk_norm)
        return 0;
    snprintf(n[0], sizeof(n[0]), "blk.%d.attn_q_norm.weight", l);
    snprintf(n[1], sizeof(n[1]), "blk.%d.attn_k_norm.weight", l);
    return load_one(m, f, &L->q_norm, n[0], 1, hd, TRAM_W_F32, sc, err) ||
           load_one(m, f, &L->k_norm, n[1], 1, hd, TRAM_W_F32, sc, err);
}

/* The router, this rank's experts whole (expert parallelism; each with its
 * gate and up stacked, like the dense FFN's) and its slice of the shared
 * expert, split like a dense FFN.  The router stays at the backend's format:
 * routing decisions are not worth an int8 error. */
static int load_moe(tram_model *m, tram_model_file *f, int l, tram_shard_scratch *sc, tram_error *err)
{
    const tram_model_config *c = &m->cfg;
    tram_moe_weights *W = &m->layers[l].moe;
    char n[4][64];
    snprintf(n[0], sizeof(n[0]), "blk.%d.ffn_gate_inp.weight", l);
    if (tram_moe_weights_init(W, c, m->be, err) ||
        load_one(m, f, &W->router, n[0], c->n_experts, c->dim, m->lim.weight_type, sc, err))
        return -1;
    const char *gate_up[2] = {n[0], n[1]};
    for (int i = 0; i < W->layer.count; i++) {
        static const char *const kinds[3] = {"ffn_gate", "ffn_up", "ffn_down"};
        for (int k = 0; k < 3; k++)
            tram_moe_expert_name(n[k], sizeof(n[k]), l, kinds[k], W->layer.first + i);
        tram_shard_part gu[2] = {part(m, n[0], c->ffn_dim, c->dim), part(m, n[1], c->ffn_dim, c->dim)};
        if (tram_shard_load(m->be, f, &W->gate_up[i], gu, 2, 2 * c->ffn_dim, c->dim, stacked_type(m, f, gate_up, 2),
                            sc, err) ||
            load_one(m, f, &W->down[i], n[2], c->dim, c->ffn_dim, matrix_type(m, f, n[2]), sc, err))
            return -1;
    }
    if (!c->shared_ffn_dim)
        return 0;
    static const char *const shexp[4] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp_shexp"};
    for (int k = 0; k < 4; k++)
        snprintf(n[k], sizeof(n[k]), "blk.%d.%s.weight", l, shexp[k]);
    int sh = c->shared_ffn_dim, sn = sh / m->shard.world_size;
    tram_shard_part gu[2] = {part(m, n[0], sh, c->dim), part(m, n[1], sh, c->dim)};
    tram_shard_part down = part(m, n[2], c->dim, sh);
    return tram_shard_load(m->be, f, &W->shared_gate_up, gu, 2, 2 * sn, c->dim, stacked_type(m, f, gate_up, 2), sc,
                           err) ||
           tram_shard_load(m->be, f, &W->shared_down, &down, 1, c->dim, sn, matrix_type(m, f, n[2]), sc, err) ||
           load_one(m, f, &W->shared_gate, n[3], 1, c->dim, m->lim.weight_type, sc, err);
}

/* gate and up by rows (this rank's FFN slice of each), o_proj and down by
 * columns (this rank's heads, its FFN slice), as models/arch.c's names say:
 * their partial sums meet in all_reduce. */
static int load_layer(tram_model *m, tram_model_file *f, int l, tram_shard_scratch *sc, tram_error *err)
{
    const tram_model_config *c = &m->cfg;
    llama_layer *L = &m->layers[l];
    int qd = c->n_heads * c->head_dim, qn = m->shard.n_heads * c->head_dim, ffn = c->ffn_dim, fn = m->shard.ffn_dim;
    char n[6][64];
    static const char *const suffix[6] = {"attn_norm.weight", "attn_output.weight", "ffn_norm.weight",
                                          "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof(n[i]), "blk.%d.%s", l, suffix[i]);
    const char *gate_up[2] = {n[3], n[4]};
    tram_shard_part o = part(m, n[1], c->dim, qd), down = part(m, n[5], c->dim, ffn);
    tram_shard_part gu[2] = {part(m, n[3], ffn, c->dim), part(m, n[4], ffn, c->dim)};
    if (load_one(m, f, &L->attn_norm, n[0], 1, c->dim, TRAM_W_F32, sc, err) ||
        load_qkv(m, f, l, sc, err) ||
        tram_shard_load(m->be, f, &L->wo, &o, 1, c->dim, qn, matrix_type(m, f, n[1]), sc, err) ||
        load_one(m, f, &L->ffn_norm, n[2], 1, c->dim, TRAM_W_F32, sc, err))
        return -1;
    if (c->n_experts)
        return load_moe(m, f, l, sc, err);
    return tram_shard_load(m->be, f, &L->w_gate_up, gu, 2, 2 * fn, c->dim, stacked_type(m, f, gate_up, 2), sc, err) ||
           tram_shard_load(m->be, f, &L->w_down, &down, 1, c->dim, fn, matrix_type(m, f, n[5]), sc, err);
}

/* Inverse RoPE frequencies, divided by the per-frequency factors that
 * llama.cpp stores as rope_freqs.weight for llama3-scaled GGUFs. */
static int load_inv_freq(tram_model *m, tram_model_file *f, float *scratch, tram_error *err)
{
    int half = m->cfg.head_dim / 2;
    tram_rope_inv_freq(&m->cfg, scratch);
    if (tram_model_file_has_tensor(f, "rope_freqs.weight")) {
        float *factors = scratch + half;
        if (tram_model_file_read_f32(f, "rope_freqs.weight", factors, half, err))
            return -1;
        for (int i = 0; i < half; i++)
            scratch[i] /= factors[i];
    }
    m->inv_freq = m->be->alloc(m->be, half * sizeof(float));
    if (m->inv_freq)
        m->be->upload(m->be, m->inv_freq, scratch, half * sizeof(float));
    return m->be->sync(m->be, err);
}

static int load_weights(tram_model *m, tram_model_file *f, tram_error *err)
{
    const tram_model_config *c = &m->cfg;
    size_t qkv = (size_t)(c->n_heads + 2 * c->n_kv_heads) * c->head_dim * c->dim;
    size_t biggest = TRAM_MAX(TRAM_MAX((size_t)c->vocab_size * c->dim, (size_t)2 * c->ffn_dim * c->dim), qkv);
    biggest = TRAM_MAX(biggest, (size_t)2 * c->shared_ffn_dim * c->dim);
    /* cut under tensor parallelism: q and o (qd x dim), gate, up and down (ffn
     * x dim), a shared expert's (shared_ffn x dim); routed experts load whole */
    size_t widest = (size_t)TRAM_MAX(TRAM_MAX(c->n_heads * c->head_dim, c->ffn_dim), c->shared_ffn_dim);
    size_t cut = m->shard.world_size > 1 ? widest * c->dim : 0;
    tram_shard_scratch sc;
    if (tram_shard_scratch_init(&sc, biggest, cut, err))
        return -1;
    ask_sparse(m, f);
    /* A tied table is also the lm_head, and takes its format; an untied one is
     * only looked up a row at a time and stays at full precision.  Every rank
     * holds the table (a lookup needs no communication); only rank 0, which
     * samples, holds an untied lm_head and computes logits. */
    tram_wtype embd_type = c->tied_embeddings ? matrix_type(m, f, "token_embd.weight") : m->lim.weight_type;
    if (embd_type == TRAM_W_FP8) /* no FP8 lookup: the table (and head) run dequantized */
        embd_type = m->lim.weight_type;
    int rc = load_inv_freq(m, f, sc.packed, err) ||
             load_one(m, f, &m->tok_embd, "token_embd.weight", c->vocab_size, c->dim, embd_type, &sc, err) ||
             load_one(m, f, &m->output_norm, "output_norm.weight", 1, c->dim, TRAM_W_F32, &sc, err);
    if (!rc && c->tied_embeddings)
        m->output = m->tok_embd;
    else if (!rc && m->shard.rank == 0)
        rc = load_one(m, f, &m->output, "output.weight", c->vocab_size, c->dim,
                      matrix_type(m, f, "output.weight"), &sc, err);
    for (int l = 0; !rc && l < c->n_layers; l++)
        rc = load_layer(m, f, l, &sc, err);
    tram_shard_scratch_free(&sc);
    return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- buffers */

static int alloc_kv(tram_model *m, tram_error *err)
{
    tram_backend *be = m->be;
    size_t slot = tram_kv_slot_bytes(m->lim.kv_dtype, m->shard.n_kv_heads, m->cfg.head_dim, be->act_bytes);
    size_t kv_bytes = (size_t)m->lim.num_blocks * m->lim.block_size * slot;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        m->layers[l].k_cache = be->alloc(be, kv_bytes);
        m->layers[l].v_cache = m->layers[l].k_cache ? be->alloc(be, kv_bytes) : NULL;
        if (!m->layers[l].v_cache)
            return be->sync(be, err) ? -1 : tram_fail(err, "out of memory for the KV cache");
    }
    return 0;
}

static int alloc_qact(tram_model *m, tram_qact *qa, int cols, tram_error *err)
{
    tram_backend *be = m->be;
    *qa = (tram_qact){.cols = cols, .kp = tram_qact_stride(cols)};
    qa->q = be->alloc(be, (size_t)m->lim.max_tokens * qa->kp);
    qa->scales = qa->q ? be->alloc(be, (size_t)m->lim.max_tokens * sizeof(float)) : NULL;
    return qa->scales ? 0 : be->sync(be, err) ? -1 : tram_fail(err, "out of memory for int8 activations");
}

/* The int8 copies exist only when a layer matrix reading xb or hidden is int8. */
static int alloc_qacts(tram_model *m, tram_error *err)
{
    int any = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const llama_layer *L = &m->layers[l];
        any |= tram_wtype_takes_qact(L->wqkv.type) || tram_wtype_takes_qact(L->w_gate_up.type) ||
               tram_wtype_takes_qact(L->w_down.type);
    }
    if (!any)
        return 0;
    return alloc_qact(m, &m->xq_dim, m->cfg.dim, err) || alloc_qact(m, &m->xq_ffn, m->shard.ffn_dim, err) ? -1 : 0;
}

/* Rows of logits (and of their hidden states) the device buffers hold. */
static int logits_rows_max(const tram_model_limits *lim)
{
    return TRAM_MAX(lim->max_seqs, lim->max_logits);
}

static int alloc_buffers(tram_model *m, tram_error *err)
{
    const tram_model_config *c = &m->cfg;
    tram_backend *be = m->be;
    size_t t = m->lim.max_tokens, s = m->lim.max_seqs, ab = be->act_bytes, rows = logits_rows_max(&m->lim);
    size_t qd = (size_t)m->shard.n_heads * c->head_dim, kd = (size_t)m->shard.n_kv_heads * c->head_dim;
    size_t ffn = m->shard.ffn_dim;
    struct { void **p; size_t bytes; } bufs[] = {
        {&m->a.x, t * c->dim * ab}, {&m->a.xb, t * c->dim * ab}, {&m->a.qkv, t * (qd + 2 * kd) * ab},
        {&m->a.q, t * qd * ab},
        {&m->a.k, t * kd * ab}, {&m->a.v, t * kd * ab}, {&m->a.att, t * qd * ab},
        {&m->a.proj, t * c->dim * ab}, {&m->a.gate_up, t * 2 * ffn * ab},
        {&m->a.hidden, t * ffn * ab}, {&m->a.last, rows * c->dim * ab},
        {&m->a.logits, rows * c->vocab_size * sizeof(float)},  /* act_bytes <= 4 */
        {(void **)&m->bb.token_ids, t * 4}, {(void **)&m->bb.positions, t * 4},
        {(void **)&m->bb.slot_mapping, t * 4}, {(void **)&m->bb.query_start, (s + 1) * 4},
        {(void **)&m->bb.seq_lens, s * 4}, {(void **)&m->bb.block_tables, s * m->lim.max_blocks_per_seq * 4},
        {(void **)&m->bb.logits_rows, t * 4},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
        if (!(*bufs[i].p = be->alloc(be, bufs[i].bytes)))
            return be->sync(be, err) ? -1 : tram_fail(err, "out of memory for activations");
    if (!(m->bb.host = be->alloc_host(be, (4 * t + 2 * s + 1 + s * m->lim.max_blocks_per_seq) * 4)))
        return be->sync(be, err) ? -1 : tram_fail(err, "out of host memory for the batch staging");
    if (c->n_experts && tram_moe_acts_alloc(be, c, m->lim.max_tokens, &m->moe_acts, err))
        return -1;
    return alloc_qacts(m, err) || alloc_kv(m, err) ? -1 : 0;
}

static void free_kv(tram_model *m)
{
    for (int l = 0; l < m->cfg.n_layers && !m->kv_borrowed; l++) {
        m->be->free(m->be, m->layers[l].k_cache);
        m->be->free(m->be, m->layers[l].v_cache);
        m->layers[l].k_cache = m->layers[l].v_cache = NULL;
    }
}

int tram_model_resize_kv(tram_model *m, int num_blocks, tram_error *err)
{
    if (num_blocks < 1)
        return tram_fail(err, "a KV pool of %d blocks is too small", num_blocks);
    if (m->kv_borrowed)
        return tram_fail(err, "a model reading another model's KV pool cannot resize it");
    free_kv(m);
    m->lim.num_blocks = num_blocks;
    return alloc_kv(m, err);
}

int tram_model_share_kv(tram_model *m, const tram_model *from, tram_error *err)
{
    const tram_model_config *a = &m->cfg, *b = &from->cfg;
    if (a->n_layers != b->n_layers || m->shard.n_kv_heads != from->shard.n_kv_heads ||
        a->head_dim != b->head_dim || m->lim.kv_dtype != from->lim.kv_dtype ||
        m->lim.block_size != from->lim.block_size || m->be != from->be)
        return tram_fail(err, "a model can share only the KV pool of one of its own shape on its backend");
    free_kv(m);
    for (int l = 0; l < a->n_layers; l++) {
        m->layers[l].k_cache = from->layers[l].k_cache;
        m->layers[l].v_cache = from->layers[l].v_cache;
    }
    m->lim.num_blocks = from->lim.num_blocks;
    m->kv_borrowed = 1;
    return 0;
}

size_t tram_model_kv_block_bytes(const tram_model_config *c, int block_size, int act_bytes, int world_size,
                                 tram_kv_dtype kv)
{
    int kv_heads = TRAM_MAX(1, c->n_kv_heads / world_size); /* divided, or one replicated */
    return (size_t)2 * c->n_layers * block_size * tram_kv_slot_bytes(kv, kv_heads, c->head_dim, act_bytes);
}

static int limits_check(const tram_model_limits *lim, tram_error *err)
{
    if (lim->max_tokens < 1 || lim->max_seqs < 1 || lim->max_seqs > lim->max_tokens ||
        lim->max_blocks_per_seq < 1 || lim->num_blocks < 1 || lim->block_size < 1 || lim->max_logits < 0 ||
        lim->max_logits > lim->max_tokens)
        return tram_fail(err, "invalid model limits (tokens %d, seqs %d, logits rows %d, blocks %d x %d, %d per "
                              "seq)", lim->max_tokens, lim->max_seqs, lim->max_logits, lim->num_blocks, lim->block_size,
                         lim->max_blocks_per_seq);
    return 0;
}

/* A quantized KV cache, for heads the CPU's tiles hold.  Both backends run
 * it; the engine still keeps it to the CPU (engine/engine.c) until the GPU
 * check (tests/gpu/check_e2e.c --formats) has passed on a GPU. */
static int kv_dtype_check(const tram_model_limits *lim, const tram_model_config *c, tram_error *err)
{
    if (lim->kv_dtype == TRAM_KV_AUTO)
        return 0;
    const char *name = lim->kv_dtype == TRAM_KV_INT8 ? "int8" : "fp8";
    if (c->head_dim > TRAM_KV_MAX_HEAD_DIM)
        return tram_fail(err, "--kv-cache-dtype %s takes head_dim up to %d, the model has %d", name,
                         TRAM_KV_MAX_HEAD_DIM, c->head_dim);
    return 0;
}

void tram_model_destroy(tram_model *m)
{
    if (!m)
        return;
    tram_backend *be = m->be;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            llama_layer *L = &m->layers[l];
            tram_weight *ws[] = {&L->attn_norm, &L->wqkv, &L->bqkv, &L->q_norm, &L->k_norm, &L->wo, &L->ffn_norm,
                                 &L->w_gate_up, &L->w_down};
            for (size_t i = 0; i < TRAM_ARRAY_LEN(ws); i++)
                if (ws[i]->data)
                    be->free_weight(be, ws[i]);
            tram_moe_weights_free(be, &L->moe);
        }
        free_kv(m);
        free(m->layers);
    }
    tram_moe_acts_free(be, &m->moe_acts);
    tram_lora_slots_free(&m->lora);
    if (m->output.data && m->output.data != m->tok_embd.data)
        be->free_weight(be, &m->output);
    if (m->tok_embd.data)
        be->free_weight(be, &m->tok_embd);
    if (m->output_norm.data)
        be->free_weight(be, &m->output_norm);
    be->free_host(be, m->bb.host);
    void *bufs[] = {m->inv_freq, m->a.x, m->a.xb, m->a.qkv, m->a.q, m->a.k, m->a.v, m->a.att, m->a.proj,
                    m->a.gate_up, m->a.hidden, m->a.last, m->a.logits, m->bb.token_ids,
                    m->bb.positions, m->bb.slot_mapping, m->bb.query_start, m->bb.seq_lens,
                    m->bb.block_tables, m->bb.logits_rows, m->xq_dim.q, m->xq_dim.scales,
                    m->xq_ffn.q, m->xq_ffn.scales};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
        be->free(be, bufs[i]);
    free(m);
}

int tram_model_create(tram_model **out, tram_model_file *f, tram_backend *be,
                      const tram_model_limits *lim, tram_error *err)
{
    if (limits_check(lim, err) || kv_dtype_check(lim, tram_model_file_config(f), err))
        return -1;
    tram_model *m = tram_calloc(1, sizeof(*m), err);
    if (!m)
        return -1;
    m->cfg = *tram_model_file_config(f);
    m->arch = tram_arch_by_name(m->cfg.arch);
    m->lim = *lim;
    m->be = be;
    if (tram_shard_plan(&m->shard, &m->cfg, be->rank, be->world_size, err)) {
        free(m);
        return -1;
    }
    m->shape = (tram_attn_shape){m->shard.n_heads, m->shard.n_kv_heads, m->cfg.head_dim, lim->block_size,
                                 1.0f / sqrtf((float)m->cfg.head_dim), lim->kv_dtype};
    m->layers = tram_calloc(m->cfg.n_layers, sizeof(*m->layers), err);
    if (!m->layers || load_weights(m, f, err) || alloc_buffers(m, err) ||
        tram_lora_slots_init(&m->lora, be, &m->cfg, &m->shard, lim->max_loras, lim->max_lora_rank, lim->max_tokens,
                             err)) {
        tram_model_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

const tram_model_config *tram_model_config_of(const tram_model *m) { return &m->cfg; }

int tram_model_lora_load(tram_model *m, int slot, const tram_lora_adapter *a, tram_error *err)
{
    return tram_lora_slots_load(&m->lora, slot, a, err);
}

void tram_model_lora_unload(tram_model *m, int slot)
{
    if (slot >= 0 && slot < m->lora.n_slots)
        tram_lora_slots_unload(&m->lora, slot);
}

void tram_model_set_observer(tram_model *m, tram_act_observer fn, void *ctx)
{
    m->observe = fn;
    m->observe_ctx = ctx;
}

static void observe(tram_model *m, int layer, tram_act_site site, const void *act, int n, int dim)
{
    if (m->observe)
        m->observe(m->observe_ctx, layer, site, act, n, dim);
}

/* ---------------------------------------------------------------- forward */

/* The batch comes from the scheduler, but a bug there must not become an
 * out-of-bounds write here: check every index the kernels will follow. */
static int batch_check(const tram_model *m, const tram_batch *b, tram_error *err)
{
    const tram_model_limits *lim = &m->lim;
    if (b->num_tokens < 1 || b->num_tokens > lim->max_tokens || b->num_seqs < 1 ||
        b->num_seqs > lim->max_seqs || b->max_blocks_per_seq != lim->max_blocks_per_seq ||
        b->num_logits < 0 || b->num_logits > b->num_tokens)
        return tram_fail(err, "batch of %d tokens / %d sequences / %d logits exceeds the model limits",
                         b->num_tokens, b->num_seqs, b->num_logits);
    int slots = lim->num_blocks * lim->block_size;
    for (int i = 0; i < b->num_tokens; i++)
        if (b->token_ids[i] < 0 || b->token_ids[i] >= m->cfg.vocab_size || b->positions[i] < 0 ||
            b->slot_mapping[i] < 0 || b->slot_mapping[i] >= slots)
            return tram_fail(err, "batch token %d: id %d, position %d or slot %d out of range", i,
                             b->token_ids[i], b->positions[i], b->slot_mapping[i]);
    if (b->query_start[0] != 0 || b->query_start[b->num_seqs] != b->num_tokens)
        return tram_fail(err, "batch query_start does not cover the tokens");
    for (int s = 0; s < b->num_seqs; s++) {
        int len = b->seq_lens[s];
        if (b->query_start[s + 1] <= b->query_start[s] || len < 1 ||
            len > lim->max_blocks_per_seq * lim->block_size)
            return tram_fail(err, "batch sequence %d: bad query range or length %d", s, len);
        for (int j = 0; j < (len + lim->block_size - 1) / lim->block_size; j++) {
            int blk = b->block_tables[(size_t)s * b->max_blocks_per_seq + j];
            if (blk < 0 || blk >= lim->num_blocks)
                return tram_fail(err, "batch sequence %d: block %d out of range", s, blk);
        }
    }
    for (int i = 0; i < b->num_logits; i++)
        if (b->logits_rows[i] < 0 || b->logits_rows[i] >= b->num_tokens)
            return tram_fail(err, "batch logits row %d out of range", b->logits_rows[i]);
    return 0;
}

/* Copies the batch's arrays to the backend through the host staging: one
 * asynchronous copy per array, the block table as one copy of the columns
 * the batch uses (not max_blocks_per_seq of them).  The staging is rewritten
 * by the next pass, after this one's sync.  Returns the backend-side view. */
static tram_batch upload_batch(tram_model *m, const tram_batch *b)
{
    tram_backend *be = m->be;
    size_t t = (size_t)b->num_tokens, s = (size_t)b->num_seqs, mb = (size_t)b->max_blocks_per_seq;
    const struct {
        int32_t *dst;
        const int32_t *src;
        size_t n;
    } arrays[] = {
        {m->bb.token_ids, b->token_ids, t},   {m->bb.positions, b->positions, t},
        {m->bb.slot_mapping, b->slot_mapping, t}, {m->bb.query_start, b->query_start, s + 1},
        {m->bb.seq_lens, b->seq_lens, s},     {m->bb.logits_rows, b->logits_rows, (size_t)b->num_logits},
    };
    int32_t *h = m->bb.host;
    for (size_t i = 0; i < TRAM_ARRAY_LEN(arrays); h += arrays[i++].n)
        if (arrays[i].n) {
            memcpy(h, arrays[i].src, arrays[i].n * 4);
            be->upload(be, arrays[i].dst, h, arrays[i].n * 4);
        }
    size_t used = (size_t)tram_batch_used_blocks(b, m->lim.block_size);
    tram_batch_pack_tables(b, (int)used, h);
    be->upload_rows(be, m->bb.block_tables, mb * 4, h, used * 4, used * 4, (int)s);
    tram_batch d = *b;
    d.min_query_len = d.max_query_len = b->query_start[1] - b->query_start[0];
    for (int i = 1; i < b->num_seqs; i++) {
        int len = b->query_start[i + 1] - b->query_start[i];
        d.min_query_len = TRAM_MIN(d.min_query_len, len);
        d.max_query_len = TRAM_MAX(d.max_query_len, len);
    }
    d.token_ids = m->bb.token_ids;
    d.positions = m->bb.positions;
    d.slot_mapping = m->bb.slot_mapping;
    d.query_start = m->bb.query_start;
    d.seq_lens = m->bb.seq_lens;
    d.block_tables = m->bb.block_tables;
    d.logits_rows = m->bb.logits_rows;
    return d;
}

/* W8A8: the op producing a matrix's input also writes its int8 copy when the
 * matrix is int8 (NULL: no copy wanted, or no consumer matrix). */
static const tram_qact *qact_for(const tram_qact *qa, const tram_weight *consumer)
{
    return consumer && tram_wtype_takes_qact(consumer->type) ? qa : NULL;
}

/* y = x · Wᵀ, from the int8 copy of x that its producer wrote when w is int8. */
static void matmul_in(tram_model *m, void *y, const void *x, const tram_qact *qa, const tram_weight *w, int n)
{
    if (tram_wtype_takes_qact(w->type))
        m->be->matmul_q(m->be, y, qa, w, n);
    else
        m->be->matmul(m->be, y, x, w, n);
}

/* The pass's adapters' updates of layer l's projections first .. first +
 * n_parts - 1 (one input x, adjacent outputs: a site of lora_slots.h),
 * added to y (rows stride elements apart): LoRA sits beside each base
 * product, whatever format that product ran in. */
static void add_lora(tram_model *m, int l, tram_lora_target first, int n_parts, void *y, int stride, const void *x)
{
    if (m->lora.n_groups)
        tram_lora_slots_apply(&m->lora, l, first, n_parts, y, stride, x);
}

/* x += proj; xb = rmsnorm(x) * w, and its int8 copy for an int8 consumer. */
static void add_norm(tram_model *m, const tram_weight *w, const tram_weight *consumer, int n)
{
    tram_backend *be = m->be;
    const tram_qact *qa = qact_for(&m->xq_dim, consumer);
    if (qa)
        be->add_rmsnorm_q(be, m->a.x, m->a.xb, qa, m->a.proj, w, n, m->cfg.norm_eps);
    else
        be->add_rmsnorm(be, m->a.x, m->a.xb, m->a.proj, w, n, m->cfg.norm_eps);
}

static void attention_block(tram_model *m, int l, const tram_batch *d)
{
    tram_backend *be = m->be;
    const llama_layer *L = &m->layers[l];
    int n = d->num_tokens, qd = m->shard.n_heads * m->cfg.head_dim, kd = m->shard.n_kv_heads * m->cfg.head_dim;
    observe(m, l, TRAM_ACT_ATTN_IN, m->a.xb, n, m->cfg.dim);
    matmul_in(m, m->a.qkv, m->a.xb, &m->xq_dim, &L->wqkv, n);
    add_lora(m, l, TRAM_LORA_Q, 3, m->a.qkv, qd + 2 * kd, m->a.xb); /* q, k, v */
    if (m->cfg.qkv_bias)
        be->add_bias(be, m->a.qkv, &L->bqkv, n);
    if (m->arch->qk_norm)
        be->head_rmsnorm(be, m->a.qkv, &L->q_norm, &L->k_norm, n, &m->shape, m->cfg.norm_eps);
    be->rope_store(be, m->a.q, m->a.k, m->a.v, L->k_cache, L->v_cache, m->a.qkv, d->positions, d->slot_mapping, n,
                   &m->shape, m->inv_freq, m->cfg.rope_style);
    be->attention(be, m->a.att, m->a.q, L->k_cache, L->v_cache, d, &m->shape);
    observe(m, l, TRAM_ACT_ATTN_OUT, m->a.att, n, qd);
    be->matmul(be, m->a.proj, m->a.att, &L->wo, n);
    add_lora(m, l, TRAM_LORA_O, 1, m->a.proj, m->cfg.dim, m->a.att);
    be->all_reduce(be, m->a.proj, (size_t)n * m->cfg.dim);
}

static void ffn_block(tram_model *m, int l, int n)
{
    tram_backend *be = m->be;
    const llama_layer *L = &m->layers[l];
    observe(m, l, TRAM_ACT_FFN_IN, m->a.xb, n, m->cfg.dim);
    if (m->cfg.n_experts) {
        tram_moe_forward(be, &L->moe, &m->moe_acts, m->a.proj, m->a.xb, n);
        be->all_reduce(be, m->a.proj, (size_t)n * m->cfg.dim);
        return;
    }
    int fn = m->shard.ffn_dim;
    matmul_in(m, m->a.gate_up, m->a.xb, &m->xq_dim, &L->w_gate_up, n);
    add_lora(m, l, TRAM_LORA_GATE, 2, m->a.gate_up, 2 * fn, m->a.xb); /* gate, up */
    const tram_qact *qa = qact_for(&m->xq_ffn, &L->w_down);
    if (qa)
        be->silu_mul_q(be, m->a.hidden, qa, m->a.gate_up, n, fn);
    else
        be->silu_mul(be, m->a.hidden, m->a.gate_up, n, fn);
    observe(m, l, TRAM_ACT_FFN_HIDDEN, m->a.hidden, n, fn);
    matmul_in(m, m->a.proj, m->a.hidden, &m->xq_ffn, &L->w_down, n);
    add_lora(m, l, TRAM_LORA_DOWN, 1, m->a.proj, m->cfg.dim, m->a.hidden);
    be->all_reduce(be, m->a.proj, (size_t)n * m->cfg.dim);
}

/* lm_head over the wanted rows, max_seqs rows at a time. */
static void logits_block(tram_model *m, const tram_batch *d, float *logits)
{
    tram_backend *be = m->be;
    int vocab = m->cfg.vocab_size;
    for (int first = 0; first < d->num_logits; first += m->lim.max_seqs) {
        int rows = TRAM_MIN(m->lim.max_seqs, d->num_logits - first);
        be->gather_rows(be, m->a.last, m->a.xb, d->logits_rows + first, rows, m->cfg.dim);
        be->matmul(be, m->a.logits, m->a.last, &m->output, rows);
        be->to_host_f32(be, logits + (size_t)first * vocab, m->a.logits, (size_t)rows * vocab);
    }
}

/* Every layer over the uploaded batch, up to the final norm (m->a.xb).
 * Device work only: a CUDA graph can capture it. */
static void run_layers(tram_model *m, const tram_batch *uploaded)
{
    tram_backend *be = m->be;
    tram_batch d = *uploaded;
    int n = d.num_tokens;
    float eps = m->cfg.norm_eps;
    be->embed(be, m->a.x, &m->tok_embd, d.token_ids, n);
    const tram_qact *qa = qact_for(&m->xq_dim, &m->layers[0].wqkv);
    if (qa)
        be->rmsnorm_q(be, m->a.xb, qa, m->a.x, &m->layers[0].attn_norm, n, eps);
    else
        be->rmsnorm(be, m->a.xb, m->a.x, &m->layers[0].attn_norm, n, eps);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        attention_block(m, l, &d);
        add_norm(m, &m->layers[l].ffn_norm, &m->layers[l].w_gate_up, n);
        ffn_block(m, l, n);
        /* the last norm feeds the lm_head through a row gather: no int8 copy */
        int last = l + 1 == m->cfg.n_layers;
        add_norm(m, last ? &m->output_norm : &m->layers[l + 1].attn_norm, last ? NULL : &m->layers[l + 1].wqkv,
                 n);
    }
    observe(m, m->cfg.n_layers, TRAM_ACT_HEAD_IN, m->a.xb, n, m->cfg.dim);
}

int tram_model_forward(tram_model *m, const tram_batch *b, float *logits, tram_error *err)
{
    if (batch_check(m, b, err) || tram_lora_slots_prepare(&m->lora, b, err))
        return -1;
    if (logits && m->shard.rank != 0)
        return tram_fail(err, "tensor-parallel rank %d computes no logits: rank 0 does", m->shard.rank);
    tram_batch d = upload_batch(m, b);
    run_layers(m, &d);
    if (logits)
        logits_block(m, &d, logits);
    return m->be->sync(m->be, err);
}

/* Through the staging and the logits-row buffer, max_seqs rows at a time:
 * both are free once the pass has synced. */
int tram_model_hidden_rows(tram_model *m, const int32_t *rows, int n, float *out, tram_error *err)
{
    tram_backend *be = m->be;
    int dim = m->cfg.dim;
    for (int first = 0; first < n; first += m->lim.max_seqs) {
        int k = TRAM_MIN(m->lim.max_seqs, n - first);
        memcpy(m->bb.host, rows + first, (size_t)k * sizeof(int32_t));
        be->upload(be, m->bb.logits_rows, m->bb.host, (size_t)k * sizeof(int32_t));
        be->gather_rows(be, m->a.last, m->a.xb, m->bb.logits_rows, k, dim);
        be->to_host_f32(be, out + (size_t)first * dim, m->a.last, (size_t)k * dim);
        if (be->sync(be, err))
            return -1;
    }
    return 0;
}

int tram_model_prepare(tram_model *m, const tram_batch *b, tram_error *err)
{
    if (batch_check(m, b, err) || tram_lora_slots_prepare(&m->lora, b, err))
        return -1;
    if (b->num_logits > logits_rows_max(&m->lim))
        return tram_fail(err, "batch of %d logits rows: at most %d stay on the device", b->num_logits,
                         logits_rows_max(&m->lim));
    m->prepared = upload_batch(m, b);
    return 0;
}

const void *tram_model_run(tram_model *m)
{
    tram_backend *be = m->be;
    const tram_batch *d = &m->prepared;
    run_layers(m, d);
    if (m->shard.rank != 0)
        return NULL;
    be->gather_rows(be, m->a.last, m->a.xb, d->logits_rows, d->num_logits, m->cfg.dim);
    be->matmul(be, m->a.logits, m->a.last, &m->output, d->num_logits);
    return m->a.logits;
}
