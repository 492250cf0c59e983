/* sampling.cu — one token per row of logits, drawn on the device, so only ids
 * (and log-probabilities) cross to the host.
 *
 * One block per row.  Rows with logit bias or penalties are first processed
 * into f32 scratch (kernels/cpu/sampling.c's order: bias and bans, presence and
 * frequency penalties from the sequence's output counts, the repetition
 * penalty over prompt and output); the others are read as they are.  Greedy
 * is an argmax.  Otherwise the kept set is what the host's sort keeps: a
 * prefix of the order (logit descending, id ascending), so ties at a top-k or
 * top-p boundary go to the lower ids.  It is found without a sort: min-p
 * keeps p >= min_p · p_max, top-k then the shortest prefix of >= k tokens,
 * top-p the shortest holding >= top_p of that mass; kernel variant 1 (the
 * default) finds each prefix by bisection on the keys (~50 passes over the
 * row), variant 2 (--cuda-kernels sampler=2) by radix select (5 passes,
 * kernels/cuda/sample_plan.h, whose host mirror tests/unit/test_cuda_sampler.c
 * checks against kernels/cpu/sampling.c).  The draw
 * walks the kept probabilities with a block-wide prefix sum, using a Philox
 * stream keyed by the request's seed and the token's (sample, position), so
 * a seed reproduces whatever else shares the batch.
 *
 * Token counts per sequence ("seats") live on the device: a seat is loaded
 * once from the sequence's tokens, and each draw adds its own token, so the
 * history never crosses again. */
#include <curand_kernel.h>

#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/sample_plan.h"

#define SAMPLE_THREADS 1024
#define PROMPT_BIT 0x80000000u  /* in a seat's count: the id is in the prompt */

typedef struct {
    int32_t id;
    float logprob;
} sample_result;

struct cuda_sampler {
    int rows, draws, max_bias, seats, vocab, max_history;
    tram_cuda_sampling *params;  /* [draws] */
    int32_t *drafts;             /* [draws] tram_cuda_verify's */
    tram_cuda_verify_seq *seqs;  /* [rows] tram_cuda_verify's */
    tram_logit_bias *bias;       /* [max_bias] */
    sample_result *out;          /* [draws] */
    sample_result *host;         /* [draws], pinned */
    float *scratch;              /* [rows][vocab] processed logits: a row's, or a verified sequence's */
    uint32_t *counts;            /* [seats][vocab]: PROMPT_BIT | output count */
    int32_t *history;            /* [max_history] tokens of a seat being loaded */
};

static __device__ __forceinline__ float ld(bf16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ float ld(float v) { return v; }

/* Argmax with the lowest index on ties, over the block. */
template <typename T>
static __device__ int block_argmax(const T *x, int vocab, float *max_out)
{
    __shared__ float s_v[SAMPLE_THREADS / 32];
    __shared__ int s_i[SAMPLE_THREADS / 32];
    float best = -INFINITY;
    int arg = vocab;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float v = ld(x[j]);
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

/* A prefix of the order (logit descending, id ascending): the ids whose
 * logit has a larger order key than `key`, and those with that key below idc. */
typedef struct {
    uint32_t key;
    int idc;
} cutoff;

static __device__ __forceinline__ uint32_t order_key(float f) { return tram_sample_order_key(f); }

static __device__ __forceinline__ bool kept(float v, int j, cutoff c)
{
    uint32_t k = order_key(v);
    return k > c.key || (k == c.key && j < c.idc);
}

/* Over the prefix: its size (mass false; a float, to share block_sum) or
 * Σ exp((x − M)/T). */
template <typename T>
static __device__ float prefix_sum(const T *x, int vocab, cutoff c, bool mass, float M, float inv_t)
{
    float s = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float v = ld(x[j]);
        if (kept(v, j, c))
            s += mass ? __expf((v - M) * inv_t) : 1.0f;
    }
    return block_sum(s);
}

/* The shortest prefix inside c whose sum reaches want, given that c's does:
 * the largest key whose prefix still does (bisection on the keys, exact in
 * at most 32 steps; `top` is the key of the largest logit), then the fewest
 * ids among the ties at that key. */
template <typename T>
static __device__ cutoff shortest_prefix(const T *x, int vocab, cutoff c, uint32_t top, float want, bool mass,
                                         float M, float inv_t)
{
    uint32_t lo = c.key, hi = top;  /* the prefix at lo reaches want; past hi none does */
    if (hi > lo && prefix_sum(x, vocab, cutoff{hi, vocab}, mass, M, inv_t) >= want)
        lo = hi;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (prefix_sum(x, vocab, cutoff{mid, vocab}, mass, M, inv_t) >= want)
            lo = mid;
        else
            hi = mid;
    }
    int a = 0, b = lo == c.key ? c.idc : vocab;  /* the smallest idc in [a, b] that reaches want */
    while (a < b) {
        int mid = a + (b - a) / 2;
        if (prefix_sum(x, vocab, cutoff{lo, mid}, mass, M, inv_t) >= want)
            b = mid;
        else
            a = mid + 1;
    }
    return cutoff{lo, a};
}

