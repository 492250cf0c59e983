/* dequant.h — ggml tensor types: block geometry, conversion to f32, and
 * from f32 to the 32-element block types (dummy weights in a GGUF format).
 *
 * Block layouts are ggml's (ggml-common.h): a block of `block_size` elements
 * takes `type_size` bytes; scales are little-endian f16.  tram_ggml_type_size,
 * tram_ggml_type_name (models/gguf.h) and tram_gguf_dequantize are built on these. */
#ifndef TRAM_DEQUANT_H
#define TRAM_DEQUANT_H

#include <stdint.h>

#include "kernels/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ggml tensor types this reader knows (numbering as in ggml). */
typedef enum {
    TRAM_GGML_F32 = 0, TRAM_GGML_F16 = 1, TRAM_GGML_Q4_0 = 2, TRAM_GGML_Q4_1 = 3,
    TRAM_GGML_Q8_0 = 8, TRAM_GGML_Q4_K = 12, TRAM_GGML_Q6_K = 14, TRAM_GGML_I8 = 24,
    TRAM_GGML_BF16 = 30,
} tram_ggml_type;

/* Elements per block (1 for plain types), or 0 for a type this reader does
 * not know. */
int64_t tram_ggml_block_size(tram_ggml_type type);

/* Dequantizes n elements, a multiple of the block size, from src (any
 * alignment) into dst.  Fails only on an unknown type or a partial block. */
int tram_dequantize(tram_ggml_type type, const void *src, float *dst, int64_t n, tram_error *err);

/* Quantizes n elements of src, a multiple of 32, into blocks of type (Q8_0,
 * Q4_0 or Q4_1, as ggml's reference quantizers round) at dst.  Fails on
 * another type or a partial block. */
int tram_quantize_blocks(tram_ggml_type type, const float *src, void *dst, int64_t n, tram_error *err);

/* IEEE half and bfloat16 to float, exact (subnormals, infinities, NaN). */
float tram_f16_to_f32(uint16_t h);
float tram_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif

#endif
