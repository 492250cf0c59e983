/* 2:4 sparsity: Wanda's choice in each group, the sparse GEMM against the
 * dense one on the same pruned matrix, and `tram prune`'s file read back
 * (every group of every pruned matrix exactly 2:4, the rest untouched) and
 * run sparse to the logits of the same values run dense; and 2:4 + int8:
 * the sparse W8A8 kernels and files against the dense int8 ones, bit for
 * bit; and a backend that runs 2:4 dense (CUDA without cuSPARSELt): its
 * file's kind asked once, every matrix loaded dense, one line saying why. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cpu/sparse24_int8.h"
#include "kernels/int8_format.h"
#include "models/gguf.h"
#include "models/prune.h"
#include "models/sparsegpt.h"
#include "models/sparsity.h"
#include "tests/unit/test_quantize_util.h"
#include "tests/unit/test_util.h"

static float urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

Test(prune, wanda_keeps_the_two_largest_scores_of_each_group)
{
    /* |w| alone would keep columns 0 and 1; the input norms make 2 and 3 matter more */
    float w[8] = {4, -3, 1, -2, /* and an even group: the earlier of equal scores stays */ 1, 1, 1, 1};
    double sumsq[8] = {0.01, 0.01, 100, 100, 1, 1, 1, 1};
    tram_prune_24(w, 1, 8, sumsq);
    float want[8] = {0, 0, 1, -2, 1, 1, 0, 0};
    cr_assert_arr_eq(w, want, sizeof(w));
}

Test(prune, sparse_gemm_equals_dense_gemm_on_the_pruned_matrix)
{
    enum { ROWS = 40, COLS = 96, MAXN = 17 };
    unsigned s = 3;
    static float w[ROWS * COLS], x[MAXN * COLS], dense[MAXN * ROWS], sparse[MAXN * ROWS];
    double sumsq[COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        w[i] = urand(&s);
    for (int c = 0; c < COLS; c++)
        sumsq[c] = 1.0 + c % 7;
    for (int i = 0; i < MAXN * COLS; i++)
        x[i] = urand(&s);
    tram_prune_24(w, ROWS, COLS, sumsq);
    tram_backend *be = test_cpu_backend();
    tram_weight wd, ws;
    be->upload_weight(be, &wd, w, ROWS, COLS, TRAM_W_F32);
    be->upload_weight(be, &ws, w, ROWS, COLS, TRAM_W_S24);
    tram_error err;
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    cr_assert_eq(ws.type, TRAM_W_S24);
    for (int n = 1; n <= MAXN; n += 8) { /* a GEMV, a partial token tile, several tiles */
        be->matmul(be, dense, x, &wd, n);
        be->matmul(be, sparse, x, &ws, n);
        cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
        for (int i = 0; i < n * ROWS; i++)
            cr_assert(fabsf(dense[i] - sparse[i]) <= 1e-5f * (1 + fabsf(dense[i])), "n %d, [%d]: %g vs %g", n, i,
                      dense[i], sparse[i]);
    }
    /* a group of 3 nonzeros is refused, not silently dropped */
    w[1] = w[0] = w[2] = 1.0f;
    tram_weight bad;
    be->upload_weight(be, &bad, w, ROWS, COLS, TRAM_W_S24);
    cr_assert_neq(be->sync(be, &err), 0);
    cr_assert(strstr(err.msg, "more than 2 nonzeros"), "%s", err.msg);
    be->free_weight(be, &wd);
    be->free_weight(be, &ws);
    be->destroy(be);
}

/* Each kernel of the product (kernels/cpu/sparse24.h) against the dense
 * product of the pruned matrix in double: token counts on both sides of the
 * AVX2 kernel's switch to transposed inputs and off its tiles, and a width
 * that is not a whole number of its 16-column steps. */
static void check_s24_kernels(tram_backend *be, int rows, int cols)
{
    enum { MAXN = 19 };
    unsigned s = (unsigned)(rows * cols);
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = malloc((size_t)MAXN * cols * sizeof(float));
    float *y = malloc((size_t)MAXN * rows * sizeof(float));
    double *ones = malloc((size_t)cols * sizeof(double));
    for (int i = 0; i < rows * cols; i++)
        w[i] = urand(&s);
    for (int i = 0; i < MAXN * cols; i++)
        x[i] = urand(&s);
    for (int c = 0; c < cols; c++)
        ones[c] = 1.0;
    tram_prune_24(w, rows, cols, ones);
    tram_weight ws;
    tram_error err;
    be->upload_weight(be, &ws, w, rows, cols, TRAM_W_S24);
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    static const int ns[] = {1, 3, 4, 5, 7, 8, 9, 16, 19};
    for (tram_cpu_kernel k = TRAM_CPU_GENERIC; k <= TRAM_CPU_VNNI; k++) {
        if (!tram_s24_kernel_available(k))
            continue;
        for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
            int n = ns[i];
            float *scratch = malloc((tram_s24_scratch_floats(k, n, cols) + 1) * sizeof(float));
            memset(y, 0xff, (size_t)MAXN * rows * sizeof(float));
            tram_s24_gemm(k, NULL, y, x, scratch, &ws, n);
            for (int t = 0; t < n; t++)
                for (int r = 0; r < rows; r++) {
                    double want = 0;
                    for (int c = 0; c < cols; c++)
                        want += (double)w[(size_t)r * cols + c] * x[(size_t)t * cols + c];
                    float got = y[(size_t)t * rows + r];
                    cr_assert(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "%s, %d x %d, n %d, y[%d][%d]: %g vs %g",
                              tram_cpu_kernel_name(k), rows, cols, n, t, r, got, want);
                }
            free(scratch);
        }
    }
    be->free_weight(be, &ws);
    free(w), free(x), free(y), free(ones);
}