/* An id's weight in variant 2's histograms: 1 (top-k) or its probability in
 * fixed point (top-p). */
static __device__ __forceinline__ unsigned long long weight_of(float v, bool mass, float M, float inv_t)
{
    return mass ? tram_sample_mass_fixed(__expf((v - M) * inv_t)) : 1ull;
}

static __device__ float block_scan(float v, float *incl, float *total);

/* This thread's contiguous share [*lo, *hi) of a row, for the passes that
 * scan the block's shares in order. */
static __device__ __forceinline__ void own_chunk(int vocab, int *lo, int *hi)
{
    int chunk = (vocab + blockDim.x - 1) / blockDim.x;
    *lo = threadIdx.x * chunk;
    *hi = min(vocab, *lo + chunk);
}

/* The r-th id (1-based, ascending) among c's ids whose key is `key`, + 1:
 * each thread counts its own chunk, a block scan tells which one holds it. */
template <typename T>
static __device__ int nth_tie_end(const T *x, int vocab, cutoff c, uint32_t key, float r)
{
    __shared__ int s_end;
    int lo, hi;
    own_chunk(vocab, &lo, &hi);
    float own = 0.0f;
    for (int j = lo; j < hi; j++) {
        float v = ld(x[j]);
        own += kept(v, j, c) && order_key(v) == key ? 1.0f : 0.0f;
    }
    if (threadIdx.x == 0)
        s_end = c.idc;
    float incl, total, before = block_scan(own, &incl, &total);  /* counts: exact in f32 */
    __syncthreads();
    if (before < r && r <= incl)
        for (int j = lo; j < hi; j++) {
            float v = ld(x[j]);
            if (kept(v, j, c) && order_key(v) == key && ++before == r) {
                s_end = j + 1;
                break;
            }
        }
    __syncthreads();
    return s_end;
}

/* Sampler variant 2: the shortest prefix inside c whose weight reaches the
 * target, by radix select (sample_plan.h): top-k (mass false) wants top_k
 * ids and keeps c whole when it holds no more; top-p wants top_p of c's
 * mass.  4 histogram passes and one pass for the ties. */
template <typename T>
static __device__ cutoff radix_prefix(const T *x, int vocab, cutoff c, bool mass, float M, float inv_t, float top_p,
                                      int top_k)
{
    __shared__ unsigned long long s_hist[TRAM_RADIX_DIGITS], s_want, s_above;
    __shared__ uint32_t s_prefix;
    __shared__ int s_whole;
    uint32_t prefix = 0;
    for (int pass = 0; pass < TRAM_RADIX_PASSES; pass++) {
        uint32_t mask = tram_radix_mask(pass);
        for (int d = threadIdx.x; d < TRAM_RADIX_DIGITS; d += blockDim.x)
            s_hist[d] = 0;
        __syncthreads();
        for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
            float v = ld(x[j]);
            uint32_t k = order_key(v);
            if (kept(v, j, c) && (k & mask) == prefix)
                atomicAdd(&s_hist[tram_radix_digit(k, pass)], weight_of(v, mass, M, inv_t));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (pass == 0) {
                unsigned long long total = 0;
                for (int d = 0; d < TRAM_RADIX_DIGITS; d++)
                    total += s_hist[d];
                s_want = mass ? tram_radix_mass_want(total, top_p) : (unsigned long long)top_k;
                s_whole = total <= s_want;
                s_above = 0;
            }
            s_prefix = prefix | (uint32_t)tram_radix_pick(s_hist, s_want, &s_above) << (24 - 8 * pass);
        }
        __syncthreads();
        if (s_whole)
            return c;
        prefix = s_prefix;
    }
    uint32_t bits = prefix & 0x80000000u ? prefix & 0x7fffffffu : ~prefix;  /* the key's float */
    unsigned long long each = weight_of(__uint_as_float(bits), mass, M, inv_t);
    float r = (float)tram_radix_ties_needed(s_want, s_above, each);
    return cutoff{prefix, nth_tie_end(x, vocab, c, prefix, r)};
}

