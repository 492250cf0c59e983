/* The KV dequantization kernels (kernels/cpu/kv_dequant.h): every kernel
 * this CPU runs gives the generic reference's floats exactly, on chunks whose
 * codes take every byte value (E4M3 subnormals and NaNs included), at head
 * widths that are and are not multiples of the 8-value vectors; and the
 * reference is code x scale (kernels/kv_format.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kv_dequant.h"

enum { HEADS = 3, NK = 19 };

/* NK slots of random codes, each head's scale spread over many binades. */
static uint8_t *random_slots(size_t slot_bytes, int head_dim, unsigned seed)
{
    uint8_t *slots = malloc(NK * slot_bytes);
    for (size_t i = 0; i < NK * slot_bytes; i++)
        slots[i] = (uint8_t)((seed = seed * 1664525u + 1013904223u) >> 24);
    for (int j = 0; j < NK; j++) {
        float *scales = (float *)(slots + j * slot_bytes + tram_kv_scales_offset(HEADS, head_dim));
        for (int h = 0; h < HEADS; h++)
            scales[h] = ldexpf(1.0f + (float)((j * HEADS + h) % 7) / 7.0f, (j * HEADS + h) % 41 - 20);
    }
    return slots;
}

static int same_float(float a, float b) { return isnan(a) ? isnan(b) : !memcmp(&a, &b, sizeof(a)); }

static void check_dtype(tram_kv_dtype t, int head_dim)
{
    float lut[256];
    for (int c = 0; c < 256; c++)
        lut[c] = tram_fp8_e4m3_decode((uint8_t)c);
    size_t sb = tram_kv_slot_bytes(t, HEADS, head_dim, sizeof(float)), n = (size_t)NK * head_dim;
    uint8_t *slots = random_slots(sb, head_dim, 7u + (unsigned)head_dim);
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    for (int h = 0; h < HEADS; h++) {
        tram_kv_chunk c = {.dtype = t, .slots = slots, .slot_bytes = sb, .nk = NK, .kv_head = h,
                           .n_kv_heads = HEADS, .head_dim = head_dim};
        tram_kv_dequantize(TRAM_CPU_GENERIC, ref, &c, lut);
        for (int j = 0; j < NK; j++) {
            const uint8_t *slot = slots + j * sb;
            float scale = ((const float *)(slot + tram_kv_scales_offset(HEADS, head_dim)))[h];
            for (int d = 0; d < head_dim; d++) {
                uint8_t code = slot[h * head_dim + d];
                float want = (t == TRAM_KV_INT8 ? (float)(int8_t)code : tram_fp8_e4m3_decode(code)) * scale;
                cr_assert(same_float(ref[j * head_dim + d], want), "generic: code 0x%02x scale %a: %a, want %a",
                          code, scale, ref[j * head_dim + d], want);
            }
        }
        for (tram_cpu_kernel k = TRAM_CPU_AVX2; k <= TRAM_CPU_VNNI; k++) {
            if (!tram_kv_kernel_available(k))
                continue;
            memset(got, 0xff, n * sizeof(float));
            tram_kv_dequantize(k, got, &c, lut);
            for (size_t i = 0; i < n; i++)
                cr_assert(same_float(got[i], ref[i]), "%s, dtype %d, head_dim %d, head %d, value %zu: %a, reference %a",
                          tram_cpu_kernel_name(k), (int)t, head_dim, h, i, got[i], ref[i]);
        }
    }
    free(slots), free(ref), free(got);
}

Test(kv_dequant, every_kernel_gives_the_reference_floats)
{
    static const int widths[] = {8, 64, 100, 128};
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
        check_dtype(TRAM_KV_INT8, widths[w]);
        check_dtype(TRAM_KV_FP8, widths[w]);
    }
}

/* The vector kernel is the one the backend picks wherever the CPU has AVX2
 * and F16C (and the test above then compared it, not the reference with
 * itself). */
Test(kv_dequant, avx2_is_picked_where_the_cpu_has_it)
{
    tram_cpu_features f = tram_cpu_features_detect();
    cr_assert_eq(tram_kv_kernel_best() == TRAM_CPU_AVX2, f.avx2 && f.f16c);
}
