/* Sampler against references computed here in double precision: greedy is the
 * argmax, draws follow softmax(logits / T) restricted by top_k / top_p /
 * min_p, penalties and bias move the right logits, logprobs are a log-softmax. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_sampling.h"

enum { V = 8, DRAWS = 20000 };
static const float logits[V] = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.0f, 2.4f};

static tram_sampler *s;

static void open_sampler(void)
{
    tram_error err;
    cr_assert_eq(tram_sampler_create(&s, V, &err), 0);
}

static void close_sampler(void) { tram_sampler_destroy(s); }

TestSuite(sampler, .init = open_sampler, .fini = close_sampler);

/* Temperature t, every filter and penalty off. */
static tram_sampler_row params(float t)
{
    return (tram_sampler_row){.temperature = t, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 99};
}

/* Empirical frequencies over DRAWS positions of one seeded stream. */
static void histogram(const tram_sampler_row *p, double *freq)
{
    for (int i = 0; i < V; i++)
        freq[i] = 0;
    /* output_len is the draw's position; no penalties read the (absent) tokens */
    for (int pos = 0; pos < DRAWS; pos++) {
        tram_sample_input in = {.p = *p, .output_len = pos};
        freq[tram_sample(s, logits, &in)] += 1.0 / DRAWS;
    }
}

static void softmax_ref(const int *keep, float t, double *p)
{
    double z = 0;
    for (int i = 0; i < V; i++)
        z += keep[i] ? exp(logits[i] / t) : 0;
    for (int i = 0; i < V; i++)
        p[i] = keep[i] ? exp(logits[i] / t) / z : 0;
}

static void assert_close(const double *f, const double *p)
{
    for (int i = 0; i < V; i++)
        cr_assert(fabs(f[i] - p[i]) < 0.015 + 0.05 * p[i], "token %d: drawn %.4f, expected %.4f", i,
                  f[i], p[i]);
}

/* Draws under p follow softmax(logits / p->temperature) over the tokens in keep. */
static void assert_draws_follow(const tram_sampler_row *p, const int *keep)
{
    double f[V], ref[V];
    histogram(p, f);
    softmax_ref(keep, p->temperature, ref);
    assert_close(f, ref);
}

Test(sampler, greedy_is_argmax_and_bias_moves_it)
{
    tram_sample_input in = {.p = params(0)};
    cr_assert_eq(tram_sample(s, logits, &in), 1);
    tram_logit_bias b = {6, 3.0f};
    in.bias = &b;
    in.num_bias = 1;
    cr_assert_eq(tram_sample(s, logits, &in), 6);
    int32_t banned = 6;
    in.banned = &banned;
    in.num_banned = 1;
    cr_assert_eq(tram_sample(s, logits, &in), 1);
}

Test(sampler, penalties)
{
    int32_t prompt[] = {1}, out[] = {7, 7};
    tram_sample_input in = {.p = params(0), .prompt = prompt, .prompt_len = 1, .output = out, .output_len = 2};
    in.p.repetition_penalty = 1.3f; /* 2.5/1.3 = 1.92 < 2.0 (token 3); 7 is penalized too */
    cr_assert_eq(tram_sample(s, logits, &in), 3);
    in.p.repetition_penalty = 1.0f;
    in.p.frequency_penalty = 0.3f; /* only token 7 (output): 2.4 - 0.6; token 1 stays best */
    cr_assert_eq(tram_sample(s, logits, &in), 1);
    int32_t out1[] = {1};
    in.output = out1;
    in.output_len = 1;
    in.p.frequency_penalty = 0;
    in.p.presence_penalty = 0.2f; /* 2.5 - 0.2 = 2.3 < 2.4 */
    cr_assert_eq(tram_sample(s, logits, &in), 7);
}

Test(sampler, temperature_distribution)
{
    tram_sampler_row p = params(0.7f);
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    assert_draws_follow(&p, all);
}