/* Prefix sums of v >= 0 over the block: returns the sum before this thread
 * and sets *incl to the sum through it.  Lane by lane within a warp (a tree
 * scan rounds differently per lane, so its sums need not even grow), then
 * warp by warp: each thread's *incl is the very float the next thread
 * returns, and the sums never decrease, so the intervals (before, incl] tile
 * (0, *total] with no gap or overlap and exactly one thread claims any u in
 * that range (a seeded draw must not depend on a race). */
static __device__ float block_scan(float v, float *incl, float *total)
{
    __shared__ float s_warp[SAMPLE_THREADS / 32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float before = 0.0f, inc = 0.0f;
    for (int l = 0; l < 32; l++) {
        float prev = __shfl_up_sync(0xffffffffu, inc, 1);
        if (lane == l) {
            before = l ? prev : 0.0f;
            inc = before + v;
        }
    }
    if (lane == 31)
        s_warp[warp] = inc;
    __syncthreads();
    float off = 0.0f, all = 0.0f;
    for (int w = 0; w < (int)(blockDim.x / 32); w++) {
        if (w == warp)
            off = all;
        all += s_warp[w];
    }
    *incl = off + inc;
    *total = all;
    return off + before;
}

/* Draws from the kept prefix c; each thread owns one contiguous chunk of the
 * vocabulary and the one whose share holds u walks it (sample_plan.h: never
 * onto an id of probability 0).  Falls back to `fallback` (the argmax, always
 * kept) when no thread claims u (u or the total underflowed to 0). */
template <typename T>
static __device__ int draw(const T *x, int vocab, cutoff c, float M, float inv_t, float uniform, int fallback)
{
    __shared__ int s_pick;
    int lo, hi;
    own_chunk(vocab, &lo, &hi);
    float own = 0.0f;
    for (int j = lo; j < hi; j++) {
        float v = ld(x[j]);
        own += kept(v, j, c) ? __expf((v - M) * inv_t) : 0.0f;
    }
    if (threadIdx.x == 0)
        s_pick = fallback;
    float incl, total, before = block_scan(own, &incl, &total);
    float u = uniform * total;
    __syncthreads();
    if (before < u && u <= incl) {
        tram_sample_walk w = {.run = before, .pick = fallback};
        for (int j = lo; j < hi; j++) {
            float v = ld(x[j]);
            if (kept(v, j, c) && tram_sample_walk_take(&w, j, __expf((v - M) * inv_t), u))
                break;
        }
        s_pick = w.pick;
    }
    __syncthreads();
    return s_pick;
}

/* Full-vocabulary row processing into f32: bias entries in order (thread 0,
 * so repeated ids add up as on the host), then the penalties per id. */
static __device__ void process_row(const bf16 *raw, float *f, int vocab, const tram_cuda_sampling &sp,
                                   const tram_logit_bias *bias, const uint32_t *counts, int seat_stride)
{
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        f[j] = __bfloat162float(raw[j]);
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = sp.bias_start; i < sp.bias_start + sp.num_bias; i++)
            if (bias[i].token >= 0 && bias[i].token < vocab)
                f[bias[i].token] += bias[i].bias;
    __syncthreads();
    if (sp.seat < 0)
        return;
    const uint32_t *cnt = counts + (size_t)sp.seat * seat_stride;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        uint32_t c = cnt[j], out = c & ~PROMPT_BIT;
        float v = f[j];
        if (out)  /* rounded step by step as the host does (no fused multiply-add) */
            v = __fsub_rn(v, __fadd_rn(__fmul_rn(sp.p.frequency_penalty, (float)out), sp.p.presence_penalty));
        if (c && sp.p.repetition_penalty != 1.0f)
            v = v > 0 ? v / sp.p.repetition_penalty : v * sp.p.repetition_penalty;
        f[j] = v;
    }
    __syncthreads();
}

