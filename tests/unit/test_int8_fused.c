/* W8A8 activation quantization fused into the ops that produce it, on the
 * CPU backend: rmsnorm_q / add_rmsnorm_q / silu_mul_q followed by matmul_q
 * must give exactly (memcmp) what the unfused ops followed by the int8
 * matmul give, which quantizes its input itself; the int8 copy must be
 * tram_i8_quantize of the f32 output, padding zeroed; a mis-sized copy is an
 * error.  Also split_qkv, which unpacks the fused q/k/v product. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/int8_format.h"
#include "tests/unit/test_util.h"

/* Odd widths (not multiples of 4: the int8 rows are padded) and enough rows
 * for the ops' threaded path. */
#define N 11
#define DIM 97
#define FFN 131
#define ROWS 70

static tram_backend *be;

static void setup(void) { be = test_cpu_backend(); }

static void teardown(void) { be->destroy(be); }

TestSuite(int8_fused, .init = setup, .fini = teardown);

static float *random_floats(size_t n, float scale, unsigned seed)
{
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = ((seed >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
    }
    return v;
}

static tram_weight weight(int rows, int cols, tram_wtype type, unsigned seed)
{
    float *v = random_floats((size_t)rows * cols, 1.0f, seed);
    tram_weight w;
    tram_error err;
    be->upload_weight(be, &w, v, rows, cols, type);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    free(v);
    return w;
}

static tram_qact qact_new(int cols)
{
    tram_qact qa = {.cols = cols, .kp = tram_qact_stride(cols)};
    qa.q = malloc((size_t)N * qa.kp);
    qa.scales = malloc(N * sizeof(float));
    memset(qa.q, 0x55, (size_t)N * qa.kp); /* padding must be overwritten */
    return qa;
}

static void qact_free(tram_qact *qa)
{
    free(qa->q);
    free(qa->scales);
}

/* The int8 copy is the per-row quantization of the op's f32 output. */
static void assert_qact_of(const tram_qact *qa, const float *out)
{
    int8_t *q = malloc(qa->kp);
    for (int i = 0; i < N; i++) {
        float s = tram_i8_quantize(out + (size_t)i * qa->cols, qa->cols, qa->kp, q);
        cr_assert(!memcmp(&s, &qa->scales[i], sizeof(s)), "row %d scale", i);
        cr_assert(!memcmp(q, qa->q + (size_t)i * qa->kp, qa->kp), "row %d int8 values", i);
    }
    free(q);
}

/* fused: op + matmul_q (y); unfused: op + matmul (y_ref). */
static void assert_same(const float *a, const float *b, size_t n, const char *what)
{
    cr_assert(!memcmp(a, b, n * sizeof(float)), "%s differs", what);
}

/* Once the queued ops ran: the fused op's output out[N][cols] and product y
 * equal the unfused ones, and qa holds out quantized; frees qa. */
static void assert_fused_equals_unfused(tram_qact *qa, const float *out, const float *out_ref, const char *what,
                                        const float *y, const float *y_ref)
{
    tram_error err;
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    assert_same(out, out_ref, (size_t)N * qa->cols, what);
    assert_same(y, y_ref, N * ROWS, "product");
    assert_qact_of(qa, out);
    qact_free(qa);
}

Test(int8_fused, rmsnorm_q_then_matmul_q_equals_unfused)
{
    tram_weight norm = weight(1, DIM, TRAM_W_F32, 1), w = weight(ROWS, DIM, TRAM_W_INT8, 2);
    float *x = random_floats((size_t)N * DIM, 3.0f, 3);
    float *out = malloc(N * DIM * 4), *out_ref = malloc(N * DIM * 4), *y = malloc(N * ROWS * 4),
          *y_ref = malloc(N * ROWS * 4);
    tram_qact qa = qact_new(DIM);
    be->rmsnorm(be, out_ref, x, &norm, N, 1e-5f);
    be->matmul(be, y_ref, out_ref, &w, N);
    be->rmsnorm_q(be, out, &qa, x, &norm, N, 1e-5f);
    be->matmul_q(be, y, &qa, &w, N);
    assert_fused_equals_unfused(&qa, out, out_ref, "rmsnorm output", y, y_ref);
    be->free_weight(be, &norm), be->free_weight(be, &w);
    free(x), free(out), free(out_ref), free(y), free(y_ref);
}

Test(int8_fused, add_rmsnorm_q_then_matmul_q_equals_unfused)
{
    tram_weight norm = weight(1, DIM, TRAM_W_F32, 4), w = weight(ROWS, DIM, TRAM_W_INT8, 5);
    float *res = random_floats((size_t)N * DIM, 2.0f, 6), *delta = random_floats((size_t)N * DIM, 1.0f, 7);
    float *res_ref = malloc(N * DIM * 4), *out = malloc(N * DIM * 4), *out_ref = malloc(N * DIM * 4);
    float *y = malloc(N * ROWS * 4), *y_ref = malloc(N * ROWS * 4);
    memcpy(res_ref, res, N * DIM * 4);
    tram_qact qa = qact_new(DIM);
    be->add_rmsnorm(be, res_ref, out_ref, delta, &norm, N, 1e-5f);
    be->matmul(be, y_ref, out_ref, &w, N);
    be->add_rmsnorm_q(be, res, out, &qa, delta, &norm, N, 1e-5f);
    be->matmul_q(be, y, &qa, &w, N);
    assert_fused_equals_unfused(&qa, out, out_ref, "add_rmsnorm output", y, y_ref);
    assert_same(res, res_ref, N * DIM, "residual");
    be->free_weight(be, &norm), be->free_weight(be, &w);
    free(res), free(delta), free(res_ref), free(out), free(out_ref), free(y), free(y_ref);
}

Test(int8_fused, silu_mul_q_then_matmul_q_equals_unfused)
{
    tram_weight w = weight(ROWS, FFN, TRAM_W_INT8, 8);
    float *gu = random_floats((size_t)N * 2 * FFN, 4.0f, 9);
    float *out = malloc(N * FFN * 4), *out_ref = malloc(N * FFN * 4), *y = malloc(N * ROWS * 4),
          *y_ref = malloc(N * ROWS * 4);
    tram_qact qa = qact_new(FFN);
    be->silu_mul(be, out_ref, gu, N, FFN);
    be->matmul(be, y_ref, out_ref, &w, N);
    be->silu_mul_q(be, out, &qa, gu, N, FFN);
    be->matmul_q(be, y, &qa, &w, N);
    assert_fused_equals_unfused(&qa, out, out_ref, "silu_mul output", y, y_ref);
    be->free_weight(be, &w);
    free(gu), free(out), free(out_ref), free(y), free(y_ref);
}

/* A copy sized for another width, or matmul_q on a weight that is not int8,
 * is reported through sync() and writes nothing. */
Test(int8_fused, mis_sized_copy_or_non_int8_weight_is_an_error)
{
    tram_weight norm = weight(1, DIM, TRAM_W_F32, 10), wf = weight(ROWS, DIM, TRAM_W_F32, 11);
    tram_weight wi = weight(ROWS, FFN, TRAM_W_INT8, 12);
    float *x = random_floats((size_t)N * 2 * FFN, 1.0f, 13), *out = calloc(N * FFN, 4), *y = calloc(N * ROWS, 4);
    tram_qact qa = qact_new(DIM + 1);
    tram_error err;
    be->rmsnorm_q(be, out, &qa, x, &norm, N, 1e-5f);
    cr_assert_eq(be->sync(be, &err), -1);
    cr_assert(strstr(err.msg, "wrong width"), "%s", err.msg);
    be->silu_mul_q(be, out, &qa, x, N, FFN);
    cr_assert_eq(be->sync(be, &err), -1);
    be->matmul_q(be, y, &qa, &wi, N);
    cr_assert_eq(be->sync(be, &err), -1);
    for (int i = 0; i < N * FFN; i++)
        cr_assert_eq(out[i], 0.0f);
    qa.cols = DIM;
    qa.kp = tram_qact_stride(DIM);
    be->matmul_q(be, y, &qa, &wf, N);
    cr_assert_eq(be->sync(be, &err), -1);
    cr_assert(strstr(err.msg, "int8"), "%s", err.msg);
    for (int i = 0; i < N * ROWS; i++)
        cr_assert_eq(y[i], 0.0f);
    qact_free(&qa);
    be->free_weight(be, &norm), be->free_weight(be, &wf), be->free_weight(be, &wi);
    free(x), free(out), free(y);
}

Test(int8_fused, split_qkv_unpacks_rows)
{
    int n = 3, qd = 8, kd = 4, w = qd + 2 * kd;
    float qkv[3 * 16], q[3 * 8], k[3 * 4], v[3 * 4];
    for (int i = 0; i < n * w; i++)
        qkv[i] = (float)i;
    tram_error err;
    be->split_qkv(be, q, k, v, qkv, n, qd, kd);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < qd; j++)
            cr_assert_eq(q[i * qd + j], (float)(i * w + j));
        for (int j = 0; j < kd; j++) {
            cr_assert_eq(k[i * kd + j], (float)(i * w + qd + j));
            cr_assert_eq(v[i * kd + j], (float)(i * w + qd + kd + j));
        }
    }
}
