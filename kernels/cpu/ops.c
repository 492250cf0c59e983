/* ops.c — the element-wise and row-wise ops of the CPU backend: embedding
 * lookup, (fused residual-add +) RMSNorm, per-head RMSNorm of q and k, bias, RoPE, KV store, SiLU·mul,
 * q/k/v split, row gather and the f32 copy to the host, as
 * kernels/cuda/ops.cu has them for CUDA.  The RMSNorm and SiLU·mul ops also
 * come as _q versions that write the row's int8 copy for a W8A8 matmul
 * (qact_row) while it is still in cache. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"
#include "kernels/cpu/cpu_int8.h"

/* ---------------------------------------------------------------- embed */

void cpu_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n)
{
    (void)be;
    const float *t = table->data;
    float *out = x;
    for (int i = 0; i < n; i++) {
        if (table->type == TRAM_W_INT8) /* tied to an int8 lm_head */
            tram_i8_matrix_row(table->data, ids[i], table->scales[ids[i]], out + (size_t)i * table->cols);
        else if (tram_q_block_bytes(table->type)) /* tied to a block lm_head */
            tram_q_row_f32(table, ids[i], out + (size_t)i * table->cols);
        else
            memcpy(out + (size_t)i * table->cols, t + (size_t)ids[i] * table->cols,
                   table->cols * sizeof(float));
    }
}

/* ---------------------------------------------------------------- RMSNorm */

static void rmsnorm_row(float *out, const float *x, const float *w, int dim, float eps)
{
    float ss = 0.0f;
    for (int j = 0; j < dim; j++)
        ss += x[j] * x[j];
    float inv = 1.0f / sqrtf(ss / dim + eps);
    for (int j = 0; j < dim; j++)
        out[j] = x[j] * inv * w[j];
}

/* The operands of a norm over rows (residual: add_rmsnorm's, else NULL). */
typedef struct {
    float *residual, *out;
    const tram_qact *qa;
    const float *x; /* the input, or add_rmsnorm's delta */
    const tram_weight *w;
    float eps;
} norm_job;

static void rmsnorm_chunk(void *arg, int i0, int i1)
{
    const norm_job *j = arg;
    int dim = j->w->cols;
    for (int i = i0; i < i1; i++) {
        rmsnorm_row(j->out + (size_t)i * dim, j->x + (size_t)i * dim, j->w->data, dim, j->eps);
        qact_row(j->qa, i, j->out + (size_t)i * dim);
    }
}

static void rmsnorm_rows(tram_backend *be, float *out, const tram_qact *qa, const float *x, const tram_weight *w,
                         int n, float eps)
{
    norm_job j = {.out = out, .qa = qa, .x = x, .w = w, .eps = eps};
    cpu_rows(be, n, rmsnorm_chunk, &j);
}

void cpu_rmsnorm(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps)
{
    rmsnorm_rows(be, out, NULL, x, w, n, eps);
}

void cpu_rmsnorm_q(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w,
                          int n, float eps)
{
    if (!qact_check(be, qa, w->cols))
        rmsnorm_rows(be, out, qa, x, w, n, eps);
}

typedef struct {
    float *qkv;
    const tram_weight *q_norm, *k_norm;
    const tram_attn_shape *s;
    float eps;
} head_norm_job;

static void head_rmsnorm_chunk(void *arg, int i0, int i1)
{
    const head_norm_job *j = arg;
    int hd = j->s->head_dim, heads = j->s->n_heads + j->s->n_kv_heads;
    size_t stride = (size_t)(j->s->n_heads + 2 * j->s->n_kv_heads) * hd;
    for (int i = i0; i < i1; i++)
        for (int h = 0; h < heads; h++) {
            float *head = j->qkv + i * stride + (size_t)h * hd;
            rmsnorm_row(head, head, h < j->s->n_heads ? j->q_norm->data : j->k_norm->data, hd, j->eps);
        }
}

/* Every q head, then every k head, of each fused q/k/v row, in place. */
void cpu_head_rmsnorm(tram_backend *be, void *qkv, const tram_weight *q_norm, const tram_weight *k_norm, int n,
                      const tram_attn_shape *s, float eps)
{
    head_norm_job j = {.qkv = qkv, .q_norm = q_norm, .k_norm = k_norm, .s = s, .eps = eps};
    cpu_rows(be, n, head_rmsnorm_chunk, &j);
}

static void add_rmsnorm_chunk(void *arg, int i0, int i1)
{
    const norm_job *j = arg;
    int dim = j->w->cols;
    for (int i = i0; i < i1; i++) {
        float *r = j->residual + (size_t)i * dim;
        const float *d = j->x + (size_t)i * dim;
        for (int k = 0; k < dim; k++)
            r[k] += d[k];
        rmsnorm_row(j->out + (size_t)i * dim, r, j->w->data, dim, j->eps);
        qact_row(j->qa, i, j->out + (size_t)i * dim);
    }
}

static void add_rmsnorm_rows(tram_backend *be, float *residual, float *out, const tram_qact *qa,
                             const float *delta, const tram_weight *w, int n, float eps)
{
    norm_job j = {.residual = residual, .out = out, .qa = qa, .x = delta, .w = w, .eps = eps};
    cpu_rows(be, n, add_rmsnorm_chunk, &j);
}

void cpu_add_rmsnorm(tram_backend *be, void *residual, void *out, const void *delta,
                            const tram_weight *w, int n, float eps)
{
    add_rmsnorm_rows(be, residual, out, NULL, delta, w, n, eps);
}

