/* Small helpers shared by the unit tests that compare logits. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

/* Index of the largest of x[n]; the lowest index on ties, as greedy sampling. */
static inline int test_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

#endif