Test(prune, every_sparse_kernel_equals_the_dense_product)
{
    tram_backend *be = test_cpu_backend();
    check_s24_kernels(be, 40, 96);
    check_s24_kernels(be, 33, 128);
    cr_assert_eq(tram_s24_kernel_best() == TRAM_CPU_AVX2, tram_s24_kernel_available(TRAM_CPU_AVX2),
                 "the backend's kernel is the AVX2 one wherever it runs");
    be->destroy(be);
}

static void prune_file(const char *in, const char *out, const char *exclude, tram_calib_stats *st)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, in, &err), "%s", err.msg);
    if (st->n_layers == 0) {
        int32_t ids[96];
        unsigned s = 9;
        for (int i = 0; i < 96; i++)
            ids[i] = (int32_t)((urand(&s) + 1) * 0.5f * (TINY_VOCAB - 1));
        cr_assert(!tram_calibrate(f, ids, 96, 32, 1, 0, 0, st, &err), "%s", err.msg);
    }
    tram_prune_opts o = {.out_path = out, .exclude = exclude, .stats = st};
    cr_assert(!tram_prune_model(f, &o, &err), "%s", err.msg);
    tram_model_file_close(f);
}

/* Reads tensor `name` of the file at path as f32. */
static float *read_tensor(tram_model_file *f, const char *name, int64_t *numel)
{
    const tram_gguf_tensor *t = tram_gguf_find_tensor(tram_model_file_gguf(f), name);
    cr_assert(t, "%s missing", name);
    *numel = tram_gguf_tensor_numel(t);
    float *v = malloc((size_t)*numel * sizeof(float));
    tram_error err;
    cr_assert(!tram_model_file_read_f32(f, name, v, *numel, &err), "%s", err.msg);
    return v;
}

