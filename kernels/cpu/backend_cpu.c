/* backend_cpu.c — the CPU backend: f32 activations, OpenBLAS GEMMs, OpenMP
 * threads over tokens and heads.  It is the reference every other backend is
 * tested against, so each op is the plain math first and fast second. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/quant_gemm.h"

typedef struct {
    int threads;
    tram_error err;
    int failed;
    tram_i8_kernel i8_kernel;  /* the best this CPU runs */
    int8_t *xq;                /* activations quantized for int8 matmuls, grown to the largest */
    float *xs;                 /* their per-row scales */
    size_t xq_cap, xs_cap;     /* bytes */
    tram_q_kernel q_kernel;    /* the best this CPU runs, for GGUF block weights */
    tram_q8_block *xb;         /* activations quantized for block matmuls, grown to the largest */
    size_t xb_cap;             /* bytes */
} cpu_state;

static cpu_state *state(tram_backend *be) { return be->impl; }

/* Row-parallel element-wise ops fork only from this many token rows: below
 * it a fork/join (a futex round trip per thread, more when the cores are
 * shared) costs more than the op itself. */
#define PAR_MIN_ROWS 8

static void cpu_record(tram_backend *be, const char *msg)
{
    cpu_state *s = state(be);
    if (!s->failed)
        tram_fail(&s->err, "cpu backend: %s", msg);
    s->failed = 1;
}

/* ---------------------------------------------------------------- memory */

static void *cpu_alloc(tram_backend *be, size_t bytes)
{
    /* 64-byte alignment keeps AVX-512 loads on one cache line. */
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? (bytes + 63) / 64 * 64 : 64)) {
        cpu_record(be, "out of memory");
        return NULL;
    }
    return p;
}

static void cpu_free(tram_backend *be, void *ptr)
{
    (void)be;
    free(ptr);
}

static void cpu_copy(tram_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    memcpy(dst, src, bytes);
}

/* Int8 weights: each row quantized symmetric and packed for the kernels
 * (kernels/cpu/int8_gemm.h); data holds the packed tram_i8_matrix. */
static void upload_int8(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    if (cols > TRAM_I8_MAX_COLS) {
        cpu_record(be, "int8 weights wider than 65536 columns could overflow int32 sums");
        return;
    }
    w->data = cpu_alloc(be, tram_i8_matrix_bytes(rows, cols));
    w->scales = w->data ? cpu_alloc(be, rows * sizeof(float)) : NULL;
    if (!w->scales)
        return;
    tram_i8_matrix_pack(w->data, host, rows, cols, w->scales);
    w->type = TRAM_W_INT8;
    w->rows = rows;
    w->cols = cols;
}

static void cpu_upload_weight(tram_backend *be, tram_weight *w, const float *host, int rows, int cols,
                              tram_wtype type)
{
    memset(w, 0, sizeof(*w));
    if (type == TRAM_W_INT8 && rows > 1) {
        upload_int8(be, w, host, rows, cols);
        return;
    }
    if (type != TRAM_W_F32 && type != TRAM_W_INT8) {
        cpu_record(be, "only f32 and int8 weights are supported");
        return;
    }
    size_t bytes = (size_t)rows * cols * sizeof(float);
    w->data = cpu_alloc(be, bytes);
    if (!w->data)
        return;
    memcpy(w->data, host, bytes);
    w->type = TRAM_W_F32;
    w->rows = rows;
    w->cols = cols;
}

/* GGUF blocks as stored, regrouped by 8 rows for the kernels (tram_q_pack):
 * the rows of a block weight are whole blocks. */
static void cpu_upload_weight_blocks(tram_backend *be, tram_weight *w, const void *blocks, int rows,
                                     int cols, tram_wtype type)
{
    memset(w, 0, sizeof(*w));
    if (!tram_q_block_bytes(type) || cols % TRAM_QK || rows < 1) {
        cpu_record(be, "block weights need a GGUF block type and a multiple of 32 columns");
        return;
    }
    w->data = cpu_alloc(be, tram_q_packed_bytes(type, rows, cols));
    if (!w->data)
        return;
    tram_q_pack(type, rows, cols, blocks, w->data);
    w->type = type;
    w->rows = rows;
    w->cols = cols;
}

