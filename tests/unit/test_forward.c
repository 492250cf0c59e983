/* The CPU forward pass against Hugging Face transformers (golden fixture made
 * by tests/fixtures/make_golden.py), and the unified batch's equivalences at
 * the model level: many sequences in one batch = each alone, chunked prefill =
 * whole prefill. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "models/model.h"
#include "tests/unit/test_batch.h"
#include "tests/unit/test_util.h"

#define GOLDEN "tests/fixtures/golden/smollm2.json"
#define GOLDEN_MIN_CASES 8

static tram_model_file *file;
static tram_backend *be;
static tram_model *model;
static test_golden_case cases[16];
static int n_cases;
static int vocab;

static void setup(void)
{
    tram_error err;
    n_cases = test_load_golden(GOLDEN, cases, 16);
    cr_assert(n_cases >= GOLDEN_MIN_CASES);
    cr_assert(!tram_model_file_open(&file, TRAM_DEFAULT_MODEL, &err), "%s", err.msg);
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    tram_model_limits lim = test_model_limits();
    cr_assert(!tram_model_create(&model, file, be, &lim, &err), "%s", err.msg);
    vocab = tram_model_config_of(model)->vocab_size;
}

static void teardown(void)
{
    tram_model_destroy(model);
    be->destroy(be);
    tram_model_file_close(file);
}

static void forward(const tram_batch *b, float *logits)
{
    test_forward_ok(model, b, logits);
}

TestSuite(forward, .init = setup, .fini = teardown, .timeout = 300);

Test(forward, top20_logits_and_greedy_tokens_match_transformers)
{
    test_golden_check(model, cases, n_cases, 1e-3f, 1);
}

Test(forward, batched_prefill_equals_each_alone)
{
    test_batched_equals_alone(model, cases, n_cases, 1e-4f);
}

Test(forward, chunked_prefill_equals_whole)
{
    test_golden_case *g = &cases[0];
    for (int c = 0; c < n_cases; c++)
        if (cases[c].n_prompt > g->n_prompt)
            g = &cases[c];
    float *whole = malloc((size_t)vocab * sizeof(float)), *chunked = malloc((size_t)vocab * sizeof(float));
    batch_builder bb;
    bb_init(&bb);
    bb_add(&bb, 0, g->ids, g->n_prompt, 0);
    forward(&bb.b, whole);
    /* Chunks of 37 tokens: not a multiple of the block size on purpose. */
    for (int start = 0; start < g->n_prompt; start += 37) {
        bb_init(&bb);
        bb_add(&bb, 0, g->ids + start, TRAM_MIN(37, g->n_prompt - start), start);
        forward(&bb.b, chunked);
    }
    for (int i = 0; i < vocab; i++)
        cr_assert(fabsf(whole[i] - chunked[i]) <= 1e-4f * fabsf(whole[i]) + 1e-4f, "logit %d: %f vs %f", i,
                  whole[i], chunked[i]);
    free(whole);
    free(chunked);
}

Test(forward, bad_batch_is_an_error_not_a_crash)
{
    float *logits = malloc((size_t)vocab * sizeof(float));
    batch_builder bb;
    int32_t ids[2] = {1, 2};
    bb_init(&bb);
    bb_add(&bb, 0, ids, 2, 0);
    bb.ids[1] = vocab; /* token id out of range */
    tram_error err;
    cr_assert_eq(tram_model_forward(model, &bb.b, logits, &err), -1);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    bb.ids[1] = 2;
    bb.tables[0 * MAX_BLOCKS + 0] = -5; /* block table entry out of range */
    cr_assert_eq(tram_model_forward(model, &bb.b, logits, &err), -1);
    free(logits);
}
