/* cuda_runner.c — the engine's CUDA-only parts (see cuda_runner.h). */
#include "engine/cuda_runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"
#include "kernels/cuda/launch_plan.h"

#define NO_CUDA "device cuda: this binary was built without CUDA (`make cuda` builds bin/tram-cuda)"

int tram_cuda_runner_probe(tram_error *err)
{
#ifdef TRAM_CUDA
    return tram_cuda_probe(0, err);
#else
    return tram_fail(err, NO_CUDA);
#endif
}

static int device_memory(tram_backend *be, size_t *free_bytes, size_t *total_bytes, tram_error *err)
{
#ifdef TRAM_CUDA
    tram_cuda_device_info info;
    if (tram_cuda_device_info_of(be, &info, err))
        return -1;
    *free_bytes = info.free_bytes;
    *total_bytes = info.total_bytes;
    return 0;
#else
    (void)be, (void)free_bytes, (void)total_bytes;
    return tram_fail(err, NO_CUDA);
#endif
}

/* The profiling batch: min(max_seqs, max_tokens) sequences of equal length
 * (at most max_model_len) from position 0, each on blocks of its own. */
static void profile_shape(const tram_cuda_pool_spec *s, int *seqs, int *per_seq)
{
    *seqs = s->max_seqs < s->max_tokens ? s->max_seqs : s->max_tokens;
    int per = s->max_tokens / *seqs;
    *per_seq = per < s->max_model_len ? per : s->max_model_len;
}

int tram_cuda_profile_blocks(const tram_cuda_pool_spec *s)
{
    int seqs, per;
    profile_shape(s, &seqs, &per);
    return seqs * ((per + s->block_size - 1) / s->block_size);
}

static int profile_forward(tram_ranks *ranks, const tram_cuda_pool_spec *s, tram_error *err)
{
    tram_model *m = tram_ranks_model(ranks, 0);
    int seqs, per, bs = s->block_size, mb = s->max_blocks_per_seq;
    profile_shape(s, &seqs, &per);
    int n = seqs * per, vocab = tram_model_config_of(m)->vocab_size;
    int32_t *ids = tram_calloc((size_t)4 * n, sizeof(int32_t), err);
    int32_t *seq = tram_calloc((size_t)3 * seqs + 1 + (size_t)seqs * mb, sizeof(int32_t), err);
    float *logits = tram_calloc((size_t)seqs * vocab, sizeof(float), err);
    int rc = -1;
    if (ids && seq && logits) {
        int32_t *pos = ids + n, *slots = pos + n, *qs = seq, *lens = qs + seqs + 1, *rows = lens + seqs;
        int32_t *tables = rows + seqs;
        for (int q = 0, next = 0; q < seqs; q++) {
            for (int j = 0; j < (per + bs - 1) / bs; j++)
                tables[q * mb + j] = next++;
            for (int p = 0; p < per; p++) {
                int t = q * per + p;
                ids[t] = t % vocab;
                pos[t] = p;
                slots[t] = tables[q * mb + p / bs] * bs + p % bs;
            }
            qs[q + 1] = (q + 1) * per;
            lens[q] = per;
            rows[q] = qs[q + 1] - 1;
        }
        tram_batch b = {.num_tokens = n, .num_seqs = seqs, .token_ids = ids, .positions = pos,
                        .slot_mapping = slots, .query_start = qs, .seq_lens = lens, .block_tables = tables,
                        .max_blocks_per_seq = mb, .logits_rows = rows, .num_logits = seqs};
        rc = tram_ranks_forward(ranks, &b, logits, err);
    }
    free(ids), free(seq), free(logits);
    return rc;
}

