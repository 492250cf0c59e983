#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sequence.h"

void tram_sampling_params_init(tram_sampling_params *p)
{
    *p = (tram_sampling_params){
        .n = 1,
        .temperature = 1.0f,
        .top_p = 1.0f,
        .repetition_penalty = 1.0f,
        .max_tokens = 16,
        .logprobs = -1,
        .prompt_logprobs = -1,
        .skip_special_tokens = 1,
    };
}

/* ---------------------------------------------------------------- validation */

#define BAD(name, ...) (*param = name, tram_fail(err, __VA_ARGS__))

static int check_ranges(const tram_sampling_params *p, int max_num_seqs, const char **param,
                        tram_error *err)
{
    int max_n = TRAM_MIN(TRAM_MAX_N, max_num_seqs);
    if (p->n < 1 || p->n > max_n)
        return BAD("n", "n must be between 1 and %d, got %d", max_n, p->n);
    if (!isfinite(p->temperature) || p->temperature < 0)
        return BAD("temperature", "temperature must be >= 0, got %g", p->temperature);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return BAD("top_p", "top_p must be in (0, 1], got %g", p->top_p);
    if (p->top_k < -1)
        return BAD("top_k", "top_k must be -1 or 0 (off) or positive, got %d", p->top_k);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return BAD("min_p", "min_p must be in [0, 1], got %g", p->min_p);
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0)
        return BAD("repetition_penalty", "repetition_penalty must be > 0, got %g",
                   p->repetition_penalty);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return BAD("presence_penalty", "presence_penalty must be in [-2, 2], got %g",
                   p->presence_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return BAD("frequency_penalty", "frequency_penalty must be in [-2, 2], got %g",
                   p->frequency_penalty);
    if (p->max_tokens < 0)
        return BAD("max_tokens", "max_tokens must be >= 1 (or 0 for no limit), got %d", p->max_tokens);
    if (p->min_tokens < 0 || (p->max_tokens > 0 && p->min_tokens > p->max_tokens))
        return BAD("min_tokens", "min_tokens must be in [0, max_tokens], got %d", p->min_tokens);
    if (p->logprobs < -1 || p->logprobs > TRAM_MAX_LOGPROBS)
        return BAD("logprobs", "logprobs must be in [0, %d], got %d", TRAM_MAX_LOGPROBS, p->logprobs);
    if (p->prompt_logprobs < -1 || p->prompt_logprobs > TRAM_MAX_LOGPROBS)
        return BAD("prompt_logprobs", "prompt_logprobs must be in [0, %d], got %d",
                   TRAM_MAX_LOGPROBS, p->prompt_logprobs);
    return 0;
}

static int check_arrays(const tram_sampling_params *p, int vocab, const char **param,
                        tram_error *err)
{
    if (p->num_logit_bias < 0 || (p->num_logit_bias && !p->logit_bias))
        return BAD("logit_bias", "logit_bias: %d entries but no array", p->num_logit_bias);
    for (int i = 0; i < p->num_logit_bias; i++) {
        const tram_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= vocab)
            return BAD("logit_bias", "logit_bias: token id %d is outside the vocabulary [0, %d)",
                       b->token, vocab);
        if (!(b->bias >= -100 && b->bias <= 100))
            return BAD("logit_bias", "logit_bias: bias for token %d must be in [-100, 100], got %g",
                       b->token, b->bias);
    }
    if (p->num_stop < 0 || (p->num_stop && !p->stop))
        return BAD("stop", "stop: %d strings but no array", p->num_stop);
    for (int i = 0; i < p->num_stop; i++)
        if (!p->stop[i] || !p->stop[i][0])
            return BAD("stop", "stop: string %d is empty", i);
    if (p->num_stop_token_ids < 0 || (p->num_stop_token_ids && !p->stop_token_ids))
        return BAD("stop_token_ids", "stop_token_ids: %d ids but no array", p->num_stop_token_ids);
    for (int i = 0; i < p->num_stop_token_ids; i++)
        if (p->stop_token_ids[i] < 0 || p->stop_token_ids[i] >= vocab)
            return BAD("stop_token_ids", "stop_token_ids: %d is outside the vocabulary [0, %d)",
                       p->stop_token_ids[i], vocab);
    return 0;
}

int tram_params_check(const tram_sampling_params *p, int vocab, int max_num_seqs,
                      const char **param, tram_error *err)
{
    const char *unused;
    if (!param)
        param = &unused;
    return check_ranges(p, max_num_seqs, param, err) || check_arrays(p, vocab, param, err) ? -1 : 0;
}

/* ---------------------------------------------------------------- lifetime */

/* Copies n elements of src into dst (if dst is not NULL) and returns dst;
 * src may be NULL when n is 0, which memcpy itself must never be handed. */
static void *copy_array(void *dst, const void *src, int n, size_t size)
{
    if (dst && n > 0)
        memcpy(dst, src, (size_t)n * size);
    return dst;
}