/* VARIANT 1 cuts top-k and top-p by bisection, 2 by radix select. */
template <int VARIANT, typename T>
static __device__ int sample_row(const T *x, int vocab, const tram_sampler_row &p, uint64_t step)
{
    float M;
    int arg = block_argmax(x, vocab, &M);
    arg = arg < vocab ? arg : 0;  /* every logit -inf: id 0, as the host's argmax */
    if (!(p.temperature >= TRAM_SAMPLE_GREEDY_BELOW) || M == -INFINITY)
        return arg;
    float inv_t = 1.0f / p.temperature;
    cutoff c = {.key = order_key(p.min_p > 0.0f ? M + p.temperature * logf(p.min_p) : -INFINITY),
                .idc = vocab};
    uint32_t top = order_key(M);
    if (VARIANT == 2) {
        if (p.top_k > 0)
            c = radix_prefix(x, vocab, c, false, M, inv_t, 1.0f, p.top_k);
        if (p.top_p < 1.0f)
            c = radix_prefix(x, vocab, c, true, M, inv_t, p.top_p, 0);
    } else {
        if (p.top_k > 0 && prefix_sum(x, vocab, c, false, M, inv_t) > (float)p.top_k)
            c = shortest_prefix(x, vocab, c, top, (float)p.top_k, false, M, inv_t);
        if (p.top_p < 1.0f)
            c = shortest_prefix(x, vocab, c, top, p.top_p * prefix_sum(x, vocab, c, true, M, inv_t), true, M,
                                inv_t);
    }
    curandStatePhilox4_32_10_t rng;
    curand_init(p.seed, step, 0, &rng);
    return draw(x, vocab, c, M, inv_t, curand_uniform(&rng), arg);
}

/* log-softmax of the raw row at id */
static __device__ float raw_logprob(const bf16 *x, int vocab, int id)
{
    float m = -INFINITY;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        m = fmaxf(m, __bfloat162float(x[j]));
    m = block_max(m);
    float z = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x)
        z += __expf(__bfloat162float(x[j]) - m);
    return __bfloat162float(x[id]) - m - logf(block_sum(z));
}

typedef struct {
    const bf16 *logits;
    int stride, vocab, want_logprobs, seat_stride;
    const tram_cuda_sampling *params;
    const tram_logit_bias *bias;
    uint32_t *counts;
    float *scratch;
    sample_result *out;
} sample_args;

/* One row drawn (its scratch f: [vocab], for a row with bias or
 * penalties), the seat's count of the drawn id grown by one; the same id in
 * every thread.  The syncs keep the counts still while any thread reads them,
 * and the grown count visible to the block's next row. */
template <int VARIANT>
static __device__ int draw_row(const sample_args &a, const tram_cuda_sampling &sp, float *f)
{
    const bf16 *raw = a.logits + (size_t)sp.row * a.stride;
    int id;
    if (sp.num_bias > 0 || sp.seat >= 0) {
        process_row(raw, f, a.vocab, sp, a.bias, a.counts, a.seat_stride);
        id = sample_row<VARIANT>(f, a.vocab, sp.p, sp.step);
    } else {
        id = sample_row<VARIANT>(raw, a.vocab, sp.p, sp.step);
    }
    __syncthreads();
    if (threadIdx.x == 0 && sp.seat >= 0)
        a.counts[(size_t)sp.seat * a.seat_stride + id]++;
    __syncthreads();
    return id;
}

template <int VARIANT>
static __global__ void __launch_bounds__(SAMPLE_THREADS) kernel_sample(sample_args a)
{
    const tram_cuda_sampling sp = a.params[blockIdx.x];
    int id = draw_row<VARIANT>(a, sp, a.scratch + (size_t)blockIdx.x * a.vocab);
    float lp = a.want_logprobs ? raw_logprob(a.logits + (size_t)sp.row * a.stride, a.vocab, id) : 0.0f;
    if (threadIdx.x == 0) {
        a.out[blockIdx.x].id = id;
        a.out[blockIdx.x].logprob = lp;
    }
}

