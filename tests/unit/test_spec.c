/* Speculative decoding: the n-gram proposer's lookup, and the engine's
 * verification on the default model: greedy outputs token-identical with and
 * without drafts on the golden prompts in one mixed batch (chunked prefills
 * in the same steps), seeded sampling, logprobs, stop strings and n > 1
 * unchanged, preemption mid-speculation losing nothing, no block leaked. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/defaults.h"
#include "engine/spec.h"
#include "engine/tram.h"
#include "tests/unit/test_batch.h"
#include "tests/unit/test_util.h"

/* ---------------------------------------------------------------- n-gram */

Test(spec_ngram, proposes_what_followed_the_latest_match)
{
    int32_t toks[] = {1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 2, 3}, out[8];
    /* "2 3" occurs twice before the end; the latest is followed by 5 6 7 */
    int n = tram_ngram_propose(toks, 12, 1, 2, 3, out);
    cr_assert_eq(n, 3);
    cr_assert_arr_eq(out, ((int32_t[]){5, 6, 7}), sizeof(int32_t[3]));
    /* k is capped by what follows the match */
    cr_assert_eq(tram_ngram_propose(toks, 12, 1, 2, 8, out), 5);
    cr_assert_arr_eq(out, ((int32_t[]){5, 6, 7, 2, 3}), sizeof(int32_t[5]));
}

Test(spec_ngram, longest_match_first_and_minimum_respected)
{
    /* "4 2 3": the 3-gram matches at 0 (followed by 8), the 1-gram "3" last at 6 (by 0) */
    int32_t toks[] = {4, 2, 3, 8, 5, 1, 3, 0, 4, 2, 3}, out[4];
    cr_assert_eq(tram_ngram_propose(toks, 11, 1, 3, 1, out), 1);
    cr_assert_eq(out[0], 8);
    cr_assert_eq(tram_ngram_propose(toks, 11, 1, 1, 1, out), 1);
    cr_assert_eq(out[0], 0);
    int32_t none[] = {1, 2, 3, 4};
    cr_assert_eq(tram_ngram_propose(none, 4, 1, 3, 4, out), 0, "no earlier occurrence, no guess");
    int32_t one[] = {7, 7};
    cr_assert_eq(tram_ngram_propose(one, 2, 2, 3, 4, out), 0, "shorter than prompt_lookup_min");
    cr_assert_eq(tram_ngram_propose(one, 2, 1, 3, 4, out), 1);
}

Test(spec_ngram, config_errors_name_the_field)
{
    tram_spec_config c = {.method = "ngram", .num_speculative_tokens = 3, .prompt_lookup_min = 1,
                          .prompt_lookup_max = 4};
    tram_error err = {{0}};
    cr_assert_eq(tram_spec_config_check(&c, &err), 0, "%s", err.msg);
    c.num_speculative_tokens = TRAM_SPEC_MAX_TOKENS + 1;
    cr_assert_eq(tram_spec_config_check(&c, &err), -1);
    cr_assert(strstr(err.msg, "num_speculative_tokens"), "%s", err.msg);
    c.num_speculative_tokens = 3;
    c.prompt_lookup_min = 5;
    cr_assert_eq(tram_spec_config_check(&c, &err), -1);
    cr_assert(strstr(err.msg, "prompt_lookup_min"), "%s", err.msg);
    snprintf(c.method, sizeof(c.method), "medusa");
    cr_assert_eq(tram_spec_config_check(&c, &err), -1);
    cr_assert(strstr(err.msg, "medusa"), "%s", err.msg);
}

/* ---------------------------------------------------------------- the engine */

#define MAXOUT 48
#define MAXREQ 12

typedef struct {
    int32_t toks[2][MAXOUT];
    float lp[2][MAXOUT];
    int n[2], finish[2];
    char text[2][1024];
    int most_per_step;
} result;

static tram_engine *engine(int speculate, int tiny_pool)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 1;
    c.max_model_len = tiny_pool ? 128 : 512;
    c.kv_cache_memory = (size_t)32 << 20;
    c.max_num_seqs = 16;
    c.max_num_batched_tokens = 64; /* long prompts prefill in chunks beside the drafts */
    if (tiny_pool) {
        c.enable_prefix_caching = 0;
        c.block_size = 4;
        c.num_kv_blocks = 48;
        c.max_num_batched_tokens = 256;
    }
    if (speculate)
        c.spec = (tram_spec_config){.method = "ngram", .num_speculative_tokens = 4,
                                    .prompt_lookup_min = 1, .prompt_lookup_max = 3};
    tram_error err = {{0}};
    tram_engine *e = NULL;
    cr_assert_eq(tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err), 0, "%s", err.msg);
    return e;
}

static void collect(const tram_output *o, result *res)
{
    result *r = &res[o->request_id];
    int s = o->sample_index;
    for (int i = 0; i < o->num_tokens; i++) {
        cr_assert_lt(r->n[s], MAXOUT);
        r->lp[s][r->n[s]] = o->logprobs ? o->logprobs[i].logprob : 0;
        r->toks[s][r->n[s]++] = o->token_ids[i];
    }
    r->most_per_step = TRAM_MAX(r->most_per_step, o->num_tokens);
    cr_assert_lt(strlen(r->text[s]) + o->text_len, sizeof(r->text[s]));
    strcat(r->text[s], o->text);
    cr_assert_eq(o->completion_tokens, r->n[s]);
    if (o->finish_reason) {
        cr_assert_eq(r->finish[s], 0, "a second final output");
        r->finish[s] = o->finish_reason;
    }
}

