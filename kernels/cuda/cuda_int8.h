/* cuda_int8.h — W8A8 on CUDA (kernels/cuda/int8.cu), the counterpart of
 * kernels/cpu/cpu_int8.h: int8 weights with one scale per output row, activations
 * quantized per token on the fly, int8 × int8 → int32 through cuBLASLt, and a
 * dequantizing epilogue into bf16.  The quantization is the format both
 * backends share (kernels/int8_format.h), so both form the same int32 sums.  Plain C
 * prototypes; only compiled into bin/tram-cuda (TRAM_CUDA). */
#ifndef TRAM_CUDA_INT8_H
#define TRAM_CUDA_INT8_H

#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- used by the backend's op table (backend.cu, gemm.cu, ops.cu) ---- */

/* w from host f32 rows: quantized on the host by tram_i8_quantize, stored
 * [rows rounded up to 4][cols rounded up to 4] int8, zero-padded, and
 * scales[rows] f32. */
void tram_cuda_int8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols);
/* w from host f32 rows as E4M3 codes, one scale per row (max|row| / 448,
 * rounded as tram_fp8_e4m3_encode), stored [rows][cols] rounded up to 16,
 * zero-padded, and scales[rows] f32: a TRAM_W_FP8 weight. */
void tram_cuda_fp8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols);
/* The same weight from a file's E4M3 codes [rows][cols] and row scales, kept
 * as they are (backend.h's upload_weight_fp8). */
void tram_cuda_fp8_upload_codes(tram_backend *be, tram_weight *w, const uint8_t *codes, const float *scales, int rows,
                                int cols);
/* y[n, rows] (bf16) = x[n, cols] (bf16) · Wᵀ for an int8 or FP8 w, the
 * activations quantized per token in w's format. */
void tram_cuda_int8_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n);
/* The same from activations already quantized by the op that produced them. */
void tram_cuda_int8_matmul_q(tram_backend *be, void *y, const tram_qact *qa, const tram_weight *w, int n);
/* x[i] = row ids[i] of an int8 table, dequantized to bf16 (a tied lm_head). */
void tram_cuda_int8_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n);
/* Frees the scratch buffers and cached plans (backend destroy). */
void tram_cuda_int8_destroy(tram_backend *be);

/* ---- for tests/gpu/check_kernels.c ---- */

/* The int32 products acc[n][w->rows] (host) of host int8 activations
 * xq[n][w->cols] with the weight's int8 values. */
int tram_cuda_int8_products(tram_backend *be, int32_t *acc, const int8_t *xq, int n, const tram_weight *w,
                            tram_error *err);
/* The per-token quantization of device bf16 rows x[n][cols]: q[n][cols] and
 * scales[n], copied to the host. */
int tram_cuda_int8_quantize(tram_backend *be, int8_t *q, float *scales, const void *x, int n, int cols,
                            tram_error *err);

#ifdef __cplusplus
}
#endif

#endif
