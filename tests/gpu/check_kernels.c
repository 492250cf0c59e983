/* check_kernels.c — every op of the CUDA backend against the CPU backend (the
 * reference), on fresh random inputs of several shapes.
 *
 * Inputs are rounded to bf16 once and given to both backends, so the error
 * measured is the kernels' own (bf16 outputs, f32 accumulation): relative
 * error ‖gpu − cpu‖ / ‖cpu‖ must stay under 1e-2 (bf16 keeps 8 bits of
 * mantissa, about 4e-3 per rounding), no NaN.  Outputs are poisoned (all
 * bits set: NaN in f32 and in bf16) before each run, so an element a kernel
 * forgets to write fails the check.
 * Prints one line per case; exit 0 when all pass, 1 on a failure, 2 when no
 * GPU is usable.  Usage: check_kernels [--cuda-kernels SPEC] [--small] [seed]:
 * SPEC (kernels/variants.h) chooses the GPU side's kernel variants; --small
 * keeps the SmolLM2 and Llama head shapes and the smallest matrices, for a
 * pass under compute-sanitizer (tests/gpu/run.sh), which runs kernels ~100x
 * slower. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_sampling.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cuda_int8.h"
#include "kernels/fp8_format.h"
#include "kernels/kv_format.h"
#include "tests/gpu/kernels_arg.h"

#define TOL 1e-2

static tram_backend *cpu, *gpu;
static int failures, cases;

/* ---------------------------------------------------------------- host helpers */

static float frand(void) { return (float)rand() / RAND_MAX * 2.0f - 1.0f; }

static uint16_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);  /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static float bf16_round(float f)
{
    uint32_t u = (uint32_t)bf16_bits(f) << 16;
    memcpy(&f, &u, 4);
    return f;
}

static float *random_vec(size_t n, float scale)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = bf16_round(frand() * scale);
    return v;
}

static void die_if(int bad, const char *what)
{
    if (bad) {
        fprintf(stderr, "check_kernels: %s\n", what);
        exit(1);
    }
}

static void sync_both(const char *op)
{
    tram_error err = {{0}};
    if (cpu->sync(cpu, &err) || gpu->sync(gpu, &err)) {
        fprintf(stderr, "check_kernels: %s: %s\n", op, err.msg);
        exit(1);
    }
}

/* ---------------------------------------------------------------- paired buffers */

typedef struct {
    void *c, *g;  /* f32 on the CPU backend, bf16 on CUDA */
    size_t n;
} pair;

static pair pair_new(size_t n)
{
    pair p = {cpu->alloc(cpu, n * 4), gpu->alloc(gpu, n * 2), n};
    die_if(!p.c || !p.g, "out of memory");
    return p;
}

static void pair_set(pair p, const float *host)
{
    uint16_t *b = malloc(p.n * 2);
    for (size_t i = 0; i < p.n; i++)
        b[i] = bf16_bits(host[i]);
    cpu->upload(cpu, p.c, host, p.n * 4);
    gpu->upload(gpu, p.g, b, p.n * 2);
    sync_both("upload");
    free(b);
}

static void pair_random(pair p, float scale)
{
    float *v = random_vec(p.n, scale);
    pair_set(p, v);
    free(v);
}

static void pair_poison(pair p)
{
    void *ff = malloc(p.n * 4);
    memset(ff, 0xff, p.n * 4);
    cpu->upload(cpu, p.c, ff, p.n * 4);
    gpu->upload(gpu, p.g, ff, p.n * 2);
    sync_both("poison");
    free(ff);
}

static void pair_free(pair p)
{
    cpu->free(cpu, p.c);
    gpu->free(gpu, p.g);
}

/* Compares the first n elements; prints one line and counts a failure. */
static double pair_check(pair p, size_t n, const char *op, const char *shape)
{
    float *c = malloc(n * 4), *g = malloc(n * 4);
    cpu->to_host_f32(cpu, c, p.c, n);
    gpu->to_host_f32(gpu, g, p.g, n);
    sync_both(op);
    double diff = 0, ref = 0;
    size_t nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(g[i]) || isnan(c[i])) {
            nan++;
            continue;
        }
        diff += ((double)g[i] - c[i]) * ((double)g[i] - c[i]);
        ref += (double)c[i] * c[i];
    }
    double rel = ref > 0 ? sqrt(diff / ref) : sqrt(diff);
    int ok = !nan && rel < TOL;
    printf("%-6s %-14s %-36s rel %.2e  nan %zu\n", ok ? "PASS" : "FAIL", op, shape, rel, nan);
    failures += !ok;
    cases++;
    free(c);
    free(g);
    return rel;
}

typedef struct {
    tram_weight c, g;
} wpair;

static wpair wpair_new(int rows, int cols, float scale)
{
    float *v = random_vec((size_t)rows * cols, scale);
    wpair w;
    cpu->upload_weight(cpu, &w.c, v, rows, cols, TRAM_W_F32);
    gpu->upload_weight(gpu, &w.g, v, rows, cols, rows == 1 ? TRAM_W_F32 : TRAM_W_BF16);
    sync_both("upload_weight");
    free(v);
    return w;
}

static void wpair_free(wpair *w)
{
    cpu->free_weight(cpu, &w->c);
    gpu->free_weight(gpu, &w->g);
}

typedef struct {
    int32_t *c, *g;
} ipair;

static ipair ipair_new(const int32_t *host, size_t n)
{
    ipair p = {cpu->alloc(cpu, n * 4 + 4), gpu->alloc(gpu, n * 4 + 4)};
    die_if(!p.c || !p.g, "out of memory");
    cpu->upload(cpu, p.c, host, n * 4);
    gpu->upload(gpu, p.g, host, n * 4);
    sync_both("upload ids");
    return p;
}

/* n ids drawn uniformly from [0, below). */
static ipair ipair_random(size_t n, int below)
{
    int32_t *ids = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        ids[i] = rand() % below;
    ipair p = ipair_new(ids, n);
    free(ids);
    return p;
}

static void ipair_free(ipair p)
{
    cpu->free(cpu, p.c);
    gpu->free(gpu, p.g);
}

/* ---------------------------------------------------------------- element-wise ops */

static void check_embed(int vocab, int dim, int n)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "vocab %d dim %d n %d", vocab, dim, n);
    wpair t = wpair_new(vocab, dim, 1.0f);
    ipair id = ipair_random(n, vocab);
    pair x = pair_new((size_t)n * dim);
    pair_poison(x);
    cpu->embed(cpu, x.c, &t.c, id.c, n);
    gpu->embed(gpu, x.g, &t.g, id.g, n);
    pair_check(x, x.n, "embed", shape);
    pair_free(x);
    ipair_free(id);
    wpair_free(&t);
}

static void check_norms(int dim, int n)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "dim %d n %d", dim, n);
    wpair w = wpair_new(1, dim, 1.0f);
    pair x = pair_new((size_t)n * dim), out = pair_new(x.n), delta = pair_new(x.n);
    pair_random(x, 2.0f);
    pair_random(delta, 1.0f);
    pair_poison(out);
    cpu->rmsnorm(cpu, out.c, x.c, &w.c, n, 1e-5f);
    gpu->rmsnorm(gpu, out.g, x.g, &w.g, n, 1e-5f);
    pair_check(out, out.n, "rmsnorm", shape);
    pair_poison(out);
    cpu->add_rmsnorm(cpu, x.c, out.c, delta.c, &w.c, n, 1e-5f);
    gpu->add_rmsnorm(gpu, x.g, out.g, delta.g, &w.g, n, 1e-5f);
    pair_check(out, out.n, "add_rmsnorm", shape);
    pair_check(x, x.n, "add_rmsnorm.res", shape);
    wpair bias = wpair_new(1, dim, 1.0f);
    cpu->add_bias(cpu, x.c, &bias.c, n);
    gpu->add_bias(gpu, x.g, &bias.g, n);
    pair_check(x, x.n, "add_bias", shape);
    pair_free(x), pair_free(out), pair_free(delta);
    wpair_free(&w), wpair_free(&bias);
}

static void check_matmul(int n, int rows, int cols)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d rows %d cols %d", n, rows, cols);
    wpair w = wpair_new(rows, cols, 1.0f / sqrtf((float)cols));
    pair x = pair_new((size_t)n * cols), y = pair_new((size_t)n * rows);
    pair_random(x, 1.0f);
    pair_poison(y);
    cpu->matmul(cpu, y.c, x.c, &w.c, n);
    gpu->matmul(gpu, y.g, x.g, &w.g, n);
    pair_check(y, y.n, "matmul", shape);
    pair_free(x), pair_free(y);
    wpair_free(&w);
}

/* ---------------------------------------------------------------- int8 (W8A8) */

