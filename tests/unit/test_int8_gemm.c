/* Int8 GEMM kernels against a plain triple loop written out here: exact int32
 * accumulation for every kernel this CPU runs (VNNI and AVX2 tested
 * explicitly), on random shapes that are not multiples of any SIMD width;
 * per-row quantization round trips within half a step; and the CPU backend's
 * TRAM_W_INT8 weights (matmul, embedding) against f32 math with the error
 * bound quantization allows. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_int8.h"
#include "tests/unit/test_util.h"

static unsigned lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Uniform in [-127, 127], with the extremes over-represented. */
static int8_t rand_q(unsigned *s)
{
    unsigned r = lcg(s);
    if (r % 16 == 0)
        return (r & 16) ? 127 : -127;
    return (int8_t)((int)(r % 255) - 127);
}

static float rand_f(unsigned *s) { return (lcg(s) / 16777216.0f) * 2.0f - 1.0f; }

static void *aligned(size_t bytes)
{
    void *p = NULL;
    cr_assert(!posix_memalign(&p, 64, bytes ? bytes : 64));
    return p;
}

/* acc[i][r] = Σ_k x[i][k] * w[r][k] on unpacked, unpadded arrays. */
static void reference(int32_t *acc, const int8_t *x, const int8_t *w, int n, int rows, int cols)
{
    for (int i = 0; i < n; i++)
        for (int r = 0; r < rows; r++) {
            int32_t s = 0;
            for (int k = 0; k < cols; k++)
                s += x[(size_t)i * cols + k] * w[(size_t)r * cols + k];
            acc[(size_t)i * rows + r] = s;
        }
}

/* Copies x[n][cols] into rows of stride kp, zero-padded, as the kernels take them. */
static int8_t *pad_rows(const int8_t *x, int n, int cols, int kp)
{
    int8_t *p = calloc((size_t)n * kp + 1, 1);
    for (int i = 0; i < n; i++)
        memcpy(p + (size_t)i * kp, x + (size_t)i * cols, cols);
    return p;
}

static void check_kernel(tram_cpu_kernel kern)
{
    if (!tram_i8_kernel_available(kern))
        cr_skip_test("%s is not available on this CPU", tram_cpu_kernel_name(kern));
    static const int ns[] = {1, 2, 3, 5, 8, 67, 130};
    static const int rows_set[] = {1, 15, 64, 65, 200};
    static const int cols_set[] = {1, 3, 4, 37, 64, 100, 577};
    unsigned seed = 1234 + kern;
    tram_cpu_pool *pool;
    tram_error err = {{0}};
    cr_assert_eq(tram_cpu_pool_create(&pool, 2, &err), 0, "%s", err.msg);
    for (size_t a = 0; a < TRAM_ARRAY_LEN(ns); a++)
        for (size_t b = 0; b < TRAM_ARRAY_LEN(rows_set); b++)
            for (size_t c = 0; c < TRAM_ARRAY_LEN(cols_set); c++) {
                int n = ns[a], rows = rows_set[b], cols = cols_set[c];
                int8_t *x = malloc((size_t)n * cols), *w = malloc((size_t)rows * cols);
                for (size_t i = 0; i < (size_t)n * cols; i++)
                    x[i] = rand_q(&seed);
                for (size_t i = 0; i < (size_t)rows * cols; i++)
                    w[i] = rand_q(&seed);
                void *mem = aligned(tram_i8_matrix_bytes(rows, cols));
                tram_i8_matrix *m = tram_i8_matrix_pack_q(mem, w, rows, cols);
                int8_t *xp = pad_rows(x, n, cols, m->kp);
                int32_t *ref = malloc((size_t)n * rows * 4), *got = malloc((size_t)n * rows * 4);
                reference(ref, x, w, n, rows, cols);
                for (int threads = 1; threads <= 2; threads++) {
                    memset(got, 0x55, (size_t)n * rows * 4);
                    tram_i8_gemm_i32(kern, got, xp, n, m, threads == 2 ? pool : NULL);
                    for (size_t i = 0; i < (size_t)n * rows; i++)
                        cr_assert_eq(got[i], ref[i], "%s n=%d rows=%d cols=%d threads=%d: [%zu] %d vs %d",
                                     tram_cpu_kernel_name(kern), n, rows, cols, threads, i, got[i], ref[i]);
                }
                tram_cpu_pool_quiesce(pool); /* no late worker reads what is freed */
                free(x), free(w), free(mem), free(xp), free(ref), free(got);
            }
    tram_cpu_pool_destroy(pool);
}

