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
#include "kernels/cpu/vexp.h"

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

/* Rotates the pairs of head h by the angles whose cosines and sines are
 * c[half], s[half]: interleaved rotates (2i, 2i+1), NeoX (i, i + half). */
static void rope_pairs(float *h, int half, const float *c, const float *s, tram_rope_style style)
{
    for (int i = 0; i < half; i++) {
        int a = style == TRAM_ROPE_INTERLEAVED ? 2 * i : i;
        int b = style == TRAM_ROPE_INTERLEAVED ? a + 1 : a + half;
        float x0 = h[a], x1 = h[b];
        h[a] = x0 * c[i] - x1 * s[i];
        h[b] = x0 * s[i] + x1 * c[i];
    }
}

typedef struct {
    float *q, *k;
    const int32_t *positions;
    const tram_attn_shape *s;
    const float *inv_freq;
    tram_rope_style style;
    float *cos, *sin;  /* [n][half]: the angles' table */
    int fill;          /* take the angles into the table first */
} rope_job;

/* Every query and key head of token i, by its row of the table. */
static void rope_token(const rope_job *j, int i)
{
    int hd = j->s->head_dim, half = hd / 2, nq = j->s->n_heads, nk = j->s->n_kv_heads;
    float *q = j->q + (size_t)i * nq * hd, *k = j->k + (size_t)i * nk * hd;
    float *c = j->cos + (size_t)i * half, *s = j->sin + (size_t)i * half;
    for (int p = 0; j->fill && p < half; p++) {
        float angle = (float)j->positions[i] * j->inv_freq[p];
        c[p] = cosf(angle);
        s[p] = sinf(angle);
    }
    for (int h = 0; h < nq; h++)
        rope_pairs(q + (size_t)h * hd, half, c, s, j->style);
    for (int h = 0; h < nk; h++)
        rope_pairs(k + (size_t)h * hd, half, c, s, j->style);
}

static void rope_chunk(void *arg, int i0, int i1)
{
    for (int i = i0; i < i1; i++)
        rope_token(arg, i);
}

/* Whether the cached angles are this call's: the same positions and the
 * same frequencies (compared by value: a model loaded later may reuse the
 * address of another's); else makes room for them and records the key. */
static int angles_cached(tram_backend *be, const int32_t *positions, int n, int half, const float *inv_freq)
{
    cpu_rope_angles *a = &cpu_of(be)->rope;
    size_t pos_bytes = (size_t)n * sizeof(int32_t), freq_bytes = (size_t)half * sizeof(float);
    if (a->n == n && a->half == half && !memcmp(a->positions, positions, pos_bytes) &&
        !memcmp(a->inv_freq, inv_freq, freq_bytes))
        return 1;
    a->n = 0;
    if (cpu_reserve(be, (void **)&a->table, &a->table_cap, 2 * (size_t)n * freq_bytes) ||
        cpu_reserve(be, (void **)&a->positions, &a->positions_cap, pos_bytes) ||
        cpu_reserve(be, (void **)&a->inv_freq, &a->inv_freq_cap, freq_bytes))
        return -1;
    memcpy(a->positions, positions, pos_bytes);
    memcpy(a->inv_freq, inv_freq, freq_bytes);
    a->n = n, a->half = half;
    return 0;
}

/* The angles depend on the position and the pair only: each cosine and
 * sine is taken once per step (by its first layer) for all heads. */
void cpu_rope(tram_backend *be, void *q, void *k, const int32_t *positions, int n,
                     const tram_attn_shape *s, const float *inv_freq, tram_rope_style style)
{
    int half = s->head_dim / 2, cached = angles_cached(be, positions, n, half, inv_freq);
    if (cached < 0)
        return;
    cpu_rope_angles *a = &cpu_of(be)->rope;
    rope_job j = {.q = q, .k = k, .positions = positions, .s = s, .inv_freq = inv_freq, .style = style,
                  .cos = a->table, .sin = a->table + (size_t)n * half, .fill = !cached};
    cpu_rows(be, n, rope_chunk, &j);
}

/* ---------------------------------------------------------------- KV store */

typedef struct {
    uint8_t *k_cache, *v_cache;
    const float *k, *v;
    const int32_t *slot_mapping;
    const tram_attn_shape *s;
} kv_quant_job;

static void kv_quantize_rows(void *arg, int i0, int i1)
{
    const kv_quant_job *j = arg;
    const tram_attn_shape *s = j->s;
    size_t kd = (size_t)s->n_kv_heads * s->head_dim;
    size_t sb = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, s->head_dim, sizeof(float));
    for (int i = i0; i < i1; i++) {
        tram_kv_quantize_slot(s->kv_dtype, j->k_cache + j->slot_mapping[i] * sb, j->k + i * kd, s->n_kv_heads,
                              s->head_dim);
        tram_kv_quantize_slot(s->kv_dtype, j->v_cache + j->slot_mapping[i] * sb, j->v + i * kd, s->n_kv_heads,
                              s->head_dim);
    }
}

/* f32 slots are copied; int8/fp8 slots quantized (kernels/kv_format.h). */
void cpu_kv_store(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                         const int32_t *slot_mapping, int n, const tram_attn_shape *s)
{
    if (s->kv_dtype != TRAM_KV_AUTO) {
        kv_quant_job j = {.k_cache = k_cache, .v_cache = v_cache, .k = k, .v = v, .slot_mapping = slot_mapping,
                          .s = s};
        cpu_rows(be, n, kv_quantize_rows, &j);
        return;
    }
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
    tram_cpu_kernel kernel;
} silu_job;

static void silu_mul_chunk(void *arg, int i0, int i1)
{
    const silu_job *j = arg;
    int ffn = j->ffn;
    for (int i = i0; i < i1; i++) {
        const float *g = j->gate_up + (size_t)i * 2 * ffn, *u = g + ffn;
        float *o = j->out + (size_t)i * ffn;
        tram_silu_mul_row(j->kernel, o, g, u, ffn);
        qact_row(j->qa, i, o);
    }
}

static void silu_mul_rows(tram_backend *be, float *out, const tram_qact *qa, const float *gate_up, int n, int ffn)
{
    silu_job j = {.out = out, .qa = qa, .gate_up = gate_up, .ffn = ffn, .kernel = cpu_of(be)->vexp_kernel};
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