static void int8_result(int ok, const char *op, const char *shape, size_t bad)
{
    printf("%-6s %-14s %-36s mismatches %zu\n", ok ? "PASS" : "FAIL", op, shape, bad);
    failures += !ok;
    cases++;
}

/* Weights whose row maxima are ±127 quantize to themselves (scale 1), so
 * both backends hold exactly these int8 values. */
static float *int8_valued(int rows, int cols)
{
    float *w = malloc((size_t)rows * cols * sizeof(float));
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        w[i] = (float)(rand() % 255 - 127);
    for (int r = 0; r < rows; r++)
        w[(size_t)r * cols + rand() % cols] = rand() % 2 ? 127.0f : -127.0f;
    return w;
}

/* int32 sums equal to the CPU kernel's, bit for bit. */
static void check_int8_products(int n, int rows, int cols, const char *shape)
{
    float *wv = int8_valued(rows, cols);
    tram_weight wc, wg;
    cpu->upload_weight(cpu, &wc, wv, rows, cols, TRAM_W_INT8);
    gpu->upload_weight(gpu, &wg, wv, rows, cols, TRAM_W_INT8);
    sync_both("upload_weight int8");
    const tram_i8_matrix *m = wc.data;
    int8_t *xq = malloc((size_t)n * cols), *xp = calloc((size_t)n * m->kp, 1);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < cols; k++)
            xp[(size_t)i * m->kp + k] = xq[(size_t)i * cols + k] = (int8_t)(rand() % 255 - 127);
    int32_t *ac = malloc((size_t)n * rows * 4), *ag = malloc((size_t)n * rows * 4);
    tram_i8_gemm_i32(tram_i8_kernel_best(), ac, xp, n, m, NULL);
    tram_error err = {{0}};
    die_if(tram_cuda_int8_products(gpu, ag, xq, n, &wg, &err), err.msg);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)n * rows; i++)
        bad += ac[i] != ag[i];
    int8_result(!bad, "int8 int32", shape, bad);
    free(wv), free(xq), free(xp), free(ac), free(ag);
    cpu->free_weight(cpu, &wc);
    gpu->free_weight(gpu, &wg);
}

/* Per-token activation quantization equal to tram_i8_quantize, bit for bit. */
static void check_int8_quantize(int n, int cols, const char *shape)
{
    float *x = random_vec((size_t)n * cols, 3.0f);
    pair p = pair_new((size_t)n * cols);
    pair_set(p, x);
    int8_t *qc = malloc((size_t)n * cols), *qg = malloc((size_t)n * cols);
    float *sc = malloc(n * sizeof(float)), *sg = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++)
        sc[i] = tram_i8_quantize(x + (size_t)i * cols, cols, cols, qc + (size_t)i * cols);
    tram_error err = {{0}};
    die_if(tram_cuda_int8_quantize(gpu, qg, sg, p.g, n, cols, &err), err.msg);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)n * cols; i++)
        bad += qc[i] != qg[i];
    for (int i = 0; i < n; i++)
        bad += memcmp(&sc[i], &sg[i], sizeof(float)) != 0;
    int8_result(!bad, "int8 quantize", shape, bad);
    free(x), free(qc), free(qg), free(sc), free(sg);
    pair_free(p);
}

/* The whole W8A8 matmul (quantize, int32 GEMM, dequant into bf16) close to
 * the CPU's f32 output: the same int32 sums, rounded once more. */
static void check_int8_matmul(int n, int rows, int cols)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d rows %d cols %d", n, rows, cols);
    float *wv = random_vec((size_t)rows * cols, 1.0f / sqrtf((float)cols));
    tram_weight wc, wg;
    cpu->upload_weight(cpu, &wc, wv, rows, cols, TRAM_W_INT8);
    gpu->upload_weight(gpu, &wg, wv, rows, cols, TRAM_W_INT8);
    sync_both("upload_weight int8");
    pair x = pair_new((size_t)n * cols), y = pair_new((size_t)n * rows);
    pair_random(x, 1.0f);
    pair_poison(y);
    cpu->matmul(cpu, y.c, x.c, &wc, n);
    gpu->matmul(gpu, y.g, x.g, &wg, n);
    pair_check(y, y.n, "int8 matmul", shape);
    check_int8_products(n, rows, cols, shape);
    check_int8_quantize(n, cols, shape);
    pair_free(x), pair_free(y);
    free(wv);
    cpu->free_weight(cpu, &wc);
    gpu->free_weight(gpu, &wg);
}

/* ---------------------------------------------------------------- FP8 matmul */

/* An FP8 weight on both backends: quantized from random f32 rows by the row
 * quantizer both share (kernels/fp8_format.h), or, from_codes, random E4M3
 * codes with one scale for the tensor as a per-tensor checkpoint stores
 * them (upload_weight_fp8). */
static void fp8_weights(tram_weight *wc, tram_weight *wg, int rows, int cols, int from_codes)
{
    if (!from_codes) {
        float *wv = random_vec((size_t)rows * cols, 1.0f / sqrtf((float)cols));
        cpu->upload_weight(cpu, wc, wv, rows, cols, TRAM_W_FP8);
        gpu->upload_weight(gpu, wg, wv, rows, cols, TRAM_W_FP8);
        free(wv);
    } else {
        uint8_t *codes = malloc((size_t)rows * cols);
        float *scales = malloc(rows * sizeof(float));
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            codes[i] = (uint8_t)(rand() & 0xff);
            codes[i] ^= tram_fp8_is_nan(codes[i]);
        }
        for (int r = 0; r < rows; r++)
            scales[r] = 1.0f / (64.0f * sqrtf((float)cols));
        cpu->upload_weight_fp8(cpu, wc, codes, scales, rows, cols);
        gpu->upload_weight_fp8(gpu, wg, codes, scales, rows, cols);
        free(codes), free(scales);
    }
    sync_both("upload_weight fp8");
}

/* The FP8 W8A8 matmul on the GPU (cuBLASLt's E4M3 GEMM, f32 sums, the
 * epilogue into bf16) against the CPU's emulation of it (kernels/cpu/fp8.c)
 * on the same bf16 inputs: the weights' codes and scales are the same, the
 * activations are quantized per token alike (the saturating conversion is
 * tram_fp8_e4m3_encode), so only the order of the f32 sums and the bf16
 * output differ.  act_max > 0 clamps the activation scales on both
 * (FBGEMM's activation_scale_ub), saturating the larger values. */
static void check_fp8_matmul(int n, int rows, int cols, int from_codes, float act_max)
{
    char shape[64], op[32];
    snprintf(shape, sizeof(shape), "n %d rows %d cols %d", n, rows, cols);
    snprintf(op, sizeof(op), "fp8 %s%s", from_codes ? "codes" : "matmul", act_max > 0 ? " ub" : "");
    tram_weight wc, wg;
    fp8_weights(&wc, &wg, rows, cols, from_codes);
    wc.act_max = wg.act_max = act_max;
    float *xv = random_vec((size_t)n * cols, 1.0f);
    for (size_t i = 0; i < (size_t)n * cols; i++) { /* the bf16 values, so that both quantize the same x */
        uint32_t u = (uint32_t)bf16_bits(xv[i]) << 16;
        memcpy(&xv[i], &u, sizeof(u));
    }
    pair x = pair_new((size_t)n * cols), y = pair_new((size_t)n * rows);
    pair_set(x, xv);
    pair_poison(y);
    cpu->matmul(cpu, y.c, x.c, &wc, n);
    gpu->matmul(gpu, y.g, x.g, &wg, n);
    pair_check(y, y.n, op, shape);
    pair_free(x), pair_free(y);
    free(xv);
    cpu->free_weight(cpu, &wc);
    gpu->free_weight(gpu, &wg);
}

/* ---------------------------------------------------------------- fused W8A8 activation quantization */

typedef struct {
    tram_qact c, g;  /* the same shape on each backend */
} qpair;

static qpair qpair_new(int n, int cols)
{
    qpair p;
    p.c = p.g = (tram_qact){.cols = cols, .kp = tram_qact_stride(cols)};
    p.c.q = cpu->alloc(cpu, (size_t)n * p.c.kp), p.c.scales = cpu->alloc(cpu, n * sizeof(float));
    p.g.q = gpu->alloc(gpu, (size_t)n * p.g.kp), p.g.scales = gpu->alloc(gpu, n * sizeof(float));
    die_if(!p.c.q || !p.c.scales || !p.g.q || !p.g.scales, "out of memory");
    return p;
}

static void qpair_free(qpair *p)
{
    cpu->free(cpu, p->c.q), cpu->free(cpu, p->c.scales);
    gpu->free(gpu, p->g.q), gpu->free(gpu, p->g.scales);
}

