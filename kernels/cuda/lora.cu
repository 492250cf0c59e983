/* lora.cu — LoRA's grouped shrink and expand on the device (Punica's SGMV
 * shape); kernels/cpu/lora.c is the reference.  A site's groups travel by
 * value in the launches, so a call copies nothing to the device: the
 * shrink writes t = x[order[pos]] · Aᵀ (f32 sums, bf16 t) with a warp per
 * rank row and a block per row of order, the expand adds
 * scale · t · Bᵀ to y's row order[pos], a thread per output column.  The
 * rows of a group are distinct rows of y, so no two threads write one
 * element.  A site's parts (q|k|v, gate|up) run one after the other, each
 * over the groups that adapt it.  Checked against the CPU op by
 * tests/gpu/check_kernels. */
#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/reduce.cuh"

#define LORA_THREADS 256
/* The most groups of one site: --max-loras's bound (engine/lora_pool.h),
 * which the model's slots never exceed. */
#define LORA_MAX_GROUPS 64

struct lora_groups {
    int n;
    const bf16 *a[LORA_MAX_GROUPS], *bt[LORA_MAX_GROUPS];  /* A (rank, in), Bᵀ (rank, out) */
    float scale[LORA_MAX_GROUPS];
    int first[LORA_MAX_GROUPS], count[LORA_MAX_GROUPS], rank[LORA_MAX_GROUPS];
};

/* The group whose run of order holds pos; -1 for a row of a group that
 * does not adapt this part. */
static __device__ int group_of(const lora_groups &G, int pos)
{
    for (int g = 0; g < G.n; g++)
        if (pos >= G.first[g] && pos < G.first[g] + G.count[g])
            return g;
    return -1;
}

static __global__ void kernel_lora_shrink(lora_groups G, const bf16 *x, int in, const int32_t *order, bf16 *t,
                                          int ld)
{
    int pos = blockIdx.x, g = group_of(G, pos);
    if (g < 0)
        return;
    const bf16 *row = x + (size_t)order[pos] * in;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < G.rank[g]; r += blockDim.x / 32) {
        const bf16 *a = G.a[g] + (size_t)r * in;
        float sum = 0.0f;
        for (int k = lane; k < in; k += 32)
            sum += __bfloat162float(row[k]) * __bfloat162float(a[k]);
        sum = warp_sum(sum);
        if (lane == 0)
            t[(size_t)pos * ld + r] = __float2bfloat16(sum);
    }
}

/* Block (pos, slice): columns [slice * blockDim.x, +blockDim.x) of row pos;
 * t's row in shared memory (ld floats). */
static __global__ void kernel_lora_expand(lora_groups G, const bf16 *t, int ld, const int32_t *order, bf16 *y,
                                          int y_stride, int out)
{
    extern __shared__ float ts[];
    int pos = blockIdx.x, g = group_of(G, pos);
    if (g < 0)
        return;
    int rank = G.rank[g];
    for (int r = threadIdx.x; r < rank; r += blockDim.x)
        ts[r] = __bfloat162float(t[(size_t)pos * ld + r]);
    __syncthreads();
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= out)
        return;
    const bf16 *bt = G.bt[g] + c;
    float sum = 0.0f;
    for (int r = 0; r < rank; r++)
        sum += ts[r] * __bfloat162float(bt[(size_t)r * out]);
    bf16 *dst = y + (size_t)order[pos] * y_stride + c;
    *dst = __float2bfloat16(__bfloat162float(*dst) + G.scale[g] * sum);
}

/* The groups that adapt part p of the site, by value, each checked against
 * the part's widths and the scratch as the CPU op checks them; -1
 * (recorded) when one does not fit. */
static int lora_pack(tram_backend *be, lora_groups *G, int *rows, const tram_lora_site *site, int p,
                     const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s)
{
    if (n_groups > LORA_MAX_GROUPS) {
        cuda_fail(be, "lora: %d groups, at most %d", n_groups, LORA_MAX_GROUPS);
        return -1;
    }
    int in = site->in, out = site->out[p];
    G->n = 0;
    *rows = 0;
    for (int g = 0; g < n_groups; g++) {
        const tram_lora_group *L = &groups[g];
        const tram_weight *a = L->a[p], *bt = L->bt[p];
        if (!a && !bt)
            continue; /* the adapter leaves this part alone */
        if (!a || !bt || a->type != TRAM_W_BF16 || bt->type != TRAM_W_BF16 || a->cols != in || bt->cols != out ||
            bt->rows != a->rows || a->rows > s->max_rank || in > s->max_in || out > s->max_out || L->first < 0 ||
            L->count < 1 || L->first + L->count > s->max_rows) {
            cuda_fail(be, "lora: group %d's factors or rows do not fit the site or the scratch", g);
            return -1;
        }
        int n = G->n++;
        G->a[n] = (const bf16 *)a->data, G->bt[n] = (const bf16 *)bt->data;
        G->scale[n] = L->scale, G->first[n] = L->first, G->count[n] = L->count, G->rank[n] = a->rows;
        *rows = TRAM_MAX(*rows, L->first + L->count);
    }
    return 0;
}

/* Part after part, each a shrink and an expand over the groups that adapt
 * it, into its columns of y; t is reused (the launches are in order). */
void cuda_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_site *site,
               const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s)
{
    cuda_state *c = cuda_of(be);
    if (n_groups < 1)
        return;
    if (site->n_parts < 1 || site->n_parts > TRAM_LORA_MAX_PARTS) {
        cuda_fail(be, "lora: a site of %d parts", site->n_parts);
        return;
    }
    bf16 *col = (bf16 *)y;
    for (int p = 0; p < site->n_parts; col += site->out[p++]) {
        lora_groups G;
        int rows;
        if (lora_pack(be, &G, &rows, site, p, groups, n_groups, s))
            return;
        if (!G.n)
            continue;
        int out = site->out[p];
        kernel_lora_shrink<<<rows, LORA_THREADS, 0, c->stream>>>(G, (const bf16 *)x, site->in, s->order,
                                                                 (bf16 *)s->t, s->max_rank);
        LAUNCH_CHECK(&c->st, "kernel_lora_shrink");
        dim3 grid(rows, tram_cuda_grid_1d(out, LORA_THREADS));
        kernel_lora_expand<<<grid, LORA_THREADS, (size_t)s->max_rank * sizeof(float), c->stream>>>(
            G, (const bf16 *)s->t, s->max_rank, s->order, col, y_stride, out);
        LAUNCH_CHECK(&c->st, "kernel_lora_expand");
    }
}
