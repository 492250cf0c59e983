/* CPU backend ops against plain reference math written out here: paged
 * attention against contiguous attention, both RoPE styles against each other
 * through llama.cpp's Q/K row permutation, GEMM, norms, SiLU·mul. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "tests/unit/test_util.h"

static tram_backend *be;

static void setup(void) { be = test_cpu_backend(); }

static void teardown(void) { be->destroy(be); }

TestSuite(cpu_backend, .init = setup, .fini = teardown);

static float frand(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return ((*state >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

static float *random_vec(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = frand(&seed);
    return v;
}

static void expect_close(const float *a, const float *b, size_t n, float tol, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])), "%s[%zu]: %f vs %f", what, i, a[i], b[i]);
}

Test(cpu_backend, matmul_matches_naive_loops)
{
    int n = 5, rows = 37, cols = 29;
    float *x = random_vec((size_t)n * cols, 1), *wh = random_vec((size_t)rows * cols, 2);
    float *y = malloc((size_t)n * rows * sizeof(float)), *ref = malloc((size_t)n * rows * sizeof(float));
    tram_weight w;
    be->upload_weight(be, &w, wh, rows, cols, TRAM_W_F32);
    be->matmul(be, y, x, &w, n);
    for (int i = 0; i < n; i++)
        for (int r = 0; r < rows; r++) {
            double acc = 0;
            for (int c = 0; c < cols; c++)
                acc += (double)x[i * cols + c] * wh[r * cols + c];
            ref[i * rows + r] = (float)acc;
        }
    expect_close(y, ref, (size_t)n * rows, 1e-5f, "y");
    be->free_weight(be, &w);
    free(x), free(wh), free(y), free(ref);
}

/* Every path of the f32 product (up to 12 rows streamed together, the
 * sgemm beyond), on a width with a tail past the 8-float vectors; and up to
 * 12 rows give each row the same bits whatever the batch, one row alone
 * included, as a verification of speculative drafts needs. */
Test(cpu_backend, matmul_row_counts_match_naive_and_each_other)
{
    int rows = 45, cols = 83, most = 12;
    float *x = random_vec((size_t)most * cols, 6), *wh = random_vec((size_t)rows * cols, 7);
    float *y = malloc((size_t)most * rows * sizeof(float)), *y2 = malloc((size_t)most * rows * sizeof(float));
    float *ref = malloc((size_t)most * rows * sizeof(float));
    for (int i = 0; i < most; i++)
        for (int r = 0; r < rows; r++) {
            double acc = 0;
            for (int c = 0; c < cols; c++)
                acc += (double)x[i * cols + c] * wh[r * cols + c];
            ref[i * rows + r] = (float)acc;
        }
    tram_weight w;
    be->upload_weight(be, &w, wh, rows, cols, TRAM_W_F32);
    be->matmul(be, y2, x, &w, 2);
    for (int n = 1; n <= most; n++) {
        be->matmul(be, y, x, &w, n);
        expect_close(y, ref, (size_t)n * rows, 1e-5f, "y");
        cr_assert_arr_eq(y, y2, (size_t)(n < 2 ? n : 2) * rows * sizeof(float),
                         "rows 0-1 differ in a batch of %d", n);
    }
    be->free_weight(be, &w);
    free(x), free(wh), free(y), free(y2), free(ref);
}