void cpu_add_rmsnorm_q(tram_backend *be, void *residual, void *out, const tram_qact *qa,
                              const void *delta, const tram_weight *w, int n, float eps)
{
    if (!qact_check(be, qa, w->cols))
        add_rmsnorm_rows(be, residual, out, qa, delta, w, n, eps);
}

/* ---------------------------------------------------------------- bias */

void cpu_add_bias(tram_backend *be, void *y, const tram_weight *bias, int n)
{
    (void)be;
    const float *b = bias->data;
    for (int i = 0; i < n; i++) {
        float *row = (float *)y + (size_t)i * bias->cols;
        for (int j = 0; j < bias->cols; j++)
            row[j] += b[j];
    }
}

/* ---------------------------------------------------------------- RoPE */

static void rope_head(float *h, int head_dim, float pos, const float *inv_freq, tram_rope_style style)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float angle = pos * inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        /* interleaved rotates (2i, 2i+1); NeoX rotates (i, i + half) */
        int a = style == TRAM_ROPE_INTERLEAVED ? 2 * i : i;
        int b = style == TRAM_ROPE_INTERLEAVED ? 2 * i + 1 : i + half;
        float x0 = h[a], x1 = h[b];
        h[a] = x0 * c - x1 * s;
        h[b] = x0 * s + x1 * c;
    }
}

typedef struct {
    float *q, *k;
    const int32_t *positions;
    const tram_attn_shape *s;
    const float *inv_freq;
    tram_rope_style style;
} rope_job;

static void rope_chunk(void *arg, int i0, int i1)
{
    const rope_job *j = arg;
    int hd = j->s->head_dim, qd = j->s->n_heads * hd, kd = j->s->n_kv_heads * hd;
    for (int i = i0; i < i1; i++) {
        float pos = (float)j->positions[i];
        for (int h = 0; h < j->s->n_heads; h++)
            rope_head(j->q + (size_t)i * qd + h * hd, hd, pos, j->inv_freq, j->style);
        for (int h = 0; h < j->s->n_kv_heads; h++)
            rope_head(j->k + (size_t)i * kd + h * hd, hd, pos, j->inv_freq, j->style);
    }
}

void cpu_rope(tram_backend *be, void *q, void *k, const int32_t *positions, int n,
                     const tram_attn_shape *s, const float *inv_freq, tram_rope_style style)
{
    rope_job j = {.q = q, .k = k, .positions = positions, .s = s, .inv_freq = inv_freq, .style = style};
    cpu_rows(be, n, rope_chunk, &j);
}

/* ---------------------------------------------------------------- KV store */

void cpu_kv_store(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                         const int32_t *slot_mapping, int n, const tram_attn_shape *s)
{
    (void)be;
    size_t kd = (size_t)s->n_kv_heads * s->head_dim;
    for (int i = 0; i < n; i++) {
        memcpy((float *)k_cache + slot_mapping[i] * kd, (const float *)k + i * kd, kd * sizeof(float));
        memcpy((float *)v_cache + slot_mapping[i] * kd, (const float *)v + i * kd, kd * sizeof(float));
    }
}

/* ---------------------------------------------------------------- SiLU·mul */

typedef struct {
    float *out;
    const tram_qact *qa;
    const float *gate_up;
    int ffn;
} silu_job;

static void silu_mul_chunk(void *arg, int i0, int i1)
{
    const silu_job *j = arg;
    int ffn = j->ffn;
    for (int i = i0; i < i1; i++) {
        const float *g = j->gate_up + (size_t)i * 2 * ffn, *u = g + ffn;
        float *o = j->out + (size_t)i * ffn;
        for (int k = 0; k < ffn; k++)
            o[k] = g[k] / (1.0f + expf(-g[k])) * u[k];
        qact_row(j->qa, i, o);
    }
}

static void silu_mul_rows(tram_backend *be, float *out, const tram_qact *qa, const float *gate_up, int n, int ffn)
{
    silu_job j = {.out = out, .qa = qa, .gate_up = gate_up, .ffn = ffn};
    cpu_rows(be, n, silu_mul_chunk, &j);
}

void cpu_silu_mul(tram_backend *be, void *out, const void *gate_up, int n, int ffn)
{
    silu_mul_rows(be, out, NULL, gate_up, n, ffn);
}

void cpu_silu_mul_q(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn)
{
    if (!qact_check(be, qa, ffn))
        silu_mul_rows(be, out, qa, gate_up, n, ffn);
}

/* ---------------------------------------------------------------- q/k/v split */

void cpu_split_qkv(tram_backend *be, void *q, void *k, void *v, const void *qkv, int n, int qd, int kd)
{
    (void)be;
    for (int i = 0; i < n; i++) {
        const float *src = (const float *)qkv + (size_t)i * (qd + 2 * kd);
        memcpy((float *)q + (size_t)i * qd, src, qd * sizeof(float));
        memcpy((float *)k + (size_t)i * kd, src + qd, kd * sizeof(float));
        memcpy((float *)v + (size_t)i * kd, src + qd + kd, kd * sizeof(float));
    }
}

/* ---------------------------------------------------------------- gather */

void cpu_gather_rows(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows,
                            int dim)
{
    (void)be;
    for (int i = 0; i < n_rows; i++)
        memcpy((float *)out + (size_t)i * dim, (const float *)x + (size_t)rows[i] * dim, dim * sizeof(float));
}

/* ---------------------------------------------------------------- to host */

void cpu_to_host_f32(tram_backend *be, float *dst, const void *src, size_t n)
{
    (void)be;
    memcpy(dst, src, n * sizeof(float));
}
