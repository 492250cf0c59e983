/* lora.c — LoRA's grouped shrink and expand on the CPU (the reference of
 * kernels/cuda/lora.cu).  Each group's rows are shrunk through A and
 * expanded through B, then scaled and added to the projection's output:
 * products over a group's rows, however many of the step's rows use its
 * adapter (Punica's SGMV).
 *
 * The whole site (every group of the projections of one layer that read one
 * input: q|k|v, gate|up, o, down) is one stealable job on the backend's pool
 * (pool.h): an item is a block of one group's rows, shrunk and expanded
 * through each of the site's parts into the computing thread's scratch,
 * then added to y by the thread that commits it.  One job rather than a
 * shrink job and an expand job, and one for q, k and v rather than three:
 * a decode step at many adapters is mostly small products, and each job's
 * hand-off costs as much as a small group's arithmetic.  Each part keeps
 * its own products (the same shapes as a part alone), so a site's sums are
 * those of its parts one by one. */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

#define SCRATCH_FLOATS ((int)(TRAM_POOL_SCRATCH_BYTES / sizeof(float)))

typedef struct {
    float *y;
    const float *x;
    const tram_lora_group *groups;
    const tram_lora_scratch *s;
    tram_lora_site site;
    int n_groups, y_stride;
    int width;            /* the site's columns, its parts' together */
    int t_ld;             /* a row's shrunk values: max_rank for each part */
    int rows;             /* rows of a group per item */
} lora_job;
_Static_assert(sizeof(lora_job) <= TRAM_POOL_JOB_BYTES, "a stealable job's bytes are copied into the pool");

/* One part's factors against its widths and the scratch: both present, or
 * both absent (the adapter leaves the part alone). */
static int part_fits(const tram_weight *a, const tram_weight *b, int in, int out, int max_rank)
{
    if (!a || !b)
        return !a && !b;
    return a->type == TRAM_W_F32 && b->type == TRAM_W_F32 && a->cols == in && b->rows == out && b->cols == a->rows &&
           a->rows <= max_rank;
}

/* One group's factors and rows against the site's widths and the scratch. */
static int group_fits(const tram_lora_group *G, const lora_job *j)
{
    const tram_lora_scratch *s = j->s;
    int parts = 0;
    for (int p = 0; p < j->site.n_parts; p++) {
        if (!part_fits(G->a[p], G->b[p], j->site.in, j->site.out[p], s->max_rank))
            return 0;
        parts += G->a[p] != NULL;
    }
    return parts && j->site.in <= s->max_in && j->width <= s->max_out && G->first >= 0 && G->count >= 1 &&
           G->first + G->count <= s->max_rows;
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
        if (!group_fits(G, j))
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

/* ys [n][ys_ld] = scale · (x[rows] · Aᵀ) · Bᵀ for each part the group
 * adapts (its columns of ys), through t [n][t_ld]: the shrink in one product
 * per part and run of consecutive rows (a sequence's prefill is one run), the
 * expand in one product per part over the item. */
static void compute_item(const lora_job *j, const lora_item *it, float *t, float *ys, int ys_ld)
{
    const tram_lora_group *G = it->g;
    const int32_t *rows = j->s->order + G->first + it->r0;
    int in = j->site.in, rank_ld = j->s->max_rank;
    for (int i = 0, run; i < it->n; i += run) {
        for (run = 1; i + run < it->n && rows[i + run] == rows[i] + run; run++)
            ;
        for (int p = 0; p < j->site.n_parts; p++)
            if (G->a[p])
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, run, G->a[p]->rows, in, 1.0f,
                            j->x + (size_t)rows[i] * in, in, G->a[p]->data, in, 0.0f,
                            t + (size_t)i * j->t_ld + p * rank_ld, j->t_ld);
    }
    for (int p = 0, col = 0; p < j->site.n_parts; col += j->site.out[p++])
        if (G->a[p])
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, it->n, j->site.out[p], G->a[p]->rows, G->scale,
                        t + p * rank_ld, j->t_ld, G->b[p]->data, G->a[p]->rows, 0.0f, ys + col, ys_ld);
}

static void commit_item(const lora_job *j, const lora_item *it, const float *ys, int ys_ld)
{
    const tram_lora_group *G = it->g;
    const int32_t *rows = j->s->order + G->first + it->r0;
    for (int i = 0; i < it->n; i++) {
        float *row = j->y + (size_t)rows[i] * j->y_stride;
        const float *add = ys + (size_t)i * ys_ld;
        for (int p = 0, col = 0; p < j->site.n_parts; col += j->site.out[p++]) {
            if (!G->a[p])
                continue; /* the adapter leaves this part's columns alone */
            for (int c = col; c < col + j->site.out[p]; c++)
                row[c] += add[c];
        }
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
        compute_item(j, &it, scratch, (float *)scratch + (size_t)j->rows * j->t_ld, j->width);
}

static void steal_commit(const void *job, int begin, int end, const void *scratch)
{
    const lora_job *j = job;
    lora_item it;
    (void)end;
    if (locate(j, begin, &it))
        commit_item(j, &it, (const float *)scratch + (size_t)j->rows * j->t_ld, j->width);
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
        float *t = (float *)j->s->t + row * j->t_ld, *ys = (float *)j->s->ys + row * j->s->max_out;
        compute_item(j, &it, t, ys, j->s->max_out);
        commit_item(j, &it, ys, j->s->max_out);
    }
}

void cpu_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_site *site,
              const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s)
{
    if (n_groups < 1)
        return;
    if (site->n_parts < 1 || site->n_parts > TRAM_LORA_MAX_PARTS) {
        cpu_fail(be, "lora: a site has 1 to TRAM_LORA_MAX_PARTS parts");
        return;
    }
    lora_job j = {y, x, groups, s, *site, n_groups, y_stride, 0, site->n_parts * s->max_rank, 1};
    for (int p = 0; p < site->n_parts; p++)
        j.width += site->out[p];
    int per_row = j.t_ld + j.width, items = 0;
    j.rows = TRAM_MAX(1, SCRATCH_FLOATS / per_row);
    for (int g = 0; g < n_groups; g++) {
        if (!group_fits(&groups[g], &j)) {
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