Test(cpu_backend, add_rmsnorm_and_silu_mul_match_reference)
{
    int n = 3, dim = 64;
    float *res = random_vec((size_t)n * dim, 3), *delta = random_vec((size_t)n * dim, 4);
    float *wh = random_vec(dim, 5), *out = malloc((size_t)n * dim * sizeof(float));
    float *expect_res = malloc((size_t)n * dim * sizeof(float)), *expect = malloc((size_t)n * dim * sizeof(float));
    for (int i = 0; i < n * dim; i++)
        expect_res[i] = res[i] + delta[i];
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int j = 0; j < dim; j++)
            ss += (double)expect_res[i * dim + j] * expect_res[i * dim + j];
        double inv = 1.0 / sqrt(ss / dim + 1e-5);
        for (int j = 0; j < dim; j++)
            expect[i * dim + j] = (float)(expect_res[i * dim + j] * inv * wh[j]);
    }
    tram_weight w;
    be->upload_weight(be, &w, wh, 1, dim, TRAM_W_F32);
    be->add_rmsnorm(be, res, out, delta, &w, n, 1e-5f);
    expect_close(res, expect_res, (size_t)n * dim, 1e-6f, "residual");
    expect_close(out, expect, (size_t)n * dim, 1e-5f, "normed");

    float *gu = random_vec((size_t)n * 2 * dim, 6);
    be->silu_mul(be, out, gu, n, dim);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++) {
            float g = gu[i * 2 * dim + j], u = gu[i * 2 * dim + dim + j];
            expect[i * dim + j] = g / (1.0f + expf(-g)) * u;
        }
    expect_close(out, expect, (size_t)n * dim, 1e-6f, "silu_mul");
    be->free_weight(be, &w);
    free(res), free(delta), free(wh), free(out), free(expect_res), free(expect), free(gu);
}

/* llama.cpp stores each head's rows as (x0, y0, x1, y1, ...) where HF has
 * (x0, x1, ..., y0, y1, ...): interleaved RoPE on the permuted layout must
 * equal the permutation of NeoX RoPE on the HF layout. */
Test(cpu_backend, interleaved_rope_equals_permuted_neox_rope)
{
    tram_attn_shape s = {.n_heads = 4, .n_kv_heads = 2, .head_dim = 16};
    int n = 6, half = s.head_dim / 2, qd = s.n_heads * s.head_dim, kd = s.n_kv_heads * s.head_dim;
    float inv_freq[8];
    for (int i = 0; i < half; i++)
        inv_freq[i] = 1.0f / powf(10000.0f, 2.0f * i / s.head_dim);
    int32_t pos[6] = {0, 1, 7, 100, 2047, 5};
    float *q = random_vec((size_t)n * qd, 7), *k = random_vec((size_t)n * kd, 8);
    float *qp = malloc((size_t)n * qd * sizeof(float)), *kp = malloc((size_t)n * kd * sizeof(float));
    for (int r = 0; r < n * qd / s.head_dim; r++)
        for (int i = 0; i < half; i++) {
            qp[r * s.head_dim + 2 * i] = q[r * s.head_dim + i];
            qp[r * s.head_dim + 2 * i + 1] = q[r * s.head_dim + half + i];
        }
    for (int r = 0; r < n * kd / s.head_dim; r++)
        for (int i = 0; i < half; i++) {
            kp[r * s.head_dim + 2 * i] = k[r * s.head_dim + i];
            kp[r * s.head_dim + 2 * i + 1] = k[r * s.head_dim + half + i];
        }
    be->rope(be, q, k, pos, n, &s, inv_freq, TRAM_ROPE_NEOX);
    be->rope(be, qp, kp, pos, n, &s, inv_freq, TRAM_ROPE_INTERLEAVED);
    for (int r = 0; r < n * qd / s.head_dim; r++)
        for (int i = 0; i < half; i++) {
            cr_assert_float_eq(qp[r * s.head_dim + 2 * i], q[r * s.head_dim + i], 1e-6);
            cr_assert_float_eq(qp[r * s.head_dim + 2 * i + 1], q[r * s.head_dim + half + i], 1e-6);
        }
    for (int r = 0; r < n * kd / s.head_dim; r++)
        for (int i = 0; i < half; i++)
            cr_assert_float_eq(kp[r * s.head_dim + 2 * i + 1], k[r * s.head_dim + half + i], 1e-6);
    /* and position 0 is the identity, so the test is not vacuous elsewhere */
    cr_assert(fabsf(q[3 * qd] - qp[3 * qd]) < 1e-6f);
    free(q), free(k), free(qp), free(kp);
}

/* NeoX RoPE of one head written out, cosf and sinf per pair. */
static void naive_rope_head(float *h, int hd, int pos, const float *inv_freq)
{
    for (int i = 0; i < hd / 2; i++) {
        float angle = (float)pos * inv_freq[i], c = cosf(angle), s = sinf(angle), x0 = h[i], x1 = h[i + hd / 2];
        h[i] = x0 * c - x1 * s;
        h[i + hd / 2] = x0 * s + x1 * c;
    }
}