Test(int8_gemm, generic_kernel_is_exact) { check_kernel(TRAM_CPU_GENERIC); }
Test(int8_gemm, avx2_kernel_is_exact) { check_kernel(TRAM_CPU_AVX2); }
Test(int8_gemm, vnni_kernel_is_exact) { check_kernel(TRAM_CPU_VNNI); }

/* The largest K allowed, every product at ±127²: the VNNI offset sum
 * 255 * 127 * K is at its int32 limit. */
Test(int8_gemm, extreme_values_at_max_cols_do_not_overflow)
{
    int rows = 3, cols = TRAM_I8_MAX_COLS;
    int8_t *x = malloc(2 * (size_t)cols), *w = malloc((size_t)rows * cols);
    for (int k = 0; k < cols; k++) {
        x[k] = 127, x[cols + k] = -127;
        w[k] = 127, w[cols + k] = -127, w[2 * (size_t)cols + k] = k % 2 ? 127 : -127;
    }
    void *mem = aligned(tram_i8_matrix_bytes(rows, cols));
    tram_i8_matrix *m = tram_i8_matrix_pack_q(mem, w, rows, cols);
    int32_t ref[6], got[6];
    reference(ref, x, w, 2, rows, cols);
    for (tram_cpu_kernel k = TRAM_CPU_GENERIC; k <= TRAM_CPU_VNNI; k++) {
        if (!tram_i8_kernel_available(k))
            continue;
        tram_i8_gemm_i32(k, got, x, 2, m, NULL);
        for (int i = 0; i < 6; i++)
            cr_assert_eq(got[i], ref[i], "%s [%d]: %d vs %d", tram_cpu_kernel_name(k), i, got[i], ref[i]);
    }
    free(x), free(w), free(mem);
}

/* The f32 epilogue is the exact int32 sum times the two scales. */
Test(int8_gemm, f32_epilogue_applies_both_scales)
{
    int n = 7, rows = 70, cols = 45;
    unsigned seed = 99;
    int8_t *x = malloc((size_t)n * cols), *w = malloc((size_t)rows * cols);
    float xs[7], ws[70], y[7 * 70];
    int32_t ref[7 * 70];
    for (int i = 0; i < n * cols; i++)
        x[i] = rand_q(&seed);
    for (int i = 0; i < rows * cols; i++)
        w[i] = rand_q(&seed);
    for (int i = 0; i < n; i++)
        xs[i] = 0.01f + fabsf(rand_f(&seed));
    for (int r = 0; r < rows; r++)
        ws[r] = 0.01f + fabsf(rand_f(&seed));
    void *mem = aligned(tram_i8_matrix_bytes(rows, cols));
    tram_i8_matrix *m = tram_i8_matrix_pack_q(mem, w, rows, cols);
    int8_t *xp = pad_rows(x, n, cols, m->kp);
    reference(ref, x, w, n, rows, cols);
    tram_i8_gemm_f32(tram_i8_kernel_best(), y, xp, xs, n, m, ws, NULL);
    for (int i = 0; i < n; i++)
        for (int r = 0; r < rows; r++) {
            float want = (float)ref[i * rows + r] * xs[i] * ws[r];
            cr_assert_eq(y[i * rows + r], want, "y[%d][%d] %g vs %g", i, r, y[i * rows + r], want);
        }
    free(x), free(w), free(mem), free(xp);
}

/* Each row's max maps to ±127 and every value comes back within half a step. */
Test(int8_gemm, quantize_round_trip_within_half_step)
{
    int rows = 33, cols = 301;
    unsigned seed = 7;
    float *w = malloc((size_t)rows * cols * sizeof(float)), scales[33];
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) /* rows of very different ranges, some with an outlier */
            w[r * cols + k] = r == 5 ? 0.0f : rand_f(&seed) * powf(10.0f, (float)(r % 7) - 3.0f) *
                                                  (k == r ? 50.0f : 1.0f);
    void *mem = aligned(tram_i8_matrix_bytes(rows, cols));
    tram_i8_matrix *m = tram_i8_matrix_pack(mem, w, rows, cols, scales);
    float qf[301];
    int8_t q[301];
    for (int r = 0; r < rows; r++) {
        tram_i8_matrix_row(m, r, 1.0f, qf);
        for (int k = 0; k < cols; k++)
            q[k] = (int8_t)qf[k];
        float amax = 0;
        int qmax = 0;
        for (int k = 0; k < cols; k++) {
            amax = fmaxf(amax, fabsf(w[r * cols + k]));
            qmax = abs(q[k]) > qmax ? abs(q[k]) : qmax;
            cr_assert(fabsf(q[k] * scales[r] - w[r * cols + k]) <= 0.5f * scales[r] * (1 + 1e-5f),
                      "row %d col %d: %g -> %d * %g", r, k, w[r * cols + k], q[k], scales[r]);
        }
        cr_assert_float_eq(scales[r], amax / 127.0f, 1e-12f, "row %d scale", r);
        cr_assert_eq(qmax, amax > 0 ? 127 : 0, "row %d max |q| %d", r, qmax);
        /* activations use the same rule, and pad with zeros */
        int8_t qa[304];
        memset(qa, 0x7f, sizeof(qa));
        float s = tram_i8_quantize(w + r * cols, cols, 304, qa);
        cr_assert_eq(s, scales[r]);
        cr_assert(!memcmp(qa, q, cols) && !qa[301] && !qa[302] && !qa[303], "row %d", r);
    }
    free(w), free(mem);
}

