/* spec.c — the proposers of speculative decoding (see spec.h). */
#include "engine/spec.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int tram_spec_config_check(const tram_spec_config *c, tram_error *err)
{
    if (!c->method[0])
        return 0;
    if (strcmp(c->method, "ngram") && strcmp(c->method, "self") && strcmp(c->method, "draft_model"))
        return tram_fail(err, "speculative_config.method: \"%s\" is not supported (ngram, self, draft_model)",
                         c->method);
    if (!strcmp(c->method, "draft_model") != !!c->model[0])
        return tram_fail(err, c->model[0] ? "speculative_config.model names a draft model, which only "
                                            "method \"draft_model\" runs"
                                          : "speculative_config.method \"draft_model\" needs a \"model\"");
    if (c->num_speculative_tokens < 1 || c->num_speculative_tokens > TRAM_SPEC_MAX_TOKENS)
        return tram_fail(err, "speculative_config.num_speculative_tokens must be in [1, %d], got %d",
                         TRAM_SPEC_MAX_TOKENS, c->num_speculative_tokens);
    if (!strcmp(c->method, "ngram") && (c->prompt_lookup_min < 1 || c->prompt_lookup_max < c->prompt_lookup_min))
        return tram_fail(err, "speculative_config: prompt_lookup_min (%d) must be >= 1 and at most "
                              "prompt_lookup_max (%d)", c->prompt_lookup_min, c->prompt_lookup_max);
    if (c->always_verify != 0 && c->always_verify != 1)
        return tram_fail(err, "speculative_config.always_verify must be 0 or 1, got %d", c->always_verify);
    if (c->disable_by_batch_size < 0)
        return tram_fail(err, "speculative_config.disable_by_batch_size must be >= 0, got %d",
                         c->disable_by_batch_size);
    return 0;
}

/* ---------------------------------------------------------------- n-gram */

/* The start of the most recent earlier occurrence of tokens[n - len, n)
 * (one with at least one token after it), or -1. */
static int last_match(const int32_t *tokens, int n, int len)
{
    const int32_t *suffix = tokens + n - len;
    for (int start = n - len - 1; start >= 0; start--)
        if (tokens[start] == suffix[0] &&
            !memcmp(tokens + start, suffix, (size_t)len * sizeof(int32_t)))
            return start;
    return -1;
}

int tram_ngram_propose(const int32_t *tokens, int n, int lookup_min, int lookup_max, int max_k,
                       int32_t *out)
{
    for (int len = TRAM_MIN(lookup_max, n - 1); len >= lookup_min; len--) {
        int start = last_match(tokens, n, len);
        if (start < 0)
            continue;
        int from = start + len, k = TRAM_MIN(max_k, n - from);
        memcpy(out, tokens + from, (size_t)k * sizeof(int32_t));
        return k;
    }
    return 0;
}

typedef struct {
    tram_proposer base;
    int lookup_min, lookup_max;
} ngram_proposer;

static int ngram_propose(tram_proposer *p, tram_propose_seq *seqs, int num_seqs, tram_error *err)
{
    (void)err;
    const ngram_proposer *g = (const ngram_proposer *)p;
    for (int i = 0; i < num_seqs; i++) {
        tram_propose_seq *s = &seqs[i];
        s->got = tram_ngram_propose(s->tokens, s->n, g->lookup_min, g->lookup_max, s->max_k, s->out);
    }
    return 0;
}

static void ngram_destroy(tram_proposer *p) { free(p); }

static int ngram_create(tram_proposer **out, const tram_spec_config *c, tram_error *err)
{
    ngram_proposer *g = tram_calloc(1, sizeof(*g), err);
    if (!g)
        return -1;
    *g = (ngram_proposer){
        .base = {.name = "ngram", .propose = ngram_propose, .destroy = ngram_destroy},
        .lookup_min = c->prompt_lookup_min,
        .lookup_max = c->prompt_lookup_max,
    };
    *out = &g->base;
    return 0;
}

/* ---------------------------------------------------------------- the automatic rule */

/* Each new verification of a draft position counts for a tenth of its record. */
#define RECORD_DECAY 0.9f
/* The weight, in verifications, of a position's prior (its predecessor's rate). */
#define ACCEPT_PRIOR 2.0
/* A declined sequence's first probe comes after this many declined steps;
 * each probe that does not bring drafts back doubles the wait, up to
 * PROBE_MAX_WAIT. */
#define PROBE_FIRST_WAIT 4
#define PROBE_MAX_WAIT 256

void tram_spec_record_init(tram_spec_record *r)
{
    *r = (tram_spec_record){.shadow = -1, .wait = PROBE_FIRST_WAIT, .backoff = PROBE_FIRST_WAIT};
}

void tram_spec_record_add(tram_spec_record *r, int accepted, int proposed)
{
    int tried = TRAM_MIN(accepted + 1, proposed);
    for (int i = 0; i < tried; i++) {
        r->tries[i] = r->tries[i] * RECORD_DECAY + 1;
        r->hits[i] = r->hits[i] * RECORD_DECAY + (float)(i < accepted);
    }
}

