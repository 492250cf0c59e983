/* mask.cu — packed token bitmasks applied to logits rows on the device,
 * before sampling (structured outputs).  kernels/cpu/mask.c is the
 * reference: a clear bit sets the logit to -INFINITY.  The host computes
 * each constrained row's mask (grammar/), uploads all of a step's masks in
 * one copy, and one launch masks every row in place. */
#include "kernels/cuda/cuda_impl.cuh"

#define MASK_THREADS 256

struct cuda_masks {
    int rows, words;
    uint32_t *masks;   /* [rows][words] */
    int32_t *row_ids;  /* [rows] */
};

/* Block (x, y): a slice of the columns of masked row y. */
static __global__ void kernel_apply_masks(bf16 *logits, int stride, const int32_t *row_ids,
                                          const uint32_t *masks, int words)
{
    const uint32_t *m = masks + (size_t)blockIdx.y * words;
    bf16 *row = logits + (size_t)row_ids[blockIdx.y] * stride;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < stride; i += gridDim.x * blockDim.x) {
        int keep = (i >> 5) < words && ((m[i >> 5] >> (i & 31)) & 1);
        if (!keep)
            row[i] = __float2bfloat16(-INFINITY);
    }
}

void cuda_masks_free(cuda_state *c)
{
    cuda_masks *k = c->masks;
    if (!k)
        return;
    cudaFree(k->masks);
    cudaFree(k->row_ids);
    free(k);
    c->masks = NULL;
}

extern "C" int tram_cuda_mask_reserve(tram_backend *be, int rows, int words, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    if (rows < 1 || words < 1)
        return tram_fail(err, "cuda backend: mask sizes %d rows of %d words", rows, words);
    cuda_masks_free(c);
    cuda_masks *k = (cuda_masks *)tram_calloc(1, sizeof(*k), err);
    if (!k)
        return -1;
    c->masks = k;
    k->rows = rows, k->words = words;
    if (CUDA_CHECK(&c->st, cudaMalloc((void **)&k->masks, (size_t)rows * words * sizeof(uint32_t))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&k->row_ids, (size_t)rows * sizeof(int32_t)))) {
        cuda_masks_free(c);
        return be->sync(be, err) ? -1 : tram_fail(err, "cuda backend: mask buffers failed");
    }
    return 0;
}

extern "C" int tram_cuda_apply_masks(tram_backend *be, const tram_cuda_logits *logits, const int32_t *rows,
                                     const uint32_t *masks, int n, int words, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cuda_masks *k = c->masks;
    if (n <= 0)
        return 0;
    if (!k || n > k->rows || words != k->words)
        return tram_fail(err, "cuda backend: %d masks of %d words exceed the reserve (tram_cuda_mask_reserve)",
                         n, words);
    for (int i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= logits->rows)
            return tram_fail(err, "cuda backend: mask row %d is outside the %d logits rows", rows[i], logits->rows);
    if (CUDA_CHECK(&c->st, cudaMemcpyAsync(k->masks, masks, (size_t)n * words * sizeof(uint32_t),
                                           cudaMemcpyHostToDevice, c->stream)) ||
        CUDA_CHECK(&c->st, cudaMemcpyAsync(k->row_ids, rows, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                           c->stream)))
        return be->sync(be, err) ? -1 : tram_fail(err, "cuda backend: mask upload failed");
    dim3 grid(tram_cuda_grid_1d(logits->stride, MASK_THREADS), n);
    kernel_apply_masks<<<grid, MASK_THREADS, 0, c->stream>>>((bf16 *)logits->data, logits->stride, k->row_ids,
                                                             k->masks, words);
    LAUNCH_CHECK(&c->st, "kernel_apply_masks");
    return c->st.failed ? (be->sync(be, err) ? -1 : tram_fail(err, "cuda backend: mask failed")) : 0;
}