/* Rank 0 holds the most (the lm_head besides its part), so its GPU decides. */
int tram_cuda_fit_pool(tram_ranks *ranks, const tram_cuda_pool_spec *s, int *num_blocks, tram_error *err)
{
    tram_model *m = tram_ranks_model(ranks, 0);
    tram_backend *be = tram_ranks_backend(ranks, 0);
    size_t free_bytes = 0, total = 0;
    if (profile_forward(ranks, s, err) || device_memory(be, &free_bytes, &total, err))
        return -1;
    double block = (double)tram_model_kv_block_bytes(tram_model_config_of(m), s->block_size, be->act_bytes,
                                                     be->world_size, s->kv) + (double)s->draft_block_bytes;
    /* the profiling pool holds the profile's blocks and the reserved ones */
    double in_use = (double)(total - free_bytes) + (double)s->reserved_bytes -
                    (tram_cuda_profile_blocks(s) + s->reserved_blocks) * block;
    double budget = s->utilization * (double)total - in_use, blocks = budget / block - s->reserved_blocks;
    if (blocks < s->max_blocks_per_seq)
        return tram_fail(err, "the model does not fit: weights and activations take %.2f GiB of the "
                              "%.2f GiB that --gpu-memory-utilization %.2f allows, leaving room for %.0f KV "
                              "blocks where one sequence of max_model_len %d needs %d (lower "
                              "--max-model-len or --max-num-batched-tokens, or raise the utilization)",
                         in_use / (1 << 30), s->utilization * total / (1 << 30), s->utilization,
                         blocks > 0 ? blocks : 0, s->max_model_len, s->max_blocks_per_seq);
    *num_blocks = blocks > (1 << 30) ? 1 << 30 : (int)blocks;
    return 0;
}

/* ---------------------------------------------------------------- graphs: host logic */

/* 1 when a sequence of b uses a LoRA adapter. */
static int any_adapter(const tram_batch *b)
{
    for (int q = 0; b->seq_lora && q < b->num_seqs; q++)
        if (b->seq_lora[q] >= 0)
            return 1;
    return 0;
}

int tram_cuda_step_bucket(const tram_batch *b, int max_seqs)
{
    /* A step with an adapter runs eagerly: the LoRA launches depend on the
     * step's rows by slot (models/lora_slots.c groups them on the host), which
     * a graph captured once would freeze.  So graphs hold base rows only. */
    if (b->num_tokens != b->num_seqs || b->num_logits != b->num_seqs || any_adapter(b))
        return 0;
    for (int i = 0; i < b->num_logits; i++)
        if (b->logits_rows[i] != i)
            return 0;
    int bucket = tram_cuda_graph_bucket(b->num_seqs);
    return bucket > 0 && bucket <= max_seqs ? bucket : 0;
}

tram_batch tram_cuda_pad_batch(const tram_batch *b, int bucket, int pad_block, int block_size,
                               const tram_cuda_padded *p)
{
    int n = b->num_seqs, mb = b->max_blocks_per_seq;
    memcpy(p->token_ids, b->token_ids, (size_t)n * sizeof(int32_t));
    memcpy(p->positions, b->positions, (size_t)n * sizeof(int32_t));
    memcpy(p->slot_mapping, b->slot_mapping, (size_t)n * sizeof(int32_t));
    memcpy(p->query_start, b->query_start, (size_t)(n + 1) * sizeof(int32_t));
    memcpy(p->seq_lens, b->seq_lens, (size_t)n * sizeof(int32_t));
    /* only the columns the step uses: the rest is never read, and copying
     * max_model_len's worth per row would cost more than the step's own */
    int used = tram_batch_used_blocks(b, block_size);
    for (int i = 0; i < n; i++)
        memcpy(p->block_tables + (size_t)i * mb, b->block_tables + (size_t)i * mb, (size_t)used * sizeof(int32_t));
    for (int i = 0; i < bucket; i++)
        p->logits_rows[i] = i;
    /* Pad rows: token 0 at position 0 of the pad block, a context of itself;
     * no seq_lora, as no row of a padded (graph) step has an adapter. */
    for (int i = n; i < bucket; i++) {
        p->token_ids[i] = 0;
        p->positions[i] = 0;
        p->slot_mapping[i] = pad_block * block_size;
        p->query_start[i + 1] = i + 1;
        p->seq_lens[i] = 1;
        p->block_tables[(size_t)i * mb] = pad_block;
    }
    return (tram_batch){.num_tokens = bucket, .num_seqs = bucket, .token_ids = p->token_ids,
                        .positions = p->positions, .slot_mapping = p->slot_mapping,
                        .query_start = p->query_start, .seq_lens = p->seq_lens,
                        .block_tables = p->block_tables, .max_blocks_per_seq = mb,
                        .logits_rows = p->logits_rows, .num_logits = bucket};
}

/* ---------------------------------------------------------------- sampling: host logic */

