/* 2:4 sparsity: Wanda's choice in each group, the sparse GEMM against the
 * dense one on the same pruned matrix, and `tram prune`'s file read back
 * (every group of every pruned matrix exactly 2:4, the rest untouched) and
 * run sparse to the logits of the same values run dense. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cpu/sparse24.h"
#include "models/gguf.h"
#include "models/prune.h"
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
        cr_assert(!tram_calibrate(f, ids, 96, 32, 1, 0, st, &err), "%s", err.msg);
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

static void logits_of(const char *path, float *logits, int n, const int32_t *ids)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    tram_backend *be = test_cpu_backend();
    tram_model *m = test_model_load(f, be, 0);
    test_forward_all(m, ids, n, logits);
    tram_model_destroy(m);
    be->destroy(be);
    tram_model_file_close(f);
}

Test(prune, file_is_2_4_round_trips_and_runs_sparse_as_dense)
{
    char src[128], dst[128], dense[128];
    snprintf(src, sizeof(src), "/tmp/tram-test-prune-src-%d.gguf", (int)getpid());
    snprintf(dst, sizeof(dst), "/tmp/tram-test-prune-24-%d.gguf", (int)getpid());
    snprintf(dense, sizeof(dense), "/tmp/tram-test-prune-dense-%d.gguf", (int)getpid());
    tiny_model_write(src, 5);
    tram_calib_stats st = {0};
    prune_file(src, dst, "blk.1.ffn_down", &st);
    check_round_trip(src, dst, &st);
    /* the same values with every layer excluded: loaded dense */
    prune_file(dst, dense, "blk.0,blk.1", &st);
    enum { N = 24 };
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 37 + 11) % TINY_VOCAB;
    static float a[N * TINY_VOCAB], b[N * TINY_VOCAB];
    logits_of(dst, a, N, ids);
    logits_of(dense, b, N, ids);
    for (int i = 0; i < N * TINY_VOCAB; i++)
        cr_assert(fabsf(a[i] - b[i]) <= 1e-4f * (1 + fabsf(b[i])), "logit %d: %g vs %g", i, a[i], b[i]);
    tram_calib_stats_free(&st);
    unlink(src), unlink(dst), unlink(dense);
}