/* The backend keeps the angles of a call's positions for the next call
 * (every layer of a step has the same): each call below must still give
 * the written-out rotation bit for bit, whether it repeats the last one's
 * positions and frequencies, changes one position, changes the frequencies
 * in place (same address), or has more tokens. */
Test(cpu_backend, rope_angles_follow_each_calls_positions_and_frequencies)
{
    tram_attn_shape s = {.n_heads = 3, .n_kv_heads = 1, .head_dim = 8};
    enum { MAX_N = 5 };
    int qd = s.n_heads * s.head_dim, kd = s.n_kv_heads * s.head_dim;
    float inv_freq[4] = {1.0f, 0.1f, 0.01f, 0.001f};
    int32_t pos[MAX_N] = {3, 9, 40, 41, 700};
    struct { int n, changed_pos, scale_freq; } calls[] = {{4, -1, 0}, {4, -1, 0}, {4, 2, 0}, {4, -1, 1}, {5, -1, 0}};
    for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
        int n = calls[c].n;
        if (calls[c].changed_pos >= 0)
            pos[calls[c].changed_pos] += 17;
        for (int i = 0; calls[c].scale_freq && i < 4; i++)
            inv_freq[i] *= 1.5f;
        float *q = random_vec((size_t)n * qd, 20 + (unsigned)c), *k = random_vec((size_t)n * kd, 40 + (unsigned)c);
        float *qw = malloc((size_t)n * qd * sizeof(float)), *kw = malloc((size_t)n * kd * sizeof(float));
        memcpy(qw, q, (size_t)n * qd * sizeof(float));
        memcpy(kw, k, (size_t)n * kd * sizeof(float));
        for (int i = 0; i < n; i++) {
            for (int h = 0; h < s.n_heads; h++)
                naive_rope_head(qw + (size_t)i * qd + h * s.head_dim, s.head_dim, pos[i], inv_freq);
            naive_rope_head(kw + (size_t)i * kd, s.head_dim, pos[i], inv_freq);
        }
        be->rope(be, q, k, pos, n, &s, inv_freq, TRAM_ROPE_NEOX);
        cr_assert_eq(memcmp(q, qw, (size_t)n * qd * sizeof(float)), 0, "call %zu: q", c);
        cr_assert_eq(memcmp(k, kw, (size_t)n * kd * sizeof(float)), 0, "call %zu: k", c);
        free(q), free(k), free(qw), free(kw);
    }
}

/* Softmax(q·Kᵀ·scale)·V over positions [0, ctx) of contiguous K/V. */
static void naive_attention(float *out, const float *q, const float *K, const float *V, int ctx,
                            const tram_attn_shape *s, int h)
{
    int hd = s->head_dim, kd = s->n_kv_heads * hd, kvh = h / (s->n_heads / s->n_kv_heads);
    double *p = malloc(ctx * sizeof(double)), max = -INFINITY, sum = 0;
    for (int j = 0; j < ctx; j++) {
        double dot = 0;
        for (int d = 0; d < hd; d++)
            dot += (double)q[d] * K[(size_t)j * kd + kvh * hd + d];
        p[j] = dot * s->scale;
        max = fmax(max, p[j]);
    }
    for (int j = 0; j < ctx; j++)
        sum += (p[j] = exp(p[j] - max));
    for (int d = 0; d < hd; d++) {
        double acc = 0;
        for (int j = 0; j < ctx; j++)
            acc += p[j] * V[(size_t)j * kd + kvh * hd + d];
        out[d] = (float)(acc / sum);
    }
    free(p);
}

/* What a quantized cache holds at slots[0 .. n) (kernels/kv_format.h's
 * layout, read here independently of attention.c), as f32 rows. */
static float *dequantized_rows(const uint8_t *cache, const int32_t *slots, int n, const tram_attn_shape *s)
{
    int hd = s->head_dim, kd = s->n_kv_heads * hd;
    size_t sb = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, hd, sizeof(float));
    float *out = malloc((size_t)n * kd * sizeof(float));
    for (int j = 0; j < n; j++) {
        const uint8_t *slot = cache + (size_t)slots[j] * sb;
        const float *scales = (const float *)(slot + tram_kv_scales_offset(s->n_kv_heads, hd));
        for (int d = 0; d < kd; d++)
            out[(size_t)j * kd + d] = scales[d / hd] * (s->kv_dtype == TRAM_KV_INT8 ? (float)(int8_t)slot[d]
                                                                                   : tram_fp8_e4m3_decode(slot[d]));
    }
    return out;
}

