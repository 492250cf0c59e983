/* cpu_int8.h — W8A8 matrix products on the CPU; kernels/cuda/int8.cu is the
 * CUDA counterpart.
 *
 * Y[n, rows] = X[n, cols] · Wᵀ with both operands in the shared int8 format
 * (kernels/int8_format.h): weights per output row (w = q * w_scale[row]),
 * activations per token row (x = q * x_scale[i]), quantized dynamically just
 * before the product.  The products accumulate exactly in int32; the f32
 * epilogue multiplies by the two scales while the tile is still in registers'
 * reach, so the int32 matrix is never written out.
 *
 * Weights are packed once, at upload, into groups of 64 output rows: for each
 * group and each run of 4 columns k, 256 contiguous bytes hold rows r..r+63,
 * 4 bytes each.  One 64-byte load then feeds 16 rows × 4 columns to a VNNI
 * dot-product instruction against 4 broadcast activation bytes, so a tile's
 * accumulators hold whole output columns and need no horizontal sums; and the
 * kernel streams the matrix front to back. */
#ifndef TRAM_CPU_INT8_H
#define TRAM_CPU_INT8_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/features.h"
#include "kernels/cpu/pool.h"
#include "kernels/int8_format.h"

#define TRAM_I8_GROUP 64        /* output rows per packed group */

typedef struct {
    int rows, cols;      /* logical shape */
    int kp;              /* cols rounded up to 4: stride of quantized activation rows */
    int groups;          /* ceil(rows / 64) */
    int32_t *row_sums;   /* [groups * 64] Σ_k q[row][k], for VNNI's offset correction */
    int8_t *q;           /* [groups][kp / 4][64][4], zero-padded */
} tram_i8_matrix;

/* Bytes of one allocation holding the header and both arrays. */
size_t tram_i8_matrix_bytes(int rows, int cols);
/* Lays the matrix out in mem (64-byte aligned, tram_i8_matrix_bytes long),
 * quantizing f32 rows w[rows][cols] symmetric per row; writes scales[rows]. */
tram_i8_matrix *tram_i8_matrix_pack(void *mem, const float *w, int rows, int cols, float *scales);
/* Same from values already quantized, q[rows][cols] (the tests' exact input). */
tram_i8_matrix *tram_i8_matrix_pack_q(void *mem, const int8_t *q, int rows, int cols);
/* Unpacks row `row` as out[cols] = q * scale (an int8 embedding table). */
void tram_i8_matrix_row(const tram_i8_matrix *m, int row, float scale, float *out);

/* Whether a kernel runs here (AVX2: vpmaddubsw / vpmaddwd with the sign
 * trick; VNNI: AVX-512 vpdpbusd with a +128 offset on activations), and the
 * fastest that does. */
int tram_i8_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_i8_kernel_best(void);

/* xq: [n][w->kp] quantized activations.  The pool's threads split the work
 * over output groups and token chunks (a NULL pool: the caller alone). */
void tram_i8_gemm_f32(tram_cpu_kernel k, float *y, const int8_t *xq, const float *x_scales, int n,
                      const tram_i8_matrix *w, const float *w_scales, tram_cpu_pool *pool);
/* The exact int32 products acc[n][rows], for tests. */
void tram_i8_gemm_i32(tram_cpu_kernel k, int32_t *acc, const int8_t *xq, int n, const tram_i8_matrix *w,
                      tram_cpu_pool *pool);

#endif
