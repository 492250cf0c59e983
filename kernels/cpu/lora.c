/* lora.c — LoRA's grouped shrink and expand on the CPU (the reference of
 * kernels/cuda/lora.cu).  Each group's rows are gathered, shrunk through A
 * in one product and expanded through B in another, then scaled and added
 * to the projection's output: one pair of products per adapter, however
 * many of the step's rows use it (Punica's SGMV). */
#include <cblas.h>
#include <omp.h>
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

/* One parallel region: the groups' shrinks spread over the threads, then
 * each thread expands its slice of every group's output columns (the rows
 * of a group are distinct, so no two threads write one element). */
void cpu_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_group *groups, int n_groups,
              const tram_lora_scratch *s)
{
    if (n_groups < 1 || lora_check(be, groups, n_groups, s))
        return;
#pragma omp parallel num_threads(cpu_of(be)->threads)
    {
#pragma omp for schedule(dynamic)
        for (int g = 0; g < n_groups; g++)
            shrink(x, &groups[g], s);
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        for (int g = 0; g < n_groups; g++) {
            int out = groups[g].b->rows, chunk = ((out + nt - 1) / nt + 15) / 16 * 16;
            int c0 = TRAM_MIN(t * chunk, out), c1 = TRAM_MIN(c0 + chunk, out);
            if (c1 > c0)
                expand(y, y_stride, &groups[g], s, c0, c1);
        }
    }
}
