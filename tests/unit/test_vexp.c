/* Row exponentials (kernels/cpu/vexp.h): every kernel this CPU runs against
 * the generic one, which is expf itself, on lengths that are and are not
 * multiples of the 8-float vectors (the tail takes the same polynomial), and
 * on the values a softmax or an FFN meets: 0 (the best token's e^0 must be
 * exactly 1), large negative scores, -INFINITY (a banned token: exactly 0),
 * and gates large enough that silu(x) is x or 0.  The polynomial is within
 * 2 ulp of expf, so each result agrees to 4e-7 relative, or within 1e-30
 * where expf's is 0 (the vector e^x stops at e^88, so a gate below -88 gives
 * silu about x / e^88 rather than -0); the sums of the numerators (in
 * double) agree to the same. */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/cpu/vexp.h"

enum { MAX_N = 1003 };
#define REL_TOL 4e-7

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static void assert_close(float got, float want, const char *what, int n, int i)
{
    cr_assert(fabsf(got - want) <= REL_TOL * fabsf(want) + 1e-30f, "%s, n %d, element %d: %.9g, expf gives %.9g",
              what, n, i, got, want);
}

static const int lengths[] = {1, 7, 8, 9, 64, 577, MAX_N};

/* The kernels beside the generic one that run here, into k; how many. */
static int vector_kernels(tram_cpu_kernel k[2])
{
    int n = 0;
    for (int i = TRAM_CPU_AVX2; i <= TRAM_CPU_VNNI; i++)
        if (tram_vexp_kernel_available((tram_cpu_kernel)i))
            k[n++] = (tram_cpu_kernel)i;
    return n;
}

Test(vexp, silu_mul_agrees_with_expf)
{
    static float g[MAX_N], u[MAX_N], want[MAX_N], got[MAX_N];
    unsigned seed = 7;
    tram_cpu_kernel ks[2];
    for (int kn = vector_kernels(ks), ki = 0; ki < kn; ki++) {
        tram_cpu_kernel k = ks[ki];
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
            int n = lengths[l];
            for (int i = 0; i < n; i++) {
                g[i] = frand(&seed) * (i % 5 == 0 ? 120.0f : 8.0f); /* some saturate */
                u[i] = frand(&seed);
            }
            tram_silu_mul_row(TRAM_CPU_GENERIC, want, g, u, n);
            tram_silu_mul_row(k, got, g, u, n);
            for (int i = 0; i < n; i++)
                assert_close(got[i], want[i], "silu", n, i);
        }
    }
}

Test(vexp, softmax_numerators_agree_with_expf)
{
    static float x[MAX_N], want[MAX_N], got[MAX_N];
    unsigned seed = 11;
    tram_cpu_kernel ks[2];
    for (int kn = vector_kernels(ks), ki = 0; ki < kn; ki++) {
        tram_cpu_kernel k = ks[ki];
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
            int n = lengths[l];
            float mx = -INFINITY, inv_t = 1.0f / 0.7f;
            for (int i = 0; i < n; i++) {
                x[i] = i % 13 == 3 ? -INFINITY : frand(&seed) * 30.0f;
                mx = fmaxf(mx, x[i] * inv_t);
            }
            for (int i = 0; i < n; i++)
                want[i] = got[i] = x[i];
            double sw = tram_exp_row(TRAM_CPU_GENERIC, want, n, inv_t, mx, 0.01f);
            double sg = tram_exp_row(k, got, n, inv_t, mx, 0.01f);
            for (int i = 0; i < n; i++) {
                assert_close(got[i], want[i], "exp", n, i);
                if (x[i] * inv_t == mx)
                    cr_assert_eq(got[i], 1.0f, "the best token's numerator is exactly 1");
                if (isinf(x[i]))
                    cr_assert_eq(got[i], 0.0f, "a banned token's numerator is exactly 0");
            }
            cr_assert(fabs(sg - sw) <= REL_TOL * sw, "n %d: sum %.17g, expf gives %.17g", n, sg, sw);
        }
    }
}

/* The sum counts exactly the numerators at or above `least`. */
Test(vexp, sum_keeps_only_what_passes_the_bound)
{
    float x[19];
    for (int i = 0; i < 19; i++)
        x[i] = -(float)i; /* e^0, e^-1, ... e^-18 */
    for (int k = TRAM_CPU_GENERIC; k <= TRAM_CPU_VNNI; k++) {
        if (!tram_vexp_kernel_available((tram_cpu_kernel)k))
            continue;
        float y[19];
        for (int i = 0; i < 19; i++)
            y[i] = x[i];
        double sum = tram_exp_row((tram_cpu_kernel)k, y, 19, 1.0f, 0.0f, expf(-2.5f));
        cr_assert(fabs(sum - (1 + exp(-1.0) + exp(-2.0))) < 1e-6, "kernel %d: %.9g", k, sum);
    }
}