/* The GPU's int8 copy is exactly tram_i8_quantize of the bf16 output the same
 * kernel wrote (what the unfused int8 matmul would have quantized). */
static void check_qact_copy(const tram_qact *qa, const void *out_g, int n, const char *op, const char *shape)
{
    int cols = qa->cols, kp = qa->kp;
    float *out = malloc((size_t)n * cols * 4), *sg = malloc(n * sizeof(float));
    int8_t *qg = malloc((size_t)n * kp), *qc = malloc(kp);
    gpu->to_host_f32(gpu, out, out_g, (size_t)n * cols);
    gpu->download(gpu, qg, qa->q, (size_t)n * kp);
    gpu->download(gpu, sg, qa->scales, n * sizeof(float));
    sync_both(op);
    size_t bad = 0;
    for (int i = 0; i < n; i++) {
        float sc = tram_i8_quantize(out + (size_t)i * cols, cols, kp, qc);
        bad += memcmp(&sc, &sg[i], sizeof(float)) != 0;
        for (int j = 0; j < kp; j++)
            bad += qc[j] != qg[(size_t)i * kp + j];
    }
    int8_result(!bad, op, shape, bad);
    free(out), free(sg), free(qg), free(qc);
}

static void int8_weight_pair(tram_weight *wc, tram_weight *wg, int rows, int cols)
{
    float *wv = random_vec((size_t)rows * cols, 1.0f / sqrtf((float)cols));
    cpu->upload_weight(cpu, wc, wv, rows, cols, TRAM_W_INT8);
    gpu->upload_weight(gpu, wg, wv, rows, cols, TRAM_W_INT8);
    sync_both("upload_weight int8");
    free(wv);
}

/* rmsnorm_q, add_rmsnorm_q and silu_mul_q against the CPU's, each followed
 * by matmul_q on its int8 copy, as a W8A8 layer runs them. */
static void check_int8_fused(int n, int dim, int ffn)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d dim %d ffn %d", n, dim, ffn);
    wpair nw = wpair_new(1, dim, 1.0f);
    tram_weight up_c, up_g, down_c, down_g;
    int8_weight_pair(&up_c, &up_g, ffn, dim);
    int8_weight_pair(&down_c, &down_g, dim, ffn);
    qpair qd = qpair_new(n, dim), qf = qpair_new(n, ffn);
    pair x = pair_new((size_t)n * dim), out = pair_new(x.n), delta = pair_new(x.n);
    pair gu = pair_new((size_t)n * 2 * ffn), hid = pair_new((size_t)n * ffn), y = pair_new((size_t)n * ffn);
    pair_random(x, 2.0f), pair_random(delta, 1.0f), pair_random(gu, 4.0f);
    cpu->rmsnorm_q(cpu, out.c, &qd.c, x.c, &nw.c, n, 1e-5f);
    gpu->rmsnorm_q(gpu, out.g, &qd.g, x.g, &nw.g, n, 1e-5f);
    pair_check(out, out.n, "rmsnorm_q", shape);
    check_qact_copy(&qd.g, out.g, n, "rmsnorm_q int8", shape);
    cpu->matmul_q(cpu, y.c, &qd.c, &up_c, n);
    gpu->matmul_q(gpu, y.g, &qd.g, &up_g, n);
    pair_check(y, y.n, "matmul_q", shape);
    cpu->add_rmsnorm_q(cpu, x.c, out.c, &qd.c, delta.c, &nw.c, n, 1e-5f);
    gpu->add_rmsnorm_q(gpu, x.g, out.g, &qd.g, delta.g, &nw.g, n, 1e-5f);
    pair_check(out, out.n, "add_rmsnorm_q", shape);
    pair_check(x, x.n, "add_rmsnorm_q.res", shape);
    check_qact_copy(&qd.g, out.g, n, "add_rms_q int8", shape);
    cpu->silu_mul_q(cpu, hid.c, &qf.c, gu.c, n, ffn);
    gpu->silu_mul_q(gpu, hid.g, &qf.g, gu.g, n, ffn);
    pair_check(hid, hid.n, "silu_mul_q", shape);
    check_qact_copy(&qf.g, hid.g, n, "silu_mul_q int8", shape);
    cpu->matmul_q(cpu, out.c, &qf.c, &down_c, n);
    gpu->matmul_q(gpu, out.g, &qf.g, &down_g, n);
    pair_check(out, out.n, "matmul_q down", shape);
    pair_free(x), pair_free(out), pair_free(delta), pair_free(gu), pair_free(hid), pair_free(y);
    qpair_free(&qd), qpair_free(&qf);
    wpair_free(&nw);
    cpu->free_weight(cpu, &up_c), cpu->free_weight(cpu, &down_c);
    gpu->free_weight(gpu, &up_g), gpu->free_weight(gpu, &down_g);
}

/* Qwen3's q/k norms: every q and k head of the fused rows normalized in
 * place, v left as it was. */
static void check_head_rmsnorm(int n, const tram_attn_shape *s)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d heads %d/%d hd %d", n, s->n_heads, s->n_kv_heads, s->head_dim);
    wpair qn = wpair_new(1, s->head_dim, 1.0f), kn = wpair_new(1, s->head_dim, 1.0f);
    pair qkv = pair_new((size_t)n * (s->n_heads + 2 * s->n_kv_heads) * s->head_dim);
    pair_random(qkv, 2.0f);
    cpu->head_rmsnorm(cpu, qkv.c, &qn.c, &kn.c, n, s, 1e-6f);
    gpu->head_rmsnorm(gpu, qkv.g, &qn.g, &kn.g, n, s, 1e-6f);
    pair_check(qkv, qkv.n, "head_rmsnorm", shape);
    pair_free(qkv);
    wpair_free(&qn), wpair_free(&kn);
}

/* The fused q/k/v product's rows split into q, k and v, bit for bit. */
static void check_split_qkv(int n, int qd, int kd)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d qd %d kd %d", n, qd, kd);
    pair qkv = pair_new((size_t)n * (qd + 2 * kd)), q = pair_new((size_t)n * qd), k = pair_new((size_t)n * kd),
         v = pair_new((size_t)n * kd);
    pair_random(qkv, 1.0f);
    pair_poison(q), pair_poison(k), pair_poison(v);
    cpu->split_qkv(cpu, q.c, k.c, v.c, qkv.c, n, qd, kd);
    gpu->split_qkv(gpu, q.g, k.g, v.g, qkv.g, n, qd, kd);
    pair_check(q, q.n, "split_qkv.q", shape);
    pair_check(k, k.n, "split_qkv.k", shape);
    pair_check(v, v.n, "split_qkv.v", shape);
    pair_free(qkv), pair_free(q), pair_free(k), pair_free(v);
}

static void check_silu_gather(int n, int ffn)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d ffn %d", n, ffn);
    pair gu = pair_new((size_t)n * 2 * ffn), out = pair_new((size_t)n * ffn);
    pair_random(gu, 4.0f);
    pair_poison(out);
    cpu->silu_mul(cpu, out.c, gu.c, n, ffn);
    gpu->silu_mul(gpu, out.g, gu.g, n, ffn);
    pair_check(out, out.n, "silu_mul", shape);
    int n_rows = 1 + n / 2;
    ipair r = ipair_random(n_rows, n);
    pair g = pair_new((size_t)n_rows * ffn);
    pair_poison(g);
    cpu->gather_rows(cpu, g.c, out.c, r.c, n_rows, ffn);
    gpu->gather_rows(gpu, g.g, out.g, r.g, n_rows, ffn);
    pair_check(g, g.n, "gather_rows", shape);
    pair_free(gu), pair_free(out), pair_free(g);
    ipair_free(r);
}

/* ---------------------------------------------------------------- mixture of experts */

#define MOE_MAX_EXPERTS 64

/* The moe op's scratch on one backend, for `rows` routed rows. */
static tram_moe_scratch moe_scratch(tram_backend *be, int rows, int dim, int ffn, int experts)
{
    size_t ab = (size_t)be->act_bytes;
    tram_moe_scratch s = {
        .max_rows = rows, .dim = dim, .expert = be->alloc(be, rows * 4u), .weight = be->alloc(be, rows * 4u),
        .order = be->alloc(be, rows * 4u), .slot = be->alloc(be, rows * 4u),
        .offsets = be->alloc(be, (experts + 1) * 4u), .x = be->alloc(be, rows * dim * ab),
        .y = be->alloc(be, rows * dim * ab), .gate_up = be->alloc(be, rows * 2 * ffn * ab),
        .hidden = be->alloc(be, rows * ffn * ab)};
    die_if(!s.expert || !s.weight || !s.order || !s.slot || !s.offsets || !s.x || !s.y || !s.gate_up || !s.hidden,
           "out of memory for the moe scratch");
    return s;
}

