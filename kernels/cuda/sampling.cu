/* sampling.cu — one token per row of logits, drawn on the device, so only ids
 * (and log-probabilities) cross to the host.
 *
 * One block per row.  Greedy is an argmax.  Otherwise the kept set is every
 * logit >= a threshold θ, found by bisection on logit values instead of a
 * sort: top-k takes the largest θ keeping >= k tokens, top-p then the largest
 * θ keeping >= top_p of that mass, min-p keeps p >= min_p · p_max.  The draw
 * walks the kept probabilities with a block-wide prefix sum, using a Philox
 * stream keyed by the request's seed and the token's index, so a seed
 * reproduces whatever else shares the batch. */
#include <curand_kernel.h>

#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/reduce.cuh"

#define SAMPLE_THREADS 1024
#define BISECT_STEPS 32

typedef struct {
    int32_t id;
    float logprob;
} sample_result;

/* Argmax with the lowest index on ties, over the block. */
static __device__ int block_argmax(const bf16 *x, int vocab, float *max_out)
{
    __shared__ float s_v[SAMPLE_THREADS / 32];
    __shared__ int s_i[SAMPLE_THREADS / 32];
    float best = -INFINITY;
    int arg = vocab;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float v = __bfloat162float(x[j]);
        if (v > best)
            best = v, arg = j;
    }
    for (int o = 16; o > 0; o /= 2) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, arg, o);
        if (ov > best || (ov == best && oi < arg))
            best = ov, arg = oi;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        s_v[warp] = best, s_i[warp] = arg;
    __syncthreads();
    best = s_v[0], arg = s_i[0];
    for (int w = 1; w < (int)(blockDim.x / 32); w++)
        if (s_v[w] > best || (s_v[w] == best && s_i[w] < arg))
            best = s_v[w], arg = s_i[w];
    *max_out = best;
    return arg;
}

/* Number of logits >= theta (as a float, to share block_sum). */
static __device__ float count_at_least(const bf16 *x, int vocab, float theta)
{
    float n = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        n += __bfloat162float(x[j]) >= theta ? 1.0f : 0.0f;
    return block_sum(n);
}

/* Σ exp((x − M)/T) over logits >= theta. */
static __device__ float mass_at_least(const bf16 *x, int vocab, float theta, float M, float inv_t)
{
    float s = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float v = __bfloat162float(x[j]);
        s += v >= theta ? __expf((v - M) * inv_t) : 0.0f;
    }
    return block_sum(s);
}