/* r_i from r_{i-1} (prev). */
static double next_rate(const tram_spec_record *r, int i, double prev)
{
    return (r->hits[i] + ACCEPT_PRIOR * prev) / (r->tries[i] + ACCEPT_PRIOR);
}

double tram_spec_acceptance(const tram_spec_record *r, int i)
{
    double rate = 0.5;
    for (int p = 0; p <= i; p++)
        rate = next_rate(r, p, rate);
    return rate;
}

double tram_spec_gain(const tram_spec_record *r, int j)
{
    double rate = 0.5, reach = 1, g = 0;
    for (int i = 0; i < j; i++) {
        rate = next_rate(r, i, rate);
        g += reach *= rate;
    }
    return g;
}

int tram_spec_best(const tram_spec_record *r, int proposed, const tram_step_cost *c, double tokens, double yield,
                   const tram_draft_price *price, double *gain)
{
    *gain = 0;
    /* with no line, every step counts as 1 s and yields only its drafts */
    int best = 0;
    double fixed = price && c->fitted ? price->fixed : 0, per_draft = price && c->fitted ? price->per_draft : 0;
    double base = c->fitted ? yield : 0, now = c->fitted ? tram_step_cost_at(c, tokens) : 1;
    if (now <= 0)
        return 0; /* a line that gives a step no time cannot price its drafts */
    double rate = 0.5, reach = 1, g = 0, best_speed = base / (now + fixed);
    /* T taken as never falling with n: a size measured slow (a noisy step,
     * kept until that size runs again) must not make the larger sizes not
     * yet measured look cheaper, or the rule would go past it */
    double then = now;
    for (int j = 1; j <= proposed; j++) {
        rate = next_rate(r, j - 1, rate);
        g += reach *= rate;
        if (c->fitted)
            then = fmax(then, tram_step_cost_at(c, tokens + j));
        double speed = (base + g) / (then + fixed + j * per_draft);
        if (speed > best_speed) {
            best_speed = speed;
            best = j;
            *gain = g;
        }
    }
    return best;
}

int tram_spec_choose(tram_spec_record *r, int proposed, const tram_step_cost *c, double tokens, double yield,
                     const tram_draft_price *price, double *gain)
{
    int best = tram_spec_best(r, proposed, c, tokens, yield, price, gain);
    if (best > 0) {
        r->wait = r->backoff = PROBE_FIRST_WAIT;
        return best;
    }
    if (proposed < 1 || --r->wait > 0)
        return 0;
    r->backoff = TRAM_MIN(2 * r->backoff, PROBE_MAX_WAIT);
    r->wait = r->backoff;
    *gain = tram_spec_gain(r, 1);
    return 1;
}

/* The tokens a step of depth D is expected to yield per second: the
 * sequences choose in turn as the scheduler has them choose, then the step
 * is costed at its passes' real sizes (pass d runs the sequences drafting
 * deeper than d). */
static double depth_speed(const tram_spec_record *const *recs, const int *proposed, int num,
                          const tram_step_cost *c, const tram_step_cost *pass, double tokens, double yield,
                          int depth)
{
    tram_draft_price price = tram_pass_price(pass, depth);
    int deeper[TRAM_SPEC_MAX_TOKENS] = {0};
    for (int i = 0; i < num; i++) {
        double gain;
        int j = tram_spec_best(recs[i], TRAM_MIN(proposed[i], depth), c, tokens, yield, &price, &gain);
        tokens += j;
        yield += gain;
        price.fixed += j * price.per_draft;
        for (int d = 0; d < j; d++)
            deeper[d]++;
    }
    double t = tram_step_cost_at(c, tokens);
    for (int d = 0; d < depth; d++)
        t += tram_pass_cost_at(pass, deeper[d]);
    return t > 0 ? yield / t : 0;
}

int tram_spec_depth(const tram_spec_record *const *recs, const int *proposed, int num, const tram_step_cost *c,
                    const tram_step_cost *pass, double tokens, double yield)
{
    int most = 0, best = 0;
    for (int i = 0; i < num; i++)
        most = TRAM_MAX(most, TRAM_MIN(proposed[i], TRAM_SPEC_MAX_TOKENS));
    double now = tram_step_cost_at(c, tokens), best_speed = now > 0 ? yield / now : 0;
    for (int depth = 1; depth <= most; depth++) {
        double speed = depth_speed(recs, proposed, num, c, pass, tokens, yield, depth);
        if (speed > best_speed) {
            best_speed = speed;
            best = depth;
        }
    }
    return best;
}

/* ---------------------------------------------------------------- the interface */

int tram_proposer_create(tram_proposer **out, const tram_spec_config *c, const tram_draft_env *env,
                         tram_error *err)
{
    *out = NULL;
    if (tram_spec_config_check(c, err))
        return -1;
    if (!c->method[0])
        return 0;
    if (env->file)
        return tram_draft_proposer_create(out, c->method, env, err);
    return ngram_create(out, c, err);
}

void tram_proposer_destroy(tram_proposer *p)
{
    if (p)
        p->destroy(p);
}
