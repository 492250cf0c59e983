/* Sampler against references computed here in double precision: greedy is the
 * argmax, draws follow softmax(logits / T) restricted by top_k / top_p /
 * min_p, penalties and bias move the right logits, logprobs are a log-softmax. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_sampling.h"
#include "kernels/cpu/vexp.h"

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

/* ---------------------------------------------------------------- truncation against a full sort */

typedef struct {
    float p;
    int32_t id;
} ref_cand;

/* cand_cmp's order: higher probability first, then the lower id. */
static int ref_cmp(const void *a, const void *b)
{
    const ref_cand *x = a, *y = b;
    return x->p > y->p ? -1 : x->p < y->p ? 1 : (x->id > y->id) - (x->id < y->id);
}

/* The kept ids of x[v] under p as sampling_params.h states them, every
 * positive probability put in order by qsort: min_p, the top_k best (the new
 * mass their sum, best first), then the shortest prefix holding top_p of the
 * mass (at least one).  Probabilities with the sampler's float arithmetic,
 * exp(x/T - max) by its exponentials (vexp.h), so that the two see the same
 * ties. */
enum { REF_MAX_V = 6000 }; /* the largest vocabulary the references take */

static void ref_numerators(const float *x, int v, float temperature, float *q)
{
    float mx = -INFINITY, inv_t = 1.0f / temperature;
    for (int i = 0; i < v; i++) {
        mx = fmaxf(mx, x[i] * inv_t);
        q[i] = x[i];
    }
    tram_exp_row(tram_vexp_kernel_best(), q, v, inv_t, mx, 0);
}

static int ref_kept(const float *x, int v, const tram_sampler_row *p, ref_cand *c, int32_t *ids)
{
    static float e[REF_MAX_V];
    ref_numerators(x, v, p->temperature, e);
    double norm = 0;
    int n = 0;
    for (int i = 0; i < v; i++) {
        float q = e[i];
        if (q >= p->min_p && q > 0) {
            norm += q;
            c[n++] = (ref_cand){q, i};
        }
    }
    qsort(c, (size_t)n, sizeof(*c), ref_cmp);
    if (p->top_k > 0 && p->top_k < n) {
        n = p->top_k;
        norm = 0;
        for (int i = 0; i < n; i++)
            norm += c[i].p;
    }
    if (p->top_p < 1.0f) {
        double cum = 0;
        int keep = 0;
        while (keep < n && cum < p->top_p * norm)
            cum += c[keep++].p;
        n = keep > 0 ? keep : 1;
    }
    for (int i = 0; i < n; i++)
        ids[i] = c[i].id;
    return n;
}

/* The draw of tram_sample from the kept ids in their order, with the
 * sampler's own uniform number. */
static int32_t ref_draw(const float *x, int v, const tram_sample_input *in, const int32_t *ids, int n)
{
    static float e[REF_MAX_V];
    ref_numerators(x, v, in->p.temperature, e);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += e[ids[i]];
    double target = tram_sample_uniform(in->p.seed, in->sample_index, in->output_len) * sum, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += e[ids[i]];
        if (target < cum)
            return ids[i];
    }
    return ids[n - 1];
}

static uint32_t lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

/* Logits of three shapes: spread over many octaves of probability (every
 * radix digit differs), a few values (ties everywhere), and all equal. */
static void fill_logits(float *x, int v, int shape, uint32_t *state)
{
    for (int i = 0; i < v; i++) {
        uint32_t r = lcg(state);
        x[i] = shape == 0 ? (float)(r % 100000) * 2e-4f - 10.0f : shape == 1 ? (float)(r % 4) * 0.5f : 1.0f;
    }
}

/* For every (temperature, top_k, top_p, min_p) of a grid, on tiny to large
 * vocabularies, the kept ids are those of a full qsort, in the same order, and
 * so is the seeded draw. */
Test(sampler, truncation_equals_a_full_sort)
{
    enum { MAX_V = REF_MAX_V };
    static const int vocabs[] = {1, 2, 3, 5, 17, 300, MAX_V};
    static const float temps[] = {0.5f, 1.0f, 2.5f}, top_ps[] = {1.0f, 0.99f, 0.9f, 0.5f, 0.05f},
                       min_ps[] = {0, 0.01f, 0.3f};
    static const int top_ks[] = {0, 1, 3, 40, 100000};
    static float x[MAX_V];
    static ref_cand c[MAX_V];
    static int32_t got[MAX_V], want[MAX_V];
    uint32_t state = 12345;
    tram_sampler *t;
    tram_error err;
    for (size_t vi = 0; vi < sizeof(vocabs) / sizeof(vocabs[0]); vi++) {
        int v = vocabs[vi];
        cr_assert_eq(tram_sampler_create(&t, v, &err), 0);
        for (int shape = 0; shape < 3; shape++) {
            fill_logits(x, v, shape, &state);
            for (size_t a = 0; a < sizeof(temps) / sizeof(temps[0]); a++)
                for (size_t b = 0; b < sizeof(top_ks) / sizeof(top_ks[0]); b++)
                    for (size_t d = 0; d < sizeof(top_ps) / sizeof(top_ps[0]); d++)
                        for (size_t e = 0; e < sizeof(min_ps) / sizeof(min_ps[0]); e++) {
                            tram_sample_input in = {.p = params(temps[a]), .output_len = (int)(a + b + d + e)};
                            in.p.top_k = top_ks[b];
                            in.p.top_p = top_ps[d];
                            in.p.min_p = min_ps[e];
                            if (!in.p.top_k && in.p.top_p >= 1.0f && !in.p.min_p)
                                continue; /* no truncation: kept in id order, drawn without sorting */
                            int n = tram_sample_kept(t, x, &in, got), m = ref_kept(x, v, &in.p, c, want);
                            cr_assert_eq(n, m, "vocab %d shape %d T %g k %d p %g min_p %g: %d kept, want %d",
                                         v, shape, in.p.temperature, in.p.top_k, in.p.top_p, in.p.min_p, n, m);
                            for (int i = 0; i < n; i++)
                                cr_assert_eq(got[i], want[i], "vocab %d shape %d T %g k %d p %g min_p %g: rank %d",
                                             v, shape, in.p.temperature, in.p.top_k, in.p.top_p, in.p.min_p, i);
                            cr_assert_eq(tram_sample(t, x, &in), ref_draw(x, v, &in, want, m));
                        }
        }
        tram_sampler_destroy(t);
    }
}

/* The one-loop argmax tram_argmax stands for: the first index of the
 * largest, NaN never above anything. */
static int32_t ref_argmax(const float *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* On every length to 70 (lanes and tails), with ties (the first wins),
 * NaNs inside and at 0, -0 beside 0, and all -INFINITY (banned). */
Test(sampler, argmax_is_the_first_largest)
{
    enum { N = 70 };
    float x[N];
    uint32_t state = 99;
    for (int n = 1; n <= N; n++)
        for (int shape = 0; shape < 5; shape++) {
            for (int i = 0; i < n; i++) {
                uint32_t r = lcg(&state);
                x[i] = shape == 4 ? -INFINITY : (float)(r % 7) - 3.0f; /* ties everywhere */
                if (shape == 1 && r % 5 == 0)
                    x[i] = NAN;
                if (shape == 3 && x[i] == 0.0f && r % 2)
                    x[i] = -0.0f;
            }
            if (shape == 2)
                x[0] = NAN;
            cr_assert_eq(tram_argmax(x, n), ref_argmax(x, n), "n %d shape %d", n, shape);
        }
}
