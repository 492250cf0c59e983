/* lora.c — LoRA's grouped shrink and expand on the CPU (the reference of
 * kernels/cuda/lora.cu).  Each group's rows are shrunk through A and
 * expanded through B, then scaled and added to the projection's output:
 * products over a group's rows, however many of the step's rows use its
 * adapter (Punica's SGMV).
 *
 * The whole site (every group of one projection of one layer) is one
 * stealable job on the backend's pool (pool.h): an item is a block of one
 * group's rows, shrunk and expanded into the computing thread's scratch,
 * then added to y by the thread that commits it.  One job rather than a
 * shrink job and an expand job: a decode step runs seven sites a layer, and
 * each job's hand-off costs as much as a small group's arithmetic. */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

#define SCRATCH_FLOATS ((int)(TRAM_POOL_SCRATCH_BYTES / sizeof(float)))

typedef struct {
    float *y;
    const float *x;
    const tram_lora_group *groups;
    const tram_lora_scratch *s;
    int n_groups, y_stride;
    int in, out;          /* every group of a site has the projection's widths */
    int rows;             /* rows of a group per item */
} lora_job;

/* One group's factors and rows against the site's widths and the scratch. */
static int group_fits(const tram_lora_group *G, int in, int out, const tram_lora_scratch *s)
{
    return G->a->type == TRAM_W_F32 && G->b->type == TRAM_W_F32 && G->a->cols == in && G->b->rows == out &&
           G->b->cols == G->a->rows && G->a->rows <= s->max_rank && in <= s->max_in && out <= s->max_out &&
           G->first >= 0 && G->count >= 1 && G->first + G->count <= s->max_rows;
}

static int group_items(const lora_job *j, const tram_lora_group *G)
{
    return (G->count + j->rows - 1) / j->rows;
}

typedef struct {
    const tram_lora_group *g;
    int r0, n;            /* rows [r0, r0 + n) of the group's run of order */
} lora_item;

/* Item i of the job; 0 when it names nothing that fits, which only a worker
 * late for a finished job can see (the groups and order are the next
 * site's by then): it computes nothing, and its result is never committed. */
static int locate(const lora_job *j, int i, lora_item *it)
{
    for (int g = 0; g < j->n_groups; g++) {
        const tram_lora_group *G = &j->groups[g];
        if (!group_fits(G, j->in, j->out, j->s))
            return 0;
        int n = group_items(j, G);
        if (i < n) {
            it->g = G;
            it->r0 = i * j->rows;
            it->n = TRAM_MIN(j->rows, G->count - it->r0);
            return 1;
        }
        i -= n;
    }
    return 0;
}

/* ys [n][ys_ld] = scale · (x[rows] · Aᵀ) · Bᵀ, through t [n][max_rank]: the
 * shrink in one product per run of consecutive rows (a sequence's prefill
 * is one run), the expand in one product over the item. */
static void compute_item(const lora_job *j, const lora_item *it, float *t, float *ys, int ys_ld)
{
    const tram_lora_group *G = it->g;
    const int32_t *rows = j->s->order + G->first + it->r0;
    int rank = G->a->rows, ld = j->s->max_rank;
    for (int i = 0, run; i < it->n; i += run) {
        for (run = 1; i + run < it->n && rows[i + run] == rows[i] + run; run++)
            ;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, run, rank, j->in, 1.0f,
                    j->x + (size_t)rows[i] * j->in, j->in, G->a->data, j->in, 0.0f, t + (size_t)i * ld, ld);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, it->n, j->out, rank, G->scale, t, ld, G->b->data, rank,
                0.0f, ys, ys_ld);
}

static void commit_item(const lora_job *j, const lora_item *it, const float *ys, int ys_ld)
{
    const int32_t *rows = j->s->order + it->g->first + it->r0;
    for (int i = 0; i < it->n; i++) {
        float *row = j->y + (size_t)rows[i] * j->y_stride;
        const float *add = ys + (size_t)i * ys_ld;
        for (int c = 0; c < j->out; c++)
            row[c] += add[c];
    }
}

/* The stealable form: one item per chunk (the job has at most
 * TRAM_POOL_MAX_CHUNKS), t then ys in the thread's scratch. */
static void steal_compute(const void *job, int begin, int end, void *scratch)
{
    const lora_job *j = job;
    lora_item it;
    (void)end;
    if (locate(j, begin, &it))
        compute_item(j, &it, scratch, (float *)scratch + (size_t)j->rows * j->s->max_rank, j->out);
}

static void steal_commit(const void *job, int begin, int end, const void *scratch)
{
    const lora_job *j = job;
    lora_item it;
    (void)end;
    if (locate(j, begin, &it))
        commit_item(j, &it, (const float *)scratch + (size_t)j->rows * j->s->max_rank, j->out);
}

/* The ordinary form, for sites too large for the scratch: each item's t
 * and ys in its own rows of the model's scratch. */
static void run_items(void *job, int begin, int end)
{
    const lora_job *j = job;
    for (int i = begin; i < end; i++) {
        lora_item it;
        if (!locate(j, i, &it))
            continue;
        size_t row = (size_t)it.g->first + it.r0;
        float *t = (float *)j->s->t + row * j->s->max_rank, *ys = (float *)j->s->ys + row * j->s->max_out;
        compute_item(j, &it, t, ys, j->s->max_out);
        commit_item(j, &it, ys, j->s->max_out);
    }
}

void cpu_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_group *groups, int n_groups,
              const tram_lora_scratch *s)
{
    if (n_groups < 1)
        return;
    lora_job j = {y, x, groups, s, n_groups, y_stride, groups[0].a->cols, groups[0].b->rows, 1};
    int per_row = s->max_rank + j.out, items = 0;
    j.rows = TRAM_MAX(1, SCRATCH_FLOATS / per_row);
    for (int g = 0; g < n_groups; g++) {
        if (!group_fits(&groups[g], j.in, j.out, s)) {
            cpu_fail(be, "lora: a group's factors or rows do not fit the site or the scratch");
            return;
        }
        items += group_items(&j, &groups[g]);
    }
    tram_cpu_pool *pool = cpu_of(be)->pool;
    if (per_row <= SCRATCH_FLOATS && items <= TRAM_POOL_MAX_CHUNKS) {
        tram_pool_stealable st = {.compute = steal_compute, .commit = steal_commit, .job = &j, .job_bytes = sizeof(j)};
        tram_cpu_pool_run_stealable(pool, items, 1, &st);
        return;
    }
    tram_cpu_pool_run(pool, items, 1, run_items, &j);
}
