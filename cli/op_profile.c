/* op_profile.c — the timed op table of `tram bench roofline` (see
 * op_profile.h).  Each wrapper runs the real op on the same backend (the
 * copied table shares its state) and charges its class. */
#include "cli/op_profile.h"

#include <string.h>

#include "kernels/cpu/gemm_blocks.h"

#define F4 4.0 /* bytes of an f32 activation */

static tram_op_profile *profile_of(tram_backend *be) { return (tram_op_profile *)be; }

static void charge(tram_backend *be, tram_op_class c, double t0, double bytes, double flops)
{
    tram_op_cost *k = &profile_of(be)->cost[c];
    k->seconds += tram_now() - t0;
    k->bytes += bytes;
    k->flops += flops;
}

static double weight_bytes(const tram_weight *w)
{
    if (tram_q_block_bytes(w->type))
        return (double)tram_q_packed_bytes(w->type, w->rows, w->cols);
    if (w->type == TRAM_W_INT8)
        return (double)w->rows * w->cols + 4.0 * w->rows;
    if (w->type == TRAM_W_S24 || w->type == TRAM_W_S24_INT8) /* half the values, 2 bits of position each */
        return (double)w->rows * w->cols / 2 * (w->type == TRAM_W_S24 ? F4 : 1) + w->rows * w->cols / 8.0 +
               (w->type == TRAM_W_S24 ? 0 : 4.0 * w->rows);
    return F4 * w->rows * w->cols;
}

/* Which projection a matmul is, from its shape. */
static tram_op_class matmul_class(const tram_model_config *c, const tram_weight *w)
{
    if (w->rows == c->vocab_size)
        return OP_LM_HEAD;
    if (w->rows == (c->n_heads + 2 * c->n_kv_heads) * c->head_dim)
        return OP_GEMM_QKV;
    if (w->rows == 2 * c->ffn_dim)
        return OP_GEMM_GATE_UP;
    return w->cols == c->ffn_dim ? OP_GEMM_DOWN : OP_GEMM_O;
}

static void t_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n)
{
    double t0 = tram_now();
    profile_of(be)->inner.matmul(be, y, x, w, n);
    charge(be, matmul_class(&profile_of(be)->cfg, w), t0, weight_bytes(w) + F4 * n * (w->rows + w->cols),
           2.0 * n * w->rows * w->cols);
}

/* Scores and the weighted sum of values: 4 FLOPs per (query head, key,
 * dimension); each sequence's keys and values read once. */
static void t_attention(tram_backend *be, void *out, const void *q, const void *k_cache, const void *v_cache,
                        const tram_batch *b, const tram_attn_shape *s)
{
    double t0 = tram_now(), flops = 0, kv = 0;
    profile_of(be)->inner.attention(be, out, q, k_cache, v_cache, b, s);
    int qd = s->n_heads * s->head_dim, kd = s->n_kv_heads * s->head_dim;
    for (int i = 0; i < b->num_tokens; i++)
        flops += 4.0 * (b->positions[i] + 1) * qd;
    for (int i = 0; i < b->num_seqs; i++)
        kv += 2.0 * F4 * b->seq_lens[i] * kd;
    charge(be, OP_ATTENTION, t0, kv + 2 * F4 * b->num_tokens * qd, flops);
}

static void t_rope_store(tram_backend *be, void *q, void *k, void *v, void *k_cache, void *v_cache,
                         const void *qkv, const int32_t *positions, const int32_t *slot_mapping, int n,
                         const tram_attn_shape *s, const float *inv_freq, tram_rope_style style)
{
    double t0 = tram_now();
    profile_of(be)->inner.rope_store(be, q, k, v, k_cache, v_cache, qkv, positions, slot_mapping, n, s, inv_freq,
                                     style);
    double width = (s->n_heads + 2 * s->n_kv_heads) * s->head_dim;
    charge(be, OP_ROPE_KV, t0, 2 * F4 * n * width + 2 * F4 * n * s->n_kv_heads * s->head_dim, 0);
}

