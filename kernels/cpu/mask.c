/* mask.c — the token bitmask on a logits row (see mask.h). */
#include "kernels/cpu/mask.h"

#include <math.h>

void tram_mask_logits(float *dst, const float *src, const uint32_t *mask, int n)
{
    for (int w = 0; w < (n + 31) / 32; w++) {
        uint32_t bits = mask[w];
        int base = w * 32, end = base + 32 < n ? base + 32 : n;
        for (int i = base; i < end; i++)
            dst[i] = (bits >> (i - base)) & 1 ? src[i] : -INFINITY;
    }
}