static void moe_scratch_free(tram_backend *be, tram_moe_scratch *s)
{
    void *bufs[] = {s->expert, s->weight, s->order, s->slot, s->offsets, s->x, s->y, s->gate_up, s->hidden};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
        be->free(be, bufs[i]);
}

/* Routing from the same bf16 logits on both backends (so the same experts),
 * the grouped expert products and the add-back, with and without the top-k
 * renormalization, and a rank's share of the experts (expert parallelism). */
static void check_moe(int n, int dim, int ffn, int experts, int top_k)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d dim %d ffn %d e %d/%d", n, dim, ffn, top_k, experts);
    static wpair gu[MOE_MAX_EXPERTS], dn[MOE_MAX_EXPERTS];
    static tram_weight guc[MOE_MAX_EXPERTS], gug[MOE_MAX_EXPERTS], dnc[MOE_MAX_EXPERTS], dng[MOE_MAX_EXPERTS];
    for (int e = 0; e < experts; e++) {
        gu[e] = wpair_new(2 * ffn, dim, 1.0f / sqrtf((float)dim));
        dn[e] = wpair_new(dim, ffn, 1.0f / sqrtf((float)ffn));
        guc[e] = gu[e].c, gug[e] = gu[e].g, dnc[e] = dn[e].c, dng[e] = dn[e].g;
    }
    pair x = pair_new((size_t)n * dim), logits = pair_new((size_t)n * experts), out = pair_new((size_t)n * dim);
    pair_random(x, 1.0f);
    pair_random(logits, 2.0f);
    tram_moe_scratch sc = moe_scratch(cpu, n * top_k, dim, ffn, experts);
    tram_moe_scratch sg = moe_scratch(gpu, n * top_k, dim, ffn, experts);
    static const char *const ops[3] = {"moe", "moe norm_topk", "moe 2nd half"};
    for (int i = 0; i < 3; i++) {
        int first = i == 2 ? experts / 2 : 0, count = experts - first;
        tram_moe_layer lc = {.n_experts = experts, .top_k = top_k, .norm_topk = i == 1, .first = first,
                             .count = count, .ffn = ffn, .gate_up = guc + first, .down = dnc + first};
        tram_moe_layer lg = lc;
        lg.gate_up = gug + first, lg.down = dng + first;
        pair_poison(out);
        cpu->moe(cpu, out.c, x.c, logits.c, &lc, &sc, n);
        gpu->moe(gpu, out.g, x.g, logits.g, &lg, &sg, n);
        pair_check(out, out.n, ops[i], shape);
    }
    moe_scratch_free(cpu, &sc), moe_scratch_free(gpu, &sg);
    pair_free(x), pair_free(logits), pair_free(out);
    for (int e = 0; e < experts; e++)
        wpair_free(&gu[e]), wpair_free(&dn[e]);
}

/* LoRA's grouped shrink and expand of one site of two parts (out and out / 3
 * columns, as q beside k): three adapters of ranks 4, 8 and 16 over n rows
 * in a shuffled order, the first adapting the first part alone, and a run
 * of rows whose adapter does not adapt the site (no group: those rows of y
 * keep their values), y's rows wider than the site. */
static void check_lora(int n, int in, int out)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d in %d out %d", n, in, out);
    enum { GROUPS = 3, PARTS = 2, MAX_RANK = 16, PAD = 5 };
    static const int ranks[GROUPS] = {4, 8, 16};
    tram_lora_site site = {.n_parts = PARTS, .in = in, .out = {out, out / 3}};
    int width = site.out[0] + site.out[1];
    int32_t *order = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    wpair a[GROUPS][PARTS], bt[GROUPS][PARTS];
    tram_lora_group gc[GROUPS], gg[GROUPS];
    int quarter = n / 4, first = quarter;  /* order[0, quarter): rows of an adapter without this site */
    for (int g = 0; g < GROUPS; g++) {
        int count = g < GROUPS - 1 ? quarter : n - first;
        gc[g] = (tram_lora_group){.scale = 0.5f * (g + 1), .first = first, .count = count};
        gg[g] = gc[g];
        for (int p = 0; p < (g == 0 ? 1 : PARTS); p++) {
            a[g][p] = wpair_new(ranks[g], in, 1.0f / sqrtf((float)in));
            bt[g][p] = wpair_new(ranks[g], site.out[p], 1.0f / sqrtf((float)ranks[g]));
            gc[g].a[p] = &a[g][p].c, gc[g].bt[p] = &bt[g][p].c;
            gg[g].a[p] = &a[g][p].g, gg[g].bt[p] = &bt[g][p].g;
        }
        first += count;
    }
    ipair ord = ipair_new(order, (size_t)n);
    pair x = pair_new((size_t)n * in), y = pair_new((size_t)n * (width + PAD));
    pair_random(x, 1.0f);
    pair_random(y, 1.0f);
    size_t t_rows = (size_t)n * TRAM_LORA_MAX_PARTS * MAX_RANK;
    tram_lora_scratch sc = {n, in, MAX_RANK, width, ord.c, cpu->alloc(cpu, t_rows * 4),
                            cpu->alloc(cpu, (size_t)n * width * 4)};
    tram_lora_scratch sg = {n, in, MAX_RANK, width, ord.g, gpu->alloc(gpu, t_rows * 2),
                            gpu->alloc(gpu, (size_t)n * width * 2)};
    die_if(!sc.t || !sc.ys || !sg.t || !sg.ys, "out of memory");
    cpu->lora(cpu, y.c, width + PAD, x.c, &site, gc, GROUPS, &sc);
    gpu->lora(gpu, y.g, width + PAD, x.g, &site, gg, GROUPS, &sg);
    pair_check(y, y.n, "lora", shape);
    cpu->free(cpu, sc.t), cpu->free(cpu, sc.ys), gpu->free(gpu, sg.t), gpu->free(gpu, sg.ys);
    for (int g = 0; g < GROUPS; g++)
        for (int p = 0; p < (g == 0 ? 1 : PARTS); p++)
            wpair_free(&a[g][p]), wpair_free(&bt[g][p]);
    ipair_free(ord);
    pair_free(x), pair_free(y);
    free(order);
}

static void check_rope(int n, const tram_attn_shape *s, float theta, tram_rope_style style)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d heads %d/%d hd %d %s", n, s->n_heads, s->n_kv_heads, s->head_dim,
             style == TRAM_ROPE_NEOX ? "neox" : "inter");
    int half = s->head_dim / 2;
    float *inv = malloc(half * 4);
    for (int i = 0; i < half; i++)
        inv[i] = powf(theta, -2.0f * i / s->head_dim);
    float *ic = cpu->alloc(cpu, half * 4), *ig = gpu->alloc(gpu, half * 4);
    cpu->upload(cpu, ic, inv, half * 4);
    gpu->upload(gpu, ig, inv, half * 4);
    ipair p = ipair_random(n, 8192);
    pair q = pair_new((size_t)n * s->n_heads * s->head_dim), k = pair_new((size_t)n * s->n_kv_heads * s->head_dim);
    pair_random(q, 1.0f);
    pair_random(k, 1.0f);
    cpu->rope(cpu, q.c, k.c, p.c, n, s, ic, style);
    gpu->rope(gpu, q.g, k.g, p.g, n, s, ig, style);
    pair_check(q, q.n, "rope.q", shape);
    pair_check(k, k.n, "rope.k", shape);
    pair_free(q), pair_free(k);
    ipair_free(p);
    cpu->free(cpu, ic);
    gpu->free(gpu, ig);
    free(inv);
}

/* ---------------------------------------------------------------- KV cache and attention */

typedef struct {
    int q_len, ctx;  /* tokens this step, context length after it */
} seq_spec;

static void check_kv_store(int n, const tram_attn_shape *s, int num_slots)
{
    char shape[64];
    snprintf(shape, sizeof(shape), "n %d kv %d hd %d", n, s->n_kv_heads, s->head_dim);
    size_t kd = (size_t)s->n_kv_heads * s->head_dim;
    pair kc = pair_new(num_slots * kd), vc = pair_new(num_slots * kd), k = pair_new(n * kd), v = pair_new(n * kd);
    pair_random(kc, 1.0f), pair_random(vc, 1.0f), pair_random(k, 1.0f), pair_random(v, 1.0f);
    int32_t *slots = malloc(num_slots * 4);
    for (int i = 0; i < num_slots; i++)
        slots[i] = i;
    for (int i = 0; i < n; i++) {  /* n distinct random slots */
        int j = i + rand() % (num_slots - i), t = slots[i];
        slots[i] = slots[j], slots[j] = t;
    }
    ipair sm = ipair_new(slots, n);
    cpu->kv_store(cpu, kc.c, vc.c, k.c, v.c, sm.c, n, s);
    gpu->kv_store(gpu, kc.g, vc.g, k.g, v.g, sm.g, n, s);
    pair_check(kc, kc.n, "kv_store.k", shape);
    pair_check(vc, vc.n, "kv_store.v", shape);
    pair_free(kc), pair_free(vc), pair_free(k), pair_free(v);
    ipair_free(sm);
    free(slots);
}

