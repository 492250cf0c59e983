/* test_dequant.c — ggml formats to f32, checked against the `gguf` Python
 * package's dequantizer (fixtures by tests/fixtures/make_gguf_fixtures.py)
 * and, for f16/bf16, against a from-the-definition reference over every
 * bit pattern. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dequant.h"
#include "models/gguf.h"

#define FIXTURES "tests/fixtures/gguf/"

static float *read_f32_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (run tests/fixtures/make_gguf_fixtures.py)", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)len + 1);
    cr_assert(v && fread(v, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len / sizeof(float);
    return v;
}

/* exact: bit-identical (NaN: any NaN).  Otherwise |got - want| may be
 * tol times the largest |want| of the tensor, which admits a fused
 * multiply-add where the reference rounds twice. */
static void expect_close(const float *got, const float *want, size_t n, int exact, double tol, const char *what)
{
    double max_abs = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(want[i]))
            max_abs = fmax(max_abs, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]))
            cr_assert(isnan(got[i]), "%s[%zu]: got %g, want NaN", what, i, got[i]);
        else if (exact)
            cr_assert(!memcmp(&got[i], &want[i], sizeof(float)), "%s[%zu]: got %a, want %a", what, i, got[i], want[i]);
        else
            cr_assert(fabs(got[i] - want[i]) <= tol * max_abs, "%s[%zu]: got %.9g, want %.9g", what, i, got[i],
                      want[i]);
    }
}

static void check_tensor(const char *name, tram_ggml_type type, int exact)
{
    tram_gguf *g;
    tram_error err;
    char path[256];
    cr_assert(tram_gguf_open(&g, FIXTURES "types.gguf", &err) == 0, "%s", err.msg);
    const tram_gguf_tensor *t = tram_gguf_find_tensor(g, name);
    cr_assert(t, "tensor %s missing", name);
    cr_assert_eq(t->type, type, "%s: type %d", name, t->type);
    snprintf(path, sizeof(path), FIXTURES "expected/%s.f32", name);
    size_t n;
    float *want = read_f32_file(path, &n);
    cr_assert_eq((size_t)tram_gguf_tensor_numel(t), n, "%s: %lld elements, fixture has %zu", name,
                 (long long)tram_gguf_tensor_numel(t), n);
    float *got = malloc(n * sizeof(float));
    cr_assert(tram_gguf_dequantize(t, got, &err) == 0, "%s", err.msg);
    expect_close(got, want, n, exact, 1e-6, name);

    /* Row by row from an odd address: loads must not assume alignment and
     * rows must be independently decodable. */
    int64_t row = t->ne[0], row_bytes = tram_ggml_type_size(t->type, row);
    uint8_t *copy = malloc(t->nbytes + 1);
    memcpy(copy + 1, t->data, t->nbytes);
    for (int64_t r = 0; r < (int64_t)n / row; r++) {
        cr_assert(tram_dequantize(t->type, copy + 1 + r * row_bytes, got, row, &err) == 0, "%s", err.msg);
        expect_close(got, want + r * row, (size_t)row, exact, 1e-6, name);
    }
    free(copy);
    free(got);
    free(want);
    tram_gguf_close(g);
}

Test(dequant, f32) { check_tensor("f32", TRAM_GGML_F32, 1); }
Test(dequant, f16_specials) { check_tensor("f16", TRAM_GGML_F16, 1); }
Test(dequant, bf16_specials) { check_tensor("bf16", TRAM_GGML_BF16, 1); }
Test(dequant, i8) { check_tensor("i8", TRAM_GGML_I8, 1); }
Test(dequant, q8_0) { check_tensor("q8_0", TRAM_GGML_Q8_0, 0); }
Test(dequant, q8_0_four_dims) { check_tensor("q8_0_4d", TRAM_GGML_Q8_0, 0); }
Test(dequant, q4_0) { check_tensor("q4_0", TRAM_GGML_Q4_0, 0); }
Test(dequant, q4_1) { check_tensor("q4_1", TRAM_GGML_Q4_1, 0); }
Test(dequant, q4_k) { check_tensor("q4_k", TRAM_GGML_Q4_K, 0); }
Test(dequant, q6_k) { check_tensor("q6_k", TRAM_GGML_Q6_K, 0); }

/* IEEE binary16 straight from its definition. */
static float half_reference(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v = exp == 0 ? ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, exp - 25);
    return (float)(sign ? -v : v);
}

/* bfloat16: 8 exponent bits (bias 127), 7 mantissa bits. */
static float bf16_reference(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 7) & 255, mant = h & 127;
    double v = exp == 0 ? ldexp(mant, -133) : exp == 255 ? (mant ? NAN : INFINITY) : ldexp(128 + mant, exp - 134);
    return (float)(sign ? -v : v);
}

Test(dequant, every_f16_and_bf16_bit_pattern)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float want = half_reference((uint16_t)h), got = tram_f16_to_f32((uint16_t)h);
        if (isnan(want))
            cr_assert(isnan(got), "f16 %04x: got %g", h, got);
        else
            cr_assert(!memcmp(&got, &want, 4), "f16 %04x: got %a, want %a", h, got, want);
        want = bf16_reference((uint16_t)h);
        got = tram_bf16_to_f32((uint16_t)h);
        if (isnan(want))
            cr_assert(isnan(got), "bf16 %04x: got %g", h, got);
        else
            cr_assert(!memcmp(&got, &want, 4), "bf16 %04x: got %a, want %a", h, got, want);
    }
}

