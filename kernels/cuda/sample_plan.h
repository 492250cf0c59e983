/* sample_plan.h — the device sampler's index and bucket arithmetic
 * (kernels/cuda/sampling.cu), header-only and plain C so that the kernels
 * (nvcc) and the unit tests (gcc, tests/unit/test_cuda_sampler.c) share one
 * copy, as launch_plan.h does for the launches. */
#ifndef TRAM_CUDA_SAMPLE_PLAN_H
#define TRAM_CUDA_SAMPLE_PLAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define TRAM_SP_HD __host__ __device__
#else
#define TRAM_SP_HD
#endif

/* The walk of the one thread whose share (before, before + own] of the kept
 * mass holds the draw u: its kept ids in order, each adding its probability
 * e to the running sum, until the sum reaches u.  The sums that decided the
 * claim were rounded in another order, so the walk may end a hair short of
 * u; the pick is then the last id passed with e > 0.  An id of probability 0
 * (a banned token, or one whose exp underflowed) is never the pick: the
 * claiming thread's share is positive, so such an id always exists. */
typedef struct {
    float run;  /* start at the thread's `before` */
    int pick;   /* -1 until an id of positive probability is passed */
} tram_sample_walk;

/* Passes one kept id; 1 when the walk stops at it. */
static inline TRAM_SP_HD int tram_sample_walk_take(tram_sample_walk *w, int id, float e, float u)
{
    if (!(e > 0.0f))
        return 0;
    w->pick = id;
    w->run += e;
    return w->run >= u;
}

#ifdef __cplusplus
}
#endif

#endif