/* One sequence's verification (tram_cuda_verify): its rows in order, each
 * in the block's scratch row, until a draw differs from its draft.  The draw
 * is the same in every thread, so the loop leaves at once in all. */
template <int VARIANT>
static __global__ void __launch_bounds__(SAMPLE_THREADS) kernel_verify(sample_args a, const tram_cuda_verify_seq *seqs,
                                                                       const int32_t *drafts)
{
    const tram_cuda_verify_seq q = seqs[blockIdx.x];
    float *f = a.scratch + (size_t)blockIdx.x * a.vocab;
    int j = 0;
    while (j < q.rows) {
        int i = q.first + j++;
        int id = draw_row<VARIANT>(a, a.params[i], f);
        if (threadIdx.x == 0)
            a.out[i] = sample_result{id, 0.0f};
        if (id != drafts[i])
            break;
    }
    for (; j < q.rows; j++)
        if (threadIdx.x == 0)
            a.out[q.first + j] = sample_result{-1, 0.0f};
}

/* Marks prompt ids, counts output ids. */
static __global__ void kernel_seat_load(uint32_t *row, const int32_t *tokens, int prompt_len, int n, int vocab)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int32_t t = tokens[i];
        if (t < 0 || t >= vocab)
            continue;
        if (i < prompt_len)
            atomicOr(&row[t], PROMPT_BIT);
        else
            atomicAdd(&row[t], 1u);
    }
}

/* ---------------------------------------------------------------- host side */

void cuda_sampler_free(cuda_state *c)
{
    cuda_sampler *s = c->sampler;
    if (!s)
        return;
    cudaFree(s->params);
    cudaFree(s->drafts);
    cudaFree(s->seqs);
    cudaFree(s->bias);
    cudaFree(s->out);
    cudaFreeHost(s->host);
    cudaFree(s->scratch);
    cudaFree(s->counts);
    cudaFree(s->history);
    free(s);
    c->sampler = NULL;
}

static int sampler_error(tram_backend *be, tram_error *err)
{
    return be->sync(be, err) ? -1 : tram_fail(err, "cuda backend: sampler failed");
}

extern "C" int tram_cuda_sampler_reserve(tram_backend *be, int rows, int draws, int max_bias, int seats, int vocab,
                                         int max_history, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    if (rows < 1 || draws < rows || max_bias < 0 || seats < 0 || vocab < 1 || max_history < 0)
        return tram_fail(err, "cuda backend: sampler sizes %d rows, %d draws, %d bias, %d seats, vocab %d, "
                              "history %d", rows, draws, max_bias, seats, vocab, max_history);
    cuda_sampler_free(c);
    cuda_sampler *s = (cuda_sampler *)tram_calloc(1, sizeof(*s), err);
    if (!s)
        return -1;
    c->sampler = s;
    s->rows = rows, s->draws = draws, s->max_bias = max_bias, s->seats = seats, s->vocab = vocab;
    s->max_history = max_history;
    size_t counts = (size_t)seats * vocab * sizeof(uint32_t);
    if (CUDA_CHECK(&c->st, cudaMalloc((void **)&s->params, draws * sizeof(tram_cuda_sampling))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->drafts, draws * sizeof(int32_t))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->seqs, rows * sizeof(tram_cuda_verify_seq))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->bias, (max_bias + 1) * sizeof(tram_logit_bias))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->out, draws * sizeof(sample_result))) ||
        CUDA_CHECK(&c->st, cudaMallocHost((void **)&s->host, draws * sizeof(sample_result))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->scratch, (size_t)rows * vocab * sizeof(float))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->counts, counts + sizeof(uint32_t))) ||
        CUDA_CHECK(&c->st, cudaMalloc((void **)&s->history, (max_history + 1) * sizeof(int32_t))) ||
        CUDA_CHECK(&c->st, cudaMemsetAsync(s->counts, 0, counts, c->stream))) {
        cuda_sampler_free(c);
        return sampler_error(be, err);
    }
    return 0;
}

