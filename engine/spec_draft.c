/* spec_draft.c — drafting with a model (see spec.h): the quantized
 * self-draft, the target's own file run with its GGUF blocks kept
 * (--weight-format native), several times cheaper to read than the f32
 * target (being the same weights, its guesses are mostly the target's); or a
 * separate, smaller model with the same vocabulary.  The verifier keeps the
 * output the target's.
 *
 * Its KV pool has as many blocks as the target's and is indexed by the
 * target's block tables, so the block manager hands out both at once and a
 * rollback of the table rolls both back.  Each sequence says how many of
 * its tokens the draft holds (draft_computed): the draft catches up from
 * there (the whole prompt the first time, the accepted drafts' last one
 * after a run of full acceptance), then runs one token per guess. */
#include "engine/spec.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tram_proposer base;
    tram_model *model;
    int vocab, max_tokens, block_size, max_blocks_per_seq;
    int32_t *ids, *pos, *slots;  /* [max_tokens]: one pass's tokens */
    float *logits;               /* one row of the draft's logits */
} draft_proposer;

static int32_t argmax(const float *row, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* Runs positions [from, to) of the sequence, its tokens then the guesses so
 * far, through the draft in passes of at most max_tokens; the logits are
 * the last position's. */
static int run_span(draft_proposer *d, const tram_propose_seq *s, const int32_t *guesses, int from, int to,
                    tram_error *err)
{
    int bs = d->block_size;
    while (from < to) {
        int n = TRAM_MIN(to - from, d->max_tokens);
        for (int i = 0; i < n; i++) {
            int p = from + i;
            d->ids[i] = p < s->n ? s->tokens[p] : guesses[p - s->n];
            d->pos[i] = p;
            d->slots[i] = s->table->blocks[p / bs] * bs + p % bs;
        }
        int32_t query_start[2] = {0, n}, seq_len = from + n, row = n - 1;
        tram_batch b = {.num_tokens = n, .num_seqs = 1, .token_ids = d->ids, .positions = d->pos,
                        .slot_mapping = d->slots, .query_start = query_start, .seq_lens = &seq_len,
                        .block_tables = s->table->blocks, .max_blocks_per_seq = d->max_blocks_per_seq,
                        .logits_rows = &row, .num_logits = 1};
        if (tram_model_forward(d->model, &b, d->logits, err))
            return -1;
        from += n;
    }
    return 0;
}

static int draft_propose(tram_proposer *p, const tram_propose_seq *s, int max_k, int32_t *out, tram_error *err)
{
    draft_proposer *d = (draft_proposer *)p;
    int from = TRAM_MIN(*s->draft_computed, s->n - 1);
    for (int j = 0; j < max_k; j++) {
        if (run_span(d, s, out, from, s->n + j, err)) {
            *s->draft_computed = 0;
            return -1;
        }
        out[j] = argmax(d->logits, d->vocab);
        from = s->n + j;
    }
    /* the last guess was drawn, not run */
    *s->draft_computed = s->n + max_k - 1;
    return max_k;
}

static void draft_destroy(tram_proposer *p)
{
    draft_proposer *d = (draft_proposer *)p;
    tram_model_destroy(d->model);
    free(d->ids);
    free(d->pos);
    free(d->slots);
    free(d->logits);
    free(d);
}

int tram_spec_open_draft(tram_model_file **out, const tram_spec_config *c, int dummy,
                         const tram_model_config *target, int max_model_len, tram_error *err)
{
    *out = NULL;
    if (strcmp(c->method, "draft_model"))
        return 0;
    if (dummy ? tram_model_file_open_dummy(out, c->model, err) : tram_model_file_open(out, c->model, err))
        return -1;
    const tram_model_config *d = tram_model_file_config(*out);
    int rc = d->vocab_size != target->vocab_size
                 ? tram_fail(err, "speculative_config.model: the draft's vocabulary has %d tokens and the "
                                  "target's %d; a draft model must share the target's tokenizer",
                             d->vocab_size, target->vocab_size)
             : d->max_seq_len > 0 && d->max_seq_len < max_model_len
                 ? tram_fail(err, "speculative_config.model: the draft's context of %d tokens is shorter than "
                                  "max_model_len %d", d->max_seq_len, max_model_len)
                 : 0;
    if (rc) {
        tram_model_file_close(*out);
        *out = NULL;
    }
    return rc;
}

int tram_draft_proposer_create(tram_proposer **out, const char *method, const tram_draft_env *env,
                               tram_error *err)
{
    draft_proposer *d = tram_calloc(1, sizeof(*d), err);
    if (!d)
        return -1;
    *d = (draft_proposer){
        .base = {.name = method, .runs_model = 1, .propose = draft_propose, .destroy = draft_destroy},
        .vocab = env->vocab,
        .max_tokens = env->lim.max_tokens,
        .block_size = env->lim.block_size,
        .max_blocks_per_seq = env->lim.max_blocks_per_seq,
    };
    tram_model_limits lim = env->lim;
    lim.max_loras = 0;
    lim.max_lora_rank = 0;
    size_t t = (size_t)d->max_tokens;
    d->ids = tram_calloc(t, sizeof(int32_t), err);
    d->pos = tram_calloc(t, sizeof(int32_t), err);
    d->slots = tram_calloc(t, sizeof(int32_t), err);
    d->logits = tram_calloc((size_t)tram_model_file_config(env->file)->vocab_size, sizeof(float), err);
    if (!d->ids || !d->pos || !d->slots || !d->logits ||
        tram_model_create(&d->model, env->file, env->be, &lim, err)) {
        draft_destroy(&d->base);
        return -1;
    }
    *out = &d->base;
    return 0;
}
