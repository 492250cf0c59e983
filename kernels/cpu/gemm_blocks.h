/* gemm_blocks.h — matmuls on GGUF block-quantized weights as the file stores
 * them (Q8_0, Q4_0, Q4_1), against activations quantized to int8 per block of
 * 32, the scheme llama.cpp uses (its q8_0 / q8_1 activations).  CPU only:
 * CUDA has no counterpart, it dequantizes GGUF blocks to bf16 at load.
 *
 * One decode step then reads 0.56-1.06 bytes per weight instead of the 4 of
 * dequantized f32: decode on the CPU is memory-bandwidth bound, so that ratio
 * is its speed-up.  Each block's product is an exact int32 sum of int8 x int8
 * (or nibble x int8); only the activation rounding differs from the f32 path. */
#ifndef TRAM_CPU_GEMM_BLOCKS_H
#define TRAM_CPU_GEMM_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/features.h"
#include "kernels/cpu/pool.h"

#define TRAM_QK 32   /* weights per block */

/* An activation block: x ≈ q * d, with s = d * Σq kept for the offsets of
 * Q4_0 (-8 per nibble) and Q4_1 (+m per weight), and sum = Σq for Q8_0
 * weights that a kernel takes biased by +128. */
typedef struct {
    float d, s;
    int32_t sum;
    int8_t q[TRAM_QK];
} tram_q8_block;

/* Whether a kernel runs here (AVX2: vpmaddubsw; VNNI: AVX-512 VNNI on
 * 256-bit vectors), and the fastest that does. */
int tram_q_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_q_kernel_best(void);

/* Bytes of one block of 32 weights of type t; 0 when t is not a block type. */
size_t tram_q_block_bytes(tram_wtype t);

/* Quantizes x[cols] (cols a multiple of 32) into cols/32 blocks. */
void tram_q8_quantize_row(const float *x, int cols, tram_q8_block *out);

/* The kernels read W repacked: groups of 8 rows interleaved block by block
 * (layout in gemm_blocks.c), the last group padded with zero rows.  Same bytes
 * per weight as the file.  tram_q_pack writes rows x cols of type t, given as
 * the file stores them (row after row of blocks), into out's
 * tram_q_packed_bytes. */
size_t tram_q_packed_bytes(tram_wtype t, int rows, int cols);
void tram_q_pack(tram_wtype t, int rows, int cols, const void *blocks, void *out);

/* y[n, w->rows] = x · Wᵀ with x given as n rows of cols/32 blocks and
 * w->data as tram_q_pack wrote it; W's rows in chunks on the pool (NULL: the
 * caller alone).  Each output is computed alike whoever runs its chunk. */
void tram_q_gemm(tram_cpu_kernel k, float *y, const tram_q8_block *xq, int n, const tram_weight *w,
                 tram_cpu_pool *pool);

/* Row `row` of W dequantized to f32 (the embedding lookup of a tied table). */
void tram_q_row_f32(const tram_weight *w, int row, float *out);

#endif