extern "C" int tram_cuda_seat_load(tram_backend *be, int seat, const int32_t *tokens, int prompt_len,
                                   int num_tokens, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cuda_sampler *s = c->sampler;
    if (!s || seat < 0 || seat >= s->seats || prompt_len < 0 || prompt_len > num_tokens ||
        num_tokens > s->max_history)
        return tram_fail(err, "cuda backend: seat %d with %d tokens (prompt %d) is outside the sampler's "
                              "reserve (%d seats, %d tokens)", seat, num_tokens, prompt_len,
                         s ? s->seats : 0, s ? s->max_history : 0);
    uint32_t *row = s->counts + (size_t)seat * s->vocab;
    CUDA_CHECK(&c->st, cudaMemsetAsync(row, 0, (size_t)s->vocab * sizeof(uint32_t), c->stream));
    if (num_tokens > 0 &&
        !CUDA_CHECK(&c->st, cudaMemcpyAsync(s->history, tokens, (size_t)num_tokens * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, c->stream))) {
        kernel_seat_load<<<tram_cuda_grid_1d(num_tokens, 256), 256, 0, c->stream>>>(row, s->history, prompt_len,
                                                                                  num_tokens, s->vocab);
        LAUNCH_CHECK(&c->st, "kernel_seat_load");
    }
    return c->st.failed ? sampler_error(be, err) : 0;
}

/* Every index the kernels follow, checked on the host: n rows of params
 * (at most cap). */
static int check_call(const cuda_sampler *s, const tram_cuda_logits *l, const tram_cuda_sampling *params, int n,
                      int cap, int num_bias, tram_error *err)
{
    if (!s || n > cap || num_bias < 0 || num_bias > s->max_bias || l->vocab < 1 || l->vocab > s->vocab ||
        l->vocab > l->stride)
        return tram_fail(err, "cuda backend: sample: %d rows, %d bias entries, vocab %d (stride %d) exceed the "
                              "sampler's reserve (tram_cuda_sampler_reserve)", n, num_bias, l->vocab, l->stride);
    for (int i = 0; i < n; i++) {
        const tram_cuda_sampling *sp = &params[i];
        if (sp->row < 0 || sp->row >= l->rows || sp->seat >= s->seats ||
            (sp->seat < 0 && tram_sample_has_penalties(&sp->p)) || sp->bias_start < 0 || sp->num_bias < 0 ||
            sp->bias_start + sp->num_bias > num_bias)
            return tram_fail(err, "cuda backend: sample %d: row %d (of %d), seat %d (of %d) or bias [%d, +%d) "
                                  "(of %d) out of range, or penalties without a seat", i, sp->row, l->rows,
                             sp->seat, s->seats, sp->bias_start, sp->num_bias, num_bias);
    }
    return 0;
}

/* The sequences of a verification: each a run of rows inside the n
 * params, one after another and covering them all (every row's result is
 * copied back), the rows of one on one seat (or none), no seat on two
 * sequences. */
static int check_seqs(const cuda_sampler *s, const tram_cuda_sampling *params, int n,
                      const tram_cuda_verify_seq *seqs, int num_seqs, tram_error *err)
{
    if (num_seqs < 0 || num_seqs > s->rows)
        return tram_fail(err, "cuda backend: verify: %d sequences, the reserve holds %d", num_seqs, s->rows);
    for (int q = 0, next = 0; q < num_seqs; q++) {
        const tram_cuda_verify_seq *v = &seqs[q];
        int seat = v->rows > 0 && v->first >= 0 && v->first < n ? params[v->first].seat : -1, ok = 1;
        for (int j = 0; j < v->rows && v->first == next && v->first + v->rows <= n; j++)
            ok &= params[v->first + j].seat == seat;
        for (int o = 0; o < q && seat >= 0; o++)
            ok &= params[seqs[o].first].seat != seat;
        if (!ok || v->rows < 1 || v->first != next || v->first + v->rows > n)
            return tram_fail(err, "cuda backend: verify: sequence %d's rows [%d, +%d) are not the next of the "
                                  "%d rows, or its seat %d is shared", q, v->first, v->rows, n, seat);
        next = v->first + v->rows;
    }
    int covered = num_seqs > 0 ? seqs[num_seqs - 1].first + seqs[num_seqs - 1].rows : 0;
    if (covered != n)
        return tram_fail(err, "cuda backend: verify: the sequences cover %d of the %d rows", covered, n);
    return 0;
}

