/* gpu_probe.cu — the preflight of tests/gpu/run.sh: can this machine run the
 * three things every later step needs?  One CUDA kernel, one cuBLASLt bf16
 * GEMM and one CUDA graph, each checked against values computed here (small
 * integers, exact in bf16 and f32, so "equal" means equal).  It uses the
 * runtime and cuBLASLt directly, not tram's backend: a failure here is the
 * machine's (driver, libraries, runtime), not tram's.  Prints one line per
 * part and finishes in well under a second on a working GPU.
 * Exit 0: all three ran and agreed; 1: one failed; 2: no usable GPU. */
#include <stdio.h>
#include <stdlib.h>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define N 64

static int failed;

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    printf("FAIL   probe %s: %s\n", what, cudaGetErrorString(e));
    failed = 1;
    return 0;
}

static int lt_ok(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 1;
    printf("FAIL   probe %s: cuBLASLt status %d\n", what, (int)s);
    failed = 1;
    return 0;
}

static __global__ void kernel_add(float *x, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += v;
}

/* x[i] = i by the kernel; x[i] = i + 3 after a graph of it (v = 1) replays 3 times. */
static void probe_kernel_and_graph(cudaStream_t st)
{
    float *d = NULL, h[N];
    if (!cuda_ok(cudaMalloc((void **)&d, N * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMemsetAsync(d, 0, N * sizeof(float), st), "memset"))
        return;
    for (int i = 0; i < N; i++)
        h[i] = (float)i;
    int ok = cuda_ok(cudaMemcpyAsync(d, h, sizeof(h), cudaMemcpyHostToDevice, st), "upload");
    kernel_add<<<1, N, 0, st>>>(d, 0.0f, N);
    ok = ok && cuda_ok(cudaGetLastError(), "kernel launch") && cuda_ok(cudaStreamSynchronize(st), "kernel");
    cudaGraph_t g;
    cudaGraphExec_t ge;
    if (ok && cuda_ok(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "graph capture")) {
        kernel_add<<<1, N, 0, st>>>(d, 1.0f, N);
        if (cuda_ok(cudaStreamEndCapture(st, &g), "graph end") &&
            cuda_ok(cudaGraphInstantiate(&ge, g, 0), "graph instantiate")) {
            for (int r = 0; r < 3 && ok; r++)
                ok = cuda_ok(cudaGraphLaunch(ge, st), "graph launch");
            if (ok && cuda_ok(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, st), "download") &&
                cuda_ok(cudaStreamSynchronize(st), "graph replay")) {
                int bad = 0;
                for (int i = 0; i < N; i++)
                    bad += h[i] != (float)i + 3.0f;
                printf("%s   probe kernel and graph: %d of %d values wrong after 3 replays\n", bad ? "FAIL" : "PASS",
                       bad, N);
                failed |= bad != 0;
            }
            cuda_ok(cudaGraphExecDestroy(ge), "graph exec destroy");
        }
        cuda_ok(cudaGraphDestroy(g), "graph destroy");
    }
    cuda_ok(cudaFree(d), "cudaFree");
}

/* D = A·B for N×N bf16 matrices of small integers, f32 accumulation, bf16 out. */
static void probe_gemm(cudaStream_t st)
{
    static __nv_bfloat16 a[N * N], b[N * N], d[N * N];
    static float want[N * N];
    for (int i = 0; i < N * N; i++) {
        a[i] = __float2bfloat16((float)(i % 5) - 2.0f);
        b[i] = __float2bfloat16((float)(i % 3) - 1.0f);
    }
    for (int r = 0; r < N; r++)  /* column-major, as cuBLASLt's default order */
        for (int c = 0; c < N; c++) {
            float s = 0;
            for (int k = 0; k < N; k++)
                s += __bfloat162float(a[k * N + r]) * __bfloat162float(b[c * N + k]);
            want[c * N + r] = s;
        }
    void *da = NULL, *db = NULL, *dd = NULL, *ws = NULL;
    size_t bytes = sizeof(a), ws_bytes = 4u << 20;
    if (!cuda_ok(cudaMalloc(&da, bytes), "cudaMalloc") || !cuda_ok(cudaMalloc(&db, bytes), "cudaMalloc") ||
        !cuda_ok(cudaMalloc(&dd, bytes), "cudaMalloc") || !cuda_ok(cudaMalloc(&ws, ws_bytes), "cudaMalloc"))
        return;
    if (!cuda_ok(cudaMemcpyAsync(da, a, bytes, cudaMemcpyHostToDevice, st), "upload") ||
        !cuda_ok(cudaMemcpyAsync(db, b, bytes, cudaMemcpyHostToDevice, st), "upload"))
        return;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    float one = 1.0f, zero = 0.0f;
    if (lt_ok(cublasLtCreate(&lt), "cublasLtCreate") &&
        lt_ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc") &&
        lt_ok(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, N, N, N), "layout") &&
        lt_ok(cublasLtMatmulPreferenceCreate(&pref), "preference") &&
        lt_ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                   sizeof(ws_bytes)), "preference") &&
        lt_ok(cublasLtMatmulAlgoGetHeuristic(lt, op, l, l, l, l, pref, 1, &h, &found), "heuristic") &&
        found == 1 &&
        lt_ok(cublasLtMatmul(lt, op, &one, da, l, db, l, &zero, dd, l, dd, l, &h.algo, ws, ws_bytes, st),
              "cublasLtMatmul") &&
        cuda_ok(cudaMemcpyAsync(d, dd, bytes, cudaMemcpyDeviceToHost, st), "download") &&
        cuda_ok(cudaStreamSynchronize(st), "gemm")) {
        int bad = 0;
        for (int i = 0; i < N * N; i++)
            bad += __bfloat162float(d[i]) != want[i];
        printf("%s   probe cuBLASLt bf16 GEMM %dx%dx%d: %d of %d values wrong\n", bad ? "FAIL" : "PASS", N, N, N,
               bad, N * N);
        failed |= bad != 0;
    } else if (!failed) {
        printf("FAIL   probe cuBLASLt: no algorithm for a %dx%dx%d bf16 GEMM\n", N, N, N);
        failed = 1;
    }
    void *bufs[] = {da, db, dd, ws};
    for (int i = 0; i < 4; i++)
        cuda_ok(cudaFree(bufs[i]), "cudaFree");
}

int main(void)
{
    int count = 0, driver = 0, runtime = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("gpu_probe: no usable CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 2;
    }
    cudaDeviceProp p;
    if (!cuda_ok(cudaDriverGetVersion(&driver), "driver version") ||
        !cuda_ok(cudaRuntimeGetVersion(&runtime), "runtime version") ||
        !cuda_ok(cudaGetDeviceProperties(&p, 0), "device properties"))
        return 2;
    printf("gpu_probe: %s, compute capability %d.%d, %d SMs, driver CUDA %d, runtime %d, cuBLASLt %zu\n", p.name,
           p.major, p.minor, p.multiProcessorCount, driver, runtime, cublasLtGetVersion());
    cudaStream_t st;
    if (!cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream"))
        return 2;
    probe_kernel_and_graph(st);
    probe_gemm(st);
    cuda_ok(cudaStreamDestroy(st), "stream destroy");
    return failed;
}