static void check_round_trip(const char *src, const char *dst, const tram_calib_stats *st)
{
    tram_model_file *a, *b;
    tram_error err;
    cr_assert(!tram_model_file_open(&a, src, &err) && !tram_model_file_open(&b, dst, &err), "%s", err.msg);
    const tram_gguf *g = tram_model_file_gguf(a);
    int pruned = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        int64_t n, m, cols = g->tensors[i].ne[0];
        float *x = read_tensor(a, name, &n), *y = read_tensor(b, name, &m);
        cr_assert_eq(n, m);
        int sparse = tram_sparsity_is_24(tram_model_file_gguf(b), name);
        cr_assert_eq(sparse, tram_sparsity_prunable(name) && strncmp(name, "blk.1.ffn_down", 14), "%s", name);
        if (sparse) {
            pruned++;
            for (int64_t k = 0; k < n; k += 4) {
                int zeros = 0;
                for (int i4 = 0; i4 < 4; i4++)
                    zeros += y[k + i4] == 0.0f;
                cr_assert_eq(zeros, 2, "%s group %lld: %d zeros", name, (long long)k / 4, zeros);
            }
            const char *site = strstr(name, "attn_output") ? "o" : strstr(name, "ffn_down") ? "d" : "i";
            int layer = name[4] - '0';
            const double *ss = site[0] == 'o' ? st->sumsq[TRAM_ACT_ATTN_OUT] + layer * st->qd
                               : site[0] == 'd' ? st->sumsq[TRAM_ACT_FFN_HIDDEN] + layer * st->ffn
                               : strstr(name, "ffn_") ? st->sumsq[TRAM_ACT_FFN_IN] + layer * st->dim
                                                      : st->sumsq[TRAM_ACT_ATTN_IN] + layer * st->dim;
            tram_prune_24(x, (int)(n / cols), (int)cols, ss); /* what Wanda keeps: the file's values */
        }
        cr_assert_arr_eq(x, y, (size_t)n * sizeof(float), "%s differs", name);
        free(x), free(y);
    }
    cr_assert_eq(pruned, 7 * TINY_LAYERS - 1);
    tram_model_file_close(a);
    tram_model_file_close(b);
}

/* The tiny model written to src and pruned to dst ("/tmp/...-TAG-PID"). */
static void pruned_tiny_file(char *src, char *dst, size_t size, const char *tag, const char *exclude,
                             tram_calib_stats *st)
{
    snprintf(src, size, "/tmp/tram-test-prune-%s-src-%d.gguf", tag, (int)getpid());
    snprintf(dst, size, "/tmp/tram-test-prune-%s-24-%d.gguf", tag, (int)getpid());
    tiny_model_write(src, 5);
    prune_file(src, dst, exclude, st);
}

/* Logits of the same values run two ways, equal within float rounding. */
static void assert_logits_close(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert(fabsf(a[i] - b[i]) <= 1e-4f * (1 + fabsf(b[i])), "logit %d: %g vs %g", i, a[i], b[i]);
}

/* Token ids spread over the tiny vocabulary. */
static void tiny_ids(int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        ids[i] = (i * 37 + 11) % TINY_VOCAB;
}

/* int8: the matrices quantized at load */
static void logits_of(const char *path, float *logits, int n, const int32_t *ids, int int8)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    tram_backend *be = test_cpu_backend();
    tram_model *m = test_model_load(f, be, int8);
    test_forward_all(m, ids, n, logits);
    tram_model_destroy(m);
    be->destroy(be);
    tram_model_file_close(f);
}

Test(prune, file_is_2_4_round_trips_and_runs_sparse_as_dense)
{
    char src[128], dst[128], dense[128];
    snprintf(dense, sizeof(dense), "/tmp/tram-test-prune-dense-%d.gguf", (int)getpid());
    tram_calib_stats st = {0};
    pruned_tiny_file(src, dst, sizeof(src), "rt", "blk.1.ffn_down", &st);
    check_round_trip(src, dst, &st);
    /* the same values with every layer excluded: loaded dense */
    prune_file(dst, dense, "blk.0,blk.1", &st);
    enum { N = 24 };
    int32_t ids[N];
    tiny_ids(ids, N);
    static float a[N * TINY_VOCAB], b[N * TINY_VOCAB];
    logits_of(dst, a, N, ids, 0);
    logits_of(dense, b, N, ids, 0);
    assert_logits_close(a, b, N * TINY_VOCAB);
    tram_calib_stats_free(&st);
    unlink(src), unlink(dst), unlink(dense);
}

/* ---------------------------------------------------------------- 2:4 + int8 (sparse W8A8) */

/* Each sparse int8 kernel and the backend's matmul_q against the dense int8
 * product of the same pruned matrix, bit for bit (both sum exactly in
 * int32 and scale alike): widths under, at and past the AVX2 kernel's
 * 64-column step, token counts on and off its tiles of 4, rows past the
 * dense kernel's groups of 64, and groups with fewer than 2 nonzeros. */