/* A KV cache on both backends: bf16 / f32 slots (pairs, compared as values)
 * or a quantized cache's bytes (kernels/kv_format.h: the same layout on
 * both). */
typedef struct {
    void *k[2], *v[2]; /* [0] CPU, [1] GPU */
    pair pk, pv;       /* the slots themselves, for TRAM_KV_AUTO */
} kv_pair;

/* The bytes of a quantized cache that differ between the backends, of n. */
static size_t bytes_differing(void *c, void *g, size_t n)
{
    uint8_t *hc = malloc(n), *hg = malloc(n);
    cpu->download(cpu, hc, c, n);
    gpu->download(gpu, hg, g, n);
    sync_both("download");
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += hc[i] != hg[i];
    free(hc), free(hg);
    return diff;
}

/* Random K/V in every one of num_slots slots: random bf16 slots for
 * TRAM_KV_AUTO; else both backends' kv_store quantizes the same random bf16
 * K/V, and the codes and scales they write must be the same bytes (the same
 * f32 arithmetic; E4M3 rounds as CUDA's saturating conversion). */
static kv_pair kv_pair_new(const tram_attn_shape *s, int num_slots)
{
    size_t kd = (size_t)s->n_kv_heads * s->head_dim;
    kv_pair kv;
    memset(&kv, 0, sizeof(kv));
    if (s->kv_dtype == TRAM_KV_AUTO) {
        kv.pk = pair_new(num_slots * kd), kv.pv = pair_new(num_slots * kd);
        pair_random(kv.pk, 1.0f), pair_random(kv.pv, 1.0f);
        kv.k[0] = kv.pk.c, kv.k[1] = kv.pk.g, kv.v[0] = kv.pv.c, kv.v[1] = kv.pv.g;
        return kv;
    }
    size_t bytes = (size_t)num_slots * tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, s->head_dim, 4);
    kv.k[0] = cpu->alloc(cpu, bytes), kv.k[1] = gpu->alloc(gpu, bytes);
    kv.v[0] = cpu->alloc(cpu, bytes), kv.v[1] = gpu->alloc(gpu, bytes);
    die_if(!kv.k[0] || !kv.k[1] || !kv.v[0] || !kv.v[1], "out of memory");
    pair k = pair_new(num_slots * kd), v = pair_new(num_slots * kd);
    pair_random(k, 1.0f), pair_random(v, 1.0f);
    int32_t *slots = malloc(num_slots * 4);
    for (int i = 0; i < num_slots; i++)
        slots[i] = i;
    ipair sm = ipair_new(slots, num_slots);
    cpu->kv_store(cpu, kv.k[0], kv.v[0], k.c, v.c, sm.c, num_slots, s);
    gpu->kv_store(gpu, kv.k[1], kv.v[1], k.g, v.g, sm.g, num_slots, s);
    sync_both("kv_store (quantized)");
    size_t diff = bytes_differing(kv.k[0], kv.k[1], bytes) + bytes_differing(kv.v[0], kv.v[1], bytes);
    int ok = diff == 0;
    printf("%-6s %-14s %-36s bytes differing %zu of %zu\n", ok ? "PASS" : "FAIL", "kv_store",
           s->kv_dtype == TRAM_KV_INT8 ? "int8 cache" : "fp8 cache", diff, 2 * bytes);
    failures += !ok;
    cases++;
    pair_free(k), pair_free(v);
    ipair_free(sm);
    free(slots);
    return kv;
}

static void kv_pair_free(kv_pair *kv, tram_kv_dtype t)
{
    if (t == TRAM_KV_AUTO) {
        pair_free(kv->pk), pair_free(kv->pv);
        return;
    }
    cpu->free(cpu, kv->k[0]), gpu->free(gpu, kv->k[1]);
    cpu->free(cpu, kv->v[0]), gpu->free(gpu, kv->v[1]);
}

/* A unified batch over random, shuffled block tables; the cache is random
 * everywhere (quantized from random K/V for an int8 or fp8 cache), so reading a wrong block shows as error. */
