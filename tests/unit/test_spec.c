/* Speculative decoding: the n-gram proposer's lookup, the automatic rule,
 * and the engine's verification on the default model: greedy outputs
 * token-identical with and without drafts (n-gram and the quantized
 * self-draft) on the golden prompts in one mixed batch (chunked prefills in
 * the same steps), seeded sampling, logprobs, stop strings and n > 1
 * unchanged, preemption mid-speculation losing nothing, no block leaked;
 * and the rejection sampler's law. */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/defaults.h"
#include "cli/engine_flags.h"
#include "engine/spec.h"
#include "engine/tram.h"
#include "kernels/cpu/cpu_sampling.h"
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
    c.prompt_lookup_min = 1;
    c.always_verify = 2;
    cr_assert_eq(tram_spec_config_check(&c, &err), -1);
    cr_assert(strstr(err.msg, "always_verify"), "%s", err.msg);
    c.always_verify = 1;
    cr_assert_eq(tram_spec_config_check(&c, &err), 0, "%s", err.msg);
    snprintf(c.method, sizeof(c.method), "medusa");
    cr_assert_eq(tram_spec_config_check(&c, &err), -1);
    cr_assert(strstr(err.msg, "medusa"), "%s", err.msg);
}

/* ---------------------------------------------------------------- the automatic rule */

Test(spec_rule, acceptance_follows_the_recent_record)
{
    tram_spec_record r;
    tram_spec_record_init(&r);
    cr_assert_eq(r.shadow, -1);
    cr_assert_float_eq(tram_spec_acceptance(&r, 0), 0.5, 1e-9, "no record: even odds");
    for (int i = 0; i < 20; i++)
        tram_spec_record_add(&r, 4, 4);
    cr_assert_gt(tram_spec_acceptance(&r, 0), 0.9, "every draft accepted");
    cr_assert_gt(tram_spec_acceptance(&r, 3), 0.95);
    for (int i = 0; i < 20; i++)
        tram_spec_record_add(&r, 0, 4);
    cr_assert_lt(tram_spec_acceptance(&r, 0), 0.4, "the recent rejections outweigh the old hits");
    for (int i = 0; i < 40; i++)
        tram_spec_record_add(&r, 0, 1);
    cr_assert_lt(tram_spec_acceptance(&r, 0), 0.15, "shadow misses count as rejections too");
}

/* Each position's rate is conditional on the drafts before it being
 * accepted: a sequence whose first draft always holds and whose second never
 * does has r_0 high and r_1 low, and positions never verified take their
 * predecessor's rate. */
Test(spec_rule, acceptance_is_kept_per_draft_position)
{
    tram_spec_record r;
    tram_spec_record_init(&r);
    for (int i = 0; i < 30; i++)
        tram_spec_record_add(&r, 1, 4);
    double r0 = tram_spec_acceptance(&r, 0), r1 = tram_spec_acceptance(&r, 1);
    cr_assert_gt(r0, 0.9);
    cr_assert_lt(r1, 0.2);
    cr_assert_float_eq(tram_spec_acceptance(&r, 2), r1, 1e-9, "position 2 was never verified");
    cr_assert_float_eq(tram_spec_gain(&r, 2), r0 + r0 * r1, 1e-9);
}

/* t = 0.03 + 0.002 n: steps of 1 and 5 tokens give the line back; steps of
 * one size only cannot, and once fitted the line stays while they are all
 * alike. */
Test(spec_rule, step_cost_fits_the_measured_line)
{
    tram_step_cost c = {0};
    double a, b;
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 0, "nothing measured");
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, 1, 0.032);
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 0, "one token count only");
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, i % 2 ? 5 : 1, 0.03 + 0.002 * (i % 2 ? 5 : 1));
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1);
    cr_assert_float_eq(a, 0.03, 1e-6);
    cr_assert_float_eq(b, 0.002, 1e-6);
    for (int i = 0; i < 200; i++)
        tram_step_cost_add(&c, 1, 0.032);
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1, "steps of one size keep the last line");
    cr_assert_float_eq(b, 0.002, 1e-4);
}

Test(spec_rule, two_steps_do_not_fit_a_line)
{
    tram_step_cost c = {0};
    double a, b;
    tram_step_cost_add(&c, 1, 0.03);
    tram_step_cost_add(&c, 5, 0.09);
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 0);
}

/* Steps whose time falls with their tokens are noise (more tokens never
 * cost less): they fit no line, and would otherwise make drafts look free;
 * nor do steps a token apart, whose slope the noise swamps. */
Test(spec_rule, a_falling_or_narrow_line_is_not_fitted)
{
    tram_step_cost c = {0};
    double a, b;
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, i % 2 ? 9 : 1, i % 2 ? 0.03 : 0.05);
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 0, "a slope below 0");
    tram_step_cost narrow = {0};
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&narrow, i % 2 ? 33 : 32, i % 2 ? 0.09 : 0.08);
    cr_assert_eq(tram_step_cost_line(&narrow, &a, &b), 0, "steps a token apart");
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, i % 2 ? 9 : 1, 0.03 + 0.002 * (i % 2 ? 9 : 1));
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1);
    cr_assert_gt(b, 0);
    for (int i = 0; i < 4; i++)
        tram_step_cost_add(&c, 1, 0.2);
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1, "a slow plain step leaves the last line in force");
    cr_assert_gt(b, 0);
}

/* Steps that all draft alike never fit the line, so until they do every
 * other step verifies `few` drafts (one in all for n-gram, none each for a
 * draft model) and the others `many`; then the step has no limit. */