int tram_cuda_sampling_of(const tram_seq *s, tram_cuda_sampling *sp, tram_logit_bias *bias, int *num_bias)
{
    const tram_request *r = s->req;
    const tram_sampling_params *p = &r->p;
    int nb = p->num_logit_bias + (tram_seq_holds_stops(s) ? r->num_banned : 0);
    if (p->logprobs >= 0 || r->num_seqs < r->n || tram_seq_wants_prompt_logprobs(s) || nb > TRAM_CUDA_MAX_BIAS)
        return 0;
    if (p->num_logit_bias > 0)
        memcpy(bias, p->logit_bias, (size_t)p->num_logit_bias * sizeof(*bias));
    for (int i = p->num_logit_bias; i < nb; i++)
        bias[i] = (tram_logit_bias){.token = r->banned[i - p->num_logit_bias], .bias = -INFINITY};
    *num_bias = nb;
    *sp = (tram_cuda_sampling){
        .p = tram_seq_sampler_row(s),
        .seat = -1,
        .num_bias = nb,
        .step = (uint64_t)s->sample_index << 32 | (uint32_t)(s->num_tokens - s->prompt_len),
    };
    return 1;
}

tram_cuda_sampling tram_cuda_sampling_ahead(const tram_seq *s, const tram_cuda_sampling *first, int j)
{
    const tram_request *r = s->req;
    tram_cuda_sampling sp = *first;
    sp.row = first->row + j;
    sp.step = first->step + (uint64_t)j;  /* the position is the low half, which a draft never carries over */
    if (s->num_tokens + j - s->prompt_len >= r->p.min_tokens)
        sp.num_bias = TRAM_MIN(first->num_bias, r->p.num_logit_bias);
    return sp;
}

uint64_t tram_cuda_seq_key(const tram_seq *s)
{
    return (s->arrival + 1) * (uint64_t)TRAM_MAX_N + (uint64_t)s->sample_index;
}

int tram_cuda_seat_for(tram_cuda_seat *seats, int num_seats, uint64_t key, int num_tokens, uint64_t step,
                       int *load)
{
    int pick = -1;
    for (int i = 0; i < num_seats; i++) {
        if (seats[i].key == key) {
            pick = i;
            break;
        }
        if (seats[i].used != step && (pick < 0 || seats[i].used < seats[pick].used))
            pick = i;
    }
    if (pick < 0)
        return -1;
    tram_cuda_seat *t = &seats[pick];
    *load = t->key != key || t->len != num_tokens;
    *t = (tram_cuda_seat){.key = key, .len = num_tokens + 1, .used = step};
    return pick;
}

/* ---------------------------------------------------------------- the runner */

#ifdef TRAM_CUDA

struct tram_cuda_runner {
    tram_backend *be;
    tram_cuda_runner_spec spec;
    tram_cuda_seat *seats;       /* [max_seqs] */
    uint64_t step;
    tram_cuda_sampling *params;  /* [max_rows] this step's device rows */
    int32_t *drafts;             /* [max_rows] the draft each row is checked against; -1: none */
    tram_cuda_verify_seq *vseqs; /* [max_seqs] the rows of each device sequence */
    int *vitem;                  /* [max_seqs] its item in the step */
    tram_logit_bias *bias;       /* [max_seqs * TRAM_CUDA_MAX_BIAS] their entries */
    int32_t *ids;                /* [max_rows] */
    int32_t *drawn;              /* [max_rows] token per logits row; -1: the host's */
    int32_t *pad_mem;
    tram_cuda_padded pad;
    const void *logits;          /* the model's device logits (tram_model_run) */
    const int32_t *mask_rows;    /* the step's token masks (tram_cuda_runner_set_masks) */
    const uint32_t *masks;
    int num_masks;
    tram_cuda_runner_stats stats;
};

static int runner_alloc(tram_cuda_runner *g, tram_error *err)
{
    size_t s = (size_t)g->spec.max_seqs, mb = (size_t)(g->spec.max_model_len + g->spec.block_size - 1) /
                                                g->spec.block_size;
    g->seats = tram_calloc(s, sizeof(*g->seats), err);
    size_t rows = (size_t)g->spec.max_rows;
    g->params = tram_calloc(rows, sizeof(*g->params), err);
    g->drafts = tram_calloc(rows, sizeof(*g->drafts), err);
    g->vseqs = tram_calloc(s, sizeof(*g->vseqs), err);
    g->vitem = tram_calloc(s, sizeof(*g->vitem), err);
    g->bias = tram_calloc(s * TRAM_CUDA_MAX_BIAS, sizeof(*g->bias), err);
    g->ids = tram_calloc(rows, sizeof(*g->ids), err);
    g->drawn = tram_calloc(rows, sizeof(*g->drawn), err);
    g->pad_mem = tram_calloc(6 * s + 1 + s * mb, sizeof(int32_t), err);
    if (!g->seats || !g->params || !g->drafts || !g->vseqs || !g->vitem || !g->bias || !g->ids || !g->drawn ||
        !g->pad_mem)
        return -1;
    int32_t *a = g->pad_mem;  /* ids, positions, slots, query_start (s + 1), lens, rows, then tables */
    g->pad = (tram_cuda_padded){
        .token_ids = a,
        .positions = a + s,
        .slot_mapping = a + 2 * s,
        .query_start = a + 3 * s,
        .seq_lens = a + 4 * s + 1,
        .logits_rows = a + 5 * s + 1,
        .block_tables = a + 6 * s + 1,
    };
    return 0;
}

