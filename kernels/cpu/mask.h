/* mask.h — a packed token bitmask applied to a row of logits: the CPU
 * reference of kernels/cuda/mask.cu.  Bit (id & 31) of word (id >> 5) set:
 * token id keeps its logit; clear: it becomes -INFINITY, so no sampler
 * setting can draw it.  Grammar-constrained rows go through it before
 * sampling. */
#ifndef TRAM_CPU_MASK_H
#define TRAM_CPU_MASK_H

#include <stdint.h>

/* dst[i] = mask bit i ? src[i] : -INFINITY for i < n (dst may be src). */
void tram_mask_logits(float *dst, const float *src, const uint32_t *mask, int n);

#endif