/* Largest θ in [lo, M] with count(θ) >= k; count(lo) >= k holds. */
static __device__ float top_k_threshold(const bf16 *x, int vocab, int k, float lo, float M)
{
    if (count_at_least(x, vocab, M) >= k)
        return M;
    float hi = M;
    for (int i = 0; i < BISECT_STEPS; i++) {
        float mid = 0.5f * (lo + hi);
        if (count_at_least(x, vocab, mid) >= k)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Largest θ in [lo, M] keeping at least `want` of the mass. */
static __device__ float top_p_threshold(const bf16 *x, int vocab, float want, float lo, float M, float inv_t)
{
    if (mass_at_least(x, vocab, M, M, inv_t) >= want)
        return M;
    float hi = M;
    for (int i = 0; i < BISECT_STEPS; i++) {
        float mid = 0.5f * (lo + hi);
        if (mass_at_least(x, vocab, mid, M, inv_t) >= want)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Exclusive prefix sum of v over the block. */
static __device__ float block_exclusive_scan(float v, float *total)
{
    __shared__ float s_warp[SAMPLE_THREADS / 32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float inc = v;
    for (int o = 1; o < 32; o *= 2) {
        float n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o)
            inc += n;
    }
    if (lane == 31)
        s_warp[warp] = inc;
    __syncthreads();
    float before = 0.0f, all = 0.0f;
    for (int w = 0; w < (int)(blockDim.x / 32); w++) {
        before += w < warp ? s_warp[w] : 0.0f;
        all += s_warp[w];
    }
    *total = all;
    return before + inc - v;
}

/* Draws from the kept set {x >= theta}; each thread owns one contiguous chunk
 * of the vocabulary.  Falls back to `fallback` (the argmax, always kept) if
 * rounding leaves u past the last kept token. */
static __device__ int draw(const bf16 *x, int vocab, float theta, float M, float inv_t, float uniform, int fallback)
{
    __shared__ int s_pick;
    int chunk = (vocab + blockDim.x - 1) / blockDim.x;
    int lo = threadIdx.x * chunk, hi = min(vocab, lo + chunk);
    float own = 0.0f;
    for (int j = lo; j < hi; j++) {
        float v = __bfloat162float(x[j]);
        own += v >= theta ? __expf((v - M) * inv_t) : 0.0f;
    }
    if (threadIdx.x == 0)
        s_pick = fallback;
    float total, before = block_exclusive_scan(own, &total);
    float u = uniform * total;
    __syncthreads();
    if (own > 0.0f && before < u && u <= before + own) {
        float run = before;
        int pick = -1;
        for (int j = lo; j < hi; j++) {
            float v = __bfloat162float(x[j]);
            if (v < theta)
                continue;
            pick = j;
            run += __expf((v - M) * inv_t);
            if (run >= u)
                break;
        }
        s_pick = pick;
    }
    __syncthreads();
    return s_pick;
}

static __global__ void __launch_bounds__(SAMPLE_THREADS)
kernel_sample(const bf16 *logits, int vocab, const tram_cuda_sampling *params, sample_result *out)
{
    const bf16 *x = logits + (size_t)blockIdx.x * vocab;
    tram_cuda_sampling sp = params[blockIdx.x];
    float M;
    int arg = block_argmax(x, vocab, &M);
    float z = 0.0f, lowest = INFINITY;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float v = __bfloat162float(x[j]);
        z += __expf(v - M);
        lowest = fminf(lowest, v);
    }
    z = block_sum(z);
    /* Bisection starts from the lowest logit, bounded so that its steps stay
     * fine; logits further below M have no probability in f32 anyway. */
    float floor_ = fmaxf(-block_max(-lowest), M - 1e4f);
    int id = arg;
    if (sp.temperature > 0.0f) {
        float inv_t = 1.0f / sp.temperature, theta = floor_;
        if (sp.top_k > 0 && sp.top_k < vocab)
            theta = top_k_threshold(x, vocab, sp.top_k, theta, M);
        if (sp.top_p < 1.0f) {
            float want = sp.top_p * mass_at_least(x, vocab, theta, M, inv_t);
            theta = top_p_threshold(x, vocab, want, theta, M, inv_t);
        }
        if (sp.min_p > 0.0f)
            theta = fmaxf(theta, M + sp.temperature * logf(sp.min_p));
        curandStatePhilox4_32_10_t rng;
        curand_init(sp.seed, sp.step, 0, &rng);
        id = draw(x, vocab, theta, M, inv_t, curand_uniform(&rng), arg);
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x].id = id;
        out[blockIdx.x].logprob = __bfloat162float(x[id]) - M - logf(z);
    }
}

extern "C" int tram_cuda_sample(tram_backend *be, const void *logits, int rows, int vocab,
                                const tram_cuda_sampling *params, int32_t *ids, float *logprobs, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    if (rows <= 0)
        return 0;
    size_t pbytes = (size_t)rows * sizeof(tram_cuda_sampling), rbytes = (size_t)rows * sizeof(sample_result);
    if (cuda_reserve(c, &c->sample_buf, &c->sample_bytes, pbytes + rbytes))
        return be->sync(be, err);
    tram_cuda_sampling *d_params = (tram_cuda_sampling *)c->sample_buf;
    sample_result *d_out = (sample_result *)((char *)c->sample_buf + pbytes);
    sample_result *host = (sample_result *)tram_calloc((size_t)rows, sizeof(sample_result), err);
    if (!host)
        return -1;
    CUDA_CHECK(&c->st, cudaMemcpyAsync(d_params, params, pbytes, cudaMemcpyHostToDevice, c->stream));
    kernel_sample<<<rows, SAMPLE_THREADS, 0, c->stream>>>((const bf16 *)logits, vocab, d_params, d_out);
    if (!LAUNCH_CHECK(&c->st, "kernel_sample"))
        CUDA_CHECK(&c->st, cudaMemcpyAsync(host, d_out, rbytes, cudaMemcpyDeviceToHost, c->stream));
    int rc = be->sync(be, err);
    for (int i = 0; !rc && i < rows; i++) {
        ids[i] = host[i].id;
        if (logprobs)
            logprobs[i] = host[i].logprob;
    }
    free(host);
    return rc;
}