/* ---------------------------------------------------------------- backend */

static tram_backend *be;

static void be_setup(void) { be = test_cpu_backend(); }

static void be_teardown(void) { be->destroy(be); }

TestSuite(int8_backend, .init = be_setup, .fini = be_teardown);

/* y = x·Wᵀ within what symmetric rounding of both operands can move it:
 * |Δy| <= Σ_k (|x_k| δw + |w_k| δx + δx δw) with δ = half a step. */
Test(int8_backend, matmul_within_quantization_bound_of_f32)
{
    int n = 9, rows = 130, cols = 97;
    unsigned seed = 3;
    float *x = malloc((size_t)n * cols * 4), *w = malloc((size_t)rows * cols * 4);
    float *y = malloc((size_t)n * rows * 4);
    for (int i = 0; i < n * cols; i++)
        x[i] = rand_f(&seed) * (i % 13 == 0 ? 20.0f : 1.0f);
    for (int i = 0; i < rows * cols; i++)
        w[i] = rand_f(&seed) * 0.1f;
    tram_weight tw;
    tram_error err;
    be->upload_weight(be, &tw, w, rows, cols, TRAM_W_INT8);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    cr_assert_eq(tw.type, TRAM_W_INT8);
    be->matmul(be, y, x, &tw, n);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    for (int i = 0; i < n; i++) {
        float amax = 0;
        for (int k = 0; k < cols; k++)
            amax = fmaxf(amax, fabsf(x[i * cols + k]));
        float dx = amax / 127.0f / 2.0f;
        for (int r = 0; r < rows; r++) {
            double ref = 0, bound = 0;
            float dw = tw.scales[r] / 2.0f;
            for (int k = 0; k < cols; k++) {
                ref += (double)x[i * cols + k] * w[r * cols + k];
                bound += fabsf(x[i * cols + k]) * dw + fabsf(w[r * cols + k]) * dx + dx * dw;
            }
            cr_assert(fabs(y[i * rows + r] - ref) <= bound * 1.001 + 1e-6, "y[%d][%d] %g vs %g (bound %g)", i,
                      r, y[i * rows + r], ref, bound);
        }
    }
    be->free_weight(be, &tw);
    free(x), free(w), free(y);
}

/* An int8 table (tied embeddings) embeds each token as q * scale. */
Test(int8_backend, embed_dequantizes_rows)
{
    int vocab = 70, dim = 33;
    unsigned seed = 5;
    float *t = malloc((size_t)vocab * dim * 4), out[3 * 33];
    for (int i = 0; i < vocab * dim; i++)
        t[i] = rand_f(&seed);
    tram_weight tw;
    tram_error err;
    be->upload_weight(be, &tw, t, vocab, dim, TRAM_W_INT8);
    int32_t ids[3] = {0, 69, 64};
    be->embed(be, out, &tw, ids, 3);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < dim; k++)
            cr_assert(fabsf(out[i * dim + k] - t[ids[i] * dim + k]) <= tw.scales[ids[i]] * 0.5f * (1 + 1e-5f),
                      "token %d dim %d", ids[i], k);
    be->free_weight(be, &tw);
    free(t);
}

Test(int8_backend, refuses_matrices_too_wide_for_int32)
{
    tram_weight tw;
    tram_error err;
    float *w = calloc(2 * (TRAM_I8_MAX_COLS + 1), sizeof(float));
    be->upload_weight(be, &tw, w, 2, TRAM_I8_MAX_COLS + 1, TRAM_W_INT8);
    cr_assert_eq(be->sync(be, &err), -1);
    cr_assert(strstr(err.msg, "int8"), "%s", err.msg);
    free(w);
}