static void check_s24i8_kernels(tram_backend *be, int rows, int cols)
{
    enum { MAXN = 17 };
    unsigned s = (unsigned)(rows * 131 + cols);
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = malloc((size_t)MAXN * cols * sizeof(float));
    float *dense = malloc((size_t)MAXN * rows * sizeof(float)), *sparse = malloc((size_t)MAXN * rows * sizeof(float));
    double *ones = malloc((size_t)cols * sizeof(double));
    for (int i = 0; i < rows * cols; i++)
        w[i] = urand(&s) * (i % 7 == 0 ? 8.0f : 1.0f);
    for (int c = 0; c < cols; c++)
        ones[c] = 1.0;
    tram_prune_24(w, rows, cols, ones);
    for (int c = 0; c < cols; c++)
        w[c] = 0.0f; /* an empty first row, and groups of one nonzero */
    w[cols + 1] = w[2 * cols + 2] = 0.0f;
    for (int c = 0; c < cols; c++) /* a kept value that rounds to zero */
        if (w[3 * cols + c] != 0.0f) {
            w[3 * cols + c] = 1e-6f;
            break;
        }
    tram_qact qa = {.cols = cols, .kp = tram_qact_stride(cols)};
    qa.q = be->alloc(be, (size_t)MAXN * qa.kp), qa.scales = be->alloc(be, MAXN * sizeof(float));
    for (int t = 0; t < MAXN; t++) {
        for (int c = 0; c < cols; c++)
            x[(size_t)t * cols + c] = urand(&s) * (c == t ? 30.0f : 1.0f);
        qa.scales[t] = tram_i8_quantize(x + (size_t)t * cols, cols, qa.kp, qa.q + (size_t)t * qa.kp);
    }
    tram_weight wd, ws;
    tram_error err;
    be->upload_weight(be, &wd, w, rows, cols, TRAM_W_INT8);
    be->upload_weight(be, &ws, w, rows, cols, TRAM_W_S24_INT8);
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    cr_assert_eq(ws.type, TRAM_W_S24_INT8);
    static const int ns[] = {1, 2, 3, 4, 5, 7, 9, 17};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        int n = ns[i];
        be->matmul_q(be, dense, &qa, &wd, n);
        be->matmul_q(be, sparse, &qa, &ws, n);
        cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
        cr_assert_arr_eq(sparse, dense, (size_t)n * rows * sizeof(float), "backend, %d x %d, n %d", rows, cols, n);
        for (tram_cpu_kernel k = TRAM_CPU_GENERIC; k <= TRAM_CPU_VNNI; k++) {
            if (!tram_s24i8_kernel_available(k))
                continue;
            memset(sparse, 0xff, (size_t)n * rows * sizeof(float));
            tram_s24i8_gemm(k, NULL, sparse, qa.q, qa.scales, &ws, n);
            cr_assert_arr_eq(sparse, dense, (size_t)n * rows * sizeof(float), "%s, %d x %d, n %d",
                             tram_cpu_kernel_name(k), rows, cols, n);
        }
    }
    /* from f32 inputs (quantized per token inside the op), as o_proj runs */
    be->matmul(be, dense, x, &wd, MAXN);
    be->matmul(be, sparse, x, &ws, MAXN);
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    cr_assert_arr_eq(sparse, dense, (size_t)MAXN * rows * sizeof(float), "matmul, %d x %d", rows, cols);
    be->free_weight(be, &wd);
    be->free_weight(be, &ws);
    be->free(be, qa.q), be->free(be, qa.scales);
    free(w), free(x), free(dense), free(sparse), free(ones);
}

Test(prune, sparse_int8_gemm_equals_dense_int8_gemm_bit_for_bit)
{
    tram_backend *be = test_cpu_backend();
    check_s24i8_kernels(be, 40, 8);
    check_s24i8_kernels(be, 33, 72);
    check_s24i8_kernels(be, 70, 136);
    check_s24i8_kernels(be, 65, 576);
    cr_assert_eq(tram_s24i8_kernel_best() == TRAM_CPU_AVX2, tram_s24i8_kernel_available(TRAM_CPU_AVX2),
                 "the backend's kernel is the AVX2 one wherever it runs");
    /* a group of 3 nonzeros is refused, not silently dropped */
    float w[2 * 8] = {1, 2, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    tram_weight bad;
    tram_error err;
    be->upload_weight(be, &bad, w, 2, 8, TRAM_W_S24_INT8);
    cr_assert_neq(be->sync(be, &err), 0);
    cr_assert(strstr(err.msg, "more than 2 nonzeros"), "%s", err.msg);
    be->destroy(be);
}

static void quantize_file(const char *in, const char *out, const tram_calib_stats *st)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, in, &err), "%s", err.msg);
    tram_quant_opts o = {.out_path = out, .exclude = "lm_head", .stats = st, .alpha = 0.5f, .threads = 1};
    cr_assert(!tram_quantize_model(f, &o, &err), "%s", err.msg);
    tram_model_file_close(f);
}