enum { SEQS = 3, MAXB = 64, NBLOCKS = SEQS * MAXB, MAXT = 512 };

/* Three sequences' K/V written by kv_store over scattered blocks. */
typedef struct {
    tram_attn_shape s;
    int seq_len[SEQS];
    int32_t tables[SEQS * MAXB];
    uint8_t *kc, *vc;
    float *K[SEQS], *V[SEQS];   /* what was stored, contiguous */
    float *Kq[SEQS], *Vq[SEQS]; /* what the cache holds (K and V themselves for f32) */
} paged_cache;

static void paged_cache_fill(paged_cache *c, const tram_attn_shape *sh, const int seq_len[SEQS])
{
    c->s = *sh;
    c->s.scale = 1.0f / sqrtf((float)c->s.head_dim);
    int kd = c->s.n_kv_heads * c->s.head_dim, bs = c->s.block_size;
    for (int i = 0; i < SEQS * MAXB; i++)
        c->tables[i] = (i * 17 + 5) % NBLOCKS; /* a permutation of the blocks */
    size_t sb = tram_kv_slot_bytes(c->s.kv_dtype, c->s.n_kv_heads, c->s.head_dim, sizeof(float));
    c->kc = calloc((size_t)NBLOCKS * bs, sb), c->vc = calloc((size_t)NBLOCKS * bs, sb);
    int32_t *slots = malloc(MAXB * bs * sizeof(int32_t));
    for (int q = 0; q < SEQS; q++) {
        cr_assert(seq_len[q] <= MAXB * bs);
        c->seq_len[q] = seq_len[q];
        c->K[q] = random_vec((size_t)seq_len[q] * kd, 10 + q);
        c->V[q] = random_vec((size_t)seq_len[q] * kd, 20 + q);
        for (int j = 0; j < seq_len[q]; j++)
            slots[j] = c->tables[q * MAXB + j / bs] * bs + j % bs;
        be->kv_store(be, c->kc, c->vc, c->K[q], c->V[q], slots, seq_len[q], &c->s);
        int quantized = c->s.kv_dtype != TRAM_KV_AUTO;
        c->Kq[q] = quantized ? dequantized_rows(c->kc, slots, seq_len[q], &c->s) : c->K[q];
        c->Vq[q] = quantized ? dequantized_rows(c->vc, slots, seq_len[q], &c->s) : c->V[q];
    }
    free(slots);
}

static void paged_cache_free(paged_cache *c)
{
    for (int q = 0; q < SEQS; q++) {
        if (c->Kq[q] != c->K[q])
            free(c->Kq[q]), free(c->Vq[q]);
        free(c->K[q]), free(c->V[q]);
    }
    free(c->kc), free(c->vc);
}

/* The batch of each sequence's last n_new tokens (positions and qstart are
 * its arrays, MAXT and SEQS + 1 long). */
static tram_batch paged_batch(const paged_cache *c, const int n_new[SEQS], int32_t *positions, int32_t *qstart)
{
    int t = 0;
    qstart[0] = 0;
    for (int q = 0; q < SEQS; q++) {
        cr_assert(t + n_new[q] <= MAXT);
        for (int i = 0; i < n_new[q]; i++)
            positions[t++] = c->seq_len[q] - n_new[q] + i;
        qstart[q + 1] = t;
    }
    return (tram_batch){.num_tokens = t, .num_seqs = SEQS, .positions = positions, .query_start = qstart,
                        .seq_lens = c->seq_len, .block_tables = c->tables, .max_blocks_per_seq = MAXB};
}

/* Three sequences of the given lengths, each with its last n_new tokens in
 * the batch, against naive attention on contiguous K/V: on what the cache
 * holds within 1e-6, and on the K/V before quantization within quant_tol (0
 * for an f32 cache). */