Test(spec_rule, unfitted_line_measures_with_few_drafts)
{
    tram_step_cost c = {0};
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(tram_step_cost_drafts(&c, 1, 8), i % 2 == 0 ? 1 : 8, "step %d", i);
        tram_step_cost_add(&c, 80, 0.2);
    }
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, tram_step_cost_drafts(&c, 1, 8) == 1 ? 33 : 40, 0.2);
    double a, b;
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1, "the two sizes fit a line");
    for (int i = 0; i < 5; i++)
        cr_assert_eq(tram_step_cost_drafts(&c, 1, 8), INT_MAX, "a fitted line needs no measuring steps");
    tram_step_cost model = {0};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(tram_step_cost_drafts(&model, 0, 2), i % 2 == 0 ? 0 : 2, "step %d", i);
}

static tram_step_cost cost_line(double a, double b)
{
    tram_step_cost c = {0};
    for (int n = 1; n <= 40; n++)
        tram_step_cost_add(&c, n, a + b * n);
    return c;
}

static tram_spec_record record_of(int accepted, int proposed)
{
    tram_spec_record r;
    tram_spec_record_init(&r);
    for (int i = 0; i < 30; i++)
        tram_spec_record_add(&r, accepted, proposed);
    return r;
}

/* The line t = 0.2 + 0.01 n from steps of 4 and 12 tokens; steps of 5
 * measured at 0.5 s, 0.25 above it (a product that changes regime): T(5) is
 * what they measured, T(6) the line's (which they pull up); one draft at
 * batch 4 with half its guesses accepted, which pays on the line, does not
 * at T(5), nor do 2 or 3, since T never falls with n. */
Test(spec_rule, a_measured_size_is_priced_by_its_own_steps)
{
    tram_step_cost c = {0};
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, i % 2 ? 12 : 4, 0.2 + 0.01 * (i % 2 ? 12 : 4));
    tram_spec_record half = record_of(0, 1);
    for (int i = 0; i < 30; i++)
        tram_spec_record_add(&half, i % 2, 1);
    double gain;
    cr_assert_eq(tram_spec_best(&half, 1, &c, 4, 4, NULL, &gain), 1, "on the line one draft pays");
    for (int i = 0; i < 10; i++)
        tram_step_cost_add(&c, 5, 0.5);
    double a, b;
    cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1);
    cr_assert_float_eq(tram_step_cost_at(&c, 5), 0.5, 0.03, "what steps of 5 measured");
    cr_assert_gt(tram_step_cost_at(&c, 5), a + 5 * b + 0.04, "above the line the steps of 5 pull up");
    cr_assert_float_eq(tram_step_cost_at(&c, 6), a + 6 * b, 1e-9, "a size not measured takes the line");
    cr_assert_eq(tram_spec_best(&half, 1, &c, 4, 4, NULL, &gain), 0, "at its measured cost it does not");
    cr_assert_eq(tram_spec_best(&half, 3, &c, 4, 4, NULL, &gain), 0,
                 "nor do the larger sizes, not measured: T never falls with n");
}

/* Noise only adds time: one slow step does not price its size (the
 * median of its last three departures), a size slow
 * three times running is. */
Test(spec_rule, one_slow_step_does_not_price_its_size)
{
    tram_step_cost c = {0};
    for (int i = 0; i < 30; i++)
        tram_step_cost_add(&c, i % 2 ? 64 : 32, 0.004 + 0.003 * (i % 2 ? 64 : 32));
    double slow = 0.004 + 0.003 * 32 + 0.3, fast = 0.004 + 0.003 * 32;
    double seconds[4] = {slow, slow, fast, fast};
    const char *why[4] = {"one spike among its fellows is not their median", "two spikes of three are the median",
                          "and stay while they are the median", "until the size runs at its speed again"};
    for (int i = 0; i < 4; i++) {
        tram_step_cost_add(&c, 32, seconds[i]);
        double a, b;
        cr_assert_eq(tram_step_cost_line(&c, &a, &b), 1);
        double above = tram_step_cost_at(&c, 32) - (a + 32 * b);
        if (i == 0 || i == 3)
            cr_assert_lt(above, 0.01, "%s: %.3f s above the line", why[i], above);
        else
            cr_assert_gt(above, 0.2, "%s: %.3f s above the line", why[i], above);
    }
}

/* j = argmax (P + g(j)) / T(N + j): drafts where they are accepted and the
 * step's extra tokens cost little, as deep as the acceptance holds, none
 * where either fails. */
Test(spec_rule, drafts_only_where_they_pay)
{
    /* a token costs a sixth of a one-token step: the weights' read dominates */
    tram_step_cost some = cost_line(0.03, 0.006);
    tram_spec_record copying = record_of(4, 4), inventing = record_of(0, 4), first = record_of(1, 4);
    double gain;
    cr_assert_eq(tram_spec_choose(&copying, 4, &some, 1, 1, NULL, &gain), 4);
    cr_assert_gt(gain, 3.5);
    cr_assert_eq(tram_spec_choose(&copying, 8, &some, 1, 1, NULL, &gain), 8, "a larger k where they all hold");
    cr_assert_eq(tram_spec_choose(&inventing, 4, &some, 1, 1, NULL, &gain), 0,
                 "a sequence whose drafts are rejected stops drafting");
    cr_assert_eq(gain, 0);
    cr_assert_eq(tram_spec_choose(&first, 4, &some, 1, 1, NULL, &gain), 1,
                 "only the first draft is accepted: the second costs more than it brings");
    cr_assert_float_eq(gain, tram_spec_acceptance(&first, 0), 1e-9);
    tram_step_cost unmeasured = {0};
    cr_assert_eq(tram_spec_choose(&inventing, 3, &unmeasured, 1, 1, NULL, &gain), 3,
                 "with no measured cost every proposal is verified, so the cost gets measured");
}

