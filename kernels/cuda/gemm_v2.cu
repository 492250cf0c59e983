/* gemm_v2.cu — variant 2 of the bf16 GEMM (kernels/variants.h): the fastest
 * of cuBLASLt's top candidates, timed once per shape, and a GEMV for the
 * few-row products of decode.
 *
 * The heuristic's first choice is a guess from the shape alone.  At the
 * first product of a shape (the profiling pass or the eager run before a
 * CUDA graph is captured, never inside a capture, never in a replay), the
 * plan times up to CUDA_GEMM_CANDIDATES algorithms on the call's own
 * buffers and, for n <= TRAM_CUDA_GEMV_MAX_N rows, the GEMV below, and
 * keeps the fastest; later calls only look the plan up.
 *
 * The GEMV is for decode, where a product reads every weight once for a
 * handful of token rows: memory-bound, so what counts is 16-byte loads and
 * enough of them in flight.  Each warp computes TRAM_CUDA_GEMV_ROWS output
 * rows, each lane reading 8 weights of every row and the same 8 columns of
 * each token row per step; splitting the columns (split-K) keeps about 48
 * warps per multiprocessor busy when the matrix has few rows, the partial
 * sums going to f32 scratch that a second pass adds up in a fixed order. */
#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/reduce.cuh"

#define GEMV_WARPS TRAM_CUDA_GEMV_WARPS
#define GEMV_ROWS TRAM_CUDA_GEMV_ROWS
#define TIMED_RUNS 3

/* Σ over 8 columns of w·x, both 16-byte loads of bf16. */
static __device__ __forceinline__ float dot8(const uint4 &w, const uint4 &x)
{
    const __nv_bfloat162 *a = reinterpret_cast<const __nv_bfloat162 *>(&w);
    const __nv_bfloat162 *b = reinterpret_cast<const __nv_bfloat162 *>(&x);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 fa = __bfloat1622float2(a[i]), fb = __bfloat1622float2(b[i]);
        s = fmaf(fa.x, fb.x, s);
        s = fmaf(fa.y, fb.y, s);
    }
    return s;
}

/* y[N][rows] (or split blockIdx.y's partials) = x[N][cols] · W[rows][cols]ᵀ. */
template <int N>
static __global__ void __launch_bounds__(GEMV_WARPS * 32)
    kernel_gemv(bf16 *y, float *part, const bf16 *__restrict__ w, const bf16 *__restrict__ x, int rows, int cols,
                int splits)
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int r0 = (blockIdx.x * GEMV_WARPS + warp) * GEMV_ROWS;
    if (r0 >= rows)
        return;
    int lo, hi;
    tram_cuda_gemv_cols(cols, splits, blockIdx.y, &lo, &hi);
    const bf16 *wr[GEMV_ROWS];
    float acc[GEMV_ROWS][N];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        wr[r] = w + (size_t)min(r0 + r, rows - 1) * cols;  /* a row past the end repeats the last, unwritten */
#pragma unroll
        for (int j = 0; j < N; j++)
            acc[r][j] = 0.0f;
    }
#pragma unroll 2
    for (int k = lo + lane * 8; k < hi; k += 32 * 8) {
        uint4 wv[GEMV_ROWS];
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
            wv[r] = __ldg(reinterpret_cast<const uint4 *>(wr[r] + k));
#pragma unroll
        for (int j = 0; j < N; j++) {
            uint4 xv = __ldg(reinterpret_cast<const uint4 *>(x + (size_t)j * cols + k));
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++)
                acc[r][j] += dot8(wv[r], xv);
        }
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
        for (int j = 0; j < N; j++) {
            float v = warp_sum(acc[r][j]);
            if (lane != 0 || r0 + r >= rows)
                continue;
            if (splits == 1)
                y[(size_t)j * rows + r0 + r] = __float2bfloat16(v);
            else
                part[((size_t)blockIdx.y * N + j) * rows + r0 + r] = v;
        }
}

/* y[i] = Σ_s part[s][i] over n·rows sums, splits in order. */
static __global__ void kernel_gemv_sum(bf16 *y, const float *part, int splits, size_t count)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    float s = 0.0f;
    for (int k = 0; k < splits; k++)
        s += part[(size_t)k * count + i];
    y[i] = __float2bfloat16(s);
}

typedef void (*gemv_kernel)(bf16 *, float *, const bf16 *, const bf16 *, int, int, int);

static gemv_kernel gemv_instance(int n)
{
    static const gemv_kernel kernels[TRAM_CUDA_GEMV_MAX_N] = {
        kernel_gemv<1>, kernel_gemv<2>, kernel_gemv<3>, kernel_gemv<4>,
        kernel_gemv<5>, kernel_gemv<6>, kernel_gemv<7>, kernel_gemv<8>,
    };
    return kernels[n - 1];
}

