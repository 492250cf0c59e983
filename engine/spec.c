/* spec.c — the proposers of speculative decoding (see spec.h). */
#include "engine/spec.h"

#include <stdlib.h>
#include <string.h>

int tram_spec_config_check(const tram_spec_config *c, tram_error *err)
{
    if (!c->method[0])
        return 0;
    if (strcmp(c->method, "ngram"))
        return tram_fail(err, "speculative_config.method: \"%s\" is not supported (ngram)", c->method);
    if (c->num_speculative_tokens < 1 || c->num_speculative_tokens > TRAM_SPEC_MAX_TOKENS)
        return tram_fail(err, "speculative_config.num_speculative_tokens must be in [1, %d], got %d",
                         TRAM_SPEC_MAX_TOKENS, c->num_speculative_tokens);
    if (c->prompt_lookup_min < 1 || c->prompt_lookup_max < c->prompt_lookup_min)
        return tram_fail(err, "speculative_config: prompt_lookup_min (%d) must be >= 1 and at most "
                              "prompt_lookup_max (%d)", c->prompt_lookup_min, c->prompt_lookup_max);
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

static int ngram_propose(tram_proposer *p, const int32_t *tokens, int n, int max_k, int32_t *out)
{
    const ngram_proposer *g = (const ngram_proposer *)p;
    return tram_ngram_propose(tokens, n, g->lookup_min, g->lookup_max, max_k, out);
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

/* ---------------------------------------------------------------- the interface */

int tram_proposer_create(tram_proposer **out, const tram_spec_config *c, tram_error *err)
{
    *out = NULL;
    if (tram_spec_config_check(c, err))
        return -1;
    if (!c->method[0])
        return 0;
    return ngram_create(out, c, err);
}

void tram_proposer_destroy(tram_proposer *p)
{
    if (p)
        p->destroy(p);
}