static void check_attention(const char *what, const seq_spec *seqs, int num_seqs, const tram_attn_shape *s)
{
    int bs = s->block_size, max_blocks = 1, T = 0;
    for (int i = 0; i < num_seqs; i++) {
        max_blocks = TRAM_MAX(max_blocks, (seqs[i].ctx + bs - 1) / bs);
        T += seqs[i].q_len;
    }
    int num_blocks = max_blocks * num_seqs + 3;
    int32_t *perm = malloc(num_blocks * 4), *tables = calloc((size_t)num_seqs * max_blocks, 4);
    int32_t *qs = malloc((num_seqs + 1) * 4), *lens = malloc(num_seqs * 4), *pos = malloc(T * 4);
    for (int i = 0; i < num_blocks; i++)
        perm[i] = i;
    for (int i = num_blocks - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    qs[0] = 0;
    for (int i = 0, next = 0; i < num_seqs; i++) {
        for (int j = 0; j < max_blocks; j++)
            tables[(size_t)i * max_blocks + j] = perm[next++];
        lens[i] = seqs[i].ctx;
        qs[i + 1] = qs[i] + seqs[i].q_len;
        for (int j = 0; j < seqs[i].q_len; j++)
            pos[qs[i] + j] = seqs[i].ctx - seqs[i].q_len + j;
    }
    ipair bt = ipair_new(tables, (size_t)num_seqs * max_blocks), q_s = ipair_new(qs, num_seqs + 1);
    ipair sl = ipair_new(lens, num_seqs), ps = ipair_new(pos, T);
    size_t qd = (size_t)s->n_heads * s->head_dim;
    kv_pair kv = kv_pair_new(s, num_blocks * bs);
    pair q = pair_new(T * qd), out = pair_new(T * qd);
    pair_random(q, 1.0f);
    pair_poison(out);
    tram_batch bc = {.num_tokens = T, .num_seqs = num_seqs, .positions = ps.c, .query_start = q_s.c,
                     .seq_lens = sl.c, .block_tables = bt.c, .max_blocks_per_seq = max_blocks};
    tram_batch bg = {.num_tokens = T, .num_seqs = num_seqs, .positions = ps.g, .query_start = q_s.g,
                     .seq_lens = sl.g, .block_tables = bt.g, .max_blocks_per_seq = max_blocks};
    cpu->attention(cpu, out.c, q.c, kv.k[0], kv.v[0], &bc, s);
    gpu->attention(gpu, out.g, q.g, kv.k[1], kv.v[1], &bg, s);
    static const char *const kv_names[] = {"", " int8", " fp8"};
    char shape[64];
    snprintf(shape, sizeof(shape), "%s T %d h %d/%d hd %d%s", what, T, s->n_heads, s->n_kv_heads, s->head_dim,
             kv_names[s->kv_dtype]);
    pair_check(out, out.n, "attention", shape);
    kv_pair_free(&kv, s->kv_dtype);
    pair_free(q), pair_free(out);
    ipair_free(bt), ipair_free(q_s), ipair_free(sl), ipair_free(ps);
    free(perm), free(tables), free(qs), free(lens), free(pos);
}

static void check_attention_shapes(size_t num_shapes)
{
    static const tram_attn_shape shapes[] = {
        {9, 3, 64, 16, 0, TRAM_KV_AUTO},    /* SmolLM2-135M */
        {32, 8, 128, 16, 0, TRAM_KV_AUTO},  /* Llama-3.1-8B */
        {28, 4, 128, 16, 0, TRAM_KV_AUTO},  /* Qwen2.5-7B: group of 7 */
        {8, 8, 256, 16, 0, TRAM_KV_AUTO},   /* MHA, widest head */
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(shapes) && i < num_shapes; i++) {
        tram_attn_shape s = shapes[i];
        s.scale = 1.0f / sqrtf((float)s.head_dim);
        seq_spec decode1[] = {{1, 1 + rand() % 3000}};
        seq_spec decode_many[] = {{1, 1}, {1, 17}, {1, 200 + rand() % 100}, {1, 1000 + rand() % 2000}, {1, 64}};
        seq_spec prefill[] = {{100 + rand() % 200, 0}};
        prefill[0].ctx = prefill[0].q_len;
        seq_spec mixed[] = {{1, 513}, {37, 37}, {20, 90}, {1, 5}, {64, 64 + rand() % 500}};
        check_attention("decode-1", decode1, 1, &s);
        check_attention("decode-5", decode_many, 5, &s);
        check_attention("prefill", prefill, 1, &s);
        check_attention("mixed", mixed, 5, &s);
        check_kv_store(1 + rand() % 100, &s, 512);
        /* the quantized caches (kernels/kv_format.h): CUDA's kv_store writes
         * the CPU's bytes, and attends over them as the CPU does */
        for (int t = TRAM_KV_INT8; t <= TRAM_KV_FP8; t++) {
            tram_attn_shape sq = s;
            sq.kv_dtype = (tram_kv_dtype)t;
            check_attention("decode-5", decode_many, 5, &sq);
            check_attention("mixed", mixed, 5, &sq);
        }
    }
}

/* ---------------------------------------------------------------- sampling and graphs */

/* The device sampler against kernels/cpu/sampling.c on the same bf16 logits: greedy
 * ids equal exactly (bias, bans and penalties included, and again after a
 * draw has grown the seat's counts on the device); seeded draws reproduce; and
 * the frequencies of SROWS device draws (one Philox step each) match those
 * of SROWS host draws (one seed each) within 0.05 everywhere, about five
 * standard deviations of the difference of two such frequencies. */
enum { SV = 64, SROWS = 4096, HIST = 12 };
static int draw_rows = SROWS;  /* fewer under the sanitizer (--small), with a tolerance as many deviations wide */

typedef struct {
    const char *name;
    tram_sampler_row p;
    const tram_logit_bias *bias;
    int num_bias;
    int ban;                   /* a banned id (min_tokens), or -1 */
} sample_case;

static void sampler_reserve(int rows, int seats, int vocab)
{
    tram_error err = {{0}};
    die_if(tram_cuda_sampler_reserve(gpu, rows, rows, rows * 4, seats, vocab, HIST, &err), err.msg);
}

/* Device parameters of one row, as engine/cuda_runner.c derives them. */
static tram_cuda_sampling device_params(const sample_case *c, int seat, uint64_t step)
{
    tram_cuda_sampling sp = {
        .p = c->p,
        .seat = tram_sample_has_penalties(&c->p) ? seat : -1,
        .num_bias = c->num_bias + (c->ban >= 0),
        .step = step,
    };
    sp.p.seed = 1234;
    return sp;
}

/* The case's bias list for the device: its logit bias, then the ban. */
static int device_bias(const sample_case *c, tram_logit_bias *out)
{
    memcpy(out, c->bias, c->num_bias * sizeof(*out));
    if (c->ban >= 0)
        out[c->num_bias] = (tram_logit_bias){c->ban, -INFINITY};
    return c->num_bias + (c->ban >= 0);
}

static int32_t host_draw(tram_sampler *hs, const float *row, const sample_case *c, const int32_t *hist, int n,
                         uint64_t seed)
{
    tram_sample_input in = {
        .p = c->p,
        .bias = c->bias,
        .num_bias = c->num_bias,
        .banned = c->ban >= 0 ? &c->ban : NULL,
        .num_banned = c->ban >= 0,
        .prompt = hist,
        .prompt_len = HIST / 2,
        .output = hist + HIST / 2,
        .output_len = n - HIST / 2,
    };
    in.p.seed = seed;
    return tram_sample(hs, row, &in);
}

/* rows draws of one case from the logits row 0; seats 0..rows-1 loaded from hist. */
static void device_draws(const pair *l, int vocab, const sample_case *c, const int32_t *hist, int n, int rows,
                         int load, int32_t *ids)
{
    tram_error err = {{0}};
    tram_cuda_sampling *sp = calloc(rows, sizeof(*sp));
    tram_logit_bias bias[8];
    int nb = device_bias(c, bias);
    for (int r = 0; r < rows; r++) {
        sp[r] = device_params(c, r, (uint64_t)r);
        if (load && sp[r].seat >= 0)
            die_if(tram_cuda_seat_load(gpu, r, hist, HIST / 2, n, &err), err.msg);
    }
    tram_cuda_logits lg = {l->g, 1, vocab, vocab};
    die_if(tram_cuda_sample(gpu, &lg, sp, rows, bias, nb, ids, NULL, &err), err.msg);
    free(sp);
}

static void sample_result_line(int ok, const char *name, const char *fmt, double a, double b)
{
    char detail[96];
    snprintf(detail, sizeof(detail), fmt, a, b);
    printf("%-6s %-14s %-36s %s\n", ok ? "PASS" : "FAIL", "sample", name, detail);
    failures += !ok;
    cases++;
}

/* Greedy twice: the second draw sees the first one's token in the counts. */
static void check_greedy(const pair *l, const float *row, int vocab, const sample_case *c, tram_sampler *hs)
{
    int32_t hist[HIST + 2], dev[2], host[2];
    for (int i = 0; i < HIST; i++)
        hist[i] = rand() % vocab;
    sample_case g = *c;
    g.p.temperature = 0;
    for (int k = 0; k < 2; k++) {
        host[k] = host_draw(hs, row, &g, hist, HIST + k, 1);
        device_draws(l, vocab, &g, hist, HIST + k, 1, k == 0, &dev[k]);
        hist[HIST + k] = host[k];
    }
    char name[64];
    snprintf(name, sizeof(name), "greedy %s v %d", c->name, vocab);
    sample_result_line(dev[0] == host[0] && dev[1] == host[1], name, "ids %.0f, %.0f", dev[0], dev[1]);
}

static void check_distribution(const pair *l, const float *row, const sample_case *c, tram_sampler *hs)
{
    int32_t hist[HIST], *ids = malloc(draw_rows * 4), *again = malloc(draw_rows * 4);
    for (int i = 0; i < HIST; i++)
        hist[i] = rand() % SV;
    double fd[SV] = {0}, fh[SV] = {0}, worst = 0;
    device_draws(l, SV, c, hist, HIST, draw_rows, 1, ids);
    device_draws(l, SV, c, hist, HIST, draw_rows, 1, again);
    int in_range = 1;
    for (int r = 0; r < draw_rows; r++) {
        in_range &= ids[r] >= 0 && ids[r] < SV && ids[r] != c->ban;
        fd[ids[r] >= 0 && ids[r] < SV ? ids[r] : 0] += 1.0 / draw_rows;
        fh[host_draw(hs, row, c, hist, HIST, 1000 + r)] += 1.0 / draw_rows;
    }
    for (int j = 0; j < SV; j++)
        worst = fmax(worst, fabs(fd[j] - fh[j]));
    int repro = !memcmp(ids, again, draw_rows * 4);
    char name[64];
    snprintf(name, sizeof(name), "draws %s", c->name);
    sample_result_line(worst < 0.05 * sqrt((double)SROWS / draw_rows) && repro && in_range, name, "max |freq - host| %.3f  reproducible %.0f",
                       worst, repro);
    free(ids), free(again);
}

/* Rows of a wider stride than the vocabulary, each greedy on its own row. */
static void check_rows_stride(void)
{
    enum { R = 5, V = 1000, STRIDE = 1003 };
    float *v = random_vec((size_t)R * STRIDE, 3.0f);
    for (int i = 0; i < R * STRIDE; i++)
        v[i] = bf16_round(v[i]);
    pair l = pair_new((size_t)R * STRIDE);
    pair_set(l, v);
    tram_cuda_sampling sp[R];
    int32_t ids[R];
    float lp[R];
    int ok = 1;
    for (int r = 0; r < R; r++)
        sp[r] = (tram_cuda_sampling){
            .p = {.top_p = 1, .repetition_penalty = 1, .seed = 1},
            .row = R - 1 - r,
            .seat = -1,
        };
    tram_cuda_logits lg = {l.g, R, STRIDE, V};
    tram_error err = {{0}};
    die_if(tram_cuda_sample(gpu, &lg, sp, R, NULL, 0, ids, lp, &err), err.msg);
    for (int r = 0; r < R; r++) {
        const float *row = v + (size_t)(R - 1 - r) * STRIDE;
        int best = 0;
        double z = 0;
        for (int j = 0; j < V; j++)
            best = row[j] > row[best] ? j : best;
        for (int j = 0; j < V; j++)
            z += exp(row[j] - row[best]);
        ok &= ids[r] == best && fabs(lp[r] - (-log(z))) < 1e-3;
    }
    sample_result_line(ok, "greedy rows, stride > vocab", "logprob of row 0 %.4f", lp[0], 0);
    pair_free(l);
    free(v);
}

static void check_sampling(void)
{
    static const tram_logit_bias bias[] = {{3, 2.5f}, {17, -1.0f}, {3, 0.5f}};
    tram_sampler_row base = {.temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f};
    sample_case cs[] = {
        {.name = "temperature 0.7", .p = base, .ban = -1},
        {.name = "top_k 5", .p = base, .ban = -1},
        {.name = "top_p 0.8", .p = base, .ban = -1},
        {.name = "min_p 0.1 top_p 0.9", .p = base, .ban = -1},
        {.name = "penalties bias ban top_k 20", .p = base, .bias = bias, .num_bias = 3, .ban = 5},
    };
    cs[0].p.temperature = 0.7f;
    cs[1].p.top_k = 5;
    cs[2].p.top_p = 0.8f;
    cs[3].p.min_p = 0.1f, cs[3].p.top_p = 0.9f;
    tram_sampler_row *pen = &cs[4].p;
    pen->repetition_penalty = 1.3f, pen->presence_penalty = 0.5f, pen->frequency_penalty = 0.4f, pen->top_k = 20;
    tram_error err = {{0}};
    int big = 128256;
    tram_sampler *hs_small, *hs_big;
    die_if(tram_sampler_create(&hs_small, SV, &err) || tram_sampler_create(&hs_big, big, &err), err.msg);
    float *small = random_vec(SV, 2.0f), *large = random_vec(big, 4.0f);
    for (int j = 0; j < SV; j++)
        small[j] = bf16_round(small[j]);
    for (int j = 0; j < big; j++)
        large[j] = bf16_round(large[j]);
    pair ls = pair_new(SV), lb = pair_new(big);
    pair_set(ls, small);
    pair_set(lb, large);
    sampler_reserve(SROWS, SROWS, SV);
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cs); i++) {
        check_greedy(&ls, small, SV, &cs[i], hs_small);
        check_distribution(&ls, small, &cs[i], hs_small);
    }
    /* Four distinct logits only: the top-k and top-p boundaries fall inside
     * ties, which the host's sort breaks by id (a threshold would keep all). */
    float tied[SV];
    for (int j = 0; j < SV; j++)
        tied[j] = (float)(rand() % 4) - 1.0f;
    pair lt = pair_new(SV);
    pair_set(lt, tied);
    sample_case ties[] = {
        {.name = "ties top_k 5", .p = base, .ban = -1},
        {.name = "ties top_p 0.3", .p = base, .ban = -1},
    };
    ties[0].p.top_k = 5;
    ties[1].p.top_p = 0.3f;
    for (size_t i = 0; i < TRAM_ARRAY_LEN(ties); i++)
        check_distribution(&lt, tied, &ties[i], hs_small);
    pair_free(lt);
    sampler_reserve(8, 8, big);
    check_greedy(&lb, large, big, &cs[4], hs_big);
    check_rows_stride();
    pair_free(ls), pair_free(lb);
    free(small), free(large);
    tram_sampler_destroy(hs_small), tram_sampler_destroy(hs_big);
}

