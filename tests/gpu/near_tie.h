/* near_tie.h — is a greedy token that differs between the CPU reference (f32)
 * and CUDA (bf16) a near-tie that rounding may flip, or a real divergence?
 * (tests/gpu/check_e2e.c; tested on the host by tests/unit/test_near_tie.c.)
 *
 * With a = the reference row, b = the CUDA row, d = b − a, tc = argmax a and
 * tg = argmax b ≠ tc, the reference margin a[tc] − a[tg] is always at most
 * d[tg] − d[tc] ≤ |d[tc]| + |d[tg]| (b[tg] ≥ b[tc]): that bound holds for
 * every flip, so it cannot tell a near-tie from a bug, and neither can the
 * row's largest |d| (a genuine flip may need up to twice it).  What does tell
 * them apart is whether the two tokens' errors are ordinary for this row: a
 * flip is a near-tie when |d[tc]| and |d[tg]| are both within
 * TRAM_NEAR_TIE_SIGMAS root-mean-square differences of the row (bf16
 * rounding spreads error over every logit alike), and real when the error at
 * one of the two tokens stands out (a wrong value there). */
#ifndef TRAM_TESTS_NEAR_TIE_H
#define TRAM_TESTS_NEAR_TIE_H

#include <math.h>

#define TRAM_NEAR_TIE_SIGMAS 6.0

/* 1: a near-tie; 0: a real divergence.  rms_diff is √(Σ d² / vocab). */
static inline int tram_near_tie(const float *a, const float *b, int tc, int tg, double rms_diff)
{
    double d_tc = fabs((double)b[tc] - a[tc]), d_tg = fabs((double)b[tg] - a[tg]);
    double ordinary = TRAM_NEAR_TIE_SIGMAS * rms_diff;
    return d_tc <= ordinary && d_tg <= ordinary;
}

#endif
