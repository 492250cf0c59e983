/* quant_row.cuh — per-token int8 quantization of one bf16 row by one thread
 * block, shared by the W8A8 matmul's own quantize pass (int8.cu) and the ops
 * that write an int8 copy of their output (ops.cu: RMSNorm, SiLU·mul).  The
 * arithmetic is tram_i8_quantize's (kernels/int8_format.h): scale
 * max|x| / 127, IEEE 127/max and product, rint = round half to even, values in
 * [-127, 127], zeros after cols, so every path forms the same int8 values from
 * the same bf16 row. */
#ifndef TRAM_CUDA_QUANT_ROW_CUH
#define TRAM_CUDA_QUANT_ROW_CUH

#include "kernels/cuda/reduce.cuh"

/* Called by every thread of the block with amax = the max |x[j]| over the
 * elements j ≡ threadIdx.x (mod blockDim.x) it owns; each thread then reads
 * back only those, so a row this block has just written needs no barrier. */
static __device__ void quantize_row(int8_t *q, float *scale, const bf16 *x, int cols, int kp, float amax)
{
    amax = block_max(amax);
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = threadIdx.x; j < kp; j += blockDim.x) {
        float v = j < cols ? rintf(__bfloat162float(x[j]) * inv) : 0.0f;
        q[j] = (int8_t)fminf(fmaxf(v, -127.0f), 127.0f);
    }
    if (threadIdx.x == 0)
        *scale = amax / 127.0f;
}

#endif