/* ---------------------------------------------------------------- speculative verification */

/* tram_cuda_verify against the references on the same rows and uniforms, four
 * sequences in one call: greedy with penalties, bias and a min_tokens ban that
 * lifts at row 2 (kernels/cpu/sampling.c's draws, the drafts its chain with
 * draft 2 wrong: rows 0..2 drawn, 3 and 4 not); greedy without a seat, draft 0
 * wrong; sampled with penalties, every draft right (the bonus row drawn);
 * one sampled row.  The sampled ones must equal tram_cuda_sample's draws of
 * the same rows and steps one after another (the seat grown by each), itself
 * checked against the CPU above.  Then the first sequence's seat must hold
 * its three draws: a greedy draw of row 3 from it must be the CPU's. */
enum { VV = 1000, VHIST = HIST, VMIN = VHIST / 2 + 2 };  /* min_tokens: the first two rows' bans hold */

typedef struct {
    tram_sampler_row p;
    int rows, first_row, seat;
    uint64_t step;
} verify_case;

/* The CPU's greedy draw of row r with the history hist[n] (its first half
 * the prompt), the ban while the output is shorter than VMIN. */
static int32_t verify_host_greedy(tram_sampler *hs, const float *v, int r, const tram_sampler_row *p,
                                  const tram_logit_bias *bias, int32_t ban, const int32_t *hist, int n)
{
    tram_sample_input in = {.p = *p, .bias = bias, .num_bias = 2, .prompt = hist, .prompt_len = VHIST / 2,
                            .output = hist + VHIST / 2, .output_len = n - VHIST / 2};
    in.p.temperature = 0;
    in.banned = in.output_len < VMIN ? &ban : NULL;
    in.num_banned = in.banned != NULL;
    return tram_sample(hs, v + (size_t)r * VV, &in);
}

/* Row j of case c: its position's step and the bans while min_tokens holds. */
static tram_cuda_sampling verify_params(const verify_case *c, int j, int nbias)
{
    int held = VHIST - VHIST / 2 + j < VMIN;
    return (tram_cuda_sampling){.p = c->p, .row = c->first_row + j, .seat = c->seat, .num_bias = nbias + held,
                                .step = c->step + (uint64_t)j};
}

static void check_verify(void)
{
    static const tram_logit_bias bias_list[3] = {{3, 2.5f}, {17, -1.0f}, {0, -INFINITY}};
    tram_logit_bias bias[3];
    memcpy(bias, bias_list, sizeof(bias));
    tram_sampler_row greedy = {.top_p = 1, .repetition_penalty = 1.3f, .presence_penalty = 0.5f,
                               .frequency_penalty = 0.4f, .seed = 7};
    tram_sampler_row plain = {.top_p = 1, .repetition_penalty = 1, .seed = 7};
    tram_sampler_row sampled = greedy, one = plain;
    sampled.temperature = 1.0f, sampled.top_k = 20;
    one.temperature = 0.7f;
    verify_case cs[4] = {
        {greedy, 5, 0, 0, 10}, {plain, 4, 5, -1, 20}, {sampled, 4, 9, 1, 30}, {one, 1, 13, -1, 40}};
    int total = 14;
    float *v = random_vec((size_t)total * VV, 3.0f);
    for (int i = 0; i < total * VV; i++)
        v[i] = bf16_round(v[i]);
    bias[2].token = tram_argmax(v, VV);  /* the ban matters at row 0 */
    pair l = pair_new((size_t)total * VV);
    pair_set(l, v);
    tram_cuda_logits lg = {l.g, total, VV, VV};
    tram_error err = {{0}};
    tram_sampler *hs;
    die_if(tram_sampler_create(&hs, VV, &err), err.msg);
    sampler_reserve(total, 2, VV);
    int32_t hist[VHIST], chain_a[5], chain_b[4], dev_c[4], dev_d;
    for (int i = 0; i < VHIST; i++)
        hist[i] = rand() % VV;
    /* the references: the CPU's greedy chains, the device's one-row draws */
    int32_t ext[VHIST + 8];
    memcpy(ext, hist, sizeof(hist));
    for (int j = 0; j < 5; j++)
        ext[VHIST + j] = chain_a[j] = verify_host_greedy(hs, v, cs[0].first_row + j, &greedy, bias, bias[2].token,
                                                         ext, VHIST + j);
    for (int j = 0; j < 4; j++) {
        tram_sample_input in = {.p = plain, .output_len = 0};
        chain_b[j] = tram_sample(hs, v + (size_t)(cs[1].first_row + j) * VV, &in);
    }
    die_if(tram_cuda_seat_load(gpu, 1, hist, VHIST / 2, VHIST, &err), err.msg);
    for (int j = 0; j < 4; j++) {
        tram_cuda_sampling sp = verify_params(&cs[2], j, 2);
        die_if(tram_cuda_sample(gpu, &lg, &sp, 1, bias, 3, &dev_c[j], NULL, &err), err.msg);
    }
    tram_cuda_sampling one_sp = verify_params(&cs[3], 0, 0);
    one_sp.num_bias = 0;
    die_if(tram_cuda_sample(gpu, &lg, &one_sp, 1, bias, 3, &dev_d, NULL, &err), err.msg);
    /* the verification: drafts from the references, one wrong in A and B */
    int32_t drafts[14], ids[14], want[14];
    tram_cuda_sampling sp[14];
    tram_cuda_verify_seq seqs[4];
    const int32_t *expect[4] = {chain_a, chain_b, dev_c, &dev_d};
    int wrong[4] = {2, 0, -1, -1};
    for (int q = 0, n = 0; q < 4; q++) {
        seqs[q] = (tram_cuda_verify_seq){.first = n, .rows = cs[q].rows};
        int stop = wrong[q] >= 0 ? wrong[q] : cs[q].rows - 1;
        for (int j = 0; j < cs[q].rows; j++, n++) {
            sp[n] = verify_params(&cs[q], j, q == 3 ? 0 : 2);
            if (q == 3 || q == 1)
                sp[n].num_bias = 0;
            drafts[n] = j == cs[q].rows - 1 ? -1 : j == wrong[q] ? (expect[q][j] + 1) % VV : expect[q][j];
            want[n] = j <= stop ? expect[q][j] : -1;
        }
    }
    die_if(tram_cuda_seat_load(gpu, 0, hist, VHIST / 2, VHIST, &err) ||
               tram_cuda_seat_load(gpu, 1, hist, VHIST / 2, VHIST, &err),
           err.msg);
    die_if(tram_cuda_verify(gpu, &lg, sp, drafts, total, seqs, 4, bias, 3, ids, &err), err.msg);
    int bad = -1, drawn = 0;
    for (int i = 0; i < total; i++) {
        bad = bad < 0 && ids[i] != want[i] ? i : bad;
        drawn += want[i] >= 0;
    }
    char name[64];
    if (bad < 0) {
        snprintf(name, sizeof(name), "verify 4 seqs v %d", VV);
        sample_result_line(1, name, "%.0f rows as the references, %.0f drawn", total, drawn);
    } else {  /* the row, and what the references say */
        snprintf(name, sizeof(name), "verify row %d want %d", bad, want[bad]);
        sample_result_line(0, name, "got %.0f (drafts %.0f)", ids[bad], drafts[bad]);
    }
    /* seat 0 now holds hist and chain_a[0..2]: row 3's greedy draw is the CPU's */
    tram_cuda_sampling after = verify_params(&cs[0], 3, 2);
    int32_t next;
    die_if(tram_cuda_sample(gpu, &lg, &after, 1, bias, 3, &next, NULL, &err), err.msg);
    sample_result_line(next == chain_a[3], "verify seat after", "id %.0f, CPU %.0f", next, chain_a[3]);
    pair_free(l);
    free(v);
    tram_sampler_destroy(hs);
}

