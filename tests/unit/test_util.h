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

/* An engine that must load. */
static inline tram_engine *test_engine_create(const tram_engine_config *c, const char *model)
{
    tram_error err = {{0}};
    tram_engine *e = NULL;
    cr_assert_eq(tram_engine_create(&e, c, model, &err), 0, "%s", err.msg);
    return e;
}

/* Queues a request that must be accepted (priority 0). */
static inline void test_add_request(tram_engine *e, uint64_t id, tram_prompt prompt, const tram_sampling_params *p)
{
    tram_error err = {{0}};
    cr_assert_eq(tram_engine_add_request(e, id, &prompt, p, 0, &err), 0, "%s", err.msg);
}

/* One engine step that must succeed; returns how many outputs it made. */
static inline int test_step(tram_engine *e, const tram_output **outs)
{
    tram_error err = {{0}};
    int n;
    cr_assert_eq(tram_engine_step(e, outs, &n, &err), 0, "%s", err.msg);
    return n;
}

/* Steps e until nothing is left, handing each output to visit with ctx. */
typedef void test_output_visitor(const tram_output *o, void *ctx);
static inline void test_drain(tram_engine *e, test_output_visitor *visit, void *ctx)
{
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n = test_step(e, &outs);
        for (int i = 0; i < n; i++)
            visit(&outs[i], ctx);
    }
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