/* The two ends of the cost line: drafts that cost nothing are all verified
 * whatever their acceptance; drafts that cost a whole token each (a step's
 * time proportional to its tokens, as in a large batch) never pay, since a
 * draft yields at most the token it costs. */
Test(spec_rule, free_drafts_all_verified_costly_ones_none)
{
    tram_step_cost free = cost_line(0.03, 0), costly = cost_line(0, 0.005);
    tram_spec_record copying = record_of(4, 4), inventing = record_of(0, 4);
    double gain;
    cr_assert_eq(tram_spec_choose(&inventing, 6, &free, 1, 1, NULL, &gain), 6);
    cr_assert_eq(tram_spec_choose(&copying, 6, &free, 32, 32, NULL, &gain), 6);
    cr_assert_eq(tram_spec_choose(&copying, 6, &costly, 1, 1, NULL, &gain), 0);
    cr_assert_eq(tram_spec_choose(&copying, 6, &costly, 32, 32, NULL, &gain), 0);
    /* a batch of 32 on a line with a fixed part: the same draft pays at batch
     * 1 and not at 32, where the fixed part is spread over 32 tokens */
    tram_step_cost line = cost_line(0.03, 0.006);
    tram_spec_record r = record_of(1, 2);
    cr_assert_gt(tram_spec_choose(&r, 4, &line, 1, 1, NULL, &gain), 0);
    tram_spec_record half = record_of(0, 1);
    for (int i = 0; i < 30; i++)
        tram_spec_record_add(&half, i % 2, 1);
    cr_assert_gt(tram_spec_choose(&half, 4, &line, 1, 1, NULL, &gain), 0);
    cr_assert_eq(tram_spec_choose(&half, 4, &line, 32, 32, NULL, &gain), 0);
}

/* A draft model's passes: their own line by tokens, or before it is fitted
 * the mean pass; a step of depth D pays D intercepts once and the slope per
 * draft, a lone draft at depth 0 a whole pass. */
Test(spec_rule, passes_are_priced_by_their_own_line)
{
    tram_step_cost pass = {0};
    cr_assert_eq(tram_pass_cost_at(&pass, 4), 0, "nothing measured");
    for (int i = 0; i < 10; i++)
        tram_step_cost_add(&pass, 32, 0.05);
    cr_assert_float_eq(tram_pass_cost_at(&pass, 5), 0.05, 1e-9, "passes of one size: their mean");
    tram_draft_price p = tram_pass_price(&pass, 3);
    cr_assert_float_eq(p.fixed, 0.15, 1e-9);
    cr_assert_float_eq(p.per_draft, 0, 1e-9);
    pass = cost_line(0.008, 0.0015);
    cr_assert_float_eq(tram_pass_cost_at(&pass, 4), 0.014, 1e-6);
    cr_assert_eq(tram_pass_cost_at(&pass, 0), 0, "a depth no one drafts to runs no pass");
    p = tram_pass_price(&pass, 2);
    cr_assert_float_eq(p.fixed, 0.016, 1e-6);
    cr_assert_float_eq(p.per_draft, 0.0015, 1e-6);
    p = tram_pass_price(&pass, 0);
    cr_assert_float_eq(p.fixed, 0, 1e-9);
    cr_assert_float_eq(p.per_draft, 0.0095, 1e-6);
}

/* Passes shared by the step: at batch 4, four copying sequences pay for
 * their passes together where one alone, paying a whole pass a draft, does
 * not; at batch 32 on a line where a token costs what an average one does,
 * no depth pays; and a step's passes are costed at the sequences they
 * serve, so one copying sequence among inventing ones drafts alone only
 * if its passes pay for themselves. */
Test(spec_rule, a_steps_depth_shares_its_passes)
{
    tram_step_cost step = cost_line(0.030, 0.006), pass = cost_line(0.008, 0.0015);
    tram_spec_record copying = record_of(8, 8), inventing = record_of(0, 8);
    const tram_spec_record *four[4] = {&copying, &copying, &copying, &copying};
    int proposed[32];
    for (int i = 0; i < 32; i++)
        proposed[i] = 8;
    double gain;
    tram_draft_price alone = tram_pass_price(&pass, 0);
    cr_assert_eq(tram_spec_best(&copying, 8, &step, 4, 4, &alone, &gain), 0, "one sequence paying its passes");
    int depth = tram_spec_depth(four, proposed, 4, &step, &pass, 4, 4);
    cr_assert_gt(depth, 4, "four sharing them: depth %d", depth);
    tram_draft_price shared = tram_pass_price(&pass, depth);
    cr_assert_gt(tram_spec_best(&copying, depth, &step, 4, 4, &shared, &gain), 0);

    tram_step_cost steep = cost_line(0.004, 0.0075);
    const tram_spec_record *many[32];
    for (int i = 0; i < 32; i++)
        many[i] = &copying;
    cr_assert_eq(tram_spec_depth(many, proposed, 32, &steep, &pass, 32, 32), 0, "batch 32, compute-bound");
    tram_step_cost cheap = cost_line(0.100, 0.002);
    cr_assert_gt(tram_spec_depth(many, proposed, 32, &cheap, &pass, 32, 32), 0, "batch 32, a cheap token");

    const tram_spec_record *mixed[4] = {&copying, &inventing, &inventing, &inventing};
    tram_step_cost dear = cost_line(0.060, 0.0015);
    cr_assert_eq(tram_spec_depth(mixed, proposed, 4, &step, &dear, 4, 4), 0,
                 "one copier on passes that cost half a step each");
    tram_step_cost cheap_pass = cost_line(0.002, 0.0005);
    cr_assert_gt(tram_spec_depth(mixed, proposed, 4, &step, &cheap_pass, 4, 4), 0, "and on cheap ones");
}