/* A captured rmsnorm + matmul replays on new input like the direct ops,
 * after one eager pass as the engine runs it (the GEMM plan is then made
 * outside the capture); a grown scratch buffer then drops the graph, whose
 * kernels could point at the freed one. */
static void check_graph(void)
{
    enum { N = 8, DIM = 576, OUT = 1536 };
    wpair nw = wpair_new(1, DIM, 1.0f), w = wpair_new(OUT, DIM, 0.05f);
    pair x = pair_new(N * DIM), h = pair_new(N * DIM), y = pair_new(N * OUT);
    tram_error err = {{0}};
    pair_random(x, 1.0f);
    gpu->rmsnorm(gpu, h.g, x.g, &nw.g, N, 1e-5f);
    gpu->matmul(gpu, y.g, h.g, &w.g, N);
    sync_both("graph warm-up");
    die_if(tram_cuda_graph_begin(gpu, &err), err.msg);
    gpu->rmsnorm(gpu, h.g, x.g, &nw.g, N, 1e-5f);
    gpu->matmul(gpu, y.g, h.g, &w.g, N);
    die_if(tram_cuda_graph_end(gpu, N, &err), err.msg);
    pair_random(x, 1.0f);  /* new input after capture */
    pair_poison(y);
    die_if(tram_cuda_graph_replay(gpu, N, &err), err.msg);
    cpu->rmsnorm(cpu, h.c, x.c, &nw.c, N, 1e-5f);
    cpu->matmul(cpu, y.c, h.c, &w.c, N);
    pair_check(y, y.n, "graph", "rmsnorm+matmul replay n 8");
    /* larger than any earlier download: to_host_f32 grows its staging buffer */
    size_t big = (size_t)1 << 26;
    void *src = gpu->alloc(gpu, big * 2);
    float *host = malloc(big * sizeof(float));
    die_if(!src || !host, "out of memory");
    gpu->to_host_f32(gpu, host, src, big);
    sync_both("staging growth");
    int dropped = !tram_cuda_graph_ready(gpu, N);
    printf("%-6s %-14s %-36s ready after growth %d\n", dropped ? "PASS" : "FAIL", "graph", "dropped on buffer growth",
           !dropped);
    failures += !dropped;
    cases++;
    gpu->free(gpu, src);
    free(host);
    pair_free(x), pair_free(h), pair_free(y);
    wpair_free(&nw), wpair_free(&w);
}

int main(int argc, char **argv)
{
    tram_kernel_variants kv;
    take_kernels_arg("check_kernels", &argc, argv, &kv);
    int reduced = argc > 1 && !strcmp(argv[1], "--small");
    unsigned seed = argc > 1 + reduced ? (unsigned)strtoul(argv[1 + reduced], NULL, 10) : (unsigned)time(NULL);
    size_t large = !reduced;  /* the large shapes too */
    draw_rows = reduced ? SROWS / 8 : SROWS;
    tram_error err = {{0}};
    if (tram_backend_cuda_create(&gpu, 0, &err)) {
        fprintf(stderr, "check_kernels: %s\n", err.msg);
        return 2;
    }
    die_if(tram_cuda_set_kernel_variants(gpu, &kv, &err), err.msg);
    char names[128];
    printf("check_kernels: kernels %s\n", tram_kernel_variants_format(&kv, names, sizeof(names)));
    die_if(tram_backend_cpu_create(&cpu, 0, &err), err.msg);
    srand(seed);
    printf("check_kernels: seed %u, tolerance %.0e%s\n", seed, TOL, reduced ? ", small shapes" : "");
    int dims[] = {576, 4096};
    for (size_t i = 0; i < 1 + large; i++) {
        check_embed(1000, dims[i], 1 + rand() % 300);
        check_norms(dims[i], 1);
        check_norms(dims[i], 1 + rand() % 512);
    }
    static const int mm[][3] = {{1, 576, 576}, {7, 3072, 576}, {64, 4096, 4096}, {300, 1000, 576},
                                {1, 49152, 576}, {33, 576, 1536}, {256, 14336, 4096}};
    for (size_t i = 0; i < (large ? TRAM_ARRAY_LEN(mm) : 2); i++)
        check_matmul(mm[i][0], mm[i][1], mm[i][2]);
    static const int mm8[][3] = {{1, 576, 576}, {7, 3072, 576}, {64, 4096, 4096}, {33, 578, 1538},
                                 {5, 49152, 576}, {256, 14336, 4096}};
    for (size_t i = 0; i < (large ? TRAM_ARRAY_LEN(mm8) : 2); i++)
        check_int8_matmul(mm8[i][0], mm8[i][1], mm8[i][2]);
    /* FP8 against the CPU's emulation: the same shapes, up to 64 x 4096 x
     * 4096 (the CPU's FP8 product is the slow side); a checkpoint's codes
     * with a per-tensor scale; activation scales clamped */
    for (size_t i = 0; i < (large ? 4 : 2); i++)
        check_fp8_matmul(mm8[i][0], mm8[i][1], mm8[i][2], 0, 0.0f);
    check_fp8_matmul(7, 3072, 576, 1, 0.0f);
    check_fp8_matmul(33, 578, 1538, 0, 0.5f);
    check_int8_fused(1, 576, 1536);
    if (large)
        check_int8_fused(1 + rand() % 256, 4096, 14336);
    check_int8_fused(33, 578, 1538);
    check_split_qkv(1 + rand() % 64, 4096, 1024);
    tram_attn_shape qwen3 = {16, 8, 128, 16, 0.0884f, TRAM_KV_AUTO}, odd = {3, 1, 72, 16, 0.118f, TRAM_KV_AUTO};
    check_head_rmsnorm(1 + rand() % 300, &qwen3);
    check_head_rmsnorm(7, &odd);
    check_silu_gather(1, 1536);
    if (large)
        check_silu_gather(64, 14336);
    check_moe(1, 576, 1536, 8, 2);
    if (large)
        check_moe(1 + rand() % 256, 2048, 1408, 60, 4);
    else
        check_moe(1 + rand() % 16, 256, 192, 16, 4);
    check_lora(16, 576, 1536);
    check_lora(4 + rand() % 300, 1536, 576);
    if (large)
        check_lora(1 + rand() % 64 + 4, 4096, 14336);
    tram_attn_shape small = {9, 3, 64, 16, 0.125f, TRAM_KV_AUTO}, big = {32, 8, 128, 16, 0.0884f, TRAM_KV_AUTO};
    for (int style = 0; style < 2; style++) {
        check_rope(1 + rand() % 64, &small, 100000.0f, (tram_rope_style)style);
        check_rope(1 + rand() % 64, &big, 500000.0f, (tram_rope_style)style);
    }
    check_attention_shapes(large ? 4 : 2);
    check_sampling();
    check_verify();
    check_graph();
    printf("check_kernels: %d of %d cases passed\n", cases - failures, cases);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return failures ? 1 : 0;
}
