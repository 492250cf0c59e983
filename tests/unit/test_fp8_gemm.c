/* FP8 (E4M3) W8A8 on the CPU: the E4M3 encoder and decoder on every code,
 * the AVX2 product bit for bit against the generic reference, the product
 * against an f32 GEMM of the dequantized operands (the sums' rounding only),
 * and the CPU backend's TRAM_W_FP8 weights against f32 math within what
 * E4M3's 3-bit mantissa allows. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_fp8.h"
#include "kernels/fp8_format.h"
#include "tests/unit/test_util.h"

static unsigned lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Uniform in [-1, 1), with an outlier now and then (what FP8 scales meet). */
static float rand_f(unsigned *s)
{
    float v = (lcg(s) / 16777216.0f) * 2.0f - 1.0f;
    return lcg(s) % 64 == 0 ? v * 40.0f : v;
}

Test(fp8_format, every_code_decodes_and_encodes_back)
{
    for (int c = 0; c < 256; c++) {
        float v = tram_fp8_e4m3_decode((uint8_t)c);
        if (tram_fp8_is_nan((uint8_t)c)) {
            cr_assert(isnan(v), "code 0x%02x", c);
            continue;
        }
        cr_assert_eq(tram_fp8_e4m3_encode(v), (uint8_t)c, "code 0x%02x (%g) re-encodes to 0x%02x", c, v,
                     tram_fp8_e4m3_encode(v));
    }
    /* saturation and rounding to even between the two largest codes */
    cr_assert_eq(tram_fp8_e4m3_encode(1e9f), 0x7e);
    cr_assert_eq(tram_fp8_e4m3_encode(-500.0f), 0xfe);
    cr_assert_eq(tram_fp8_e4m3_encode(432.0f), 0x7e); /* halfway 416 | 448: 448's mantissa is even */
}

Test(fp8_format, row_quantization_maps_the_maximum_to_448)
{
    float x[37];
    uint8_t q[40];
    unsigned seed = 7;
    for (int j = 0; j < 37; j++)
        x[j] = rand_f(&seed);
    x[11] = -3.5f * 40.0f; /* the largest magnitude */
    float scale = tram_fp8_quantize_row(x, 37, 40, q);
    cr_assert_float_eq(scale, 140.0f / 448.0f, 1e-7f);
    cr_assert_eq(q[11], 0xfe);
    for (int j = 37; j < 40; j++)
        cr_assert_eq(q[j], 0);
    for (int j = 0; j < 37; j++) /* within half a step of the 3-bit mantissa */
        cr_assert(fabsf(tram_fp8_e4m3_decode(q[j]) * scale - x[j]) <= fabsf(x[j]) / 16 + 0x1p-10f * scale,
                  "x[%d] = %g", j, x[j]);
}

/* The AVX2 activation rounding against the encoder's: rows whose largest
 * value is 448 (scale 1, so each value is rounded as it is), sweeping every
 * 97th f32 bit pattern of both signs (every binade, midpoints among them)
 * and the exact midpoints between neighbouring E4M3 values. */