/* A declined sequence verifies one draft after 4 declined steps, then after
 * 8, 16, ... 256; drafts chosen again reset the wait. */
Test(spec_rule, declined_drafts_are_probed_with_back_off)
{
    tram_step_cost some = cost_line(0.03, 0.006);
    tram_spec_record r = record_of(0, 4);
    double gain;
    int wait = 4, step = 0;
    for (int probe = 0; probe < 8; probe++, wait = TRAM_MIN(2 * wait, 256)) {
        for (int i = 1; i < wait; i++, step++)
            cr_assert_eq(tram_spec_choose(&r, 4, &some, 1, 1, NULL, &gain), 0, "step %d", step);
        cr_assert_eq(tram_spec_choose(&r, 4, &some, 1, 1, NULL, &gain), 1, "probe %d at step %d", probe, step++);
        cr_assert_gt(gain, 0);
    }
    for (int i = 0; i < 30; i++)
        tram_spec_record_add(&r, 4, 4);
    cr_assert_eq(tram_spec_choose(&r, 4, &some, 1, 1, NULL, &gain), 4, "the proposer pays again");
    r.hits[0] = r.hits[1] = r.hits[2] = r.hits[3] = 0;
    for (int i = 1; i < 4; i++)
        cr_assert_eq(tram_spec_choose(&r, 4, &some, 1, 1, NULL, &gain), 0);
    cr_assert_eq(tram_spec_choose(&r, 4, &some, 1, 1, NULL, &gain), 1, "the wait starts again at 4");
}

/* Guesses checked as shadows every step never probe: tram_spec_best is the
 * rule alone. */
Test(spec_rule, shadowed_guesses_are_never_probed)
{
    tram_step_cost some = cost_line(0.03, 0.006);
    tram_spec_record r = record_of(0, 4), copying = record_of(4, 4);
    double gain;
    for (int step = 0; step < 600; step++)
        cr_assert_eq(tram_spec_best(&r, 4, &some, 1, 1, NULL, &gain), 0, "step %d", step);
    cr_assert_eq(gain, 0);
    cr_assert_eq(tram_spec_best(&copying, 4, &some, 1, 1, NULL, &gain), 4);
}

/* --speculative-config reads vLLM's JSON; what it cannot honour is refused. */
Test(spec_ngram, flag_reads_json_and_refuses_unknown_keys)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    tram_flag_table t = tram_engine_flags(&c);
    const char *args[1];
    char *good[] = {"tram", "--speculative-config",
                    "{\"method\": \"ngram\", \"num_speculative_tokens\": 5, \"prompt_lookup_max\": 3}", NULL};
    cr_assert_eq(tram_flags_parse(&t, 1, 3, good, args, 1), 0);
    cr_assert_str_eq(c.spec.method, "ngram");
    cr_assert_eq(c.spec.num_speculative_tokens, 5);
    cr_assert_eq(c.spec.prompt_lookup_max, 3);
    cr_assert_eq(c.spec.prompt_lookup_min, 1, "the default stays");
    const char *bad[] = {"{\"method\": \"ngram\", \"draft_tensor_parallel_size\": 1}",
                         "{\"method\": \"eagle\"}", "{\"num_speculative_tokens\": 3}",
                         "{\"method\": \"ngram\", \"num_speculative_tokens\": \"3\"}", "[1]", "{"};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bad); i++) {
        tram_engine_config_init(&c);
        char *argv[] = {"tram", "--speculative-config", (char *)bad[i], NULL};
        cr_assert_eq(tram_flags_parse(&t, 1, 3, argv, args, 1), -1, "%s accepted", bad[i]);
    }
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

/* method: "" for no speculation, "ngram" or "self" */
static tram_engine *engine(const char *method, int tiny_pool)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 1;
    c.max_model_len = tiny_pool ? 128 : 512;
    c.kv_cache_memory = (size_t)64 << 20; /* a self-draft's KV pool takes half */
    c.max_num_seqs = 16;
    c.max_num_batched_tokens = 64; /* long prompts prefill in chunks beside the drafts */
    if (tiny_pool) {
        c.enable_prefix_caching = 0;
        c.block_size = 4;
        c.num_kv_blocks = 48;
        c.max_num_batched_tokens = 256;
    }
    c.spec = (tram_spec_config){.num_speculative_tokens = 4, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
    snprintf(c.spec.method, sizeof(c.spec.method), "%s", method);
    return test_engine_create(&c, TRAM_DEFAULT_MODEL);
}

/* A test_output_visitor: request ids index the results ctx points to. */
static void collect(const tram_output *o, void *ctx)
{
    result *r = (result *)ctx + o->request_id;
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
    test_drain(e, collect, res);
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    cr_assert_eq(s.num_blocks_free, s.num_blocks_total, "%d blocks leaked",
                 s.num_blocks_total - s.num_blocks_free);
    return s;
}

static void add_ids(tram_engine *e, uint64_t id, const int32_t *ids, int n, const tram_sampling_params *p)
{
    test_add_request(e, id, (tram_prompt){.token_ids = ids, .num_tokens = n}, p);
}