static void cpu_free_weight(tram_backend *be, tram_weight *w)
{
    (void)be;
    free(w->data);
    free(w->scales);
    memset(w, 0, sizeof(*w));
}

/* ---------------------------------------------------------------- ops */

static void cpu_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n)
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

static void rmsnorm_row(float *out, const float *x, const float *w, int dim, float eps)
{
    float ss = 0.0f;
    for (int j = 0; j < dim; j++)
        ss += x[j] * x[j];
    float inv = 1.0f / sqrtf(ss / dim + eps);
    for (int j = 0; j < dim; j++)
        out[j] = x[j] * inv * w[j];
}

/* A W8A8 op's quantized copy of its output: checked against the row width the
 * op produces, so a mis-sized buffer is an error, not an overrun. */
static int qact_check(tram_backend *be, const tram_qact *qa, int cols)
{
    if (qa->cols == cols && qa->kp == tram_qact_stride(cols))
        return 0;
    cpu_record(be, "quantized activations of the wrong width for this op");
    return -1;
}

/* Row i quantized for an int8 matmul right after it was computed, while it is
 * still in cache; nothing without qa. */
static void qact_row(const tram_qact *qa, int i, const float *row)
{
    if (qa)
        qa->scales[i] = tram_i8_quantize(row, qa->cols, qa->kp, qa->q + (size_t)i * qa->kp);
}

static void rmsnorm_rows(tram_backend *be, float *out, const tram_qact *qa, const float *x, const tram_weight *w,
                         int n, float eps)
{
    int dim = w->cols;
#pragma omp parallel for num_threads(state(be)->threads) if (n >= PAR_MIN_ROWS)
    for (int i = 0; i < n; i++) {
        rmsnorm_row(out + (size_t)i * dim, x + (size_t)i * dim, w->data, dim, eps);
        qact_row(qa, i, out + (size_t)i * dim);
    }
}

static void cpu_rmsnorm(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps)
{
    rmsnorm_rows(be, out, NULL, x, w, n, eps);
}

static void cpu_rmsnorm_q(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w,
                          int n, float eps)
{
    if (!qact_check(be, qa, w->cols))
        rmsnorm_rows(be, out, qa, x, w, n, eps);
}

static void add_rmsnorm_rows(tram_backend *be, float *residual, float *out, const tram_qact *qa,
                             const float *delta, const tram_weight *w, int n, float eps)
{
    int dim = w->cols;
#pragma omp parallel for num_threads(state(be)->threads) if (n >= PAR_MIN_ROWS)
    for (int i = 0; i < n; i++) {
        float *r = residual + (size_t)i * dim;
        const float *d = delta + (size_t)i * dim;
        for (int j = 0; j < dim; j++)
            r[j] += d[j];
        rmsnorm_row(out + (size_t)i * dim, r, w->data, dim, eps);
        qact_row(qa, i, out + (size_t)i * dim);
    }
}

static void cpu_add_rmsnorm(tram_backend *be, void *residual, void *out, const void *delta,
                            const tram_weight *w, int n, float eps)
{
    add_rmsnorm_rows(be, residual, out, NULL, delta, w, n, eps);
}

static void cpu_add_rmsnorm_q(tram_backend *be, void *residual, void *out, const tram_qact *qa,
                              const void *delta, const tram_weight *w, int n, float eps)
{
    if (!qact_check(be, qa, w->cols))
        add_rmsnorm_rows(be, residual, out, qa, delta, w, n, eps);
}

/* Grows the scratch for quantized activations; only the first forward
 * passes of a new largest batch allocate. */
static int i8_scratch(tram_backend *be, int n, int kp)
{
    cpu_state *s = state(be);
    size_t q_bytes = (size_t)n * kp, s_bytes = (size_t)n * sizeof(float);
    if (q_bytes > s->xq_cap) {
        free(s->xq);
        s->xq = cpu_alloc(be, q_bytes);
        s->xq_cap = s->xq ? q_bytes : 0;
    }
    if (s_bytes > s->xs_cap) {
        free(s->xs);
        s->xs = cpu_alloc(be, s_bytes);
        s->xs_cap = s->xs ? s_bytes : 0;
    }
    return s->xq && s->xs ? 0 : -1;
}

