/* kv_dequant.h — a quantized KV cache's codes back to f32, a chunk of one KV
 * head's slots at a time, for attention (kernels/cpu/attention.c).  The
 * generic kernel is the reference: a multiply per value (int8) or a table of
 * the 256 E4M3 values (fp8).  The AVX2 one does 8 values per instruction:
 * int8 codes sign-extended and converted, E4M3 codes moved into f16 bit
 * patterns (the same exponent and mantissa, 8 exponents lower) that F16C
 * converts, subnormals included; both give the reference's floats exactly. */
#ifndef TRAM_CPU_KV_DEQUANT_H
#define TRAM_CPU_KV_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/features.h"
#include "kernels/kv_format.h"

/* Where the chunk is and what it holds: nk slots slot_bytes apart, each
 * n_kv_heads heads of head_dim codes then their scales (kernels/kv_format.h). */
typedef struct {
    tram_kv_dtype dtype; /* INT8 or FP8 */
    const uint8_t *slots;
    size_t slot_bytes;
    int nk, kv_head, n_kv_heads, head_dim;
} tram_kv_chunk;

/* Whether kernel k runs here (AVX2: avx2 and f16c), and the fastest that does. */
int tram_kv_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_kv_kernel_best(void);

/* out[nk][head_dim] = kv_head's values of the chunk's slots; fp8_lut maps an
 * E4M3 code to its value (tram_fp8_e4m3_decode), used by the generic kernel. */
void tram_kv_dequantize(tram_cpu_kernel k, float *out, const tram_kv_chunk *c, const float *fp8_lut);

#endif
