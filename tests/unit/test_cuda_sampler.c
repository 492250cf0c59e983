/* The device sampler's host-side arithmetic (kernels/cuda/sample_plan.h),
 * checked on the CPU: the draw's walk, and the radix select of top-k/top-p
 * against kernels/cpu/sampling.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_sampling.h"
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

/* ---------------------------------------------------------------- radix select */

typedef struct {
    uint32_t key;
    int idc;  /* ids with key > key, and those with key == key below idc */
} cutoff;

static int kept(const float *x, int j, cutoff c)
{
    uint32_t k = tram_sample_order_key(x[j]);
    return k > c.key || (k == c.key && j < c.idc);
}

static unsigned long long weight_of(float v, int mass, float M, float inv_t)
{
    return mass ? tram_sample_mass_fixed(expf((v - M) * inv_t)) : 1ull;
}

/* sampling.cu's radix_prefix, one thread doing what the block does: the
 * histograms of each pass (integer sums: the same in any order), the scans
 * of sample_plan.h, then the ties in ascending id order. */
static cutoff radix_prefix(const float *x, int vocab, cutoff c, int mass, float M, float inv_t, float top_p,
                           int top_k, int *passes)
{
    unsigned long long want = 0, above = 0;
    uint32_t prefix = 0;
    for (int pass = 0; pass < TRAM_RADIX_PASSES; pass++) {
        unsigned long long hist[TRAM_RADIX_DIGITS] = {0};
        uint32_t mask = tram_radix_mask(pass);
        for (int j = 0; j < vocab; j++) {
            uint32_t k = tram_sample_order_key(x[j]);
            if (kept(x, j, c) && (k & mask) == prefix)
                hist[tram_radix_digit(k, pass)] += weight_of(x[j], mass, M, inv_t);
        }
        ++*passes;
        if (pass == 0) {
            unsigned long long total = 0;
            for (int d = 0; d < TRAM_RADIX_DIGITS; d++)
                total += hist[d];
            want = mass ? tram_radix_mass_want(total, top_p) : (unsigned long long)top_k;
            if (total <= want)
                return c;
        }
        prefix |= (uint32_t)tram_radix_pick(hist, want, &above) << (24 - 8 * pass);
    }
    uint32_t bits = prefix & 0x80000000u ? prefix & 0x7fffffffu : ~prefix;
    float v;
    memcpy(&v, &bits, 4);
    unsigned long long r = tram_radix_ties_needed(want, above, weight_of(v, mass, M, inv_t)), seen = 0;
    ++*passes;
    for (int j = 0; j < vocab; j++)
        if (kept(x, j, c) && tram_sample_order_key(x[j]) == prefix && ++seen == r)
            return (cutoff){prefix, j + 1};
    cr_assert_fail("the cutoff key %08x has fewer than %llu ties", prefix, r);
    return c;
}

/* The ids of positive probability variant 2 keeps (min-p, top-k, top-p, as
 * sampling.cu's sample_row), in ascending order; returns how many. */
static int device_kept(const float *x, int vocab, const tram_sampler_row *p, int32_t *ids, int *passes)
{
    float M = -INFINITY;
    for (int j = 0; j < vocab; j++)
        M = fmaxf(M, x[j]);
    float inv_t = 1.0f / p->temperature;
    cutoff c = {tram_sample_order_key(p->min_p > 0.0f ? M + p->temperature * logf(p->min_p) : -INFINITY), vocab};
    if (p->top_k > 0)
        c = radix_prefix(x, vocab, c, 0, M, inv_t, 1.0f, p->top_k, passes);
    if (p->top_p < 1.0f)
        c = radix_prefix(x, vocab, c, 1, M, inv_t, p->top_p, 0, passes);
    int n = 0;
    for (int j = 0; j < vocab; j++)
        if (kept(x, j, c) && expf((x[j] - M) * inv_t) > 0.0f)
            ids[n++] = j;
    return n;
}

static int cmp_id(const void *a, const void *b) { return *(const int32_t *)a - *(const int32_t *)b; }

/* Rows of continuous logits and rows of four distinct values (every cutoff
 * then falls inside ties); each parameter set's kept ids equal the host
 * sampler's, in at most 2 × 5 passes over the row. */
Test(cuda_sampler, radix_select_keeps_what_the_host_sampler_keeps)
{
    enum { V = 1000 };
    static float row[V];
    static int32_t want[V], got[V];
    tram_sampler *hs;
    tram_error err = {{0}};
    cr_assert_eq(tram_sampler_create(&hs, V, &err), 0, "%s", err.msg);
    static const int ks[] = {0, 1, 5, 50, 999, 1000, 5000};
    static const float ps[] = {1.0f, 0.1f, 0.5f, 0.9f, 0.99f}, mins[] = {0.0f, 0.05f}, temps[] = {0.7f, 1.0f, 1.5f};
    srand(11);
    int cases = 0, truncated = 0;
    for (int tied = 0; tied < 2; tied++)
        for (int trial = 0; trial < 3; trial++) {
            for (int j = 0; j < V; j++)
                row[j] = tied ? (float)(rand() % 4) - 1.0f : (float)rand() / RAND_MAX * 8.0f - 4.0f;
            for (size_t a = 0; a < TRAM_ARRAY_LEN(ks); a++)
                for (size_t b = 0; b < TRAM_ARRAY_LEN(ps); b++)
                    for (size_t m = 0; m < TRAM_ARRAY_LEN(mins); m++)
                        for (size_t t = 0; t < TRAM_ARRAY_LEN(temps); t++) {
                            tram_sample_input in = {.p = {.temperature = temps[t], .top_k = ks[a], .top_p = ps[b],
                                                          .min_p = mins[m], .repetition_penalty = 1.0f}};
                            int passes = 0, n = tram_sample_kept(hs, row, &in, want);
                            qsort(want, (size_t)n, sizeof(int32_t), cmp_id);
                            int k = device_kept(row, V, &in.p, got, &passes);
                            cr_assert_eq(k, n, "tied %d k %d p %g min_p %g T %g: %d ids kept, host %d", tied, ks[a],
                                         ps[b], mins[m], temps[t], k, n);
                            cr_assert_eq(memcmp(got, want, (size_t)n * sizeof(int32_t)), 0,
                                         "tied %d k %d p %g min_p %g T %g: other ids", tied, ks[a], ps[b], mins[m],
                                         temps[t]);
                            cr_assert_leq(passes, 2 * (TRAM_RADIX_PASSES + 1));
                            cases++;
                            truncated += n < V;
                        }
        }
    cr_assert_gt(truncated, cases / 2, "most cases cut the row");
    tram_sampler_destroy(hs);
}
