/* sample_plan.h — the device sampler's index and bucket arithmetic
 * (kernels/cuda/sampling.cu), header-only and plain C so that the kernels
 * (nvcc) and the unit tests (gcc, tests/unit/test_cuda_sampler.c) share one
 * copy, as launch_plan.h does for the launches. */
#ifndef TRAM_CUDA_SAMPLE_PLAN_H
#define TRAM_CUDA_SAMPLE_PLAN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* ---------------------------------------------------------------- radix select (sampler variant 2) */

/* Variant 2 finds a top-k or top-p cutoff in 4 histogram passes over the
 * row instead of variant 1's ~50 bisection passes.  The row's order is by
 * key (logit descending, id ascending among equal logits); a cutoff is a
 * prefix of that order.  Pass p histograms, over the kept ids whose key
 * matches the digits chosen so far, the weights of their p-th 8-bit digit
 * (most significant first): 1 per id for top-k, the probability in fixed
 * point for top-p (integers, so the sums do not depend on the order the
 * threads add them in and seeds reproduce).  The scan from the top digit
 * picks the bucket where the running weight first reaches the target; after
 * 4 passes the key of the cutoff is exact, and the ties at it are taken in
 * ascending id order, as many as the target still needs. */

#define TRAM_RADIX_DIGITS 256
#define TRAM_RADIX_PASSES 4

/* Unsigned keys in the order of the floats (-0 just below +0). */
static inline TRAM_SP_HD uint32_t tram_sample_order_key(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b & 0x80000000u ? ~b : b | 0x80000000u;
}

static inline TRAM_SP_HD int tram_radix_digit(uint32_t key, int pass)
{
    return (int)(key >> (24 - 8 * pass)) & (TRAM_RADIX_DIGITS - 1);
}

/* The key bits passes [0, pass) have fixed. */
static inline TRAM_SP_HD uint32_t tram_radix_mask(int pass)
{
    return pass == 0 ? 0u : ~0u << (32 - 8 * pass);
}

/* A probability exp((x - max)/T) in (0, 1] as an integer of 2^-40 units
 * (truncated; a row of 2^22 ids sums below 2^63). */
static inline TRAM_SP_HD unsigned long long tram_sample_mass_fixed(float e)
{
    return (unsigned long long)(e * 1099511627776.0f);
}

/* The target weight of top-p over a kept mass `total`: the shortest prefix
 * holding at least top_p of it, and at least one id. */
static inline TRAM_SP_HD unsigned long long tram_radix_mass_want(unsigned long long total, float top_p)
{
    double w = ceil((double)total * (double)top_p);
    return w < 1.0 ? 1ull : (unsigned long long)w;
}

/* The bucket the running weight first reaches `want` in, scanning from the
 * top digit; *above (the weight of keys above the current range on entry)
 * grows by the buckets passed over. */
static inline TRAM_SP_HD int tram_radix_pick(const unsigned long long *hist, unsigned long long want,
                                             unsigned long long *above)
{
    for (int d = TRAM_RADIX_DIGITS - 1; d > 0; d--) {
        if (*above + hist[d] >= want)
            return d;
        *above += hist[d];
    }
    return 0;
}

/* How many of the ties at the cutoff key (each of weight `each`) the
 * prefix needs after the `above` weight of larger keys. */
static inline TRAM_SP_HD unsigned long long tram_radix_ties_needed(unsigned long long want, unsigned long long above,
                                                                   unsigned long long each)
{
    return (want - above + each - 1) / each;
}

#ifdef __cplusplus
}
#endif

#endif