Test(sampler, top_k_top_p_min_p)
{
    tram_sampler_row p = params(1.0f);
    /* top_k = 3: tokens 1, 7, 3 */
    p.top_k = 3;
    int k3[V] = {0, 1, 0, 1, 0, 0, 0, 1};
    assert_draws_follow(&p, k3);
    /* top_p = 0.5: sorted probs are .257 (1), .233 (7), .156 (3), ... → {1, 7} reach 0.5 */
    p.top_k = 0;
    p.top_p = 0.5f;
    int p5[V] = {0, 1, 0, 0, 0, 0, 0, 1};
    int all[V] = {1, 1, 1, 1, 1, 1, 1, 1};
    double ref[V];
    softmax_ref(all, 1.0f, ref);
    cr_assert(ref[1] + ref[7] >= 0.5 && ref[1] < 0.5);
    assert_draws_follow(&p, p5);
    /* min_p = 0.5: keep p >= 0.5 * p_max, i.e. logit >= 2.5 - ln 2 = 1.807 */
    p.top_p = 1.0f;
    p.min_p = 0.5f;
    int m5[V] = {0, 1, 0, 1, 0, 0, 0, 1};
    assert_draws_follow(&p, m5);
}

Test(sampler, seeded_streams)
{
    cr_assert_eq(tram_sample_uniform(5, 0, 3), tram_sample_uniform(5, 0, 3));
    cr_assert_neq(tram_sample_uniform(5, 0, 3), tram_sample_uniform(5, 1, 3));
    cr_assert_neq(tram_sample_uniform(5, 0, 3), tram_sample_uniform(6, 0, 3));
    cr_assert_neq(tram_sample_uniform(5, 0, 3), tram_sample_uniform(5, 0, 4));
}

Test(sampler, logprobs_are_log_softmax)
{
    double z = 0;
    for (int i = 0; i < V; i++)
        z += exp(logits[i]);
    tram_logprob_entry e;
    tram_token_logprob top[V];
    tram_logprobs(s, logits, 3, V, &e, top);
    cr_assert_float_eq(e.logprob, logits[3] - log(z), 1e-5);
    cr_assert_eq(e.rank, 3);
    cr_assert_eq(e.num_top, V);
    double sum = 0;
    for (int i = 0; i < V; i++) {
        sum += exp(top[i].logprob);
        cr_assert_float_eq(top[i].logprob, logits[top[i].token] - log(z), 1e-5);
        if (i)
            cr_assert_geq(top[i - 1].logprob, top[i].logprob);
    }
    cr_assert_float_eq(sum, 1.0, 1e-5);
    cr_assert_eq(top[0].token, 1);
    cr_assert_eq(top[1].token, 7);
}

static int cand_ref_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b; /* {p, id} */
    return x[0] > y[0] ? -1 : x[0] < y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The nucleus of a wide, flat distribution (thousands of candidates, the
 * nucleus far past the first sorted ones) is the prefix of a full sort, the
 * same ids in the same order, with ties broken by the lower id. */
Test(sampler, nucleus_of_a_flat_distribution_is_the_full_sort_prefix)
{
    enum { W = 6000 };
    static float flat[W], prob[W];
    static double ref[W][2];
    static int32_t kept[W];
    tram_sampler *big;
    tram_error err;
    cr_assert_eq(tram_sampler_create(&big, W, &err), 0);
    srand(5);
    for (int i = 0; i < W; i++)
        flat[i] = (float)(rand() % 400) * 0.001f; /* many exact ties */
    for (float top_p = 0.05f; top_p < 1.0f; top_p += 0.3f) {
        tram_sample_input in = {.p = params(0.7f)};
        in.p.top_p = top_p;
        int n = tram_sample_kept(big, flat, &in, kept);
        /* the reference, with the sampler's own float arithmetic: exp(x/T - max) */
        float mx = -INFINITY, inv_t = 1.0f / 0.7f;
        for (int i = 0; i < W; i++)
            mx = fmaxf(mx, flat[i] * inv_t);
        double norm = 0;
        for (int i = 0; i < W; i++) {
            prob[i] = expf(flat[i] * inv_t - mx);
            norm += prob[i];
            ref[i][0] = prob[i];
            ref[i][1] = i;
        }
        qsort(ref, W, sizeof(ref[0]), cand_ref_cmp);
        double cum = 0;
        int keep = 0;
        while (keep < W && cum < top_p * norm)
            cum += ref[keep++][0];
        cr_expect_gt(keep, 64, "top_p %.2f: the nucleus should outgrow the first sort", top_p);
        cr_assert_eq(n, keep, "top_p %.2f: %d kept, the full sort keeps %d", top_p, n, keep);
        for (int i = 0; i < n; i++)
            cr_assert_eq(kept[i], (int32_t)ref[i][1], "top_p %.2f: rank %d", top_p, i);
    }
    tram_sampler_destroy(big);
}
