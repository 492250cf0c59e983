/* backend.cu — the CUDA backend's op table, life cycle, memory, weights and
 * tensor-parallel all-reduce, as kernels/cpu/backend.c is the CPU's; the ops
 * live in the files named like the CPU's (ops.cu, attention.cu, gemm.cu,
 * int8.cu).  Activations are bf16 (act_bytes = 2); weight matrices are bf16,
 * vectors f32.  All work is queued on one stream; errors are recorded
 * (check.h) and reported by sync(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curand_kernel.h>

#include "kernels/cuda/cuda_impl.cuh"

/* ---------------------------------------------------------------- memory */

static void *cuda_alloc(tram_backend *be, size_t bytes)
{
    void *p = NULL;
    if (CUDA_CHECK(&cuda_of(be)->st, cudaMalloc(&p, bytes ? bytes : 1)))
        return NULL;
    return p;
}

static void cuda_free(tram_backend *be, void *ptr)
{
    if (ptr)
        CUDA_CHECK(&cuda_of(be)->st, cudaFree(ptr));
}

/* Stream-ordered.  From pageable host memory the call returns once the source
 * is staged, so the caller may reuse it at once. */
static void cuda_upload(tram_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_state *c = cuda_of(be);
    CUDA_CHECK(&c->st, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}

static void cuda_upload_rows(tram_backend *be, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                             size_t row_bytes, int rows)
{
    cuda_state *c = cuda_of(be);
    if (rows > 0 && row_bytes > 0)
        CUDA_CHECK(&c->st, cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, (size_t)rows,
                                             cudaMemcpyHostToDevice, c->stream));
}

/* Pinned: copies from it are asynchronous DMA, with no staging copy. */
static void *cuda_alloc_host(tram_backend *be, size_t bytes)
{
    void *p = NULL;
    if (CUDA_CHECK(&cuda_of(be)->st, cudaMallocHost(&p, bytes ? bytes : 1)))
        return NULL;
    return p;
}

static void cuda_free_host(tram_backend *be, void *ptr)
{
    if (ptr)
        CUDA_CHECK(&cuda_of(be)->st, cudaFreeHost(ptr));
}

static void cuda_download(tram_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_state *c = cuda_of(be);
    if (!CUDA_CHECK(&c->st, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream)))
        CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream));
}

/* ---------------------------------------------------------------- weights */

static __global__ void kernel_f32_to_bf16(bf16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}

static void f32_to_bf16(cuda_state *c, bf16 *dst, const float *src, size_t n)
{
    int blocks = tram_cuda_grid_1d((int64_t)n, 256);
    if (blocks > 65536)
        blocks = 65536;  /* grid-stride loop covers the rest */
    kernel_f32_to_bf16<<<blocks, 256, 0, c->stream>>>(dst, src, n);
    LAUNCH_CHECK(&c->st, "kernel_f32_to_bf16");
}

/* Matrices run as bf16; vectors (rows == 1: norms, biases) stay f32, as the
 * interface promises, whatever type is asked. */
static int weight_storage(tram_backend *be, tram_weight *w, int rows, int cols, tram_wtype type)
{
    memset(w, 0, sizeof(*w));
    tram_wtype stored = rows == 1 ? TRAM_W_F32 : type;
    if (stored != TRAM_W_F32 && stored != TRAM_W_BF16) {
        cuda_fail(be, "weight %dx%d: type %d is not supported (bf16 matrices, f32 vectors)", rows, cols, type);
        return -1;
    }
    if (stored == TRAM_W_F32 && rows != 1) {
        cuda_fail(be, "weight %dx%d: f32 matrices are not supported, ask for bf16", rows, cols);
        return -1;
    }
    size_t bytes = (size_t)rows * cols * (stored == TRAM_W_F32 ? 4 : 2);
    w->data = cuda_alloc(be, bytes);
    if (!w->data)
        return -1;
    w->type = stored;
    w->rows = rows;
    w->cols = cols;
    return 0;
}