static tram_engine_stats drain(tram_engine *e, result *res)
{
    tram_error err = {{0}};
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n;
        cr_assert_eq(tram_engine_step(e, &outs, &n, &err), 0, "%s", err.msg);
        for (int i = 0; i < n; i++)
            collect(&outs[i], res);
    }
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    cr_assert_eq(s.num_blocks_free, s.num_blocks_total, "%d blocks leaked",
                 s.num_blocks_total - s.num_blocks_free);
    return s;
}

static void add_ids(tram_engine *e, uint64_t id, const int32_t *ids, int n, const tram_sampling_params *p)
{
    tram_error err = {{0}};
    tram_prompt pr = {.token_ids = ids, .num_tokens = n};
    cr_assert_eq(tram_engine_add_request(e, id, &pr, p, 0, &err), 0, "%s", err.msg);
}

static void add_text(tram_engine *e, uint64_t id, const char *text, const tram_sampling_params *p)
{
    tram_error err = {{0}};
    tram_prompt pr = {.text = text};
    cr_assert_eq(tram_engine_add_request(e, id, &pr, p, 0, &err), 0, "%s", err.msg);
}

static void assert_same(const result *a, const result *b, int n)
{
    for (int i = 0; i < n; i++)
        for (int s = 0; s < 2; s++) {
            cr_assert_eq(a[i].n[s], b[i].n[s], "request %d sample %d: %d vs %d tokens", i, s, a[i].n[s],
                         b[i].n[s]);
            cr_assert_arr_eq(a[i].toks[s], b[i].toks[s], (size_t)a[i].n[s] * sizeof(int32_t),
                             "request %d sample %d differs", i, s);
            for (int t = 0; t < a[i].n[s]; t++)
                cr_assert_float_eq(a[i].lp[s][t], b[i].lp[s][t], 1e-3, "request %d token %d logprob", i, t);
            cr_assert_str_eq(a[i].text[s], b[i].text[s]);
            cr_assert_eq(a[i].finish[s], b[i].finish[s], "request %d finish", i);
        }
}

static const char *grounded =
    "Copy the list exactly.\nList: red apple, green pear, yellow banana, purple plum, orange "
    "orange, red apple, green pear, yellow banana.\nCopy: red apple, green pear,";

/* The golden prompts greedy, a grounded one seeded with n = 2 and logprobs,
 * one with a stop string inside its run, all in one batch. */
static int add_mix(tram_engine *e)
{
    static test_golden_case cases[16];
    int n = test_load_golden("tests/fixtures/golden/smollm2.json", cases, 16);
    for (int i = 0; i < n; i++) {
        tram_sampling_params p = test_greedy_params(TRAM_MIN(cases[i].n_greedy, 16));
        add_ids(e, (uint64_t)i, cases[i].ids, cases[i].n_prompt, &p);
    }
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.temperature = 0.8f;
    p.top_k = 50;
    p.has_seed = 1;
    p.seed = 11;
    p.n = 2;
    p.max_tokens = 24;
    p.logprobs = 2;
    p.presence_penalty = 0.3f;
    add_text(e, (uint64_t)n, grounded, &p);
    tram_sampling_params q = test_greedy_params(40);
    const char *stop[] = {"pear, yellow"};
    q.stop = stop;
    q.num_stop = 1;
    add_text(e, (uint64_t)n + 1, grounded, &q);
    return n + 2;
}

Test(spec_engine, outputs_identical_in_a_mixed_batch, .timeout = 300)
{
    static result plain[MAXREQ], spec[MAXREQ];
    tram_engine *e = engine(0, 0);
    int n = add_mix(e);
    drain(e, plain);
    tram_engine_destroy(e);
    e = engine(1, 0);
    add_mix(e);
    tram_engine_stats s = drain(e, spec);
    tram_engine_destroy(e);
    assert_same(plain, spec, n);
    cr_assert_gt(s.spec_decode_num_accepted_tokens, 0, "the grounded prompts must accept drafts");
    cr_assert_lt(s.spec_decode_num_accepted_tokens, s.spec_decode_num_draft_tokens,
                 "and reject some, or the rollback is not exercised");
    cr_assert_gt(spec[n - 2].most_per_step, 1, "accepted drafts come out several per step");
    cr_assert_eq(spec[n - 1].finish[0], TRAM_FINISH_STOP);
    cr_assert(!strstr(spec[n - 1].text[0], "pear, yellow"), "the stop string is never emitted");
    uint64_t per_pos = 0;
    for (int i = 0; i < TRAM_SPEC_MAX_TOKENS; i++)
        per_pos += s.spec_decode_num_accepted_tokens_per_pos[i];
    cr_assert_eq(per_pos, s.spec_decode_num_accepted_tokens);
    cr_assert_geq(s.spec_decode_num_accepted_tokens_per_pos[0], s.spec_decode_num_accepted_tokens_per_pos[1]);
}

Test(spec_engine, preemption_mid_speculation_loses_nothing, .timeout = 300)
{
    static result roomy[MAXREQ], tiny[MAXREQ];
    tram_sampling_params p = test_greedy_params(24);
    for (int pass = 0; pass < 2; pass++) {
        tram_engine *e = engine(1, pass);
        for (int i = 0; i < 6; i++)
            add_text(e, (uint64_t)i, grounded, &p);
        tram_engine_stats s = drain(e, pass ? tiny : roomy);
        tram_engine_destroy(e);
        cr_assert_gt(s.spec_decode_num_accepted_tokens, 0);
        if (pass)
            cr_assert_gt(s.num_preemptions, 0, "48 blocks of 4 hold fewer than 6 such sequences");
    }
    assert_same(roomy, tiny, 6);
}
