/* lora.c — LoRA's grouped shrink and expand on the CPU (the reference of
 * kernels/cuda/lora.cu).  Each group's rows are gathered, shrunk through A
 * in one product and expanded through B in another, then scaled and added
 * to the projection's output: one pair of products per adapter, however
 * many of the step's rows use it (Punica's SGMV). */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

/* Every size the op will follow, against the scratch the model allocated. */
static int lora_check(tram_backend *be, const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s)
{
    for (int g = 0; g < n_groups; g++) {
        const tram_lora_group *G = &groups[g];
        if (G->a->type != TRAM_W_F32 || G->b->type != TRAM_W_F32 || G->b->cols != G->a->rows ||
            G->a->cols > s->max_in || G->a->rows > s->max_rank || G->b->rows > s->max_out || G->first < 0 ||
            G->count < 1 || G->first + G->count > s->max_rows) {
            cpu_fail(be, "lora: a group's factors or rows do not fit the scratch");
            return -1;
        }
    }
    return 0;
}

/* t_g = x[rows of g] · Aᵀ, the rows gathered into xs first. */
static void shrink(const float *x, const tram_lora_group *G, const tram_lora_scratch *s)
{
    int in = G->a->cols, rank = G->a->rows;
    float *xs = (float *)s->xs + (size_t)G->first * s->max_in, *t = (float *)s->t + (size_t)G->first * s->max_rank;
    for (int i = 0; i < G->count; i++)
        memcpy(xs + (size_t)i * in, x + (size_t)s->order[G->first + i] * in, (size_t)in * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, G->count, rank, in, 1.0f, xs, in, G->a->data, in, 0.0f, t,
                rank);
}

/* y[rows of g][c0, c1) += scale · t_g · B[c0, c1)ᵀ */
static void expand(float *y, int y_stride, const tram_lora_group *G, const tram_lora_scratch *s, int c0, int c1)
{
    int rank = G->a->rows, out = G->b->rows;
    const float *t = (const float *)s->t + (size_t)G->first * s->max_rank;
    float *ys = (float *)s->ys + (size_t)G->first * s->max_out;
    const float *b = (const float *)G->b->data + (size_t)c0 * rank;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, G->count, c1 - c0, rank, G->scale, t, rank, b, rank, 0.0f,
                ys + c0, out);
    for (int i = 0; i < G->count; i++) {
        float *row = y + (size_t)s->order[G->first + i] * y_stride;
        for (int c = c0; c < c1; c++)
            row[c] += ys[(size_t)i * out + c];
    }
}

/* Output columns of one group that one chunk of the expand covers. */
#define EXPAND_COLS 64

typedef struct {
    float *y;
    int y_stride;
    const float *x;
    const tram_lora_group *groups;
    const tram_lora_scratch *s;
    int chunks;           /* expand chunks per group: every group of a projection has its out */
} lora_job;

static void shrink_chunk(void *ctx, int begin, int end)
{
    const lora_job *j = ctx;
    for (int g = begin; g < end; g++)
        shrink(j->x, &j->groups[g], j->s);
}

/* Item i is columns [c * EXPAND_COLS, +EXPAND_COLS) of group i / chunks: the
 * rows of a group are distinct, so no two chunks write one element. */
static void expand_chunk(void *ctx, int begin, int end)
{
    const lora_job *j = ctx;
    for (int i = begin; i < end; i++) {
        const tram_lora_group *G = &j->groups[i / j->chunks];
        int c0 = i % j->chunks * EXPAND_COLS, c1 = TRAM_MIN(c0 + EXPAND_COLS, G->b->rows);
        expand(j->y, j->y_stride, G, j->s, c0, c1);
    }
}

/* Two jobs on the backend's pool (pool.h): the groups' shrinks, then their
 * expands in column chunks. */
void cpu_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_group *groups, int n_groups,
              const tram_lora_scratch *s)
{
    if (n_groups < 1 || lora_check(be, groups, n_groups, s))
        return;
    for (int g = 1; g < n_groups; g++)
        if (groups[g].b->rows != groups[0].b->rows) {
            cpu_fail(be, "lora: the groups of one projection differ in width");
            return;
        }
    lora_job j = {y, y_stride, x, groups, s, (groups[0].b->rows + EXPAND_COLS - 1) / EXPAND_COLS};
    tram_cpu_pool *pool = cpu_of(be)->pool;
    tram_cpu_pool_run(pool, n_groups, 1, shrink_chunk, &j);
    tram_cpu_pool_run(pool, n_groups * j.chunks, 1, expand_chunk, &j);
}
