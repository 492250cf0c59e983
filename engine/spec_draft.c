/* spec_draft.c — drafting with a model (see spec.h): the quantized
 * self-draft, the target's own file run with its GGUF blocks kept
 * (--weight-format native), several times cheaper to read than the f32
 * target, or on CUDA quantized to int8 (W8A8) at load for the bf16 target
 * (being the same weights, its guesses are mostly the target's); or a
 * separate, smaller model with the same vocabulary.  The verifier keeps the
 * output the target's.
 *
 * A separate model's KV pool has as many blocks as the target's and is
 * indexed by the target's block tables, so the block manager hands out both
 * at once and a rollback of the table rolls both back.  Each sequence says
 * how many of its tokens the draft holds (draft_computed): the draft
 * catches up from there (the whole prompt the first time, the accepted
 * drafts' last one after a run of full acceptance), then runs one token
 * per guess.  The self-draft has the target's shape and reads the target's
 * own pool instead: the target holds all but a decoding sequence's last
 * token, so the draft never catches up on a prompt, and what it writes
 * (the last token, its guesses) the target's verifying pass overwrites
 * with its own before any of its layers reads it, so the output stays the
 * target's; when the target's pool is resized (fitted to GPU memory), the
 * draft reads the new one.  All the
 * sequences of a step draft together: guess j of each is one pass over
 * their spans, the catch-ups and guesses concatenated in one unified batch
 * with a query range and block table each, so that reading the draft's
 * weights is paid once per guess position, not once per sequence. */
#include "engine/spec.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_sampling.h"

typedef struct {
    tram_proposer base;
    tram_model *model;
    int vocab, model_vocab;      /* guesses among the first vocab of the model's logits */
    int max_tokens, max_seqs;    /* one pass's most tokens and sequences */
    int block_size, max_blocks_per_seq;
    const tram_model *kv_from;   /* the target whose KV pool it reads (the self-draft), or NULL */
    int32_t *ids, *pos, *slots;  /* [max_tokens]: one pass's tokens */
    int32_t *query_start;        /* [max_seqs + 1] */
    int32_t *seq_lens;           /* [max_seqs] */
    int32_t *tables;             /* [max_seqs][max_blocks_per_seq] */
    int32_t *rows, *row_seq;     /* [max_seqs]: the logits rows drawn from, whose sequence */
    float *logits;               /* [max_seqs][model_vocab] */
} draft_proposer;

/* What one pass holds so far. */
typedef struct {
    int tokens, seqs, rows;
} draft_pass;

/* Adds to the pass what room is left of the positions of s that the draft
 * has not run before guess j (its tokens, then its guesses so far), which is
 * s's i-th; returns 1 when they all fit, and the last one's logits are drawn
 * from. */
static int add_span(draft_proposer *d, draft_pass *p, tram_propose_seq *s, int i, int j)
{
    int bs = d->block_size, from = *s->draft_computed, to = s->n + j;
    int n = TRAM_MIN(to - from, d->max_tokens - p->tokens);
    for (int t = 0; t < n; t++) {
        int q = from + t, at = p->tokens + t;
        d->ids[at] = q < s->n ? s->tokens[q] : s->out[q - s->n];
        d->pos[at] = q;
        d->slots[at] = s->table->blocks[q / bs] * bs + q % bs;
    }
    p->tokens += n;
    d->query_start[p->seqs + 1] = p->tokens;
    d->seq_lens[p->seqs] = from + n;
    memcpy(d->tables + (size_t)p->seqs * d->max_blocks_per_seq, s->table->blocks,
           (size_t)((from + n + bs - 1) / bs) * sizeof(int32_t));
    p->seqs++;
    *s->draft_computed = from + n;
    if (from + n < to)
        return 0;
    d->rows[p->rows] = p->tokens - 1;
    d->row_seq[p->rows++] = i;
    return 1;
}

static int run_pass(draft_proposer *d, const draft_pass *p, tram_propose_seq *seqs, int j, tram_error *err)
{
    tram_batch b = {.num_tokens = p->tokens, .num_seqs = p->seqs, .token_ids = d->ids, .positions = d->pos,
                    .slot_mapping = d->slots, .query_start = d->query_start, .seq_lens = d->seq_lens,
                    .block_tables = d->tables, .max_blocks_per_seq = d->max_blocks_per_seq,
                    .logits_rows = d->rows, .num_logits = p->rows};
    double t0 = tram_now();
    if (tram_model_forward(d->model, &b, d->logits, err))
        return -1;
    if (d->base.pass_cost)
        tram_step_cost_add(d->base.pass_cost, p->tokens, tram_now() - t0);
    for (int r = 0; r < p->rows; r++)
        seqs[d->row_seq[r]].out[j] = tram_argmax(d->logits + (size_t)r * d->model_vocab, d->vocab);
    return 0;
}

