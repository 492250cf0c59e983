/* dummy_values.h — the values of `--load-format dummy` (models/dummy.h), as
 * one formula that the host (models/dummy.c) and the device
 * (kernels/cuda/backend.cu's upload_weight_dummy) both compute, so that a
 * dummy model drawn on the GPU holds bit for bit the weights the CPU reads.
 *
 * Counter-based: value i of a tensor is a function of (the tensor's key, i)
 * alone, so any element, on any thread of any device, in any order, is the
 * same.  splitmix64 gives 24 random bits, uniform u in [-1, 1); the value is
 * offset + scale·u rounded to the nearest bf16 (ties to even).  The product
 * and the sum are rounded one at a time on both sides, so the two agree by
 * construction: a multiply-add contracted by nvcc (its default) rounds once,
 * which could change a value lying on a bf16 rounding boundary. */
#ifndef TRAM_DUMMY_VALUES_H
#define TRAM_DUMMY_VALUES_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define TRAM_DV_HD __host__ __device__
#else
#define TRAM_DV_HD
#endif

/* The values of one tensor: offset + scale · uniform(key, i). */
typedef struct {
    uint64_t key;  /* from the tensor's name (models/dummy.c) */
    float scale, offset;
} tram_dummy_stream;

/* splitmix64 of (key, i): uniform in [-1, 1), 24 random bits. */
static inline TRAM_DV_HD float tram_dummy_uniform(uint64_t key, uint64_t i)
{
    uint64_t z = key + (i + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

/* Nearest bf16 value (ties to even), as an f32. */
static inline TRAM_DV_HD float tram_dummy_bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static inline TRAM_DV_HD float tram_dummy_value(const tram_dummy_stream *s, uint64_t i)
{
    float u = tram_dummy_uniform(s->key, i);
#ifdef __CUDA_ARCH__
    float v = __fadd_rn(s->offset, __fmul_rn(s->scale, u));
#else
    float v = s->offset + s->scale * u;  /* C11 (-std=c11) contracts no expression into an FMA */
#endif
    return tram_dummy_bf16_round(v);
}

#ifdef __cplusplus
}
#endif

#endif