static void matmul_qact(tram_backend *be, float *y, const tram_qact *qa, const tram_weight *w, int n)
{
    cpu_state *s = state(be);
    tram_i8_gemm_f32(s->i8_kernel, y, qa->q, qa->scales, n, w->data, w->scales, s->threads);
}

/* W8A8 on an input that no op quantized for us (the attention output, the
 * lm_head's rows): each token row is quantized here first, one more pass over
 * n*cols floats against rows*cols weight bytes for the product itself. */
static void matmul_int8(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    cpu_state *s = state(be);
    const tram_i8_matrix *m = w->data;
    if (i8_scratch(be, n, m->kp))
        return;
    tram_qact qa = {s->xq, s->xs, w->cols, m->kp};
#pragma omp parallel for num_threads(s->threads) if (n >= PAR_MIN_ROWS)
    for (int i = 0; i < n; i++)
        qact_row(&qa, i, x + (size_t)i * w->cols);
    matmul_qact(be, y, &qa, w, n);
}

static void cpu_matmul_q(tram_backend *be, void *y, const tram_qact *qa, const tram_weight *w, int n)
{
    if (w->type != TRAM_W_INT8) {
        cpu_record(be, "matmul_q: the weight must be int8");
        return;
    }
    if (!qact_check(be, qa, w->cols))
        matmul_qact(be, y, qa, w, n);
}

/* Block weights: activations quantized per 32 like the weights, then integer
 * block dots (kernels/cpu/quant_gemm.h).  Only a new largest batch allocates. */
static void matmul_blocks(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    cpu_state *s = state(be);
    int nb = w->cols / TRAM_QK;
    size_t bytes = (size_t)n * nb * sizeof(tram_q8_block);
    if (bytes > s->xb_cap) {
        free(s->xb);
        s->xb = cpu_alloc(be, bytes);
        s->xb_cap = s->xb ? bytes : 0;
        if (!s->xb)
            return;
    }
#pragma omp parallel for num_threads(s->threads) if (n >= PAR_MIN_ROWS)
    for (int i = 0; i < n; i++)
        tram_q8_quantize_row(x + (size_t)i * w->cols, w->cols, s->xb + (size_t)i * nb);
    tram_q_gemm(s->q_kernel, y, s->xb, n, w, s->threads);
}

/* Rows up to which matmul runs as matrix-vector products (see sgemm_rows). */
#define GEMV_MAX_ROWS 2

/* y[:, r0:r1] = x · W[r0:r1]ᵀ with single-threaded OpenBLAS.  For a few rows
 * sgemm spends more time packing W than multiplying, so those go through
 * sgemv, which streams W once, unpacked. */
static void sgemm_rows(float *y, const float *x, const float *w, int n, int rows, int cols, int r0, int r1)
{
    if (n <= GEMV_MAX_ROWS) {
        for (int i = 0; i < n; i++)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, r1 - r0, cols, 1.0f, w + (size_t)r0 * cols, cols,
                        x + (size_t)i * cols, 1, 0.0f, y + (size_t)i * rows + r0, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, r1 - r0, cols, 1.0f, x, cols,
                w + (size_t)r0 * cols, cols, 0.0f, y + r0, rows);
}

/* y[n, rows] = x[n, cols] · Wᵀ.  The output columns are split across our
 * OpenMP threads and OpenBLAS runs single-threaded inside each: one pool of
 * threads on the cores, instead of OpenBLAS's pool fighting OpenMP's spinning
 * workers for them. */
static void cpu_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n)
{
    if (w->type == TRAM_W_INT8) {
        matmul_int8(be, y, x, w, n);
        return;
    }
    if (tram_q_block_bytes(w->type)) {
        matmul_blocks(be, y, x, w, n);
        return;
    }
    if (w->type != TRAM_W_F32) {
        cpu_record(be, "matmul: unsupported weight type");
        return;
    }
    int threads = state(be)->threads;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        /* slices on 16-row boundaries keep each thread's rows cache-line aligned */
        int chunk = (w->rows + nt - 1) / nt;
        chunk = (chunk + 15) / 16 * 16;
        int r0 = TRAM_MIN(t * chunk, w->rows), r1 = TRAM_MIN(r0 + chunk, w->rows);
        if (r1 > r0)
            sgemm_rows(y, x, w->data, n, w->rows, w->cols, r0, r1);
    }
}

