/* spec.c — the proposers of speculative decoding (see spec.h). */
#include "engine/spec.h"

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

/* Each new verification counts for a tenth of the record. */
#define RECORD_DECAY 0.9f
/* A step's time counts for a twentieth of the line. */
#define COST_DECAY 0.95
/* Below this variance of the recent token counts the line is not fitted. */
#define COST_MIN_VARIANCE 0.25

void tram_spec_record_init(tram_spec_record *r) { *r = (tram_spec_record){.shadow = -1}; }

void tram_spec_record_add(tram_spec_record *r, int accepted, int proposed)
{
    r->hits = r->hits * RECORD_DECAY + (float)accepted;
    r->misses = r->misses * RECORD_DECAY + (float)(accepted < proposed);
}

double tram_spec_acceptance(const tram_spec_record *r)
{
    return (r->hits + 1.0) / (r->hits + r->misses + 2.0);
}

void tram_step_cost_add(tram_step_cost *c, int tokens, double seconds)
{
    double n = tokens;
    *c = (tram_step_cost){
        .w = c->w * COST_DECAY + 1,
        .n = c->n * COST_DECAY + n,
        .t = c->t * COST_DECAY + seconds,
        .nn = c->nn * COST_DECAY + n * n,
        .nt = c->nt * COST_DECAY + n * seconds,
        .bare = c->bare,
    };
}

int tram_step_cost_line(const tram_step_cost *c, double *a, double *b)
{
    if (c->w <= 0)
        return 0;
    double mn = c->n / c->w, mt = c->t / c->w, var = c->nn / c->w - mn * mn;
    if (var < COST_MIN_VARIANCE)
        return 0;
    *b = (c->nt / c->w - mn * mt) / var;
    *a = mt - *b * mn;
    return 1;
}

int tram_step_cost_probe(tram_step_cost *c)
{
    double a, b;
    c->bare = !tram_step_cost_line(c, &a, &b) && !c->bare;
    return c->bare;
}

/* The extra time of j more tokens, as a share of the step's, from the line
 * (a noisy fit that slopes down counts as free drafts; one that gives a step
 * no time counts as nothing but drafts). */
static double extra_share(double a, double b, double tokens, int j)
{
    double slope = fmax(b, 0), base = a + slope * tokens;
    return base > 0 ? slope * j / base : INFINITY;
}

double tram_spec_gain(const tram_spec_record *r, int j)
{
    double alpha = tram_spec_acceptance(r), g = 0, power = 1;
    for (int i = 0; i < j; i++)
        g += power *= alpha;
    return g;
}

int tram_spec_choose(const tram_spec_record *r, int proposed, const tram_step_cost *c, double tokens,
                     double yield, double *gain)
{
    double alpha = tram_spec_acceptance(r), a, b, g = 0, power = 1, best_net = 0;
    int fitted = tram_step_cost_line(c, &a, &b), best = 0;
    *gain = 0;
    for (int j = 1; j <= proposed; j++) {
        power *= alpha;
        g += power;
        double net = fitted ? g - yield * extra_share(a, b, tokens, j) : g;
        if (net > best_net) {
            best_net = net;
            best = j;
            *gain = g;
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