static void add_text(tram_engine *e, uint64_t id, const char *text, const tram_sampling_params *p)
{
    test_add_request(e, id, (tram_prompt){.text = text}, p);
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

/* The mix without speculation, then with the method's drafts. */
static tram_engine_stats run_mix(const char *method, result *plain, result *spec, int *n)
{
    tram_engine *e = engine("", 0);
    *n = add_mix(e);
    drain(e, plain);
    tram_engine_destroy(e);
    e = engine(method, 0);
    add_mix(e);
    tram_engine_stats s = drain(e, spec);
    tram_engine_destroy(e);
    assert_same(plain, spec, *n);
    return s;
}

Test(spec_engine, outputs_identical_in_a_mixed_batch, .timeout = 300)
{
    static result plain[MAXREQ], spec[MAXREQ];
    int n;
    tram_engine_stats s = run_mix("ngram", plain, spec, &n);
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

/* The quantized self-draft: the file's Q4_1 blocks draft for the f32
 * model; the output stays the f32 model's, token for token. */
Test(spec_engine, self_draft_outputs_identical_in_a_mixed_batch, .timeout = 300)
{
    static result plain[MAXREQ], spec[MAXREQ];
    int n;
    tram_engine_stats s = run_mix("self", plain, spec, &n);
    cr_assert_gt(s.spec_decode_num_accepted_tokens, s.spec_decode_num_draft_tokens / 2,
                 "the same weights in blocks mostly agree with their f32 copy: %llu of %llu",
                 (unsigned long long)s.spec_decode_num_accepted_tokens,
                 (unsigned long long)s.spec_decode_num_draft_tokens);
    cr_assert_gt(spec[n - 2].most_per_step, 1);
    cr_assert_eq(spec[n - 1].finish[0], TRAM_FINISH_STOP);
}

Test(spec_engine, self_draft_refuses_what_it_cannot_run)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    snprintf(c.spec.method, sizeof(c.spec.method), "self");
    snprintf(c.weight_format, sizeof(c.weight_format), "native");
    tram_error err = {{0}};
    tram_engine *e = NULL;
    cr_assert_eq(tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err), -1);
    cr_assert(strstr(err.msg, "self") && strstr(err.msg, "--weight-format native"), "%s", err.msg);
    snprintf(c.weight_format, sizeof(c.weight_format), "f32");
    c.tensor_parallel_size = 2;
    cr_assert_eq(tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err), -1);
    cr_assert(strstr(err.msg, "tensor_parallel_size"), "%s", err.msg);
}

/* On CUDA, every method runs (a draft model in a pool fitted to GPU memory
 * or an exact one); only a self-draft for a target quantized already is
 * refused, by name.  (This build has no CUDA: what is not refused fails for
 * that.) */
Test(spec_engine, cuda_refuses_only_what_it_cannot_run)
{
    static const struct {
        const char *method, *quantization;
        int num_kv_blocks;
        const char *says;
    } cases[] = {
        {"self", "int8", 0, "--quantization int8 already"},
        {"self", "none", 0, "built without CUDA"},
        {"draft_model", "none", 0, "built without CUDA"},
        {"draft_model", "none", 64, "built without CUDA"},
        {"ngram", "none", 0, "built without CUDA"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tram_engine_config c;
        tram_engine_config_init(&c);
        snprintf(c.device, sizeof(c.device), "cuda");
        snprintf(c.spec.method, sizeof(c.spec.method), "%s", cases[i].method);
        if (!strcmp(cases[i].method, "draft_model"))
            snprintf(c.spec.model, sizeof(c.spec.model), "smollm2-135m");
        c.num_kv_blocks = cases[i].num_kv_blocks;
        snprintf(c.quantization, sizeof(c.quantization), "%s", cases[i].quantization);
        tram_error err = {{0}};
        tram_engine *e = NULL;
        cr_assert_eq(tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, &err), -1);
        cr_assert(strstr(err.msg, cases[i].says), "%s, %d blocks: %s", cases[i].method, cases[i].num_kv_blocks,
                  err.msg);
    }
}

/* Six grounded prompts in a pool of 48 blocks of 4 (preempted and
 * recomputed, a draft model's KV with them) against a roomy pool. */