/* Guess j of every sequence that wants one: the sequences' spans packed
 * into as few passes as max_tokens and max_seqs allow (a long catch-up
 * continues in the next pass, as a chunked prefill does). */
static int guess_position(draft_proposer *d, tram_propose_seq *seqs, int num_seqs, int j, tram_error *err)
{
    int i = 0;
    while (i < num_seqs) {
        draft_pass p = {0};
        d->query_start[0] = 0;
        for (; i < num_seqs && p.tokens < d->max_tokens && p.seqs < d->max_seqs; i++)
            if (j < seqs[i].max_k && !add_span(d, &p, &seqs[i], i, j))
                break;
        if (p.seqs && run_pass(d, &p, seqs, j, err))
            return -1;
    }
    return 0;
}

/* The draft catches each sequence up from what it holds (the whole prompt
 * the first time), then runs one token per guess; the last guess is drawn,
 * not run. */
static int draft_propose(tram_proposer *p, tram_propose_seq *seqs, int num_seqs, tram_error *err)
{
    draft_proposer *d = (draft_proposer *)p;
    int most = 0;
    for (int i = 0; i < num_seqs; i++) {
        tram_propose_seq *s = &seqs[i];
        *s->draft_computed = d->kv_from ? s->n - 1 : TRAM_MIN(*s->draft_computed, s->n - 1);
        s->got = 0;
        most = TRAM_MAX(most, s->max_k);
    }
    for (int j = 0; j < most; j++)
        if (guess_position(d, seqs, num_seqs, j, err)) {
            for (int i = 0; i < num_seqs; i++)
                *seqs[i].draft_computed = 0;
            return -1;
        }
    for (int i = 0; i < num_seqs; i++)
        seqs[i].got = seqs[i].max_k;
    return 0;
}

/* A pool of its own is resized; the self-draft reads the target's again
 * (resized, it lies elsewhere). */
static int draft_resize_kv(tram_proposer *p, int num_blocks, tram_error *err)
{
    draft_proposer *d = (draft_proposer *)p;
    return d->kv_from ? tram_model_share_kv(d->model, d->kv_from, err)
                      : tram_model_resize_kv(d->model, num_blocks, err);
}

static void draft_destroy(tram_proposer *p)
{
    draft_proposer *d = (draft_proposer *)p;
    tram_model_destroy(d->model);
    TRAM_FREE_ALL(d->ids, d->pos, d->slots, d->query_start, d->seq_lens, d->tables, d->rows, d->row_seq,
                  d->logits, d);
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
        .base = {.name = method, .runs_model = 1, .propose = draft_propose, .destroy = draft_destroy,
                 .resize_kv = draft_resize_kv},
        .vocab = env->vocab,
        .model_vocab = tram_model_file_config(env->file)->vocab_size,
        .max_tokens = env->lim.max_tokens,
        .max_seqs = TRAM_MIN(env->lim.max_seqs, env->max_batch),
        .block_size = env->lim.block_size,
        .max_blocks_per_seq = env->lim.max_blocks_per_seq,
        .kv_from = env->kv_from,
    };
    tram_model_limits lim = env->lim;
    lim.max_loras = 0;
    lim.max_lora_rank = 0;
    lim.max_logits = 0;  /* its passes download their rows (tram_model_forward) */
    if (env->kv_from)
        lim.num_blocks = 1; /* freed for the target's */
    size_t t = (size_t)d->max_tokens, n = (size_t)d->max_seqs;
    d->ids = tram_calloc(t, sizeof(int32_t), err);
    d->pos = tram_calloc(t, sizeof(int32_t), err);
    d->slots = tram_calloc(t, sizeof(int32_t), err);
    d->query_start = tram_calloc(n + 1, sizeof(int32_t), err);
    d->seq_lens = tram_calloc(n, sizeof(int32_t), err);
    d->tables = tram_calloc(n * (size_t)d->max_blocks_per_seq, sizeof(int32_t), err);
    d->rows = tram_calloc(n, sizeof(int32_t), err);
    d->row_seq = tram_calloc(n, sizeof(int32_t), err);
    d->logits = tram_calloc(n * (size_t)d->model_vocab, sizeof(float), err);
    if (!d->ids || !d->pos || !d->slots || !d->query_start || !d->seq_lens || !d->tables || !d->rows ||
        !d->row_seq || !d->logits || tram_model_create(&d->model, env->file, env->be, &lim, err) ||
        (env->kv_from && tram_model_share_kv(d->model, env->kv_from, err))) {
        draft_destroy(&d->base);
        return -1;
    }
    *out = &d->base;
    return 0;
}