/* Every matrix of an int8 file that the file says is 2:4: int8, and at most
 * 2 nonzero codes in every group of 4. */
static int int8_matrices_keep_2_4(const char *path)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    const tram_gguf *g = tram_model_file_gguf(f);
    int sparse = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        if (!tram_sparsity_is_24(g, t->name))
            continue;
        cr_assert(tram_model_file_is_int8(f, t->name), "%s", t->name);
        const int8_t *q = (const int8_t *)t->data;
        for (int64_t k = 0; k < tram_gguf_tensor_numel(t); k += 4)
            cr_assert((q[k] != 0) + (q[k + 1] != 0) + (q[k + 2] != 0) + (q[k + 3] != 0) <= 2, "%s", t->name);
        sparse++;
    }
    tram_model_file_close(f);
    return sparse;
}

/* The two files' logits over one sequence, bit for bit (int8: quantized at load). */
static void assert_same_logits(const char *a_path, const char *b_path, int int8)
{
    static int32_t ids[TEST_MAX_TOKENS / 16];
    static float a[TEST_MAX_TOKENS / 16 * TINY_VOCAB], b[TEST_MAX_TOKENS / 16 * TINY_VOCAB];
    int n = TEST_MAX_TOKENS / 16;
    for (int i = 0; i < n; i++)
        ids[i] = (i * 29 + 5) % TINY_VOCAB;
    logits_of(a_path, a, n, ids, int8);
    logits_of(b_path, b, n, ids, int8);
    cr_assert_arr_eq(a, b, sizeof(a), "%s and %s differ", a_path, b_path);
}

/* A pruned model quantized by `tram quantize` (SmoothQuant's folds keep
 * zeros zero) stays 2:4, runs sparse W8A8, and gives the logits of the same
 * int8 values run dense, bit for bit; so does a pruned f32 file quantized at
 * load (--quantization int8). */
Test(prune, quantized_2_4_file_runs_sparse_int8_as_dense_int8)
{
    char src[128], s24[128], dense[128], q24[128], qdense[128];
    int pid = (int)getpid();
    snprintf(src, sizeof(src), "/tmp/tram-test-pq-src-%d.gguf", pid);
    snprintf(s24, sizeof(s24), "/tmp/tram-test-pq-24-%d.gguf", pid);
    snprintf(dense, sizeof(dense), "/tmp/tram-test-pq-dense-%d.gguf", pid);
    snprintf(q24, sizeof(q24), "/tmp/tram-test-pq-q24-%d.gguf", pid);
    snprintf(qdense, sizeof(qdense), "/tmp/tram-test-pq-qdense-%d.gguf", pid);
    tiny_model_write(src, 7);
    tram_calib_stats st = {0};
    prune_file(src, s24, NULL, &st);
    prune_file(s24, dense, "blk.0,blk.1", &st); /* the same values, declared dense */
    quantize_file(s24, q24, &st);
    quantize_file(dense, qdense, &st);
    cr_assert_eq(int8_matrices_keep_2_4(q24), 7 * TINY_LAYERS);
    cr_assert_eq(int8_matrices_keep_2_4(qdense), 0);
    assert_same_logits(q24, qdense, 0);
    assert_same_logits(s24, dense, 1);
    tram_calib_stats_free(&st);
    unlink(src), unlink(s24), unlink(dense), unlink(q24), unlink(qdense);
}

/* ---------------------------------------------------------------- SparseGPT */

/* ‖X·(W − P)ᵀ‖², the output error of pruned weights p on inputs x. */
static double output_error(const float *x, int n, const float *w, const float *p, int rows, int cols)
{
    double e = 0;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            double d = 0;
            for (int c = 0; c < cols; c++)
                d += (double)x[(size_t)t * cols + c] * (w[(size_t)r * cols + c] - p[(size_t)r * cols + c]);
            e += d * d;
        }
    return e;
}