static void preemption_check(const char *method)
{
    static result roomy[MAXREQ], tiny[MAXREQ];
    memset(roomy, 0, sizeof(roomy));
    memset(tiny, 0, sizeof(tiny));
    tram_sampling_params p = test_greedy_params(24);
    for (int pass = 0; pass < 2; pass++) {
        tram_engine *e = engine(method, pass);
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

Test(spec_engine, preemption_mid_speculation_loses_nothing, .timeout = 300) { preemption_check("ngram"); }

Test(spec_engine, preemption_mid_self_draft_loses_nothing, .timeout = 300) { preemption_check("self"); }

/* ---------------------------------------------------------------- the law */

#define V 16 /* tests/fixtures/spec/tiny-vocab.json's vocabulary */

/* Dummy weights over that vocabulary, without speculation. */
static tram_engine_config tiny_config(void)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 1;
    c.kv_cache_memory = (size_t)16 << 20;
    snprintf(c.load_format, sizeof(c.load_format), "dummy");
    snprintf(c.preset, sizeof(c.preset), "tests/fixtures/spec/tiny-vocab.json");
    return c;
}

/* speculate: the largest batch that still speculates, 0: none */
static tram_engine *tiny_engine(int speculate)
{
    tram_engine_config c = tiny_config();
    if (speculate)
        c.spec = (tram_spec_config){.method = "ngram", .num_speculative_tokens = 3,
                                    .prompt_lookup_min = 1, .prompt_lookup_max = 2,
                                    .disable_by_batch_size = speculate, .always_verify = 1};
    return test_engine_create(&c, TRAM_DEFAULT_MODEL);
}

/* ---------------------------------------------------------------- a draft model */

static tram_engine *draft_engine(const char *draft, tram_error *err)
{
    tram_engine_config c = tiny_config();
    if (draft) {
        c.spec = (tram_spec_config){.method = "draft_model", .num_speculative_tokens = 3, .always_verify = 1};
        snprintf(c.spec.model, sizeof(c.spec.model), "%s", draft);
    }
    tram_engine *e = NULL;
    tram_engine_create(&e, &c, TRAM_DEFAULT_MODEL, err);
    return e;
}

static void add_draft_mix(tram_engine *e)
{
    static const int32_t prompt[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
    for (int i = 0; i < 4; i++) {
        tram_sampling_params p = test_greedy_params(40);
        if (i >= 2) {
            p.temperature = 0.9f;
            p.has_seed = 1;
            p.seed = 7 + (uint64_t)i;
            p.logprobs = 1;
        }
        add_ids(e, (uint64_t)i, prompt + i, 12, &p);
    }
}

/* A separate draft (smaller, the same vocabulary, its KV in blocks of the
 * same manager): greedy and seeded outputs are the target's alone. */
Test(spec_draft, draft_model_outputs_identical, .timeout = 120)
{
    static result plain[MAXREQ], spec[MAXREQ];
    tram_error err = {{0}};
    tram_engine *e = draft_engine(NULL, &err);
    cr_assert(e, "%s", err.msg);
    add_draft_mix(e);
    drain(e, plain);
    tram_engine_destroy(e);
    e = draft_engine("tests/fixtures/spec/tiny-draft.json", &err);
    cr_assert(e, "%s", err.msg);
    add_draft_mix(e);
    tram_engine_stats s = drain(e, spec);
    tram_engine_destroy(e);
    assert_same(plain, spec, 4);
    cr_assert_gt(s.spec_decode_num_drafts, 0);
    cr_assert_lt(s.spec_decode_num_accepted_tokens, s.spec_decode_num_draft_tokens,
                 "a different model's guesses are rejected at times: the rollback runs");
}

Test(spec_draft, refuses_a_draft_with_another_vocabulary)
{
    tram_error err = {{0}};
    cr_assert_null(draft_engine("tests/fixtures/spec/tiny-vocab32.json", &err));
    cr_assert(strstr(err.msg, "32") && strstr(err.msg, "16") && strstr(err.msg, "vocabulary"), "%s", err.msg);
    tram_spec_config c = {.method = "draft_model", .num_speculative_tokens = 3};
    cr_assert_eq(tram_spec_config_check(&c, &err), -1, "draft_model without a model");
    cr_assert(strstr(err.msg, "\"model\""), "%s", err.msg);
}

/* The batched draft against one sequence at a time: six sequences in one
 * call, in passes of at most 8 tokens and 4 sequences (so catch-ups and
 * sequences spill into further passes), guess the tokens each sequence
 * guesses alone in a proposer of its own (its own KV); then each accepts
 * some of its guesses (none, some, all) and both draft on from what their
 * draft holds. */
#define DRAFT_SEQS 6
#define DRAFT_BLOCKS 16 /* of 4 tokens: sequence i owns blocks [16 i, 16 i + 16) */

static tram_proposer *tiny_draft(tram_model_file *f, tram_backend *be, int max_batch)
{
    tram_draft_env env = {.file = f, .be = be, .vocab = V, .max_batch = max_batch,
                          .lim = {.max_tokens = 8, .max_seqs = 8, .max_blocks_per_seq = DRAFT_BLOCKS,
                                  .num_blocks = DRAFT_SEQS * DRAFT_BLOCKS, .block_size = 4,
                                  .weight_type = TRAM_W_F32}};
    tram_proposer *p = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_draft_proposer_create(&p, "draft_model", &env, &err), 0, "%s", err.msg);
    return p;
}

Test(spec_draft, batched_guesses_equal_one_sequence_at_a_time, .timeout = 60)
{
    tram_model_file *f = NULL;
    tram_backend *be = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_model_file_open_dummy(&f, "tests/fixtures/spec/tiny-draft.json", &err), 0, "%s", err.msg);
    cr_assert_eq(tram_backend_cpu_create(&be, 1, &err), 0, "%s", err.msg);
    tram_proposer *together = tiny_draft(f, be, 4), *alone = tiny_draft(f, be, 1);
    static int32_t blocks[DRAFT_SEQS][DRAFT_BLOCKS], toks[2][DRAFT_SEQS][64];
    tram_block_table tables[DRAFT_SEQS];
    int n[DRAFT_SEQS], computed[2][DRAFT_SEQS] = {{0}}, distinct = 0, seen[V] = {0};
    for (int i = 0; i < DRAFT_SEQS; i++) {
        for (int b = 0; b < DRAFT_BLOCKS; b++)
            blocks[i][b] = i * DRAFT_BLOCKS + b;
        tables[i] = (tram_block_table){.blocks = blocks[i], .num_blocks = DRAFT_BLOCKS};
        n[i] = 3 + 3 * i;
        for (int t = 0; t < n[i]; t++)
            toks[0][i][t] = toks[1][i][t] = (i * 5 + t * 7) % V;
    }
    for (int round = 0; round < 3; round++) {
        tram_propose_seq batch[DRAFT_SEQS];
        for (int i = 0; i < DRAFT_SEQS; i++)
            batch[i] = (tram_propose_seq){.tokens = toks[0][i], .n = n[i], .table = &tables[i],
                                          .draft_computed = &computed[0][i], .max_k = 1 + (i + round) % 4,
                                          .out = toks[0][i] + n[i]};
        cr_assert_eq(together->propose(together, batch, DRAFT_SEQS, &err), 0, "%s", err.msg);
        for (int i = 0; i < DRAFT_SEQS; i++) {
            int k = batch[i].max_k;
            tram_propose_seq one = {.tokens = toks[1][i], .n = n[i], .table = &tables[i],
                                    .draft_computed = &computed[1][i], .max_k = k, .out = toks[1][i] + n[i]};
            cr_assert_eq(alone->propose(alone, &one, 1, &err), 0, "%s", err.msg);
            cr_assert_eq(batch[i].got, k);
            cr_assert_eq(one.got, k);
            cr_assert_arr_eq(batch[i].out, one.out, (size_t)k * sizeof(int32_t), "round %d sequence %d", round, i);
            cr_assert_eq(computed[0][i], computed[1][i]);
            for (int j = 0; j < k; j++)
                distinct += !seen[one.out[j]]++;
            /* j of the k guesses accepted, then the target's own draw; the
             * draft holds the accepted ones (engine.c's count_accepted) */
            int j = (i + round) % (k + 1);
            toks[0][i][n[i] + j] = toks[1][i][n[i] + j] = (i + round + 3) % V;
            for (int c = 0; c < 2; c++)
                computed[c][i] = TRAM_MIN(computed[c][i], n[i] + j);
            n[i] += j + 1;
        }
    }
    cr_assert_gt(distinct, 2, "the guesses depend on the text, or the comparison proves little");
    tram_proposer_destroy(together);
    tram_proposer_destroy(alone);
    be->destroy(be);
    tram_model_file_close(f);
}

