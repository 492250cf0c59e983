/* The device sampler's host-side arithmetic (kernels/cuda/sample_plan.h),
 * checked on the CPU: the draw's walk, and the radix select of top-k/top-p
 * against kernels/cpu/sampling.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/sample_plan.h"

/* The claiming thread of sampling.cu's draw: a chunk of kept probabilities
 * (zeros where ids are banned), its share (before, incl] of the block's sums
 * with incl = before + own as the block scan rounds it, and u = incl, the
 * largest draw it claims.  Returns the pick under the rule of sample_plan.h,
 * and in *old_pick the pick of the rule before it (every kept id was taken
 * before the running sum was tested). */
static int walk_chunk(const float *e, int n, float before, int *old_pick, int *short_of_u)
{
    float own = 0.0f;
    for (int j = 0; j < n; j++)
        own += e[j];
    float u = before + own;
    tram_sample_walk w = {.run = before, .pick = -1};
    int stopped = 0;
    for (int j = 0; j < n && !stopped; j++)
        stopped = tram_sample_walk_take(&w, j, e[j], u);
    float run = before;
    *old_pick = -1;
    for (int j = 0; j < n; j++) {
        *old_pick = j;
        run += e[j];
        if (run >= u)
            break;
    }
    *short_of_u = !stopped;
    return w.pick;
}

Test(cuda_sampler, a_rounding_shortfall_never_picks_a_zero_probability_id)
{
    srand(7);
    int shortfalls = 0, old_zero_picks = 0;
    for (int trial = 0; trial < 20000; trial++) {
        float e[16];
        int n = 2 + rand() % 14, positive = 1 + rand() % (n - 1);
        for (int j = 0; j < n; j++)  /* positive ids first, then banned ones (probability 0) */
            e[j] = j < positive ? (float)rand() / RAND_MAX * 1e-2f + 1e-6f : 0.0f;
        float before = (float)rand() / RAND_MAX * 3.0f;
        int old_pick, short_of_u, pick = walk_chunk(e, n, before, &old_pick, &short_of_u);
        cr_assert(pick >= 0 && pick < n && e[pick] > 0.0f, "trial %d: picked id %d of probability %g", trial, pick,
                  pick >= 0 ? e[pick] : -1.0f);
        shortfalls += short_of_u;
        old_zero_picks += e[old_pick] == 0.0f;
    }
    /* the case is real: the walk does fall short, and the old rule then took a banned id */
    cr_assert_gt(shortfalls, 0);
    cr_assert_gt(old_zero_picks, 0, "%d shortfalls, none reproduced the old pick", shortfalls);
}
