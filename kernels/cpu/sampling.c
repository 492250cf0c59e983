#include "kernels/cpu/cpu_sampling.h"

#include "kernels/cpu/vexp.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct {
    float p;       /* unnormalized probability */
    int32_t id;
} cand;

/* Truncation sorts its candidates by radix on the bits of their
 * probabilities: a positive float's bits order as an unsigned integer.  A
 * coarse pass over the top bits (the exponent and 3 mantissa bits, 1/8 of an
 * octave a bucket) first finds which candidates can be kept; then three LSD
 * passes of 11 bits sort those. */
enum {
    COARSE_SHIFT = 20,
    COARSE_BUCKETS = 1 << (31 - COARSE_SHIFT), /* the sign bit is 0 */
    DIGIT_BITS = 11,
    DIGIT_BUCKETS = 1 << DIGIT_BITS,
    DIGITS = 3, /* 3 x 11 bits cover the 32 */
};

struct tram_sampler {
    int vocab;
    tram_cpu_kernel exp_kernel; /* vexp.h's best here */
    float *work;   /* [vocab] processed logits, then unnormalized probabilities */
    cand *cands;   /* [vocab] the kept candidates, best first */
    cand *spare;   /* [vocab] the radix sort's other buffer */
    int32_t *counts; /* [vocab] occurrences in the output; all zero between calls */
    uint8_t *seen;   /* [vocab] in prompt or output; all zero between calls */
    uint32_t coarse_count[COARSE_BUCKETS];
    double coarse_mass[COARSE_BUCKETS];
    uint32_t digit_count[DIGITS][DIGIT_BUCKETS];
};

void tram_sampler_destroy(tram_sampler *s)
{
    if (!s)
        return;
    TRAM_FREE_ALL(s->work, s->cands, s->spare, s->counts, s->seen, s);
}

int tram_sampler_create(tram_sampler **out, int vocab, tram_error *err)
{
    tram_sampler *s = tram_calloc(1, sizeof(*s), err);
    *out = NULL;
    if (!s)
        return -1;
    s->vocab = vocab;
    s->exp_kernel = tram_vexp_kernel_best();
    s->work = tram_calloc((size_t)vocab, sizeof(float), err);
    s->cands = tram_calloc((size_t)vocab, sizeof(cand), err);
    s->spare = tram_calloc((size_t)vocab, sizeof(cand), err);
    s->counts = tram_calloc((size_t)vocab, sizeof(int32_t), err);
    s->seen = tram_calloc((size_t)vocab, 1, err);
    if (!s->work || !s->cands || !s->spare || !s->counts || !s->seen) {
        tram_sampler_destroy(s);
        return -1;
    }
    *out = s;
    return 0;
}

double tram_sample_uniform(uint64_t seed, int sample_index, int position)
{
    uint64_t x = tram_mix64(seed ^ tram_mix64(0x9e3779b97f4a7c15ULL * (uint64_t)(sample_index + 1)));
    x = tram_mix64(x ^ tram_mix64(0xd1b54a32d192ed03ULL * (uint64_t)(position + 1)));
    return (double)(x >> 11) * 0x1.0p-53;
}

/* ---------------------------------------------------------------- logit processing */

/* Applies each distinct token's penalty once; counts/seen are reset on the way
 * out so the scratch stays zero between calls without a vocab-wide clear. */
static void apply_penalties(tram_sampler *s, const tram_sample_input *in)
{
    const tram_sampler_row *p = &in->p;
    float *w = s->work;
    if (p->presence_penalty != 0 || p->frequency_penalty != 0) {
        for (int i = 0; i < in->output_len; i++)
            s->counts[in->output[i]]++;
        for (int i = 0; i < in->output_len; i++) {
            int32_t t = in->output[i];
            if (s->counts[t]) {
                w[t] -= p->frequency_penalty * (float)s->counts[t] + p->presence_penalty;
                s->counts[t] = 0;
            }
        }
    }
    if (p->repetition_penalty != 1.0f) {
        const int32_t *lists[2] = {in->prompt, in->output};
        int lens[2] = {in->prompt_len, in->output_len};
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < lens[l]; i++) {
                int32_t t = lists[l][i];
                if (!s->seen[t]) {
                    s->seen[t] = 1;
                    w[t] = w[t] > 0 ? w[t] / p->repetition_penalty : w[t] * p->repetition_penalty;
                }
            }
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < lens[l]; i++)
                s->seen[lists[l][i]] = 0;
    }
}

