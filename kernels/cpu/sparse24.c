/* sparse24.c — 2:4 sparse weights on the CPU (TRAM_W_S24, backend.h): of
 * every 4 consecutive weights along a row at most 2 are nonzero, and only
 * those are stored, with their positions in 2 bits each.  The product reads
 * half the weights' bytes (plus 1/16 for the positions) and does half the
 * multiply-adds of the dense one: the zeros are skipped, not multiplied.
 *
 * Layout, one allocation: values [rows][cols/2] f32, then positions
 * [rows][cols/8] bytes; a byte holds two groups, group 2b in its low nibble,
 * and a group's nibble is i0 | i1 << 2 (i0 < i1, the positions within the
 * group of its first and second stored value).  A group with fewer than two
 * nonzeros stores zeros at unused positions. */
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

static size_t s24_value_count(int rows, int cols) { return (size_t)rows * cols / 2; }

static const uint8_t *s24_positions(const tram_weight *w)
{
    return (const uint8_t *)((const float *)w->data + s24_value_count(w->rows, w->cols));
}

/* One group's two kept positions, or -1 when more than two are nonzero. */
static int group_nibble(const float *g)
{
    int pos[4], n = 0;
    for (int i = 0; i < 4; i++)
        if (g[i] != 0.0f) {
            if (n == 2)
                return -1;
            pos[n++] = i;
        }
    for (int i = 0; n < 2; i++) /* pad with zero positions not already taken */
        if (n == 0 || pos[0] != i)
            pos[n++] = i;
    if (pos[0] > pos[1])
        pos[0] ^= pos[1], pos[1] ^= pos[0], pos[0] ^= pos[1];
    return pos[0] | pos[1] << 2;
}

void cpu_s24_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    if (cols % 8) {
        cpu_fail(be, "a 2:4 sparse matrix needs a multiple of 8 columns");
        return;
    }
    size_t nv = s24_value_count(rows, cols);
    uint8_t *data = cpu_alloc(be, nv * sizeof(float) + (size_t)rows * cols / 8);
    if (!data)
        return;
    float *values = (float *)data;
    uint8_t *positions = data + nv * sizeof(float);
    for (size_t g = 0; g < (size_t)rows * cols / 4; g++) {
        const float *x = host + g * 4;
        int nib = group_nibble(x);
        if (nib < 0) {
            free(data);
            cpu_fail(be, "a matrix loaded as 2:4 sparse has a group of 4 with more than 2 nonzeros");
            return;
        }
        values[2 * g] = x[nib & 3];
        values[2 * g + 1] = x[nib >> 2];
        if (g % 2 == 0)
            positions[g / 2] = (uint8_t)nib;
        else
            positions[g / 2] |= (uint8_t)(nib << 4);
    }
    *w = (tram_weight){.type = TRAM_W_S24, .rows = rows, .cols = cols, .data = data};
}

typedef struct {
    float *y;
    const float *x;
    const tram_weight *w;
    int n;
} s24_job;

/* One token's product with one row: a byte of positions covers two groups,
 * and four sums (fixed, so the result does not depend on threads) keep the
 * adds from waiting on each other. */
static float s24_dot(const float *v, const uint8_t *p, const float *x, int cols)
{
    float acc[4] = {0};
    for (int b = 0; b < cols / 8; b++, v += 4, x += 8) {
        int lo = p[b] & 15, hi = p[b] >> 4, k = b & 1;
        acc[2 * k] += v[0] * x[lo & 3] + v[1] * x[lo >> 2];
        acc[2 * k + 1] += v[2] * x[4 + (hi & 3)] + v[3] * x[4 + (hi >> 2)];
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* Output columns [r0, r1) for every token. */
static void s24_rows(void *arg, int r0, int r1)
{
    const s24_job *j = arg;
    int cols = j->w->cols;
    for (int r = r0; r < r1; r++) {
        const float *v = (const float *)j->w->data + (size_t)r * cols / 2;
        const uint8_t *p = s24_positions(j->w) + (size_t)r * cols / 8;
        for (int t = 0; t < j->n; t++)
            j->y[(size_t)t * j->w->rows + r] = s24_dot(v, p, j->x + (size_t)t * cols, cols);
    }
}

void cpu_s24_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n)
{
    s24_job j = {.y = y, .x = x, .w = w, .n = n};
    int chunk = TRAM_MAX(16, 65536 / (w->cols * 2)); /* about 64 KiB of values */
    tram_cpu_pool_run(cpu_of(be)->pool, w->rows, chunk, s24_rows, &j);
}