static void cpu_add_bias(tram_backend *be, void *y, const tram_weight *bias, int n)
{
    (void)be;
    const float *b = bias->data;
    for (int i = 0; i < n; i++) {
        float *row = (float *)y + (size_t)i * bias->cols;
        for (int j = 0; j < bias->cols; j++)
            row[j] += b[j];
    }
}

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

static void cpu_rope(tram_backend *be, void *q, void *k, const int32_t *positions, int n,
                     const tram_attn_shape *s, const float *inv_freq, tram_rope_style style)
{
    int qd = s->n_heads * s->head_dim, kd = s->n_kv_heads * s->head_dim;
#pragma omp parallel for num_threads(state(be)->threads) if (n >= PAR_MIN_ROWS)
    for (int i = 0; i < n; i++) {
        float pos = (float)positions[i];
        for (int h = 0; h < s->n_heads; h++)
            rope_head((float *)q + (size_t)i * qd + h * s->head_dim, s->head_dim, pos, inv_freq, style);
        for (int h = 0; h < s->n_kv_heads; h++)
            rope_head((float *)k + (size_t)i * kd + h * s->head_dim, s->head_dim, pos, inv_freq, style);
    }
}

static void cpu_kv_store(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                         const int32_t *slot_mapping, int n, const tram_attn_shape *s)
{
    (void)be;
    size_t kd = (size_t)s->n_kv_heads * s->head_dim;
    for (int i = 0; i < n; i++) {
        memcpy((float *)k_cache + slot_mapping[i] * kd, (const float *)k + i * kd, kd * sizeof(float));
        memcpy((float *)v_cache + slot_mapping[i] * kd, (const float *)v + i * kd, kd * sizeof(float));
    }
}