static void cuda_upload_weight(tram_backend *be, tram_weight *w, const float *host, int rows, int cols,
                               tram_wtype type)
{
    cuda_state *c = cuda_of(be);
    if ((type == TRAM_W_INT8 || type == TRAM_W_S24_INT8) && rows > 1) {
        tram_cuda_int8_upload(be, w, host, rows, cols);
        if (type == TRAM_W_S24_INT8)  /* the int8 codes compressed, their scales kept */
            cuda_sparse24_compress(be, w);
        return;
    }
    if (type == TRAM_W_FP8 && rows > 1) {
        tram_cuda_fp8_upload(be, w, host, rows, cols);
        return;
    }
    /* a 2:4 matrix is uploaded dense, then compressed by cuSPARSELt */
    int sparse = type == TRAM_W_S24 && rows > 1;
    if (weight_storage(be, w, rows, cols, sparse ? TRAM_W_BF16 : type))
        return;
    size_t n = (size_t)rows * cols;
    if (w->type == TRAM_W_F32) {
        cuda_upload(be, w->data, host, n * sizeof(float));
        return;
    }
    /* Convert on the device: one f32 staging copy, freed right after. */
    float *tmp = NULL;
    if (CUDA_CHECK(&c->st, cudaMallocAsync((void **)&tmp, n * sizeof(float), c->stream)))
        return;
    cuda_upload(be, tmp, host, n * sizeof(float));
    f32_to_bf16(c, (bf16 *)w->data, tmp, n);
    CUDA_CHECK(&c->st, cudaFreeAsync(tmp, c->stream));
    if (sparse)
        cuda_sparse24_compress(be, w);
}

static void cuda_free_weight(tram_backend *be, tram_weight *w)
{
    cuda_free(be, w->data);
    cuda_free(be, w->scales);
    memset(w, 0, sizeof(*w));
}

/* --load-format dummy on the device: the very values models/dummy.c reads on
 * the host (kernels/dummy_values.h), part after part. */
static __global__ void kernel_dummy_values(void *dst, int is_bf16, size_t start, size_t n, tram_dummy_stream s)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = tram_dummy_value(&s, i);
        if (is_bf16)
            ((bf16 *)dst)[start + i] = __float2bfloat16(v);  /* exact: v is a bf16 value */
        else
            ((float *)dst)[start + i] = v;
    }
}

static void cuda_upload_weight_dummy(tram_backend *be, tram_weight *w, const tram_dummy_stream *parts,
                                     const int64_t *counts, int n_parts, int rows, int cols, tram_wtype type)
{
    cuda_state *c = cuda_of(be);
    if (weight_storage(be, w, rows, cols, type))
        return;
    size_t start = 0;
    for (int p = 0; p < n_parts; start += (size_t)counts[p++]) {
        if (start + (size_t)counts[p] > (size_t)rows * cols) {
            cuda_fail(be, "dummy weight %dx%d: parts hold more values", rows, cols);
            return;
        }
        int blocks = tram_cuda_grid_1d(counts[p], 256);
        kernel_dummy_values<<<blocks > 65536 ? 65536 : blocks, 256, 0, c->stream>>>(
            w->data, w->type == TRAM_W_BF16, start, (size_t)counts[p], parts[p]);
        LAUNCH_CHECK(&c->st, "kernel_dummy_values");
    }
}

/* Counter-based, so any element's value depends only on (seed, index). */
static __global__ void kernel_random_uniform(void *dst, int is_bf16, size_t n, uint64_t seed, float scale)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        curandStatePhilox4_32_10_t rng;
        curand_init(seed, i, 0, &rng);
        float v = (2.0f * curand_uniform(&rng) - 1.0f) * scale;
        if (is_bf16)
            ((bf16 *)dst)[i] = __float2bfloat16(v);
        else
            ((float *)dst)[i] = v;
    }
}

extern "C" void tram_cuda_random_weight(tram_backend *be, tram_weight *w, int rows, int cols, tram_wtype type,
                                        uint64_t seed, float scale)
{
    cuda_state *c = cuda_of(be);
    if (weight_storage(be, w, rows, cols, type))
        return;
    size_t n = (size_t)rows * cols;
    int blocks = tram_cuda_grid_1d((int64_t)n, 256);
    if (blocks > 65536)
        blocks = 65536;
    kernel_random_uniform<<<blocks, 256, 0, c->stream>>>(w->data, w->type == TRAM_W_BF16, n, seed, scale);
    LAUNCH_CHECK(&c->st, "kernel_random_uniform");
}