static void process_logits(tram_sampler *s, const float *logits, const tram_sample_input *in)
{
    memcpy(s->work, logits, (size_t)s->vocab * sizeof(float));
    for (int i = 0; i < in->num_bias; i++)
        s->work[in->bias[i].token] += in->bias[i].bias;
    for (int i = 0; i < in->num_banned; i++)
        s->work[in->banned[i]] = -INFINITY;
    apply_penalties(s, in);
}

/* The largest of x[n] * scale.  A comparison rather than fmaxf, which the
 * compiler makes a call of (for its NaN rules; a comparison skips a NaN
 * alike), and eight running maxima, so that the loop vectorizes: a maximum
 * is the same in any order. */
static float max_scaled(const float *x, int n, float scale)
{
    enum { LANES = 8 };
    float lane[LANES], mx = -INFINITY;
    for (int j = 0; j < LANES; j++)
        lane[j] = -INFINITY;
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float v = x[i + j] * scale;
            lane[j] = v > lane[j] ? v : lane[j];
        }
    for (; i < n; i++)
        mx = x[i] * scale > mx ? x[i] * scale : mx;
    for (int j = 0; j < LANES; j++)
        mx = lane[j] > mx ? lane[j] : mx;
    return mx;
}

/* The first index of the largest of x[n]: the largest by max_scaled's
 * vector lanes, then the first element equal to it, rather than one loop
 * whose every step waits on the last comparison.  As that loop, a NaN never
 * wins, except at 0 (nothing compares above it), and all -INFINITY gives 0. */
int32_t tram_argmax(const float *x, int n)
{
    if (n <= 0 || isnan(x[0]))
        return 0;
    float mx = max_scaled(x, n, 1.0f);
    for (int i = 0; i < n; i++)
        if (x[i] == mx)
            return i;
    return 0;
}

/* ---------------------------------------------------------------- truncation */

static uint32_t float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}

/* Copies the candidates (probabilities >= thr > 0) to s->spare in id order;
 * returns how many.  Every token is written and only a candidate advances
 * the end: about half the tokens pass the nucleus bound, a branch on it
 * would guess wrong every other time. */
static int gather(tram_sampler *s, float thr)
{
    const float *w = s->work;
    cand *c = s->spare;
    int n = 0;
    for (int i = 0; i < s->vocab; i++) {
        float p = w[i]; /* read once: the store below may alias it as far as the compiler knows */
        c[n] = (cand){.p = p, .id = i};
        n += p >= thr;
    }
    return n;
}

/* Keeps those of s->spare[n] whose probability is >= least, in order;
 * returns how many. */
static int keep_above(tram_sampler *s, int n, float least)
{
    cand *c = s->spare;
    int m = 0;
    for (int i = 0; i < n; i++) {
        cand x = c[i]; /* read before the store, which may land on it */
        c[m] = x;
        m += x.p >= least;
    }
    return m;
}

/* The count and mass of s->spare[n] per coarse bucket. */
static void count_coarse(tram_sampler *s, int n)
{
    const cand *c = s->spare;
    uint32_t *count = s->coarse_count;
    double *mass = s->coarse_mass;
    memset(count, 0, sizeof(s->coarse_count));
    memset(mass, 0, sizeof(s->coarse_mass));
    for (int i = 0; i < n; i++) {
        uint32_t b = float_bits(c[i].p) >> COARSE_SHIFT;
        count[b]++;
        mass[b] += c[i].p;
    }
}

/* The least probability of the best coarse buckets that hold at least k
 * (>= 1) candidates and `mass` of the probability (0 when only all of them
 * do).  The margin on the mass covers the rounding of its sums:
 * summed in another order the same candidates differ by far less. */
