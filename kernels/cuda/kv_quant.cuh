/* kv_quant.cuh — a quantized KV cache's slots on the device, in
 * kernels/kv_format.h's layout (codes per KV head, then one f32 scale per
 * head), so that the CPU backend reads what CUDA writes and the GPU check
 * compares the two: the same f32 operations in the same order, int8 rounded
 * half to even (rintf, as tram_i8_round's nearbyintf), E4M3 through CUDA's
 * saturating conversion, whose rounding tram_fp8_e4m3_encode reproduces. */
#ifndef TRAM_CUDA_KV_QUANT_CUH
#define TRAM_CUDA_KV_QUANT_CUH

#include <cuda_fp8.h>

#include "kernels/cuda/reduce.cuh"
#include "kernels/kv_format.h"

/* One code back to its value before the scale. */
template <int KV>
static __device__ __forceinline__ float kv_code_value(uint8_t c)
{
    if (KV == TRAM_KV_INT8)
        return (float)(int8_t)c;
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3)));
}

static __device__ __forceinline__ float kv_slot_scale(const uint8_t *slot, size_t scales_offset, int kv_head)
{
    return reinterpret_cast<const float *>(slot + scales_offset)[kv_head];
}

/* Called by the 32 lanes of a warp: head h of one token's K or V, x[head_dim],
 * into its slot's codes and scale. */
template <int KV>
static __device__ void kv_quantize_head(uint8_t *slot, size_t scales_offset, const bf16 *x, int h, int head_dim)
{
    int lane = threadIdx.x % 32;
    float amax = 0.0f;
    for (int d = lane; d < head_dim; d += 32)
        amax = fmaxf(amax, fabsf(__bfloat162float(x[d])));
    amax = warp_max(amax);
    float top = KV == TRAM_KV_INT8 ? 127.0f : TRAM_FP8_MAX, inv = amax > 0.0f ? top / amax : 0.0f;
    uint8_t *codes = slot + (size_t)h * head_dim;
    for (int d = lane; d < head_dim; d += 32) {
        float v = __bfloat162float(x[d]) * inv;
        codes[d] = KV == TRAM_KV_INT8 ? (uint8_t)(int8_t)fminf(fmaxf(rintf(v), -127.0f), 127.0f)
                                      : (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    }
    if (lane == 0)
        reinterpret_cast<float *>(slot + scales_offset)[h] = amax / top;
}

#endif