static void check_paged_attention_kv(const tram_attn_shape *sh, const int seq_len[SEQS], const int n_new[SEQS],
                                     float quant_tol)
{
    paged_cache c;
    paged_cache_fill(&c, sh, seq_len);
    int32_t positions[MAXT], qstart[SEQS + 1];
    tram_batch b = paged_batch(&c, n_new, positions, qstart);
    int t = b.num_tokens, qd = c.s.n_heads * c.s.head_dim;
    float *qv = random_vec((size_t)t * qd, 30), *out = malloc((size_t)t * qd * sizeof(float));
    float *ref = malloc((size_t)t * qd * sizeof(float)), *exact = malloc((size_t)t * qd * sizeof(float));
    be->attention(be, out, qv, c.kc, c.vc, &b, &c.s);
    cr_assert_eq(be->sync(be, &(tram_error){{0}}), 0);
    for (int q = 0, i = 0; q < SEQS; q++)
        for (; i < qstart[q + 1]; i++)
            for (int h = 0; h < c.s.n_heads; h++) {
                size_t at = (size_t)i * qd + h * c.s.head_dim;
                naive_attention(ref + at, qv + at, c.Kq[q], c.Vq[q], positions[i] + 1, &c.s, h);
                naive_attention(exact + at, qv + at, c.K[q], c.V[q], positions[i] + 1, &c.s, h);
            }
    expect_close(out, ref, (size_t)t * qd, 1e-6f, "attention on the cache's values");
    if (quant_tol > 0)
        expect_close(out, exact, (size_t)t * qd, quant_tol, "attention against f32 K/V");
    paged_cache_free(&c);
    free(qv), free(out), free(ref), free(exact);
}

static void check_paged_attention(const tram_attn_shape *sh, const int seq_len[SEQS], const int n_new[SEQS])
{
    check_paged_attention_kv(sh, seq_len, n_new, 0);
}

Test(cpu_backend, paged_attention_matches_contiguous_attention)
{
    /* A decode token with long context, a prefill chunk that starts
     * mid-sequence, and a fresh prompt, over blocks of 4. */
    tram_attn_shape s = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 8, .block_size = 4};
    check_paged_attention(&s, (int[]){45, 30, 9}, (int[]){1, 11, 9});
}

Test(cpu_backend, paged_attention_with_large_blocks_and_long_prefill)
{
    /* Blocks longer than the kernel's key chunk, prompts longer than its
     * query tile, and GQA groups that fill the tile unevenly (7 heads / 1). */
    tram_attn_shape s = {.n_heads = 7, .n_kv_heads = 1, .head_dim = 64, .block_size = 80};
    check_paged_attention(&s, (int[]){300, 170, 61}, (int[]){2, 150, 61});
}

/* The quantized caches (kernels/kv_format.h) through the same checks: the
 * kernel reads exactly what kv_store wrote, and lands within the format's
 * error of f32 attention (K/V uniform in [-1, 1]; int8 rounds each value by
 * at most half of max/127, E4M3 by 1/16 of the value). */
Test(cpu_backend, paged_attention_over_an_int8_cache)
{
    tram_attn_shape s = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 8, .block_size = 4, .kv_dtype = TRAM_KV_INT8};
    check_paged_attention_kv(&s, (int[]){45, 30, 9}, (int[]){1, 11, 9}, 1e-2f);
    tram_attn_shape big = {.n_heads = 7, .n_kv_heads = 1, .head_dim = 64, .block_size = 80, .kv_dtype = TRAM_KV_INT8};
    check_paged_attention_kv(&big, (int[]){300, 170, 61}, (int[]){2, 150, 61}, 1e-2f);
}

Test(cpu_backend, paged_attention_over_an_fp8_cache)
{
    tram_attn_shape s = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 8, .block_size = 4, .kv_dtype = TRAM_KV_FP8};
    check_paged_attention_kv(&s, (int[]){45, 30, 9}, (int[]){1, 11, 9}, 5e-2f);
    tram_attn_shape big = {.n_heads = 7, .n_kv_heads = 1, .head_dim = 64, .block_size = 80, .kv_dtype = TRAM_KV_FP8};
    check_paged_attention_kv(&big, (int[]){300, 170, 61}, (int[]){2, 150, 61}, 5e-2f);
}