static float coarse_cutoff(const tram_sampler *s, int k, double mass)
{
    double want = mass * (1 + 1e-9), cum = 0;
    uint32_t count = 0;
    for (int b = COARSE_BUCKETS - 1; b > 0; b--) {
        count += s->coarse_count[b];
        cum += s->coarse_mass[b];
        if (count >= (uint32_t)k && cum >= want) {
            uint32_t u = (uint32_t)b << COARSE_SHIFT;
            float lowest;
            memcpy(&lowest, &u, sizeof(lowest));
            return lowest;
        }
    }
    return 0;
}

/* The digit of the key that sorts higher probabilities first. */
static uint32_t digit(float p, int d)
{
    return (~float_bits(p) >> (d * DIGIT_BITS)) & (DIGIT_BUCKETS - 1);
}

/* Sorts s->spare[n] best first into s->cands: LSD radix passes, each stable,
 * so that equal probabilities keep the order they came in.  A digit all of
 * them share (the exponent of a flat distribution's) needs no pass. */
static void radix_sort(tram_sampler *s, int n)
{
    uint32_t(*count)[DIGIT_BUCKETS] = s->digit_count;
    memset(count, 0, sizeof(s->digit_count));
    cand *from = s->spare, *to = s->cands;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < DIGITS; d++)
            count[d][digit(from[i].p, d)]++;
    for (int d = 0; d < DIGITS; d++) {
        uint32_t *at = count[d], start = 0;
        if (n == 0 || at[digit(from[0].p, d)] == (uint32_t)n)
            continue;
        for (int b = 0; b < DIGIT_BUCKETS; b++) {
            uint32_t c = at[b];
            at[b] = start;
            start += c;
        }
        for (int i = 0; i < n; i++)
            to[at[digit(from[i].p, d)]++] = from[i];
        cand *t = from;
        from = to;
        to = t;
    }
    if (from != s->cands) { /* the buffers are alike: trade them rather than copy */
        s->spare = s->cands;
        s->cands = from;
    }
}

/* The shortest prefix of c[n] (best first) holding `target` of the mass, at
 * least one. */
static int nucleus(const cand *c, int n, double target)
{
    double cum = 0;
    int keep = 0;
    while (keep < n && cum < target)
        cum += c[keep++].p;
    return keep > 0 ? keep : 1;
}

/* Turns s->work into unnormalized probabilities exp(x/T - max); returns their
 * sum over the tokens that pass min_p (relative to the best, whose value is 1). */
static double to_probs(tram_sampler *s, float temperature, float min_p)
{
    float inv_t = 1.0f / temperature;
    return tram_exp_row(s->exp_kernel, s->work, s->vocab, inv_t, max_scaled(s->work, s->vocab, inv_t), min_p);
}

/* Candidates after min_p, top_k and top_p, best first; returns how many.
 * Only the best coarse buckets that can hold them are sorted: a flat
 * distribution can leave thousands of candidates, its nucleus a few dozen. */
static int truncate_dist(tram_sampler *s, const tram_sampler_row *p, double norm)
{
    float thr = p->min_p;
    /* Without top_k, tokens below this bound hold less than 1 - top_p of the
     * mass together, so the nucleus lies among the others: skip sorting them. */
    if (p->top_k == 0 && p->top_p < 1.0f)
        thr = fmaxf(thr, (float)((1.0 - p->top_p) * norm / s->vocab));
    int n = gather(s, fmaxf(thr, FLT_TRUE_MIN)); /* zero probabilities are never kept */
    count_coarse(s, n);
    int top_k = p->top_k > 0 && p->top_k < n ? p->top_k : 0;
    int nucleus_only = !top_k && p->top_p < 1.0f;
    float cutoff = coarse_cutoff(s, top_k ? top_k : nucleus_only ? 1 : n, nucleus_only ? p->top_p * norm : 0);
    n = keep_above(s, n, cutoff);
    radix_sort(s, n);
    if (top_k) {
        n = top_k;
        norm = 0;
        for (int i = 0; i < n; i++)
            norm += s->cands[i].p;
    }
    return p->top_p < 1.0f ? nucleus(s->cands, n, p->top_p * norm) : n;
}

static int32_t draw(const cand *c, int n, double u)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += c[i].p;
    double x = u * sum, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += c[i].p;
        if (x < cum)
            return c[i].id;
    }
    return c[n - 1].id;
}