Test(fp8_gemm, avx2_activation_rounding_equals_the_encoder)
{
    if (!tram_fp8_kernel_available(TRAM_CPU_AVX2))
        cr_skip_test("avx2 is not available on this CPU");
    enum { COLS = 4099 };
    float *x = malloc(COLS * sizeof(float)), *ref = malloc((COLS + 8) * sizeof(float));
    float *got = malloc((COLS + 8) * sizeof(float)), s1, s2;
    uint32_t bits = 0;
    size_t checked = 0;
    for (int row = 0; bits < 0x7f800000u; row++) {
        x[0] = TRAM_FP8_MAX;
        for (int j = 1; j < COLS; j++, bits += 97) {
            uint32_t b = bits | (j & 1u) << 31;
            memcpy(&x[j], &b, 4);
            if (!(fabsf(x[j]) <= TRAM_FP8_MAX) || row == 0) /* 448 the row's maximum, no NaN; row 0: midpoints */
                x[j] = (tram_fp8_e4m3_decode((uint8_t)(j % 126)) + tram_fp8_e4m3_decode((uint8_t)(j % 126 + 1))) / 2;
        }
        tram_fp8_quantize_acts(TRAM_CPU_GENERIC, ref, &s1, x, 1, COLS, 0);
        tram_fp8_quantize_acts(TRAM_CPU_AVX2, got, &s2, x, 1, COLS, 0);
        cr_assert_eq(s1, 1.0f, "row %d: scale %a", row, s1);
        for (int j = 0; j < COLS + 5; j++)
            cr_assert_eq(memcmp(&ref[j], &got[j], 4), 0, "x = %a: encoder %a, avx2 %a", j < COLS ? x[j] : 0.0f,
                         ref[j], got[j]);
        checked += COLS;
    }
    cr_assert_gt(checked, 20000000);
    TRAM_FREE_ALL(x, ref, got);
}

/* A TRAM_W_FP8 weight of random codes (no NaN) and scales, made by the CPU backend. */
static void make_weight(tram_backend *be, tram_weight *w, int rows, int cols, unsigned *seed)
{
    uint8_t *codes = malloc((size_t)rows * cols);
    float *scales = malloc((size_t)rows * sizeof(float));
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        codes[i] = (uint8_t)(lcg(seed) & 0xff);
        if (tram_fp8_is_nan(codes[i]))
            codes[i] ^= 1;
    }
    for (int r = 0; r < rows; r++)
        scales[r] = 0.001f * (1 + lcg(seed) % 100);
    be->upload_weight_fp8(be, w, codes, scales, rows, cols);
    tram_error err = {{0}};
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    free(codes);
    free(scales);
}

Test(fp8_gemm, avx2_equals_the_reference_bit_for_bit)
{
    if (!tram_fp8_kernel_available(TRAM_CPU_AVX2))
        cr_skip_test("avx2 is not available on this CPU");
    static const int ns[] = {1, 3, 8, 9, 21};
    static const int shapes[][2] = {{1, 1}, {17, 5}, {64, 64}, {33, 577}, {130, 200}};
    unsigned seed = 99;
    tram_backend *be = test_cpu_backend();
    for (size_t a = 0; a < TRAM_ARRAY_LEN(ns); a++)
        for (size_t b = 0; b < TRAM_ARRAY_LEN(shapes); b++) {
            int n = ns[a], rows = shapes[b][0], cols = shapes[b][1], kp = tram_fp8_stride(cols);
            tram_weight w;
            make_weight(be, &w, rows, cols, &seed);
            float *x = malloc((size_t)n * cols * sizeof(float)), *xd = malloc((size_t)n * kp * sizeof(float));
            float *xs = malloc(n * sizeof(float)), *ref = malloc((size_t)n * rows * sizeof(float));
            float *fast = malloc((size_t)n * rows * sizeof(float));
            for (size_t i = 0; i < (size_t)n * cols; i++)
                x[i] = rand_f(&seed);
            tram_fp8_quantize_acts(TRAM_CPU_GENERIC, xd, xs, x, n, cols, 0);
            tram_fp8_gemm(TRAM_CPU_GENERIC, NULL, ref, xd, xs, &w, n);
            tram_fp8_gemm(TRAM_CPU_AVX2, NULL, fast, xd, xs, &w, n);
            cr_assert_eq(memcmp(ref, fast, (size_t)n * rows * sizeof(float)), 0, "n %d, %dx%d", n, rows, cols);
            be->free_weight(be, &w);
            TRAM_FREE_ALL(x, xd, xs, ref, fast);
        }
    be->destroy(be);
}

/* The product against an f32 GEMM, in double, of the same dequantized
 * operands: each f32 sum of exact products is within cols * 2^-24 of the
 * sum of their magnitudes (the bound on an f32 sum's rounding). */
