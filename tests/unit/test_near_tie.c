/* The near-tie rule of the GPU end-to-end check (tests/gpu/near_tie.h). */
#include <criterion/criterion.h>

#include "tests/gpu/near_tie.h"

enum { V = 1000 };

/* A reference row with its argmax at 0, margin m over token 1, and a CUDA row
 * of small ordinary noise (±e, alternating) on every logit. */
static void rows(float *a, float *b, float m, float e)
{
    for (int i = 0; i < V; i++) {
        a[i] = -1.0f - (float)(i % 7) * 0.1f;
        b[i] = a[i] + (i % 2 ? e : -e);
    }
    a[0] = 2.0f, a[1] = 2.0f - m;
}

Test(near_tie, a_flip_with_a_margin_beyond_the_largest_difference_is_a_tie)
{
    static float a[V], b[V];
    rows(a, b, 0.015f, 0.01f);
    /* token 0 down by 0.01, token 1 up by 0.01: a flip of margin 0.015 > the largest |d| */
    b[0] = a[0] - 0.01f, b[1] = a[1] + 0.01f;
    double rms = 0.01, maxdiff = 0.01;
    cr_assert(b[1] > b[0] && a[0] - a[1] > maxdiff, "the case the old rule (margin <= max |d|) called real");
    cr_assert(tram_near_tie(a, b, 0, 1, rms));
}

Test(near_tie, a_wrong_value_at_one_token_is_real)
{
    static float a[V], b[V];
    rows(a, b, 0.5f, 0.01f);
    b[1] = a[1] + 0.6f;  /* an error 60 times the row's at the token that won */
    cr_assert(b[1] > b[0]);
    cr_assert_not(tram_near_tie(a, b, 0, 1, 0.01));
    b[1] = a[1] + 0.01f, b[0] = a[0] - 0.6f;  /* or at the token that lost */
    cr_assert(b[1] > b[0]);
    cr_assert_not(tram_near_tie(a, b, 0, 1, 0.01));
}
