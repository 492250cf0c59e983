/* reduce.cuh — warp and block reductions shared by the CUDA kernels.  Block
 * versions need blockDim.x a multiple of 32 (at most 1024), are called by
 * every thread of the block, and return the result to every thread. */
#ifndef TRAM_CUDA_REDUCE_CUH
#define TRAM_CUDA_REDUCE_CUH

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The shared slots are reused by the next call only after every thread has
 * passed this call's second barrier, so back-to-back calls are safe. */
template <bool MAX>
static __device__ float block_reduce(float v)
{
    __shared__ float warp_part[32];
    __shared__ float total;
    v = MAX ? warp_max(v) : warp_sum(v);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float ident = MAX ? -INFINITY : 0.0f;
        v = lane < (int)(blockDim.x / 32) ? warp_part[lane] : ident;
        v = MAX ? warp_max(v) : warp_sum(v);
        if (lane == 0)
            total = v;
    }
    __syncthreads();
    return total;
}

static __device__ __forceinline__ float block_sum(float v) { return block_reduce<false>(v); }
static __device__ __forceinline__ float block_max(float v) { return block_reduce<true>(v); }

#endif