static int seq_of_token(const tram_batch *b, int token)
{
    int lo = 0, hi = b->num_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (b->query_start[mid] <= token)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Attention works on a tile of query rows (token x head) that share one KV
 * head and one sequence: the query heads of a GQA group and up to a few
 * consecutive prefill tokens.  Each chunk of keys is read from memory once for
 * the whole tile, scored for all its rows, and folded into each row's softmax
 * with one max and one exp per score (the online softmax, by chunk). */
#define ATT_ROWS 48   /* query rows of one tile */
#define ATT_KEYS 32   /* keys scored at once (within one KV block) */
/* Multiply-adds below which attention runs on one thread: a fork/join with
 * passive OpenMP waits costs tens of microseconds, what one core needs for
 * about this much work (a decode token over a few hundred positions). */
#define ATT_PAR_MIN_MACS (1L << 20)

typedef struct {
    const float *q[ATT_ROWS];
    float *out[ATT_ROWS];    /* accumulates Σ p·v, then divided by Σ p */
    int ctx[ATT_ROWS];       /* keys this row sees (causal) */
    float max[ATT_ROWS], sum[ATT_ROWS];
    int n, max_ctx;
} att_tile;

/* The reduction lets the compiler split the sum over SIMD lanes. */
static float dot(const float *restrict a, const float *restrict b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

static void axpy(float *restrict y, float a, const float *restrict x, int n)
{
#pragma omp simd
    for (int d = 0; d < n; d++)
        y[d] += a * x[d];
}

/* Row r's scores of keys [j0, j0+nk) become softmax weights under the row's
 * running max (rescaling what it accumulated when the max grows). */
static void score_chunk(att_tile *t, int r, float *p, const float *kb, size_t kd, int nk,
                        const tram_attn_shape *s)
{
    float m = t->max[r];
    for (int j = 0; j < nk; j++) {
        p[j] = dot(t->q[r], kb + j * kd, s->head_dim) * s->scale;
        m = fmaxf(m, p[j]);
    }
    if (m > t->max[r]) {
        float c = expf(t->max[r] - m); /* 0 on the first chunk: out and sum are 0 */
        t->sum[r] *= c;
        for (int d = 0; d < s->head_dim; d++)
            t->out[r][d] *= c;
        t->max[r] = m;
    }
    float sum = 0.0f;
    for (int j = 0; j < nk; j++) {
        p[j] = expf(p[j] - m);
        sum += p[j];
    }
    t->sum[r] += sum;
}

static void attend_tile(att_tile *t, const float *k_cache, const float *v_cache, const int32_t *block_table,
                        int kv_head, const tram_attn_shape *s)
{
    int hd = s->head_dim, bs = s->block_size;
    size_t kd = (size_t)s->n_kv_heads * hd;
    float p[ATT_ROWS][ATT_KEYS];
    for (int r = 0; r < t->n; r++) {
        t->max[r] = -INFINITY;
        t->sum[r] = 0.0f;
        memset(t->out[r], 0, hd * sizeof(float));
    }
    for (int j0 = 0; j0 < t->max_ctx;) {
        int off = j0 % bs, nk = TRAM_MIN(TRAM_MIN(ATT_KEYS, bs - off), t->max_ctx - j0);
        size_t slot = (size_t)block_table[j0 / bs] * bs + off;
        const float *kb = k_cache + slot * kd + (size_t)kv_head * hd;
        const float *vb = v_cache + slot * kd + (size_t)kv_head * hd;
        for (int r = 0; r < t->n; r++)
            if (t->ctx[r] > j0)
                score_chunk(t, r, p[r], kb, kd, TRAM_MIN(nk, t->ctx[r] - j0), s);
        for (int j = 0; j < nk; j++)
            for (int r = 0; r < t->n; r++)
                if (t->ctx[r] > j0 + j)
                    axpy(t->out[r], p[r][j], vb + j * kd, hd);
        j0 += nk;
    }
    for (int r = 0; r < t->n; r++) {
        float inv = 1.0f / t->sum[r];
        for (int d = 0; d < hd; d++)
            t->out[r][d] *= inv;
    }
}

/* Work item = (tile of consecutive tokens, KV head, chunk of that head's query
 * heads).  A token tile that spans sequences is attended one sequence's run
 * at a time. */
static void cpu_attention(tram_backend *be, void *out, const void *q, const void *k_cache,
                          const void *v_cache, const tram_batch *b, const tram_attn_shape *s)
{
    int hd = s->head_dim, qd = s->n_heads * hd, group = s->n_heads / s->n_kv_heads;
    int hq = TRAM_MIN(group, ATT_ROWS), hchunks = (group + hq - 1) / hq, tt = ATT_ROWS / hq;
    int per_tile = s->n_kv_heads * hchunks, work = (b->num_tokens + tt - 1) / tt * per_tile;
    long keys = 0; /* an upper bound: a token sees at most position + 1 keys */
    for (int i = 0; i < b->num_tokens; i++)
        keys += b->positions[i] + 1;
#pragma omp parallel for num_threads(state(be)->threads) schedule(dynamic, 1) \
    if (keys * 2 * qd >= ATT_PAR_MIN_MACS)
    for (int w = 0; w < work; w++) {
        int kvh = w % per_tile / hchunks, h0 = kvh * group + w % hchunks * hq;
        int h1 = TRAM_MIN(h0 + hq, (kvh + 1) * group);
        int i = w / per_tile * tt, end = TRAM_MIN(i + tt, b->num_tokens);
        while (i < end) {
            int seq = seq_of_token(b, i), run_end = TRAM_MIN(end, b->query_start[seq + 1]);
            att_tile t = {.n = 0, .max_ctx = 0};
            for (; i < run_end; i++)
                for (int h = h0; h < h1; h++, t.n++) {
                    t.q[t.n] = (const float *)q + (size_t)i * qd + h * hd;
                    t.out[t.n] = (float *)out + (size_t)i * qd + h * hd;
                    t.ctx[t.n] = TRAM_MIN(b->positions[i] + 1, b->seq_lens[seq]);
                    t.max_ctx = TRAM_MAX(t.max_ctx, t.ctx[t.n]);
                }
            attend_tile(&t, k_cache, v_cache, b->block_tables + (size_t)seq * b->max_blocks_per_seq, kvh, s);
        }
    }
}

static void silu_mul_rows(tram_backend *be, float *out, const tram_qact *qa, const float *gate_up, int n, int ffn)
{
#pragma omp parallel for num_threads(state(be)->threads) if (n >= PAR_MIN_ROWS)
    for (int i = 0; i < n; i++) {
        const float *g = gate_up + (size_t)i * 2 * ffn, *u = g + ffn;
        float *o = out + (size_t)i * ffn;
        for (int j = 0; j < ffn; j++)
            o[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
        qact_row(qa, i, o);
    }
}

static void cpu_silu_mul(tram_backend *be, void *out, const void *gate_up, int n, int ffn)
{
    silu_mul_rows(be, out, NULL, gate_up, n, ffn);
}

static void cpu_silu_mul_q(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn)
{
    if (!qact_check(be, qa, ffn))
        silu_mul_rows(be, out, qa, gate_up, n, ffn);
}

static void cpu_split_qkv(tram_backend *be, void *q, void *k, void *v, const void *qkv, int n, int qd, int kd)
{
    (void)be;
    for (int i = 0; i < n; i++) {
        const float *src = (const float *)qkv + (size_t)i * (qd + 2 * kd);
        memcpy((float *)q + (size_t)i * qd, src, qd * sizeof(float));
        memcpy((float *)k + (size_t)i * kd, src + qd, kd * sizeof(float));
        memcpy((float *)v + (size_t)i * kd, src + qd + kd, kd * sizeof(float));
    }
}

static void cpu_gather_rows(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows,
                            int dim)
{
    (void)be;
    for (int i = 0; i < n_rows; i++)
        memcpy((float *)out + (size_t)i * dim, (const float *)x + (size_t)rows[i] * dim, dim * sizeof(float));
}

static void cpu_to_host_f32(tram_backend *be, float *dst, const void *src, size_t n)
{
    (void)be;
    memcpy(dst, src, n * sizeof(float));
}

static void cpu_all_reduce(tram_backend *be, void *x, size_t n)
{
    (void)x;
    (void)n;
    if (be->world_size > 1)
        cpu_record(be, "all_reduce across ranks is not implemented on the CPU yet");
}

static int cpu_sync(tram_backend *be, tram_error *err)
{
    cpu_state *s = state(be);
    if (!s->failed)
        return 0;
    s->failed = 0;
    return tram_fail(err, "%s", s->err.msg);
}

static void cpu_destroy(tram_backend *be)
{
    if (!be)
        return;
    cpu_state *s = state(be);
    free(s->xq);
    free(s->xs);
    free(s->xb);
    free(s);
    free(be);
}

int tram_backend_cpu_create(tram_backend **out, int num_threads, tram_error *err)
{
    tram_backend *be = tram_calloc(1, sizeof(*be), err);
    cpu_state *s = be ? tram_calloc(1, sizeof(*s), err) : NULL;
    if (!s) {
        free(be);
        return -1;
    }
    s->threads = num_threads > 0 ? num_threads : omp_get_num_procs();
    s->i8_kernel = tram_i8_kernel_best();
    s->q_kernel = tram_q_kernel_best();
    openblas_set_num_threads(1); /* we thread around it: see cpu_matmul */
    *be = (tram_backend){
        .name = "cpu", .act_bytes = sizeof(float), .rank = 0, .world_size = 1, .impl = s,
        .alloc = cpu_alloc, .free = cpu_free, .upload = cpu_copy, .download = cpu_copy,
        .upload_weight = cpu_upload_weight, .free_weight = cpu_free_weight,
        .upload_weight_blocks = cpu_upload_weight_blocks,
        .embed = cpu_embed, .rmsnorm = cpu_rmsnorm, .add_rmsnorm = cpu_add_rmsnorm,
        .matmul = cpu_matmul, .add_bias = cpu_add_bias, .rope = cpu_rope, .kv_store = cpu_kv_store,
        .attention = cpu_attention, .silu_mul = cpu_silu_mul, .rmsnorm_q = cpu_rmsnorm_q,
        .add_rmsnorm_q = cpu_add_rmsnorm_q, .silu_mul_q = cpu_silu_mul_q, .matmul_q = cpu_matmul_q,
        .split_qkv = cpu_split_qkv, .gather_rows = cpu_gather_rows,
        .to_host_f32 = cpu_to_host_f32, .all_reduce = cpu_all_reduce, .sync = cpu_sync,
        .destroy = cpu_destroy,
    };
    *out = be;
    return 0;
}