static void t_rmsnorm(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps)
{
    double t0 = tram_now();
    profile_of(be)->inner.rmsnorm(be, out, x, w, n, eps);
    charge(be, OP_NORM, t0, F4 * (2.0 * n + 1) * w->cols, 0);
}

static void t_add_rmsnorm(tram_backend *be, void *residual, void *out, const void *delta, const tram_weight *w,
                          int n, float eps)
{
    double t0 = tram_now();
    profile_of(be)->inner.add_rmsnorm(be, residual, out, delta, w, n, eps);
    charge(be, OP_NORM, t0, F4 * (4.0 * n + 1) * w->cols, 0);
}

static void t_head_rmsnorm(tram_backend *be, void *qkv, const tram_weight *q_norm, const tram_weight *k_norm,
                           int n, const tram_attn_shape *s, float eps)
{
    double t0 = tram_now();
    profile_of(be)->inner.head_rmsnorm(be, qkv, q_norm, k_norm, n, s, eps);
    charge(be, OP_NORM, t0, 2 * F4 * n * (s->n_heads + s->n_kv_heads) * s->head_dim, 0);
}

static void t_silu_mul(tram_backend *be, void *out, const void *gate_up, int n, int ffn)
{
    double t0 = tram_now();
    profile_of(be)->inner.silu_mul(be, out, gate_up, n, ffn);
    charge(be, OP_SILU, t0, 3 * F4 * n * ffn, 0);
}

static void t_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n)
{
    double t0 = tram_now();
    profile_of(be)->inner.embed(be, x, table, ids, n);
    charge(be, OP_EMBED, t0, n * (weight_bytes(table) / table->rows + F4 * table->cols), 0);
}

static void t_add_bias(tram_backend *be, void *y, const tram_weight *bias, int n)
{
    double t0 = tram_now();
    profile_of(be)->inner.add_bias(be, y, bias, n);
    charge(be, OP_OTHER, t0, 2 * F4 * n * bias->cols, 0);
}

static void t_gather_rows(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows, int dim)
{
    double t0 = tram_now();
    profile_of(be)->inner.gather_rows(be, out, x, rows, n_rows, dim);
    charge(be, OP_COPY, t0, 2 * F4 * n_rows * dim, 0);
}

static void t_to_host_f32(tram_backend *be, float *dst, const void *src, size_t n)
{
    double t0 = tram_now();
    profile_of(be)->inner.to_host_f32(be, dst, src, n);
    charge(be, OP_COPY, t0, 2 * F4 * (double)n, 0);
}

void tram_op_profile_wrap(tram_op_profile *p, const tram_backend *inner, const tram_model_config *c)
{
    memset(p, 0, sizeof(*p));
    p->inner = *inner;
    p->cfg = *c;
    p->be = *inner;
    p->be.matmul = t_matmul;
    p->be.attention = t_attention;
    p->be.rope_store = t_rope_store;
    p->be.rmsnorm = t_rmsnorm;
    p->be.add_rmsnorm = t_add_rmsnorm;
    p->be.head_rmsnorm = t_head_rmsnorm;
    p->be.silu_mul = t_silu_mul;
    p->be.embed = t_embed;
    p->be.add_bias = t_add_bias;
    p->be.gather_rows = t_gather_rows;
    p->be.to_host_f32 = t_to_host_f32;
}

void tram_op_profile_reset(tram_op_profile *p) { memset(p->cost, 0, sizeof(p->cost)); }

const char *tram_op_class_name(tram_op_class c)
{
    static const char *const names[OP_CLASSES] = {
        [OP_GEMM_QKV] = "GEMM q/k/v", [OP_GEMM_O] = "GEMM o_proj", [OP_GEMM_GATE_UP] = "GEMM gate/up",
        [OP_GEMM_DOWN] = "GEMM down", [OP_LM_HEAD] = "GEMM lm_head", [OP_ATTENTION] = "attention",
        [OP_ROPE_KV] = "RoPE + KV store", [OP_NORM] = "RMSNorm (+ residual)", [OP_SILU] = "SiLU·mul",
        [OP_EMBED] = "embedding", [OP_COPY] = "row gather, logits copy", [OP_OTHER] = "biases",
    };
    return names[c];
}
