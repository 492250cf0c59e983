/* check.h — every CUDA runtime, cuBLASLt and NCCL call goes through one of
 * these macros.  A failure is recorded with file, line and the call's text in
 * the backend's status (first error wins) and reported later by sync(), so an
 * op never aborts and never loses an error.  Each macro evaluates to 0 on
 * success and -1 on failure, for the callers that must stop early. */
#ifndef TRAM_CUDA_CHECK_H
#define TRAM_CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/base.h"

typedef struct {
    int failed;
    tram_error err;
} tram_cuda_status;

/* Records "file:line: call: why" unless an earlier error is already held. */
static inline int tram_cuda_record(tram_cuda_status *st, const char *file, int line, const char *call,
                                   const char *why)
{
    if (!st->failed)
        tram_fail(&st->err, "cuda backend: %s:%d: %s failed: %s", file, line, call, why);
    st->failed = 1;
    return -1;
}

static inline int tram_cuda_rt(tram_cuda_status *st, cudaError_t e, const char *file, int line,
                               const char *call)
{
    return e == cudaSuccess ? 0 : tram_cuda_record(st, file, line, call, cudaGetErrorString(e));
}

static inline int tram_cuda_blas(tram_cuda_status *st, cublasStatus_t s, const char *file, int line,
                                 const char *call)
{
    return s == CUBLAS_STATUS_SUCCESS ? 0 : tram_cuda_record(st, file, line, call, cublasLtGetStatusString(s));
}

static inline int tram_cuda_nccl(tram_cuda_status *st, ncclResult_t r, const char *file, int line,
                                 const char *call)
{
    return r == ncclSuccess ? 0 : tram_cuda_record(st, file, line, call, ncclGetErrorString(r));
}

#define CUDA_CHECK(st, call) tram_cuda_rt((st), (call), __FILE__, __LINE__, #call)
#define CUBLAS_CHECK(st, call) tram_cuda_blas((st), (call), __FILE__, __LINE__, #call)
#define NCCL_CHECK(st, call) tram_cuda_nccl((st), (call), __FILE__, __LINE__, #call)
/* After every kernel launch: catches bad launch configurations at once. */
#define LAUNCH_CHECK(st, kernel) tram_cuda_rt((st), cudaGetLastError(), __FILE__, __LINE__, "launch " kernel)

#endif