/* The self-draft reads its target's KV pool; a model of another shape
 * cannot, and says so. */
Test(spec_draft, share_kv_refuses_another_shape)
{
    tram_model_file *f[2] = {NULL, NULL};
    tram_model *m[2] = {NULL, NULL};
    tram_backend *be = NULL;
    tram_error err = {{0}};
    const char *presets[2] = {"tests/fixtures/spec/tiny-vocab.json", "tests/fixtures/spec/tiny-draft.json"};
    cr_assert_eq(tram_backend_cpu_create(&be, 1, &err), 0, "%s", err.msg);
    tram_model_limits lim = {.max_tokens = 8, .max_seqs = 8, .max_blocks_per_seq = 4, .num_blocks = 8,
                             .block_size = 4, .weight_type = TRAM_W_F32};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tram_model_file_open_dummy(&f[i], presets[i], &err), 0, "%s", err.msg);
        cr_assert_eq(tram_model_create(&m[i], f[i], be, &lim, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(tram_model_share_kv(m[1], m[0], &err), -1, "one layer of width 32 against two of 64");
    cr_assert(strstr(err.msg, "KV pool"), "%s", err.msg);
    for (int i = 0; i < 2; i++) {
        tram_model_destroy(m[i]);
        tram_model_file_close(f[i]);
    }
    be->destroy(be);
}

/* Every token once, then a pattern the n-gram lookup continues: whatever is
 * drawn first has an earlier occurrence, so the second token is verified. */
static const int32_t law_prompt[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 5, 6, 7, 5, 6};

/* Pearson's statistic of counts[V] against probs[V] over n draws, cells with
 * an expected count under 5 pooled into one; *dof its degrees of freedom. */
static double chi_square(const int *counts, const float *probs, int n, int *dof)
{
    double stat = 0, pooled_e = 0, pooled_o = 0;
    int cells = 0;
    for (int i = 0; i < V; i++) {
        double e = probs[i] * n;
        if (e < 5) {
            pooled_e += e;
            pooled_o += counts[i];
            cr_assert(probs[i] > 0 || counts[i] == 0, "token %d has probability 0 but was drawn", i);
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        cells++;
    }
    if (pooled_e >= 5) {
        stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        cells++;
    }
    *dof = cells - 1;
    return stat;
}

/* The chi-square quantile at significance 0.001 (Wilson-Hilferty). */
static double chi_square_critical(int dof)
{
    double k = dof, z = 3.0902;
    return k * pow(1 - 2 / (9 * k) + z * sqrt(2 / (9 * k)), 3);
}

/* The raw next-token distribution of the tiny model after law_prompt, as
 * logits (its logprobs: all 16 are reported). */
static void tiny_logits(float *logits)
{
    tram_engine *e = tiny_engine(0);
    tram_sampling_params p = test_greedy_params(1);
    p.logprobs = V;
    add_ids(e, 0, law_prompt, TRAM_ARRAY_LEN(law_prompt), &p);
    const tram_output *outs;
    cr_assert_eq(test_step(e, &outs), 1);
    cr_assert_eq(outs[0].logprobs[0].num_top, V);
    for (int i = 0; i < V; i++)
        logits[outs[0].logprobs[0].top[i].token] = outs[0].logprobs[0].top[i].logprob;
    tram_engine_destroy(e);
}

/* The broken rule a test must catch: on rejection, a fresh draw from p
 * (instead of the residual max(0, p - q)) over-weights the draft-heavy tokens. */
static int32_t broken_rule(const float *p, const float *q, int32_t d, double u1, double u2)
{
    if (u1 * q[d] < p[d])
        return d;
    double x = u2, cum = 0;
    for (int i = 0; i < V; i++)
        if ((cum += p[i]) > x)
            return i;
    return V - 1;
}

/* Draws n tokens through the rule (broken or not) with drafts drawn from q. */
static void run_rule(const float *p, const float *q, int broken, int n, int *counts)
{
    float residual[V];
    for (int s = 0; s < n; s++) {
        double u = tram_sample_uniform((uint64_t)s, 0, 0), cum = 0;
        int32_t d = V - 1;
        for (int i = 0; i < V; i++)
            if ((cum += q[i]) > u) {
                d = i;
                break;
            }
        double u1 = tram_sample_uniform((uint64_t)s, 1, 0), u2 = tram_sample_uniform((uint64_t)s, 2, 0);
        int accepted;
        int32_t t = broken ? broken_rule(p, q, d, u1, u2)
                           : tram_rejection_sample(p, q, V, d, u1, u2, residual, &accepted);
        counts[t]++;
    }
}

Test(spec_law, rejection_sampler_keeps_the_target_distribution, .timeout = 60)
{
    float logits[V];
    tiny_logits(logits);
    tram_sampler *smp;
    tram_error err = {{0}};
    cr_assert_eq(tram_sampler_create(&smp, V, &err), 0);
    /* the target: every parameter applied first; the draft: a flatter row */
    const tram_logit_bias bias[] = {{.token = 3, .bias = 1.5f}};
    const int32_t hist[] = {4, 4, 9};
    tram_sample_input target = {
        .p = {.temperature = 0.6f, .top_k = 12, .top_p = 0.97f, .min_p = 0.01f, .repetition_penalty = 1.0f,
              .presence_penalty = 0.5f, .frequency_penalty = 0.2f},
        .bias = bias, .num_bias = 1, .output = hist, .output_len = 3};
    tram_sample_input draft = {.p = {.temperature = 1.6f, .top_p = 1.0f, .repetition_penalty = 1.0f}};
    float p[V], q[V];
    tram_sample_probs(smp, logits, &target, p);
    tram_sample_probs(smp, logits, &draft, q);
    float tv = 0;
    for (int i = 0; i < V; i++)
        tv += fabsf(p[i] - q[i]) / 2;
    cr_assert_gt(tv, 0.2f, "p and q must differ for the test to mean anything (TV %.3f)", tv);
    enum { N = 20000 };
    int good[V] = {0}, bad[V] = {0}, dof;
    run_rule(p, q, 0, N, good);
    double stat = chi_square(good, p, N, &dof);
    cr_assert_lt(stat, chi_square_critical(dof), "the rejection sampler: chi-square %.1f, %d dof", stat, dof);
    run_rule(p, q, 1, N, bad);
    double broken = chi_square(bad, p, N, &dof);
    cr_assert_gt(broken, chi_square_critical(dof), "the broken rule must fail: chi-square %.1f", broken);
    /* a point mass q (n-gram): the draft is kept with probability p(d) */
    float onehot[V] = {0};
    int32_t d = (int32_t)test_argmax(q, V);
    onehot[d] = 1;
    int point[V] = {0};
    run_rule(p, onehot, 0, N, point);
    stat = chi_square(point, p, N, &dof);
    cr_assert_lt(stat, chi_square_critical(dof), "point-mass draft: chi-square %.1f", stat);
    tram_sampler_destroy(smp);
}

/* Records each request's two tokens, and the target row of the second one
 * (its logprobs list every token) after the first token `after`. */
typedef struct {
    int32_t toks[3];
    int n;
} two_tokens;

typedef struct {
    two_tokens *got;  /* indexed by request id */
    int32_t after;
    float *target;
} law_run;

/* A test_output_visitor recording into the law_run ctx points to. */
static void record_law(const tram_output *o, void *ctx)
{
    law_run *run = ctx;
    two_tokens *g = &run->got[o->request_id];
    for (int t = 0; t < o->num_tokens; t++) {
        const tram_logprob_entry *lp = &o->logprobs[t];
        if (g->n == 1 && g->toks[0] == run->after)
            for (int k = 0; k < lp->num_top; k++)
                run->target[lp->top[k].token] = expf(lp->top[k].logprob);
        g->toks[g->n++] = o->token_ids[t];
    }
}

/* In the engine, n-gram drafts verified at temperature 1: over many seeds,
 * the second token (the first one a draft decides), given the most likely
 * first token, is distributed as the target's row says. */
Test(spec_law, engine_second_token_follows_the_target, .timeout = 120)
{
    enum { N = 3000 };
    float logits[V];
    tiny_logits(logits);
    int32_t mode = (int32_t)test_argmax(logits, V);
    tram_engine *e = tiny_engine(256); /* every step speculates */
    static two_tokens got[N];
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.max_tokens = 3; /* the second token has a third after it: room for a draft */
    p.ignore_eos = 1;
    p.logprobs = V;
    p.has_seed = 1;
    for (int s = 0; s < N; s++) {
        p.seed = (uint64_t)s;
        add_ids(e, (uint64_t)s, law_prompt, TRAM_ARRAY_LEN(law_prompt), &p);
    }
    float target[V] = {0};
    test_drain(e, record_law, &(law_run){.got = got, .after = mode, .target = target});
    tram_engine_stats st;
    tram_engine_stats_get(e, &st);
    tram_engine_destroy(e);
    int counts[V] = {0}, n = 0, dof;
    for (int s = 0; s < N; s++)
        if (got[s].toks[0] == mode) {
            counts[got[s].toks[1]]++;
            n++;
        }
    cr_assert_gt(n, 300, "the most likely first token came %d times", n);
    cr_assert_geq(st.spec_decode_num_drafts, (uint64_t)N, "every second token was verified");
    cr_assert_gt(st.spec_decode_num_accepted_tokens, 0);
    double stat = chi_square(counts, target, n, &dof);
    cr_assert_lt(stat, chi_square_critical(dof), "chi-square %.1f, %d dof, %d draws", stat, dof, n);
}

/* The turn-down rule: with more decoding sequences than disable_by_batch_size
 * a step runs no drafts; once the batch has shrunk, drafts come back. */
Test(spec_engine, turns_down_in_a_large_batch, .timeout = 60)
{
    tram_engine *e = tiny_engine(2);
    static result res[MAXREQ];
    for (int i = 0; i < 6; i++) {
        tram_sampling_params p = test_greedy_params(i == 0 ? 30 : 4);
        add_ids(e, (uint64_t)i, law_prompt, TRAM_ARRAY_LEN(law_prompt), &p);
    }
    tram_engine_stats s = drain(e, res);
    tram_engine_destroy(e);
    cr_assert_gt(s.spec_decode_off_steps, 0, "6 decoding sequences are past the limit of 2");
    cr_assert_gt(s.spec_decode_num_drafts, 0, "the last one alone speculates");
    cr_assert_eq(res[0].n[0], 30);
}