/* Plan fields: m = rows of W, n = token rows, k = columns. */
void cuda_gemv(cuda_state *c, const cuda_gemm_plan *p, void *y, const void *x, const void *w)
{
    int splits = p->gemv_splits;
    dim3 grid(tram_ceil_div(p->m, GEMV_WARPS * GEMV_ROWS), splits);
    gemv_instance(p->n)<<<grid, GEMV_WARPS * 32, 0, c->stream>>>((bf16 *)y, c->gemv_partial, (const bf16 *)w,
                                                                (const bf16 *)x, p->m, p->k, splits);
    if (LAUNCH_CHECK(&c->st, "kernel_gemv") || splits == 1)
        return;
    size_t count = (size_t)p->n * p->m;
    kernel_gemv_sum<<<tram_cuda_grid_1d((int64_t)count, 256), 256, 0, c->stream>>>((bf16 *)y, c->gemv_partial,
                                                                                   splits, count);
    LAUNCH_CHECK(&c->st, "kernel_gemv_sum");
}

/* One run of plan p as it stands (its algorithm, or its GEMV). */
static int run_plan(cuda_state *c, const cuda_gemm_plan *p, const void *w, const void *x, void *y)
{
    if (p->gemv_splits) {
        cuda_gemv(c, p, y, x, w);
        return c->st.failed ? -1 : 0;
    }
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasLtMatmul(c->lt, c->gemm_op, &one, w, p->a, x, p->b, &zero, y, p->c, y, p->c, &p->algo,
                                      c->workspace, CUDA_GEMM_WORKSPACE, c->stream);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;  /* a candidate that cannot run is skipped, not an error */
}

/* Milliseconds per run of plan p, or -1 when it cannot run. */
static float time_plan(cuda_state *c, const cuda_gemm_plan *p, const void *w, const void *x, void *y,
                       cudaEvent_t start, cudaEvent_t stop)
{
    if (run_plan(c, p, w, x, y))  /* warm-up */
        return -1.0f;
    if (CUDA_CHECK(&c->st, cudaEventRecord(start, c->stream)))
        return -1.0f;
    for (int i = 0; i < TIMED_RUNS; i++)
        if (run_plan(c, p, w, x, y))
            return -1.0f;
    float ms = -1.0f;
    if (CUDA_CHECK(&c->st, cudaEventRecord(stop, c->stream)) || CUDA_CHECK(&c->st, cudaEventSynchronize(stop)) ||
        CUDA_CHECK(&c->st, cudaEventElapsedTime(&ms, start, stop)))
        return -1.0f;
    return ms / TIMED_RUNS;
}

/* Whether the GEMV can run this plan: few rows, whole 16-byte vectors. */
static int gemv_fits(const cuda_gemm_plan *p)
{
    return p->n <= TRAM_CUDA_GEMV_MAX_N && p->k % 8 == 0 && p->align >= 16;
}

int cuda_gemm_tune(cuda_state *c, cuda_gemm_plan *p, const cublasLtMatmulHeuristicResult_t *cand, int found,
                   const void *w, const void *x, void *y)
{
    cudaStreamCaptureStatus capture;
    if (CUDA_CHECK(&c->st, cudaStreamIsCapturing(c->stream, &capture)))
        return -1;
    if (capture != cudaStreamCaptureStatusNone)
        return 0;  /* no timing inside a graph: the heuristic's first choice stays */
    cudaEvent_t start, stop;
    if (CUDA_CHECK(&c->st, cudaEventCreate(&start)))
        return -1;
    if (CUDA_CHECK(&c->st, cudaEventCreate(&stop))) {
        cudaEventDestroy(start);
        return -1;
    }
    cuda_gemm_plan best = *p, trial = *p;
    float best_ms = -1.0f;
    for (int i = 0; i < found && !c->st.failed; i++) {
        trial.algo = cand[i].algo;
        float ms = time_plan(c, &trial, w, x, y, start, stop);
        if (ms >= 0.0f && (best_ms < 0.0f || ms < best_ms))
            best = trial, best_ms = ms;
    }
    int splits = tram_cuda_gemv_splits(p->m, p->k, c->num_sms);
    size_t scratch = (size_t)splits * p->n * p->m * sizeof(float);
    if (gemv_fits(p) && !c->st.failed &&
        (splits == 1 || !cuda_reserve(c, (void **)&c->gemv_partial, &c->gemv_partial_bytes, scratch))) {
        trial = *p;
        trial.gemv_splits = splits;
        float ms = time_plan(c, &trial, w, x, y, start, stop);
        if (ms >= 0.0f && (best_ms < 0.0f || ms < best_ms))
            best = trial, best_ms = ms;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    p->algo = best.algo;
    p->gemv_splits = best.gemv_splits;
    return c->st.failed ? -1 : 0;
}