/* ---------------------------------------------------------------- tensor parallel */

static void cuda_all_reduce(tram_backend *be, void *x, size_t n)
{
    cuda_state *c = cuda_of(be);
    if (!c->comm) { /* a lone backend; a one-rank communicator still runs NCCL (tests/gpu/check_nccl.c) */
        if (be->world_size > 1)
            cuda_fail(be, "all_reduce: world_size %d but no communicator", be->world_size);
        return;
    }
    NCCL_CHECK(&c->st, ncclAllReduce(x, x, n, ncclBfloat16, ncclSum, c->comm, c->stream));
}

/* A rank's thread queues on its own device's stream. */
static void cuda_bind_thread(tram_backend *be)
{
    cuda_state *c = cuda_of(be);
    CUDA_CHECK(&c->st, cudaSetDevice(c->device));
}

/* ---------------------------------------------------------------- life cycle */

static int cuda_sync(tram_backend *be, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream));
    if (!c->st.failed)
        return 0;
    c->st.failed = 0;
    return tram_fail(err, "%s", c->st.err.msg);
}

static void cuda_destroy(tram_backend *be)
{
    if (!be)
        return;
    cuda_state *c = cuda_of(be);
    if (c) {
        cudaStreamSynchronize(c->stream);
        for (int i = 0; i < TRAM_CUDA_GRAPH_BUCKETS; i++)
            if (c->graphs[i])
                cudaGraphExecDestroy(c->graphs[i]);
        tram_cuda_int8_destroy(be);
        cuda_gemm_destroy(c);
        if (c->comm)
            NCCL_CHECK(&c->st, ncclCommDestroy(c->comm));
        cudaFree(c->attn_partial);
        cudaFree(c->stage);
        cuda_sampler_free(c);
        cuda_masks_free(c);
        cuda_moe_free(c);
        cuda_sparse24_free(c);
        if (c->stream)
            cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

/* The one sentence a machine without a usable GPU gets. */
static int pick_device(int device_index, tram_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return tram_fail(err, "no usable NVIDIA GPU: %s", cudaGetErrorString(e));
    if (device_index < 0 || device_index >= count)
        return tram_fail(err, "no usable NVIDIA GPU: device %d asked for, %d present", device_index, count);
    e = cudaSetDevice(device_index);
    if (e != cudaSuccess)
        return tram_fail(err, "no usable NVIDIA GPU: device %d: %s", device_index, cudaGetErrorString(e));
    return 0;
}

static int cuda_state_init(cuda_state *c, int device_index)
{
    c->device = device_index;
    if (CUDA_CHECK(&c->st, cudaDeviceGetAttribute(&c->num_sms, cudaDevAttrMultiProcessorCount, device_index)) ||
        CUDA_CHECK(&c->st, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)))
        return -1;
    c->attn_partial_rows = tram_cuda_attn_partial_rows(c->num_sms);
    /* per row: head_dim accumulators, then (max, sum) */
    size_t bytes = (size_t)c->attn_partial_rows * (TRAM_CUDA_ATTN_MAX_HEAD_DIM + 2) * sizeof(float);
    if (CUDA_CHECK(&c->st, cudaMalloc((void **)&c->attn_partial, bytes)))
        return -1;
    return cuda_gemm_init(c);
}

extern "C" int tram_cuda_probe(int device_index, tram_error *err) { return pick_device(device_index, err); }

extern "C" int tram_backend_cuda_create(tram_backend **out, int device_index, tram_error *err)
{
    if (pick_device(device_index, err))
        return -1;
    tram_backend *be = (tram_backend *)tram_calloc(1, sizeof(*be), err);
    cuda_state *c = be ? (cuda_state *)tram_calloc(1, sizeof(*c), err) : NULL;
    if (!c) {
        free(be);
        return -1;
    }
    *be = (tram_backend){
        .name = "cuda", .act_bytes = 2, .rank = 0, .world_size = 1, .impl = c,
        .alloc = cuda_alloc, .free = cuda_free, .upload = cuda_upload, .download = cuda_download,
        .upload_rows = cuda_upload_rows, .alloc_host = cuda_alloc_host, .free_host = cuda_free_host,
        .upload_weight = cuda_upload_weight, .free_weight = cuda_free_weight,
        .upload_weight_blocks = NULL, /* GGUF blocks are dequantized to bf16 at load */
        .upload_weight_fp8 = tram_cuda_fp8_upload_codes,
        .upload_weight_dummy = cuda_upload_weight_dummy, .sparse24_prepare = cuda_sparse24_prepare,
        .sparse24_fits = cuda_sparse24_fits,
        .embed = cuda_embed, .rmsnorm = cuda_rmsnorm, .add_rmsnorm = cuda_add_rmsnorm,
        .matmul = cuda_matmul, .add_bias = cuda_add_bias, .rope = cuda_rope, .kv_store = cuda_kv_store,
        .attention = cuda_attention, .silu_mul = cuda_silu_mul, .rmsnorm_q = cuda_rmsnorm_q,
        .add_rmsnorm_q = cuda_add_rmsnorm_q, .silu_mul_q = cuda_silu_mul_q, .matmul_q = tram_cuda_int8_matmul_q,
        .rope_store = cuda_rope_store, .head_rmsnorm = cuda_head_rmsnorm, .split_qkv = cuda_split_qkv, .gather_rows = cuda_gather_rows,
        .to_host_f32 = cuda_to_host_f32, .moe = cuda_moe_ffn, .add_gated = cuda_add_gated,
        .lora = cuda_lora,
        .all_reduce = cuda_all_reduce, .host_run = NULL, .host_threads = NULL, /* it draws on the device */
        .bind_thread = cuda_bind_thread, .sync = cuda_sync, .destroy = cuda_destroy,
    };
    if (cuda_state_init(c, device_index)) {
        tram_fail(err, "%s", c->st.err.msg);
        cuda_destroy(be);
        return -1;
    }
    *out = be;
    return 0;
}

/* One backend per device, then every communicator in one ncclCommInitAll
 * (one process drives them all, each rank from its own thread). */
extern "C" int tram_backend_cuda_create_ranks(tram_backend **out, int world_size, tram_error *err)
{
    enum { MAX_RANKS = 64 };
    int devices[MAX_RANKS];
    ncclComm_t comms[MAX_RANKS];
    if (world_size < 1 || world_size > MAX_RANKS)
        return tram_fail(err, "tensor parallel size must be in [1, %d], got %d", MAX_RANKS, world_size);
    memset(out, 0, (size_t)world_size * sizeof(*out));
    int rc = 0;
    for (int r = 0; r < world_size && !rc; r++) {
        devices[r] = r;
        rc = tram_backend_cuda_create(&out[r], r, err);
    }
    tram_cuda_status st = {};
    if (!rc && NCCL_CHECK(&st, ncclCommInitAll(comms, world_size, devices)))
        rc = tram_fail(err, "%s", st.err.msg);
    for (int r = 0; r < world_size && !rc; r++) {
        cuda_of(out[r])->comm = comms[r];
        out[r]->rank = r;
        out[r]->world_size = world_size;
    }
    if (!rc && CUDA_CHECK(&st, cudaSetDevice(0)))
        rc = tram_fail(err, "%s", st.err.msg);
    if (rc)
        for (int r = 0; r < world_size; r++) {
            cuda_destroy(out[r]);
            out[r] = NULL;
        }
    return rc;
}

extern "C" int tram_cuda_device_info_of(tram_backend *be, tram_cuda_device_info *out, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cudaDeviceProp p;
    if (CUDA_CHECK(&c->st, cudaGetDeviceProperties(&p, c->device)) ||
        CUDA_CHECK(&c->st, cudaMemGetInfo(&out->free_bytes, &out->total_bytes)))
        return cuda_sync(be, err);
    snprintf(out->name, sizeof(out->name), "%s", p.name);
    out->num_sms = c->num_sms;
    return 0;
}