void tram_cuda_runner_destroy(tram_cuda_runner *g)
{
    if (!g)
        return;
    TRAM_FREE_ALL(g->seats, g->params, g->drafts, g->vseqs, g->vitem, g->bias, g->ids, g->drawn, g->pad_mem, g);
}

int tram_cuda_runner_create(tram_cuda_runner **out, tram_backend *be, const tram_cuda_runner_spec *spec,
                            tram_error *err)
{
    tram_cuda_runner *g = tram_calloc(1, sizeof(*g), err);
    *out = NULL;
    if (!g)
        return -1;
    g->be = be;
    g->spec = *spec;
    if (spec->max_logits < spec->max_seqs || spec->max_logits > spec->max_rows) {
        free(g);
        return tram_fail(err, "CUDA runner: %d logits rows on the device, outside [%d sequences, %d rows]",
                         spec->max_logits, spec->max_seqs, spec->max_rows);
    }
    if (runner_alloc(g, err) ||
        tram_cuda_sampler_reserve(be, spec->max_seqs, spec->max_rows, spec->max_seqs * TRAM_CUDA_MAX_BIAS,
                                  spec->max_seqs, spec->vocab, spec->max_model_len, err) ||
        (spec->mask_words > 0 && tram_cuda_mask_reserve(be, spec->max_seqs, spec->mask_words, err))) {
        tram_cuda_runner_destroy(g);
        return -1;
    }
    *out = g;
    return 0;
}

void tram_cuda_runner_set_pad_block(tram_cuda_runner *g, int pad_block) { g->spec.pad_block = pad_block; }

/* One step on every tensor-parallel rank, each on its own thread and GPU:
 * the ranks' NCCL all-reduces meet inside the pass, captured graphs
 * included.  Only rank 0's logits are kept; a rank's capture failure is
 * reported to the runner after all ranks are done. */
typedef struct {
    const tram_batch *run;
    int bucket;
    const void *logits;                 /* rank 0's */
    int replayed, captured;             /* rank 0's */
    int capture_failed[TRAM_RANKS_MAX];
    tram_error why[TRAM_RANKS_MAX];
} rank_step;

/* The forward pass, leaving the logits on the device.  A bucket met for the
 * first time runs eagerly (allocating whatever the pass needs), then is
 * captured (recording only) for the next steps.  A capture that fails turns
 * graphs off with one warning: the eager result stands. */
static int forward(tram_ranks *ranks, int rank, void *ctx, tram_error *err)
{
    rank_step *j = ctx;
    tram_model *m = tram_ranks_model(ranks, rank);
    tram_backend *be = tram_ranks_backend(ranks, rank);
    if (tram_model_prepare(m, j->run, err))
        return -1;
    if (j->bucket && tram_cuda_graph_ready(be, j->bucket)) {
        if (rank == 0)
            j->replayed = 1;
        return tram_cuda_graph_replay(be, j->bucket, err);
    }
    const void *logits = tram_model_run(m);
    if (rank == 0)
        j->logits = logits;
    if (!j->bucket)
        return 0;
    if (be->sync(be, err))
        return -1;
    int rc = tram_cuda_graph_begin(be, &j->why[rank]);
    if (!rc) {
        tram_model_run(m);
        rc = tram_cuda_graph_end(be, j->bucket, &j->why[rank]);
    }
    j->capture_failed[rank] = rc != 0;
    if (rank == 0)
        j->captured = !rc;
    return 0;
}

