#include "kernels/cpu/cpu_sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float p;       /* unnormalized probability */
    int32_t id;
} cand;

struct tram_sampler {
    int vocab;
    float *work;   /* [vocab] processed logits, then unnormalized probabilities */
    cand *cands;   /* [vocab] */
    int32_t *counts; /* [vocab] occurrences in the output; all zero between calls */
    uint8_t *seen;   /* [vocab] in prompt or output; all zero between calls */
};

void tram_sampler_destroy(tram_sampler *s)
{
    if (!s)
        return;
    TRAM_FREE_ALL(s->work, s->cands, s->counts, s->seen, s);
}

int tram_sampler_create(tram_sampler **out, int vocab, tram_error *err)
{
    tram_sampler *s = tram_calloc(1, sizeof(*s), err);
    *out = NULL;
    if (!s)
        return -1;
    s->vocab = vocab;
    s->work = tram_calloc((size_t)vocab, sizeof(float), err);
    s->cands = tram_calloc((size_t)vocab, sizeof(cand), err);
    s->counts = tram_calloc((size_t)vocab, sizeof(int32_t), err);
    s->seen = tram_calloc((size_t)vocab, 1, err);
    if (!s->work || !s->cands || !s->counts || !s->seen) {
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

int32_t tram_argmax(const float *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* ---------------------------------------------------------------- truncation */

/* Total order: higher probability first, then lower token id. */
static int cand_before(const cand *a, const cand *b)
{
    return a->p > b->p || (a->p == b->p && a->id < b->id);
}

static int cand_cmp(const void *a, const void *b)
{
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

/* Reorders c so that its first k entries are the k best (in any order). */
static void select_top(cand *c, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &pivot))
                i++;
            while (cand_before(&pivot, &c[j]))
                j--;
            if (i <= j) {
                cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

/* The smallest best-first prefix of c[n] holding `target` of the mass (at
 * least one), sorted at the front; returns its length.  Only the best k are
 * sorted, k growing 4x until the prefix fits: a flat distribution can leave
 * thousands of candidates of which the nucleus is a few dozen.  The order
 * is total, so the prefix and its sums are those of a full sort. */
static int nucleus(cand *c, int n, double target)
{
    for (int k = n < 64 ? n : 64;; k = n / 4 < k ? n : 4 * k) {
        select_top(c, n, k);
        qsort(c, (size_t)k, sizeof(cand), cand_cmp);
        double cum = 0;
        int keep = 0;
        while (keep < k && cum < target)
            cum += c[keep++].p;
        if (cum >= target || k == n)
            return keep > 0 ? keep : 1;
    }
}

/* Turns s->work into unnormalized probabilities exp(x/T - max); returns their
 * sum over the tokens that pass min_p (relative to the best, whose value is 1). */
static double to_probs(tram_sampler *s, float temperature, float min_p)
{
    float *w = s->work, inv_t = 1.0f / temperature;
    float mx = -INFINITY;
    for (int i = 0; i < s->vocab; i++)
        mx = fmaxf(mx, w[i] * inv_t);
    double sum = 0;
    for (int i = 0; i < s->vocab; i++) {
        w[i] = expf(w[i] * inv_t - mx);
        if (w[i] >= min_p)
            sum += w[i];
    }
    return sum;
}

/* Candidates after min_p, top_k and top_p, best first; returns how many. */
static int truncate_dist(tram_sampler *s, const tram_sampler_row *p, double norm)
{
    float thr = p->min_p;
    /* Without top_k, tokens below this bound hold less than 1 - top_p of the
     * mass together, so the nucleus lies among the others: skip sorting them. */
    if (p->top_k == 0 && p->top_p < 1.0f)
        thr = fmaxf(thr, (float)((1.0 - p->top_p) * norm / s->vocab));
    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if (s->work[i] >= thr && s->work[i] > 0)
            s->cands[n++] = (cand){.p = s->work[i], .id = i};
    if (p->top_k > 0 && p->top_k < n) {
        select_top(s->cands, n, p->top_k);
        n = p->top_k;
        norm = 0;
        for (int i = 0; i < n; i++)
            norm += s->cands[i].p;
    }
    if (p->top_p < 1.0f)
        return nucleus(s->cands, n, p->top_p * norm);
    qsort(s->cands, (size_t)n, sizeof(cand), cand_cmp);
    return n;
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