static int32_t draw_full(const float *w, int n, double sum, double u)
{
    double x = u * sum, cum = 0;
    int32_t last = 0;
    for (int i = 0; i < n; i++) {
        if (w[i] > 0) {
            cum += w[i];
            last = i;
            if (x < cum)
                return i;
        }
    }
    return last;
}

int32_t tram_sample(tram_sampler *s, const float *logits, const tram_sample_input *in)
{
    const tram_sampler_row *p = &in->p;
    process_logits(s, logits, in);
    if (p->temperature < TRAM_SAMPLE_GREEDY_BELOW)
        return tram_argmax(s->work, s->vocab);
    double u = tram_sample_uniform(p->seed, in->sample_index, in->output_len);
    double norm = to_probs(s, p->temperature, p->min_p);
    if (p->top_k == 0 && p->top_p >= 1.0f && p->min_p <= 0)
        return draw_full(s->work, s->vocab, norm, u);
    int n = truncate_dist(s, p, norm);
    return draw(s->cands, n, u);
}

int tram_sample_kept(tram_sampler *s, const float *logits, const tram_sample_input *in, int32_t *ids)
{
    const tram_sampler_row *p = &in->p;
    process_logits(s, logits, in);
    if (p->temperature < TRAM_SAMPLE_GREEDY_BELOW) {
        ids[0] = tram_argmax(s->work, s->vocab);
        return 1;
    }
    double norm = to_probs(s, p->temperature, p->min_p);
    int n = 0;
    if (p->top_k == 0 && p->top_p >= 1.0f && p->min_p <= 0) {
        for (int i = 0; i < s->vocab; i++)
            if (s->work[i] > 0)
                ids[n++] = i;
        return n;
    }
    n = truncate_dist(s, p, norm);
    for (int i = 0; i < n; i++)
        ids[i] = s->cands[i].id;
    return n;
}

void tram_sample_probs(tram_sampler *s, const float *logits, const tram_sample_input *in, float *probs)
{
    const tram_sampler_row *p = &in->p;
    memset(probs, 0, (size_t)s->vocab * sizeof(float));
    process_logits(s, logits, in);
    if (p->temperature < TRAM_SAMPLE_GREEDY_BELOW) {
        probs[tram_argmax(s->work, s->vocab)] = 1;
        return;
    }
    double norm = to_probs(s, p->temperature, p->min_p);
    int n = truncate_dist(s, p, norm);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += s->cands[i].p;
    for (int i = 0; i < n; i++)
        probs[s->cands[i].id] = (float)(s->cands[i].p / sum);
}

int32_t tram_rejection_sample(const float *p, const float *q, int vocab, int32_t draft, double u_accept,
                              double u_resample, float *residual, int *accepted)
{
    *accepted = q[draft] > 0 && u_accept * q[draft] < p[draft];
    if (*accepted)
        return draft;
    double sum = 0;
    for (int i = 0; i < vocab; i++) {
        residual[i] = fmaxf(0.0f, p[i] - q[i]);
        sum += residual[i];
    }
    /* p = q leaves nothing to reject from; draft probability 1 was accepted */
    return sum > 0 ? draw_full(residual, vocab, sum, u_resample) : draft;
}

/* ---------------------------------------------------------------- logprobs */

void tram_logprobs(tram_sampler *s, const float *logits, int32_t token, int k,
                   tram_logprob_entry *out, tram_token_logprob *top)
{
    int n = s->vocab, rank = 1, have = 0;
    float mx = logits[tram_argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += exp((double)(logits[i] - mx));
        rank += logits[i] > logits[token] || (logits[i] == logits[token] && i < token);
        /* insertion into the running top-k, best first, ties to the lower id */
        if (k > 0 && (have < k || logits[i] > top[have - 1].logprob)) {
            int j = have < k ? have++ : k - 1;
            while (j > 0 && logits[i] > top[j - 1].logprob) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = (tram_token_logprob){.token = i, .logprob = logits[i]};
        }
    }
    float lse = mx + (float)log(sum);
    for (int i = 0; i < have; i++)
        top[i].logprob -= lse;
    out->token = token;
    out->logprob = logits[token] - lse;
    out->rank = rank;
    out->num_top = have;
    out->top = top;
}