static int forward_ranks(tram_cuda_runner *g, tram_ranks *ranks, const tram_batch *run, int bucket,
                         tram_error *err)
{
    rank_step j = {.run = run, .bucket = bucket};
    if (tram_ranks_run(ranks, forward, &j, err))
        return -1;
    if (j.replayed) {
        g->stats.graph_steps++;
        return 0;
    }
    g->logits = j.logits;
    g->stats.eager_steps++;
    for (int k = 0; k < tram_ranks_world_size(ranks); k++)
        if (j.capture_failed[k]) {
            fprintf(stderr, "tram: CUDA graphs off, running eagerly: %s\n", j.why[k].msg);
            g->spec.pad_block = -1;
            return 0;
        }
    g->stats.captures += (uint64_t)j.captured;
    return 0;
}

/* 0: sp has its seat (or needs none); 1: no seat free, the host draws; -1: error. */
static int claim_seat(tram_cuda_runner *g, const tram_seq *s, tram_cuda_sampling *sp, tram_error *err)
{
    if (!tram_sample_has_penalties(&sp->p))
        return 0;
    int load;
    sp->seat = tram_cuda_seat_for(g->seats, g->spec.max_seqs, tram_cuda_seq_key(s), s->num_tokens, g->step,
                                  &load);
    if (sp->seat < 0)
        return 1;
    return load ? tram_cuda_seat_load(g->be, sp->seat, s->tokens, s->prompt_len, s->num_tokens, err) : 0;
}

/* Item i's rows for the device, from params[n] on (one row, or 1 + k for k
 * drafts, each checked against its draft), its bias entries from bias_start:
 * returns how many rows, 0 when the host draws them, -1 on error. */
static int device_rows(tram_cuda_runner *g, const tram_sched_item *it, int row0, int n, int bias_start,
                       tram_error *err)
{
    const tram_seq *s = it->seq;
    int k = it->num_draft, nb;
    tram_cuda_sampling *sp = &g->params[n];
    if ((k && s->matcher) || !tram_cuda_sampling_of(s, sp, g->bias + bias_start, &nb))
        return 0;
    int rc = claim_seat(g, s, sp, err);
    if (rc)
        return rc < 0 ? -1 : 0;
    sp->row = row0;
    sp->bias_start = bias_start;
    for (int j = 1; j <= k; j++)
        g->params[n + j] = tram_cuda_sampling_ahead(s, sp, j);
    for (int j = 0; j <= k; j++)  /* a speculating sequence's drafts sit past its tokens */
        g->drafts[n + j] = j < k ? s->tokens[s->num_tokens + j] : -1;
    return k + 1;
}

/* The draws of a verification back in their rows; a seat ends holding the
 * sequence's tokens with its draws (the accepted drafts and the one after). */
static void take_draws(tram_cuda_runner *g, const tram_sched_item *items, int num_vseqs)
{
    for (int q = 0; q < num_vseqs; q++) {
        const tram_cuda_verify_seq *v = &g->vseqs[q];
        int got = 0;
        for (int r = v->first; r < v->first + v->rows; r++) {
            g->drawn[g->params[r].row] = g->ids[r] >= 0 ? g->ids[r] : TRAM_CUDA_NOT_DRAWN;
            got += g->ids[r] >= 0;
        }
        if (g->params[v->first].seat >= 0)
            g->seats[g->params[v->first].seat].len = items[g->vitem[q]].seq->num_tokens + got;
        g->stats.device_rows += (uint64_t)got;
        g->stats.verified_rows += v->rows > 1 ? (uint64_t)got : 0;
    }
}

/* Draws, on the device, every row the device sampler can serve: a decoding
 * or last-prefill item's one row, a speculating item's verification. */
static int sample_rows(tram_cuda_runner *g, const tram_batch *b, const tram_sched_item *items, const int *row0,
                       const int *nrows, tram_error *err)
{
    int n = 0, nb = 0, nq = 0;
    g->step++;
    for (int i = 0; i < b->num_seqs; i++) {
        const tram_seq *s = items[i].seq;
        if (nrows[i] == 0 || s->num_computed + items[i].num_new < s->num_tokens)
            continue;  /* a prompt chunk before the last: nothing to draw */
        int first = row0[i] + nrows[i] - 1 - items[i].num_draft;
        int got = device_rows(g, &items[i], first, n, nb, err);
        if (got < 0)
            return -1;
        if (got == 0)
            continue;
        g->vseqs[nq] = (tram_cuda_verify_seq){.first = n, .rows = got};
        g->vitem[nq++] = i;
        nb += g->params[n].num_bias;
        n += got;
    }
    if (n == 0)
        return 0;
    tram_cuda_logits l = {
        .data = g->logits,
        .rows = b->num_logits,
        .stride = g->spec.logits_width,
        .vocab = g->spec.vocab,
    };
    if (tram_cuda_verify(g->be, &l, g->params, g->drafts, n, g->vseqs, nq, g->bias, nb, g->ids, err))
        return -1;
    take_draws(g, items, nq);
    return 0;
}