/* Sizes from ggml's block definitions (ggml-common.h). */
Test(dequant, type_sizes)
{
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_F32, 7), 28);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_F16, 7), 14);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_BF16, 3), 6);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_I8, 5), 5);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_Q8_0, 64), 68);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_Q4_0, 64), 36);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_Q4_1, 64), 40);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_Q4_K, 512), 288);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_Q6_K, 512), 420);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_Q8_0, 33), -1, "partial block");
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_F32, -1), -1);
    cr_assert_eq(tram_ggml_type_size(TRAM_GGML_F32, INT64_MAX), -1, "overflow");
    cr_assert_eq(tram_ggml_type_size((tram_ggml_type)99, 32), -1);
    cr_assert_eq(tram_ggml_block_size(TRAM_GGML_Q6_K), 256);
    cr_assert_eq(tram_ggml_block_size((tram_ggml_type)7), 0, "Q5_0 is not supported");
    cr_assert_str_eq(tram_ggml_type_name(TRAM_GGML_Q4_K), "Q4_K");
    cr_assert_str_eq(tram_ggml_type_name((tram_ggml_type)99), "unknown");
}

Test(dequant, rejects_unknown_type_and_partial_blocks)
{
    uint8_t src[64] = {0};
    float dst[64];
    tram_error err;
    cr_assert_eq(tram_dequantize((tram_ggml_type)6, src, dst, 32, &err), -1);
    cr_assert(strstr(err.msg, "unknown type"), "%s", err.msg);
    cr_assert_eq(tram_dequantize(TRAM_GGML_Q4_0, src, dst, 48, &err), -1);
    cr_assert(strstr(err.msg, "48") && strstr(err.msg, "Q4_0"), "%s", err.msg);
}

/* Quantizing then dequantizing moves each value by at most half a step (the
 * block's d; Q4_1 also its min rounded to f16), for values of every sign
 * and spread, a constant block and a block of zeros among them.  Q4_0 by a
 * whole step at most: its scale maps the largest magnitude to -8, so a
 * value as large of the other sign is clipped to +7 (as ggml's is). */
Test(dequant, quantized_blocks_come_back_within_half_a_step)
{
    enum { N = 32 * 6 };
    static const tram_ggml_type types[] = {TRAM_GGML_Q8_0, TRAM_GGML_Q4_0, TRAM_GGML_Q4_1};
    float x[N], back[N];
    uint8_t blocks[N];
    tram_error err;
    for (int i = 0; i < N; i++) {
        int b = i / 32;
        x[i] = b == 4 ? 0.75f : b == 5 ? 0.0f : (float)((i * 37 % 61) - 30) * (b + 1) * 0.013f + (b == 3 ? 5.0f : 0);
    }
    for (size_t t = 0; t < TRAM_ARRAY_LEN(types); t++) {
        cr_assert_eq(tram_quantize_blocks(types[t], x, blocks, N, &err), 0, "%s", err.msg);
        cr_assert_eq(tram_dequantize(types[t], blocks, back, N, &err), 0, "%s", err.msg);
        for (int b = 0; b < N / 32; b++) {
            float lo = x[b * 32], hi = lo, amax = 0;
            for (int j = 0; j < 32; j++) {
                lo = fminf(lo, x[b * 32 + j]);
                hi = fmaxf(hi, x[b * 32 + j]);
                amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            }
            double step = types[t] == TRAM_GGML_Q8_0 ? amax / 127 : types[t] == TRAM_GGML_Q4_0 ? amax / 8 : (hi - lo) / 15;
            double tol = (types[t] == TRAM_GGML_Q4_0 ? 1.0 : 0.5) * step * 1.01 + amax * 0x1p-10; /* f16 d, m */
            for (int j = 0; j < 32; j++)
                cr_assert(fabs(back[b * 32 + j] - x[b * 32 + j]) <= tol, "%s block %d [%d]: %g came back %g",
                          tram_ggml_type_name(types[t]), b, j, x[b * 32 + j], back[b * 32 + j]);
        }
    }
    cr_assert_eq(tram_quantize_blocks(TRAM_GGML_Q6_K, x, blocks, N, &err), -1);
    cr_assert(strstr(err.msg, "Q6_K"), "%s", err.msg);
    cr_assert_eq(tram_quantize_blocks(TRAM_GGML_Q8_0, x, blocks, 48, &err), -1, "a partial block");
}

/* The half rounding of the scales: every finite half's value comes back as
 * that half (a Q8_0 block whose largest value is 127 d has scale d exactly). */
Test(dequant, block_scales_round_to_the_nearest_half)
{
    float x[32] = {0}, back[32];
    uint8_t block[34];
    for (uint32_t h = 1; h < 0x7c00u; h++) {
        float d = tram_f16_to_f32((uint16_t)h);
        x[0] = 127.0f * d;
        if (!isfinite(x[0]) || x[0] / 127.0f != d)
            continue; /* 127 d must divide back exactly */
        tram_quantize_blocks(TRAM_GGML_Q8_0, x, block, 32, NULL);
        uint16_t got;
        memcpy(&got, block, 2);
        cr_assert_eq(got, h, "scale of half 0x%04x came back 0x%04x", h, got);
        tram_dequantize(TRAM_GGML_Q8_0, block, back, 32, NULL);
        cr_assert_eq(back[0], x[0]);
    }
}