/* On correlated inputs (what SparseGPT's update exploits) its pruned layer
 * is exactly 2:4 and reproduces the layer's outputs better than Wanda's
 * mask of the same inputs: the kept weights absorb the pruned ones. */
Test(prune, sparsegpt_is_2_4_and_closer_to_the_layer_than_wanda)
{
    enum { N = 256, ROWS = 12, COLS = 32 };
    static float x[N * COLS], w[ROWS * COLS], wanda[ROWS * COLS], sgpt[ROWS * COLS], xtx[COLS * COLS], u[COLS * COLS];
    double sumsq[COLS] = {0};
    unsigned s = 11;
    for (int t = 0; t < N; t++) {
        float common = urand(&s);
        for (int c = 0; c < COLS; c++)
            x[t * COLS + c] = common * (1 + c % 3) + 0.3f * urand(&s);
    }
    for (int i = 0; i < ROWS * COLS; i++)
        w[i] = urand(&s);
    for (int i = 0; i < N * COLS; i++)
        sumsq[i % COLS] += (double)x[i] * x[i];
    memcpy(wanda, w, sizeof(w));
    memcpy(sgpt, w, sizeof(w));
    tram_prune_24(wanda, ROWS, COLS, sumsq);
    tram_error err;
    for (int i = 0; i < COLS; i++)
        for (int j = 0; j <= i; j++)
            for (int t = 0; t < N; t++)
                xtx[i * COLS + j] += x[t * COLS + i] * x[t * COLS + j];
    cr_assert(!tram_sparsegpt_factor(xtx, COLS, u, &err), "%s", err.msg);
    tram_sparsegpt_prune(sgpt, ROWS, COLS, u, 1);
    for (int g = 0; g < ROWS * COLS; g += 4)
        cr_assert_eq((sgpt[g] == 0) + (sgpt[g + 1] == 0) + (sgpt[g + 2] == 0) + (sgpt[g + 3] == 0), 2, "group %d", g / 4);
    double e_wanda = output_error(x, N, w, wanda, ROWS, COLS), e_sgpt = output_error(x, N, w, sgpt, ROWS, COLS);
    cr_assert(e_sgpt < 0.5 * e_wanda, "SparseGPT's error %g, Wanda's %g", e_sgpt, e_wanda);
}

/* ---------------------------------------------------------------- a backend that runs 2:4 dense */

/* The CPU backend made to answer as CUDA does without cuSPARSELt: each
 * kind asked is counted and refused, and sparse uploads are counted. */
static int asked[2], sparse_uploads;
static void (*cpu_upload_weight)(tram_backend *, tram_weight *, const float *, int, int, tram_wtype);

static int refuse_sparse(tram_backend *be, tram_wtype t, int max_rows, tram_error *why)
{
    (void)be, (void)max_rows;
    asked[t == TRAM_W_S24_INT8]++;
    tram_fail(why, "planted refusal");
    return 0;
}

/* A backend that runs both kinds but no shape of them (as CUDA refuses
 * matrices that are not multiples of its 16 or 32): each shape asked is
 * counted, and must be a matrix's (rows and columns of the tiny model). */
static int shapes_asked, odd_shapes;
static int accept_sparse(tram_backend *be, tram_wtype t, int max_rows, tram_error *why)
{
    (void)be, (void)max_rows, (void)why;
    asked[t == TRAM_W_S24_INT8]++;
    return 1;
}

static int refuse_shape(tram_backend *be, tram_wtype t, int rows, int cols, tram_error *why)
{
    (void)be, (void)t;
    shapes_asked++;
    odd_shapes += rows < 8 || cols < 8 || cols % 8;
    tram_fail(why, "planted shape refusal");
    return 0;
}

static void counting_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols, tram_wtype t)
{
    sparse_uploads += t == TRAM_W_S24 || t == TRAM_W_S24_INT8;
    cpu_upload_weight(be, w, host, rows, cols, t);
}

/* Loads path (int8: quantized at load) on the refusing backend with stderr
 * in a file; returns the lines that say a 2:4 file runs dense, the last
 * one in line. */
static int load_on(tram_backend *be, const char *path, int int8, float *logits, int n, const int32_t *ids,
                   char *line, size_t size);

