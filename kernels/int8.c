/* int8.c — per-row int8 quantization (see int8.h). */
#include "kernels/int8_format.h"

#include <string.h>

float tram_i8_quantize(const float *x, int cols, int kp, int8_t *q)
{
    float inv, scale = tram_i8_row_scale(x, cols, &inv);
    for (int j = 0; j < cols; j++)
        q[j] = tram_i8_round(x[j], inv);
    memset(q + cols, 0, kp - cols);
    return scale;
}
