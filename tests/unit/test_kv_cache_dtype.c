/* --kv-cache-dtype's formats (kernels/kv_format.h): E4M3 rounding against
 * torch's float8_e4m3fn, the error bound of each format's slots, and the
 * pool an engine sizes from --kv-cache-memory in each format.  (Attention
 * over quantized caches: test_cpu_backend.c; an int8 cache under prefix
 * hits, chunked prefill and preemption: test_engine.c.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "engine/tram.h"
#include "kernels/kv_format.h"

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof(f));
    return f;
}

/* tests/fixtures/make_fp8_fixtures.py: every code, the midpoints between
 * neighbouring codes and their float neighbours, random values; both signs. */
Test(kv_fp8, rounds_as_torch_float8_e4m3fn)
{
    FILE *f = fopen("tests/fixtures/fp8/e4m3.txt", "r");
    cr_assert(f, "tests/fixtures/fp8/e4m3.txt is missing");
    unsigned bits, code;
    int n = 0;
    while (fscanf(f, "%x %x", &bits, &code) == 2) {
        float x = from_bits(bits);
        cr_assert_eq(tram_fp8_e4m3_encode(x), code, "%a: tram 0x%02x, torch 0x%02x", x, tram_fp8_e4m3_encode(x),
                     code);
        n++;
    }
    fclose(f);
    cr_assert_gt(n, 1000);
}

Test(kv_fp8, decodes_every_code_back_to_itself_and_saturates)
{
    for (int c = 0; c < 256; c++) {
        float x = tram_fp8_e4m3_decode((uint8_t)c);
        if ((c & 0x7f) == 0x7f)
            cr_assert(isnan(x), "code 0x%02x is NaN", c);
        else
            cr_assert_eq(tram_fp8_e4m3_encode(x), c, "0x%02x -> %a -> 0x%02x", c, x, tram_fp8_e4m3_encode(x));
    }
    cr_assert_eq(tram_fp8_e4m3_decode(0x7e), 448.0f);
    cr_assert_eq(tram_fp8_e4m3_decode(0x01), 0x1p-9f);
    cr_assert_eq(tram_fp8_e4m3_encode(464.0f), 0x7e); /* CUDA's SATFINITE, where torch would round to 448 too */
    cr_assert_eq(tram_fp8_e4m3_encode(1e30f), 0x7e);
    cr_assert_eq(tram_fp8_e4m3_encode(-INFINITY), 0xfe);
    cr_assert_eq(tram_fp8_e4m3_encode(NAN) & 0x7f, 0x7f);
}

/* One token's K over 4 heads of 64 spanning six orders of magnitude: each
 * head's values come back within half an int8 step of its max, or within
 * E4M3's half ulp (1/16 of the value, 2^-10 of the scale below the normals). */
static void check_slot_error(tram_kv_dtype t)
{
    enum { HEADS = 4, HD = 64 };
    float x[HEADS * HD];
    unsigned s = 7;
    for (int i = 0; i < HEADS * HD; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((s >> 8) / 16777216.0f - 0.5f) * powf(10.0f, (float)(i / HD) * 2 - 3);
    }
    uint8_t slot[HEADS * HD + HEADS * 4];
    cr_assert_eq(tram_kv_slot_bytes(t, HEADS, HD, 4), sizeof(slot));
    tram_kv_quantize_slot(t, slot, x, HEADS, HD);
    const float *scales = (const float *)(slot + tram_kv_scales_offset(HEADS, HD));
    for (int i = 0; i < HEADS * HD; i++) {
        float scale = scales[i / HD];
        float y = scale * (t == TRAM_KV_INT8 ? (float)(int8_t)slot[i] : tram_fp8_e4m3_decode(slot[i]));
        float bound = t == TRAM_KV_INT8 ? 0.5f * scale : fmaxf(fabsf(x[i]) / 16, 0x1p-10f * scale);
        cr_assert_leq(fabsf(y - x[i]), bound * 1.0001f, "value %d: %g stored as %g", i, x[i], y);
    }
}

Test(kv_slot, int8_within_half_a_step) { check_slot_error(TRAM_KV_INT8); }
Test(kv_slot, fp8_within_half_an_ulp) { check_slot_error(TRAM_KV_FP8); }

/* The same --kv-cache-memory holds budget / block bytes blocks, a block's
 * bytes counted in the cache's format: 2 (K, V) x layers x block_size slots,
 * a slot kv_heads x head_dim values (f32) or as many bytes plus a scale per
 * KV head.  On dummy weights of tests/fixtures/tp/llama-gqa.json (4 layers, 2
 * KV heads of 32), alone and as two tensor-parallel ranks of one KV head. */
static int pool_blocks(const char *dtype, int tp)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 1;
    c.tensor_parallel_size = tp;
    c.max_model_len = 256;
    c.max_num_batched_tokens = 256;
    c.max_num_seqs = 4;
    c.kv_cache_memory = (size_t)8 << 20;
    snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "%s", dtype);
    snprintf(c.load_format, sizeof(c.load_format), "dummy");
    snprintf(c.preset, sizeof(c.preset), "tests/fixtures/tp/llama-gqa.json");
    tram_engine *e = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    tram_engine_destroy(e);
    return s.num_blocks_total;
}

Test(kv_capacity, blocks_per_dtype_from_the_same_memory, .timeout = 120)
{
    size_t budget = (size_t)8 << 20, per_layer_kv = 2 * 16; /* K and V, 16 slots a block */
    size_t f32 = 4 * per_layer_kv * (2 * 32 * 4), byte = 4 * per_layer_kv * (2 * 32 + 2 * 4);
    cr_assert_eq(pool_blocks("auto", 1), budget / f32);
    cr_assert_eq(pool_blocks("int8", 1), budget / byte);
    cr_assert_eq(pool_blocks("fp8", 1), budget / byte);
    cr_assert_eq(pool_blocks("int8", 2), budget / byte, "two ranks of one KV head hold the same bytes");
    cr_assert_gt((double)pool_blocks("int8", 1) / pool_blocks("auto", 1), 3.5);
}

Test(kv_capacity, an_unknown_dtype_is_refused)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "int4");
    tram_engine *e = NULL;
    tram_error err = {{0}};
    cr_assert_neq(tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err), 0);
    cr_assert(strstr(err.msg, "kv_cache_dtype"), "%s", err.msg);
}

/* Both caches run on --device cuda too (kv_store writes the CPU's bytes,
 * attention's variant 1 reads them; `make gpu-check`'s formats step holds
 * them against the CPU).  Without a GPU here the engine stops at the device,
 * never at the cache's dtype. */
Test(kv_capacity, a_quantized_cache_on_cuda_fails_only_for_want_of_a_gpu)
{
    static const char *const dtypes[] = {"int8", "fp8"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(dtypes); i++) {
        tram_engine_config c;
        tram_engine_config_init(&c);
        snprintf(c.device, sizeof(c.device), "cuda");
        snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "%s", dtypes[i]);
        tram_engine *e = NULL;
        tram_error err = {{0}}, plain_err = {{0}};
        int rc = tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err);
        snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "auto");
        tram_engine *plain = NULL;
        int plain_rc = tram_engine_create(&plain, &c, TRAM_DEFAULT_MODEL, &plain_err);
        cr_assert_eq(rc, plain_rc, "%s: %s / auto: %s", dtypes[i], err.msg, plain_err.msg);
        cr_assert_str_eq(err.msg, plain_err.msg);
        cr_assert_null(strstr(err.msg, "kv"), "%s", err.msg);
        tram_engine_destroy(e);
        tram_engine_destroy(plain);
    }
}
