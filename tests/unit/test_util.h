/* Small helpers shared by the unit tests. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tram.h"
#include "kernels/backend.h"

/* The value at path ("messages[1].tool_calls[0].function") in j, or NULL. */
static inline json_t *test_json_at(json_t *j, const char *path)
{
    char name[64];
    while (j && *path) {
        size_t n = strcspn(path, ".[");
        snprintf(name, sizeof(name), "%.*s", (int)n, path);
        j = json_object_get(j, name);
        path += n;
        while (j && *path == '[') {
            j = json_array_get(j, strtoul(path + 1, (char **)&path, 10));
            path++;  /* ']' */
        }
        if (*path == '.')
            path++;
    }
    return j;
}

/* Index of the largest of x[n]; the lowest index on ties, as greedy sampling. */
static inline int test_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Greedy sampling of exactly max_tokens tokens, so runs can be compared. */
static inline tram_sampling_params test_greedy_params(int max_tokens)
{
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = 1;
    return p;
}

/* A CPU backend on two threads, for the suites that test its ops. */
static inline tram_backend *test_cpu_backend(void)
{
    tram_backend *be = NULL;
    tram_error err;
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    return be;
}

#endif