static int upload_params(cuda_state *c, const tram_cuda_sampling *params, int n, const tram_logit_bias *bias,
                         int num_bias)
{
    cuda_sampler *s = c->sampler;
    CUDA_CHECK(&c->st, cudaMemcpyAsync(s->params, params, n * sizeof(*params), cudaMemcpyHostToDevice, c->stream));
    if (num_bias > 0)
        CUDA_CHECK(&c->st, cudaMemcpyAsync(s->bias, bias, num_bias * sizeof(*bias), cudaMemcpyHostToDevice, c->stream));
    return c->st.failed;
}

static sample_args args_of(const cuda_sampler *s, const tram_cuda_logits *logits, int want_logprobs)
{
    return sample_args{.logits = (const bf16 *)logits->data,
                       .stride = logits->stride,
                       .vocab = logits->vocab,
                       .want_logprobs = want_logprobs,
                       .seat_stride = s->vocab,
                       .params = s->params,
                       .bias = s->bias,
                       .counts = s->counts,
                       .scratch = s->scratch,
                       .out = s->out};
}

/* The n results copied back after the kernel (unless something failed on
 * the way, which the sync reports). */
static int fetch_results(tram_backend *be, cuda_state *c, int n, tram_error *err)
{
    cuda_sampler *s = c->sampler;
    if (!c->st.failed)
        CUDA_CHECK(&c->st, cudaMemcpyAsync(s->host, s->out, n * sizeof(sample_result), cudaMemcpyDeviceToHost, c->stream));
    return be->sync(be, err);
}

extern "C" int tram_cuda_sample(tram_backend *be, const tram_cuda_logits *logits, const tram_cuda_sampling *params,
                                int n, const tram_logit_bias *bias, int num_bias, int32_t *ids, float *logprobs,
                                tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cuda_sampler *s = c->sampler;
    if (n <= 0)
        return 0;
    if (check_call(s, logits, params, n, s ? s->rows : 0, num_bias, err))
        return -1;
    sample_args a = args_of(s, logits, logprobs != NULL);
    if (!upload_params(c, params, n, bias, num_bias)) {
        if (cuda_variant(c, TRAM_KERNEL_SAMPLER) == 2)
            kernel_sample<2><<<n, SAMPLE_THREADS, 0, c->stream>>>(a);
        else
            kernel_sample<1><<<n, SAMPLE_THREADS, 0, c->stream>>>(a);
        LAUNCH_CHECK(&c->st, "kernel_sample");
    }
    if (fetch_results(be, c, n, err))
        return -1;
    for (int i = 0; i < n; i++) {
        ids[i] = s->host[i].id;
        if (logprobs)
            logprobs[i] = s->host[i].logprob;
    }
    return 0;
}

extern "C" int tram_cuda_verify(tram_backend *be, const tram_cuda_logits *logits, const tram_cuda_sampling *params,
                                const int32_t *drafts, int n, const tram_cuda_verify_seq *seqs, int num_seqs,
                                const tram_logit_bias *bias, int num_bias, int32_t *ids, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cuda_sampler *s = c->sampler;
    if (n <= 0 && num_seqs == 0)
        return 0;
    if (check_call(s, logits, params, n, s ? s->draws : 0, num_bias, err) ||
        check_seqs(s, params, n, seqs, num_seqs, err))
        return -1;
    sample_args a = args_of(s, logits, 0);
    if (!upload_params(c, params, n, bias, num_bias) &&
        !CUDA_CHECK(&c->st, cudaMemcpyAsync(s->drafts, drafts, n * sizeof(*drafts), cudaMemcpyHostToDevice,
                                            c->stream)) &&
        !CUDA_CHECK(&c->st, cudaMemcpyAsync(s->seqs, seqs, num_seqs * sizeof(*seqs), cudaMemcpyHostToDevice,
                                            c->stream))) {
        if (cuda_variant(c, TRAM_KERNEL_SAMPLER) == 2)
            kernel_verify<2><<<num_seqs, SAMPLE_THREADS, 0, c->stream>>>(a, s->seqs, s->drafts);
        else
            kernel_verify<1><<<num_seqs, SAMPLE_THREADS, 0, c->stream>>>(a, s->seqs, s->drafts);
        LAUNCH_CHECK(&c->st, "kernel_verify");
    }
    if (fetch_results(be, c, n, err))
        return -1;
    for (int i = 0; i < n; i++)
        ids[i] = s->host[i].id;
    return 0;
}