static int copy_params(tram_request *r, const tram_sampling_params *p, tram_error *err)
{
    r->p = *p;
    if (p->grammar)   /* first, so that tram_request_free always has one to release */
        tram_grammar_retain(p->grammar);
    if (r->p.top_k < 0)
        r->p.top_k = 0;
    r->stop = tram_calloc((size_t)p->num_stop, sizeof(char *), err);
    r->bias = copy_array(tram_calloc((size_t)p->num_logit_bias, sizeof(*r->bias), err),
                         p->logit_bias, p->num_logit_bias, sizeof(*r->bias));
    r->stop_ids = copy_array(tram_calloc((size_t)p->num_stop_token_ids, sizeof(int32_t), err),
                             p->stop_token_ids, p->num_stop_token_ids, sizeof(int32_t));
    if (!r->stop || !r->bias || !r->stop_ids)
        return -1;
    for (int i = 0; i < p->num_stop; i++)
        if (!(r->stop[i] = strdup(p->stop[i])))
            return tram_fail(err, "out of memory copying stop strings");
    r->p.stop = (const char *const *)r->stop;
    r->p.logit_bias = r->bias;
    r->p.stop_token_ids = r->stop_ids;
    return 0;
}

/* EOS and end-of-turn tokens (unless ignored) plus the stop tokens: what
 * min_tokens holds back. */
static int make_banned(tram_request *r, const tram_tokenizer *tok, tram_error *err)
{
    int n_eog = 0;
    const int32_t *eog = tok ? tram_tokenizer_eog_ids(tok, &n_eog) : NULL;
    if (r->p.ignore_eos)
        n_eog = 0;
    r->banned = tram_calloc((size_t)(n_eog + r->p.num_stop_token_ids), sizeof(int32_t), err);
    if (!r->banned)
        return -1;
    copy_array(r->banned, eog, n_eog, sizeof(int32_t));
    copy_array(r->banned + n_eog, r->stop_ids, r->p.num_stop_token_ids, sizeof(int32_t));
    r->num_banned = n_eog + r->p.num_stop_token_ids;
    return 0;
}

static int init_seq(tram_request *r, int i, const tram_request_env *env, int priority,
                    tram_error *err)
{
    tram_seq *s = &r->seqs[i];
    s->req = r;
    s->sample_index = i;
    s->priority = priority;
    s->arrival = env->arrival;
    s->seats = i == 0 ? r->n : 1;
    s->stop_index = -1;
    tram_spec_record_init(&s->spec);
    s->status = TRAM_SEQ_WAITING;
    s->tokens = tram_calloc((size_t)env->max_model_len, sizeof(int32_t), err);
    if (!s->tokens || tram_block_table_init(&s->table, env->max_blocks_per_seq, err))
        return -1;
    if (env->tok && tram_detok_create(&s->detok, env->tok, r->p.skip_special_tokens,
                                      r->p.stop, r->p.num_stop, err))
        return -1;
    return r->p.grammar ? tram_matcher_create(&s->matcher, r->p.grammar, err) : 0;
}

static int alloc_prompt_logprobs(tram_request *r, int prompt_len, tram_error *err)
{
    if (r->p.prompt_logprobs < 0)
        return 0;
    r->prompt_lp = tram_calloc((size_t)prompt_len, sizeof(*r->prompt_lp), err);
    r->prompt_top = tram_calloc((size_t)prompt_len * TRAM_MAX(r->p.prompt_logprobs, 1),
                                sizeof(*r->prompt_top), err);
    return r->prompt_lp && r->prompt_top ? 0 : -1;
}

int tram_request_create(tram_request **out, uint64_t id, const tram_sampling_params *p,
                        const int32_t *prompt, int prompt_len, int priority,
                        const tram_request_env *env, tram_error *err)
{
    *out = NULL;
    tram_request *r = tram_calloc(1, sizeof(*r), err);
    if (!r)
        return -1;
    r->id = id;
    r->n = p->n;
    r->num_seqs = 1;
    r->seed = p->has_seed ? p->seed : env->seed;
    r->skip_cache = p->prompt_logprobs >= 0;  /* every prompt row's logits */
    int room = env->max_model_len - prompt_len;
    r->max_tokens = p->max_tokens > 0 ? TRAM_MIN(p->max_tokens, room) : room;
    r->seqs = tram_calloc((size_t)p->n, sizeof(tram_seq), err);
    if (!r->seqs || copy_params(r, p, err) || make_banned(r, env->tok, err) ||
        alloc_prompt_logprobs(r, prompt_len, err))
        goto fail;
    for (int i = 0; i < r->n; i++)
        if (init_seq(r, i, env, priority, err))
            goto fail;
    memcpy(r->seqs[0].tokens, prompt, (size_t)prompt_len * sizeof(int32_t));
    r->seqs[0].num_tokens = r->seqs[0].prompt_len = prompt_len;
    *out = r;
    return 0;
fail:
    tram_request_free(r);
    return -1;
}

void tram_request_free(tram_request *r)
{
    if (!r)
        return;
    for (int i = 0; r->seqs && i < r->n; i++) {
        free(r->seqs[i].tokens);
        tram_block_table_free(&r->seqs[i].table);
        tram_detok_free(r->seqs[i].detok);
        tram_matcher_free(r->seqs[i].matcher);
    }
    for (int i = 0; r->stop && i < r->p.num_stop; i++)
        free(r->stop[i]);
    TRAM_FREE_ALL(r->seqs, r->stop, r->bias, r->stop_ids, r->banned, r->prompt_lp, r->prompt_top, r->pool,
                  r->embedding);
    tram_grammar_release(r->p.grammar);
    free(r);
}