Test(fp8_gemm, product_matches_the_dequantized_gemm)
{
    int n = 5, rows = 70, cols = 300, kp = tram_fp8_stride(cols);
    unsigned seed = 3;
    tram_backend *be = test_cpu_backend();
    tram_weight w;
    make_weight(be, &w, rows, cols, &seed);
    float *x = malloc((size_t)n * cols * sizeof(float)), *xd = malloc((size_t)n * kp * sizeof(float));
    float *xs = malloc(n * sizeof(float)), *y = malloc((size_t)n * rows * sizeof(float));
    for (size_t i = 0; i < (size_t)n * cols; i++)
        x[i] = rand_f(&seed);
    tram_fp8_quantize_acts(TRAM_CPU_GENERIC, xd, xs, x, n, cols, 0);
    tram_fp8_gemm(tram_fp8_kernel_best(), NULL, y, xd, xs, &w, n);
    const uint8_t *codes = w.data;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < cols; k++) {
                double p = (double)xd[(size_t)t * kp + k] * tram_fp8_e4m3_decode(codes[(size_t)r * kp + k]);
                sum += p, mag += fabs(p);
            }
            double want = sum * xs[t] * w.scales[r], tol = (cols * 0x1p-24 * mag + 0x1p-20 * fabs(sum)) * xs[t] * w.scales[r];
            cr_assert(fabs(y[(size_t)t * rows + r] - want) <= tol, "y[%d][%d] = %g, want %g ± %g", t, r,
                      y[(size_t)t * rows + r], want, tol);
        }
    be->free_weight(be, &w);
    TRAM_FREE_ALL(x, xd, xs, y);
    be->destroy(be);
}

/* The backend's matmul of an FP8 weight quantized from f32 against the f32
 * product: weights and activations each carry a relative error of at most
 * 2^-4 per value, so each output is within (2^-4 + 2^-4 + 2^-8) of Σ|x||w|. */
Test(fp8_gemm, backend_matmul_is_near_f32)
{
    int n = 4, rows = 48, cols = 160;
    unsigned seed = 11;
    tram_backend *be = test_cpu_backend();
    float *wf = malloc((size_t)rows * cols * sizeof(float)), *x = malloc((size_t)n * cols * sizeof(float));
    float *y = malloc((size_t)n * rows * sizeof(float));
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        wf[i] = rand_f(&seed);
    for (size_t i = 0; i < (size_t)n * cols; i++)
        x[i] = rand_f(&seed);
    tram_weight w;
    be->upload_weight(be, &w, wf, rows, cols, TRAM_W_FP8);
    tram_error err = {{0}};
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    cr_assert_eq(w.type, TRAM_W_FP8);
    be->matmul(be, y, x, &w, n);
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    double worst = 0;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            double want = 0, mag = 0;
            for (int k = 0; k < cols; k++) {
                double p = (double)x[(size_t)t * cols + k] * wf[(size_t)r * cols + k];
                want += p, mag += fabs(p);
            }
            double e = fabs(y[(size_t)t * rows + r] - want) / mag;
            cr_assert(e <= 0x1p-3 + 0x1p-8, "y[%d][%d] = %g, want %g", t, r, y[(size_t)t * rows + r], want);
            worst = fmax(worst, e);
        }
    cr_assert(worst > 0, "an FP8 product equal to f32 everywhere: the weight was not quantized");
    be->free_weight(be, &w);
    TRAM_FREE_ALL(wf, x, y);
    be->destroy(be);
}

Test(fp8_gemm, a_nan_code_is_refused)
{
    tram_backend *be = test_cpu_backend();
    uint8_t codes[16] = {0};
    float scales[2] = {1, 1};
    codes[9] = 0xff;
    tram_weight w;
    be->upload_weight_fp8(be, &w, codes, scales, 2, 8);
    tram_error err = {{0}};
    cr_assert_neq(be->sync(be, &err), 0);
    cr_assert(strstr(err.msg, "NaN"), "%s", err.msg);
    be->destroy(be);
}