static int load_refused(const char *path, int int8, float *logits, int n, const int32_t *ids, char *line,
                        size_t size)
{
    tram_backend *be = test_cpu_backend();
    be->sparse24_prepare = refuse_sparse;
    return load_on(be, path, int8, logits, n, ids, line, size);
}

/* load_refused's run on a backend given (destroyed after). */
static int load_on(tram_backend *be, const char *path, int int8, float *logits, int n, const int32_t *ids,
                   char *line, size_t size)
{
    char log[128];
    snprintf(log, sizeof(log), "/tmp/tram-test-prune-log-%d.txt", (int)getpid());
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    cpu_upload_weight = be->upload_weight;
    be->upload_weight = counting_upload;
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
    tram_model *m = test_model_load(f, be, int8);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    test_forward_all(m, ids, n, logits);
    tram_model_destroy(m);
    be->destroy(be);
    tram_model_file_close(f);
    FILE *in = fopen(log, "r");
    int said = 0;
    char buf[1024];
    while (in && fgets(buf, sizeof(buf), in))
        if (strstr(buf, "is 2:4 sparse"))
            said++, snprintf(line, size, "%s", buf);
    if (in)
        fclose(in);
    unlink(log);
    return said;
}

/* The line when the backend cannot run a matrix's shape sparse: it names the
 * matrix, its shape on this rank and the backend's reason. */
static void assert_shape_refused(const char *path, int int8, float *logits, int n, const int32_t *ids)
{
    char line[1024] = "", want[512];
    asked[0] = asked[1] = sparse_uploads = shapes_asked = odd_shapes = 0;
    tram_backend *be = test_cpu_backend();
    be->sparse24_prepare = accept_sparse;
    be->sparse24_fits = refuse_shape;
    cr_assert_eq(load_on(be, path, int8, logits, n, ids, line, sizeof(line)), 1, "one line, int8 %d", int8);
    snprintf(want, sizeof(want), "tram: %s is 2:4 sparse; the cpu backend runs its %smatrices dense: blk.", path,
             int8 ? "int8 " : "");
    cr_assert(!strncmp(line, want, strlen(want)), "%s", line);
    cr_assert(strstr(line, " here, and planted shape refusal\n"), "%s", line);
    cr_assert_eq(asked[int8], 1, "the file's kind asked once (int8 %d)", int8);
    cr_assert_eq(shapes_asked, 1, "asked until the first refusal (int8 %d)", int8);
    cr_assert_eq(odd_shapes, 0, "a matrix's shape asked (int8 %d)", int8);
    cr_assert_eq(sparse_uploads, 0, "no matrix uploaded sparse (int8 %d)", int8);
}

Test(prune, a_backend_running_2_4_dense_or_not_at_a_shape_loads_dense_and_says_why_once)
{
    char src[128], dst[128], line[1024] = "", want[512];
    tram_calib_stats st = {0};
    pruned_tiny_file(src, dst, sizeof(src), "refused", "", &st);
    enum { N = 12 };
    int32_t ids[N];
    tiny_ids(ids, N);
    static float dense[N * TINY_VOCAB], sparse[N * TINY_VOCAB];
    logits_of(dst, sparse, N, ids, 0);
    for (int int8 = 0; int8 < 2; int8++) {
        asked[0] = asked[1] = sparse_uploads = 0;
        cr_assert_eq(load_refused(dst, int8, dense, N, ids, line, sizeof(line)), 1, "one line, int8 %d", int8);
        snprintf(want, sizeof(want), "tram: %s is 2:4 sparse; the cpu backend runs its %smatrices dense: "
                 "planted refusal\n", dst, int8 ? "int8 " : "");
        cr_assert_str_eq(line, want);
        cr_assert_eq(asked[int8], 1, "the file's kind asked once (int8 %d)", int8);
        cr_assert_eq(asked[!int8], 0, "the other kind not asked (int8 %d)", int8);
        cr_assert_eq(sparse_uploads, 0, "no matrix uploaded sparse (int8 %d)", int8);
        if (!int8) /* dense products of the same pruned values: the sparse run's logits */
            assert_logits_close(dense, sparse, N * TINY_VOCAB);
        assert_shape_refused(dst, int8, dense, N, ids);
        if (!int8)
            assert_logits_close(dense, sparse, N * TINY_VOCAB);
    }
    tram_calib_stats_free(&st);
    unlink(src), unlink(dst);
}