/* One token per sequence (a decode step): its keys' splits spread over the
 * pool and folded in order (kernels/cpu/attention.c), at contexts of one
 * split, of several and of a part of one; a head width the vector kernel
 * leaves to the reference; the quantized caches. */
Test(cpu_backend, paged_attention_of_a_decode_step)
{
    int lens[SEQS] = {300, 45, 129}, ones[SEQS] = {1, 1, 1};
    tram_attn_shape s = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 8, .block_size = 8};
    check_paged_attention(&s, lens, ones);
    tram_attn_shape big = {.n_heads = 7, .n_kv_heads = 1, .head_dim = 64, .block_size = 80};
    check_paged_attention(&big, (int[]){1000, 170, 61}, ones);
    tram_attn_shape odd = {.n_heads = 4, .n_kv_heads = 2, .head_dim = 12, .block_size = 16};
    check_paged_attention(&odd, (int[]){257, 3, 128}, ones);
    s.kv_dtype = TRAM_KV_INT8;
    check_paged_attention_kv(&s, lens, ones, 1e-2f);
    s.kv_dtype = TRAM_KV_FP8;
    check_paged_attention_kv(&s, lens, ones, 5e-2f);
}

/* Each sequence's last row of out (batch b) against its last row of want
 * (batch w), bit for bit. */
static void expect_same_rows(const float *out, const tram_batch *b, const float *want, const tram_batch *w,
                             int qd, const char *what)
{
    for (int q = 0; q < SEQS; q++) {
        int i = b->query_start[q + 1] - 1, k = w->query_start[q + 1] - 1;
        cr_assert(!memcmp(out + (size_t)i * qd, want + (size_t)k * qd, qd * sizeof(float)),
                  "%s: sequence %d's last token differs", what, q);
    }
}

/* A row's bits depend on its query, its keys and its context alone: each
 * sequence's last token in a decode step (its splits spread over the pool)
 * equals the same token in a batch where the sequences prefill (each tile
 * folding its own splits), and on a one-thread backend. */
Test(cpu_backend, attention_rows_do_not_depend_on_the_batch_or_the_threads)
{
    paged_cache c;
    tram_attn_shape sh = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 64, .block_size = 16};
    paged_cache_fill(&c, &sh, (int[]){700, 130, 129});
    int32_t pos_d[MAXT], qs_d[SEQS + 1], pos_p[MAXT], qs_p[SEQS + 1];
    tram_batch dec = paged_batch(&c, (int[]){1, 1, 1}, pos_d, qs_d);
    tram_batch pre = paged_batch(&c, (int[]){40, 1, 129}, pos_p, qs_p);
    int qd = sh.n_heads * sh.head_dim;
    float *q_pre = random_vec((size_t)pre.num_tokens * qd, 31), *q_dec = malloc((size_t)SEQS * qd * sizeof(float));
    for (int q = 0; q < SEQS; q++)
        memcpy(q_dec + (size_t)q * qd, q_pre + (size_t)(qs_p[q + 1] - 1) * qd, qd * sizeof(float));
    float *out_dec = malloc((size_t)SEQS * qd * sizeof(float)), *out_one = malloc((size_t)SEQS * qd * sizeof(float));
    float *out_pre = malloc((size_t)pre.num_tokens * qd * sizeof(float));
    be->attention(be, out_dec, q_dec, c.kc, c.vc, &dec, &c.s);
    be->attention(be, out_pre, q_pre, c.kc, c.vc, &pre, &c.s);
    tram_backend *one;
    cr_assert(!tram_backend_cpu_create(&one, 1, &(tram_error){{0}}));
    one->attention(one, out_one, q_dec, c.kc, c.vc, &dec, &c.s);
    cr_assert_eq(be->sync(be, &(tram_error){{0}}) | one->sync(one, &(tram_error){{0}}), 0);
    expect_same_rows(out_pre, &pre, out_dec, &dec, qd, "a prefill batch against a decode step");
    expect_same_rows(out_one, &dec, out_dec, &dec, qd, "one thread against two");
    one->destroy(one);
    paged_cache_free(&c);
    free(q_pre), free(q_dec), free(out_dec), free(out_one), free(out_pre);
}