/* The host rows' logits, each run of consecutive rows in one copy. */
static int download_rest(tram_cuda_runner *g, int num_logits, float *logits, tram_error *err)
{
    tram_backend *be = g->be;
    size_t w = (size_t)g->spec.logits_width, row_bytes = w * (size_t)be->act_bytes;
    for (int r = 0, end; r < num_logits; r = end) {
        for (end = r; end < num_logits && g->drawn[end] == -1; end++)
            ;
        if (end > r) {
            be->to_host_f32(be, logits + r * w, (const char *)g->logits + r * row_bytes, (size_t)(end - r) * w);
            g->stats.host_rows += (uint64_t)(end - r);
        } else {
            end++;
        }
    }
    return be->sync(be, err);
}

int tram_cuda_runner_step(tram_cuda_runner *g, tram_ranks *ranks, const tram_batch *b, const tram_sched_item *items,
                          const int *item_row0, const int *item_nrows, float *logits, tram_error *err)
{
    for (int r = 0; r < b->num_logits; r++)
        g->drawn[r] = -1;
    if (b->num_logits > g->spec.max_logits) {
        /* more prompt-logprobs rows than stay on the device: all on the host */
        g->stats.eager_steps++;
        g->stats.host_rows += (uint64_t)b->num_logits;
        return tram_ranks_forward(ranks, b, logits, err);
    }
    int bucket = g->spec.pad_block >= 0 ? tram_cuda_step_bucket(b, g->spec.max_seqs) : 0;
    tram_batch run = bucket ? tram_cuda_pad_batch(b, bucket, g->spec.pad_block, g->spec.block_size, &g->pad) : *b;
    int masks = g->num_masks;
    g->num_masks = 0;
    if (forward_ranks(g, ranks, &run, bucket, err))
        return -1;
    tram_cuda_logits l = {
        .data = g->logits, .rows = b->num_logits, .stride = g->spec.logits_width, .vocab = g->spec.vocab};
    if (tram_cuda_apply_masks(g->be, &l, g->mask_rows, g->masks, masks, g->spec.mask_words, err) ||
        sample_rows(g, b, items, item_row0, item_nrows, err))
        return -1;
    return download_rest(g, b->num_logits, logits, err);
}

void tram_cuda_runner_set_masks(tram_cuda_runner *g, const int32_t *rows, const uint32_t *masks, int n)
{
    g->mask_rows = rows;
    g->masks = masks;
    g->num_masks = n;
}

int32_t tram_cuda_runner_token(const tram_cuda_runner *g, int row) { return g->drawn[row]; }

void tram_cuda_runner_stats_get(const tram_cuda_runner *g, tram_cuda_runner_stats *out) { *out = g->stats; }

#else

struct tram_cuda_runner {
    int unused;
};

int tram_cuda_runner_create(tram_cuda_runner **out, tram_backend *be, const tram_cuda_runner_spec *spec,
                            tram_error *err)
{
    (void)be, (void)spec;
    *out = NULL;
    return tram_fail(err, NO_CUDA);
}

void tram_cuda_runner_destroy(tram_cuda_runner *g) { free(g); }
void tram_cuda_runner_set_pad_block(tram_cuda_runner *g, int pad_block) { (void)g, (void)pad_block; }

int tram_cuda_runner_step(tram_cuda_runner *g, tram_ranks *ranks, const tram_batch *b, const tram_sched_item *items,
                          const int *item_row0, const int *item_nrows, float *logits, tram_error *err)
{
    (void)g, (void)ranks, (void)b, (void)items, (void)item_row0, (void)item_nrows, (void)logits;
    return tram_fail(err, NO_CUDA);
}

int32_t tram_cuda_runner_token(const tram_cuda_runner *g, int row) { return (void)g, (void)row, -1; }

void tram_cuda_runner_set_masks(tram_cuda_runner *g, const int32_t *rows, const uint32_t *masks, int n)
{
    (void)g, (void)rows, (void)masks, (void)n;
}

void tram_cuda_runner_stats_get(const tram_cuda_runner *g, tram_cuda_runner_stats *out)
{
    (void)g;
    memset(out, 0, sizeof(*out));
}

#endif
