#include "engine/scheduler.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The key order: 1 when a is served before (and preempted after) b.
 * Priority counts only under TRAM_POLICY_PRIORITY; then arrival. */
static int seq_before(const tram_seq *a, const tram_seq *b, tram_sched_policy policy)
{
    if (policy == TRAM_POLICY_PRIORITY && a->priority != b->priority)
        return a->priority < b->priority;
    if (a->arrival != b->arrival)
        return a->arrival < b->arrival;
    return a->sample_index < b->sample_index;
}

int tram_seq_wants_prompt_logprobs(const tram_seq *seq)
{
    const tram_request *r = seq->req;
    return seq->sample_index == 0 && r->p.prompt_logprobs >= 0 &&
           r->prompt_lp_done < seq->prompt_len;
}

int tram_scheduler_init(tram_scheduler *s, tram_block_manager *bm, tram_sched_policy policy,
                        int max_tokens, int max_seqs, int prompt_rows, tram_error *err)
{
    *s = (tram_scheduler){
        .policy = policy,
        .max_tokens = max_tokens,
        .max_seqs = max_seqs,
        .prompt_rows = prompt_rows,
        .bm = bm,
    };
    s->running = tram_calloc((size_t)max_seqs, sizeof(*s->running), err);
    s->items = tram_calloc((size_t)max_seqs, sizeof(*s->items), err);
    s->proposals = tram_calloc((size_t)max_seqs, sizeof(*s->proposals), err);
    s->spec_recs = tram_calloc((size_t)max_seqs, sizeof(*s->spec_recs), err);
    s->spec_proposed = tram_calloc((size_t)max_seqs, sizeof(*s->spec_proposed), err);
    if (!s->running || !s->items || !s->proposals || !s->spec_recs || !s->spec_proposed) {
        tram_scheduler_free(s);
        return -1;
    }
    return 0;
}

void tram_scheduler_free(tram_scheduler *s)
{
    TRAM_FREE_ALL(s->waiting, s->running, s->items, s->proposals, s->spec_recs, s->spec_proposed);
    memset(s, 0, sizeof(*s));
}

int tram_scheduler_check_fits(const tram_scheduler *s, const tram_seq *seq, tram_error *err)
{
    int bs = tram_bm_block_size(s->bm), longest = seq->prompt_len + seq->req->max_tokens;
    int need = (longest + bs - 1) / bs, have = TRAM_MIN(seq->table.cap, tram_bm_num_total(s->bm));
    if (need > have)
        return tram_fail(err, "prompt: %d tokens plus max_tokens %d need %d KV blocks of %d tokens, "
                              "but a sequence can hold at most %d", seq->prompt_len,
                         seq->req->max_tokens, need, bs, have);
    return 0;
}

int tram_scheduler_reserve(tram_scheduler *s, int more, tram_error *err)
{
    int need = s->num_waiting + s->num_running + more;
    if (tram_grow((void **)&s->waiting, &s->cap_waiting, need, sizeof(*s->waiting)))
        return tram_fail(err, "out of memory growing the waiting queue to %d", need);
    return 0;
}

/* ---------------------------------------------------------------- queues */

static void insert_at(tram_seq **q, int *n, int at, tram_seq *seq)
{
    memmove(q + at + 1, q + at, (size_t)(*n - at) * sizeof(*q));
    q[at] = seq;
    (*n)++;
}

static void remove_from(tram_seq **q, int *n, tram_seq *seq)
{
    for (int i = 0; i < *n; i++)
        if (q[i] == seq) {
            memmove(q + i, q + i + 1, (size_t)(*n - i - 1) * sizeof(*q));
            (*n)--;
            return;
        }
}

static int sorted_pos(const tram_scheduler *s, tram_seq *const *q, int n, const tram_seq *seq)
{
    int i = n;
    while (i > 0 && seq_before(seq, q[i - 1], s->policy))
        i--;
    return i;
}

void tram_scheduler_add_waiting(tram_scheduler *s, tram_seq *seq)
{
    seq->status = TRAM_SEQ_WAITING;
    insert_at(s->waiting, &s->num_waiting, sorted_pos(s, s->waiting, s->num_waiting, seq), seq);
}

static void add_running(tram_scheduler *s, tram_seq *seq)
{
    seq->status = TRAM_SEQ_RUNNING;
    insert_at(s->running, &s->num_running, sorted_pos(s, s->running, s->num_running, seq), seq);
    s->seats_running += seq->seats;
}

void tram_scheduler_add_forked(tram_scheduler *s, tram_seq *parent, tram_seq *children, int count)
{
    s->seats_running -= parent->seats - 1;
    parent->seats = 1;
    for (int i = 0; i < count; i++) {
        children[i].seats = 1;
        add_running(s, &children[i]);
    }
}

void tram_scheduler_remove(tram_scheduler *s, tram_seq *seq)
{
    if (seq->status == TRAM_SEQ_RUNNING) {
        remove_from(s->running, &s->num_running, seq);
        s->seats_running -= seq->seats;
    } else if (seq->status == TRAM_SEQ_WAITING) {
        remove_from(s->waiting, &s->num_waiting, seq);
    }
}

/* ---------------------------------------------------------------- scheduling */

/* Recompute: the victim keeps its tokens but none of its KV. */
static void preempt(tram_scheduler *s, tram_seq *victim)
{
    tram_scheduler_remove(s, victim);
    tram_bm_release(s->bm, &victim->table);
    victim->num_computed = victim->draft_computed = 0;
    tram_scheduler_add_waiting(s, victim);
    s->num_preemptions++;
}

/* How many tokens seq runs this step within the remaining budgets. */
static int chunk_size(const tram_seq *seq, int budget, int *prompt_rows)
{
    int n = TRAM_MIN(seq->num_tokens - seq->num_computed, budget);
    if (tram_seq_wants_prompt_logprobs(seq)) {
        n = TRAM_MIN(n, *prompt_rows);
        *prompt_rows -= n;
    }
    return n;
}

static void push_item(tram_scheduler *s, tram_seq *seq, int n, int num_draft, int *budget)
{
    s->items[s->num_items++] = (tram_sched_item){.seq = seq, .num_new = n + num_draft,
                                                 .num_draft = num_draft};
    *budget -= n + num_draft;
}

void tram_scheduler_set_spec(tram_scheduler *s, tram_proposer *proposer, int k, int max_batch, int always)
{
    s->proposer = proposer;
    if (proposer && proposer->runs_model)
        proposer->pass_cost = &s->pass_cost;
    s->spec_k = k;
    s->spec_max_batch = max_batch;
    s->spec_always = always;
}

static int is_decoding(const tram_seq *seq) { return seq->num_tokens - seq->num_computed == 1; }

/* What the step being scheduled holds so far, for the automatic rule. */
typedef struct {
    double tokens, yield;      /* tokens to run; tokens expected out */
    tram_draft_price price;    /* a draft model's passes */
    int cap, left;             /* the most drafts of a sequence, and in all, still allowed (few
                                  while the rule measures their cost: tram_step_cost_drafts) */
} spec_plan;

/* The drafts a decoding sequence may verify at most: k, within the budget
 * and what its max_tokens leave room for (the draw after the last draft is
 * one more token). */
static int draft_room(const tram_seq *seq, int k, int budget)
{
    int room = seq->prompt_len + seq->req->max_tokens - seq->num_tokens - 1;
    return TRAM_MIN(k, TRAM_MIN(room, budget - 1));
}

/* A draft model's step, once its cost is measured: the depth that serves
 * the whole step best (spec.h, tram_spec_depth), and its passes' price. */
static void plan_depth(tram_scheduler *s, spec_plan *plan)
{
    int num = 0;
    for (int i = 0; i < s->num_running; i++)
        if (is_decoding(s->running[i])) {
            s->spec_recs[num] = &s->running[i]->spec;
            s->spec_proposed[num++] = draft_room(s->running[i], s->spec_k, s->max_tokens);
        }
    int depth = tram_spec_depth(s->spec_recs, s->spec_proposed, num, &s->cost, &s->pass_cost, plan->tokens,
                                plan->yield);
    plan->cap = TRAM_MAX(depth, 1); /* at depth 0, probes (and lone drafts) at a whole pass's price */
    plan->price = tram_pass_price(&s->pass_cost, depth);
}

/* A draft model's measuring depth, beside steps of none: enough drafts
 * that the two sizes differ by 4 tokens or more (the line needs their
 * variance at 2 or more, step_cost.c), and no more: at batch 32, measuring at
 * k = 8 made two steps of 288 tokens for 64 tokens out. */
static int measuring_depth(int k, int decoding)
{
    return TRAM_MIN(k, (4 + decoding - 1) / decoding);
}

/* 1 when this step speculates: a proposer and some, but few enough,
 * decoding sequences; the plan starts from one token in and out per
 * sequence. */
static int speculating(tram_scheduler *s, spec_plan *plan)
{
    if (!s->proposer)
        return 0;
    int decoding = 0;
    for (int i = 0; i < s->num_running; i++)
        decoding += is_decoding(s->running[i]);
    *plan = (spec_plan){.tokens = decoding, .yield = decoding, .cap = s->spec_k, .left = INT_MAX};
    if (decoding == 0)
        return 0;
    if (decoding > s->spec_max_batch) {
        s->spec_off_steps++;
        return 0;
    }
    if (s->spec_always)
        return 1;
    /* A draft model's passes serve all of a step's sequences, so its
     * measuring steps have every sequence draft alike, and once its cost is
     * measured the step's depth is chosen for all of them; guesses without
     * a model cost per token. */
    int model = s->proposer->runs_model;
    int most = model ? tram_step_cost_drafts(&s->cost, 0, measuring_depth(s->spec_k, decoding))
                     : tram_step_cost_drafts(&s->cost, 1, s->spec_k);
    if (!model)
        plan->left = most;
    else if (most != INT_MAX)
        plan->cap = most;
    else
        plan_depth(s, plan);
    return 1;
}

/* What the proposer sees of seq, and where its guesses go. */
static tram_propose_seq proposal(tram_seq *seq, int max_k)
{
    return (tram_propose_seq){.tokens = seq->tokens, .n = seq->num_tokens, .table = &seq->table,
                              .draft_computed = &seq->draft_computed, .max_k = max_k,
                              .out = seq->tokens + seq->num_tokens};
}

/* A proposer whose guesses cost no model pass (n-gram lookup) guesses
 * before the rule decides: the rule then weighs only the drafts there are,
 * a sequence with none neither probes nor waits for a probe, and a declined
 * first guess is kept to check against the token drawn (its shadow).  The
 * number of guesses, up to k. */
static int guess_first(tram_scheduler *s, tram_seq *seq, int k)
{
    tram_propose_seq ps = proposal(seq, k);
    tram_error err;
    if (s->proposer->propose(s->proposer, &ps, 1, &err))
        return 0;
    seq->spec.shadow = ps.got ? ps.out[0] : -1;
    return ps.got;
}

/* How many drafts a decoding sequence asks for: as many as the automatic
 * rule finds worth verifying (spec.h) within the budget and what its
 * max_tokens leave room for (the draw after the last draft is one more
 * token).  Their blocks must be free without preempting.  A draft model's
 * guesses come in one proposal for the whole step (propose_step). */
static int want_drafts(tram_scheduler *s, tram_seq *seq, int budget, spec_plan *plan)
{
    int k = draft_room(seq, TRAM_MIN(plan->cap, plan->left), budget);
    int model = s->proposer->runs_model;
    seq->spec.shadow = -1;
    if (!is_decoding(seq) || k <= 0 || (!model && (k = guess_first(s, seq, k)) == 0))
        return 0;
    double gain = 0;
    int want = s->spec_always ? k
               : model ? tram_spec_choose(&seq->spec, k, &s->cost, plan->tokens, plan->yield, &plan->price, &gain)
                       : tram_spec_best(&seq->spec, k, &s->cost, plan->tokens, plan->yield, NULL, &gain);
    s->spec_declined += (uint64_t)(k - want);
    if (want == 0 || tram_bm_grow(s->bm, &seq->table, seq->num_tokens + want))
        return 0;
    seq->spec.shadow = -1;
    if (model)
        s->proposals[s->num_proposals++] = proposal(seq, want);
    plan->tokens += want;
    plan->left -= want;
    plan->yield += tram_spec_gain(&seq->spec, want);
    plan->price.fixed += want * plan->price.per_draft;
    return want;
}

/* A draft model's guesses for every sequence that asked for drafts this
 * step, in one call of the proposer (its passes batched across them); the
 * items shrink to the drafts proposed, and the budget takes back the rest.
 * Drafts change no output: a proposer that fails costs the step its drafts
 * only. */
static void propose_step(tram_scheduler *s, int *budget)
{
    if (!s->num_proposals)
        return;
    tram_error err;
    double t0 = tram_now();
    int failed = s->proposer->propose(s->proposer, s->proposals, s->num_proposals, &err);
    s->propose_seconds = tram_now() - t0;
    for (int i = 0, p = 0; i < s->num_items && p < s->num_proposals; i++) {
        tram_sched_item *it = &s->items[i];
        if (!it->num_draft)
            continue;
        const tram_propose_seq *ps = &s->proposals[p++];
        int got = failed ? 0 : TRAM_MIN(ps->got, it->num_draft);
        it->num_new -= it->num_draft - got;
        *budget += it->num_draft - got;
        it->num_draft = got;
    }
    s->num_proposals = 0;
}

/* Returns 1 if it had to preempt. */
static int schedule_running(tram_scheduler *s, int *budget, int *prompt_rows)
{
    spec_plan plan = {0};
    int preempted = 0, spec = speculating(s, &plan);
    for (int i = 0; i < s->num_running && *budget > 0; i++) {
        tram_seq *seq = s->running[i];
        int n = chunk_size(seq, *budget, prompt_rows);
        if (n == 0)
            continue;
        int drafts = spec ? want_drafts(s, seq, *budget, &plan) : 0;
        if (drafts) {
            push_item(s, seq, n, drafts, budget);
            continue;
        }
        int self = 0;
        while (!self && tram_bm_grow(s->bm, &seq->table, seq->num_computed + n)) {
            /* Entries after i are not scheduled yet, so the victim never
             * takes back blocks promised to this step. */
            tram_seq *victim = s->running[s->num_running - 1];
            self = victim == seq;
            preempt(s, victim);
            preempted = 1;
        }
        if (self)
            break;
        push_item(s, seq, n, 0, budget);
    }
    propose_step(s, budget);
    return preempted;
}

/* 1 when seq's LoRA adapter is the base, or one a running sequence uses,
 * or fewer than max_loras adapters are running: every adapter of a step
 * then has a slot (engine/lora_pool.h). */
static int lora_fits(const tram_scheduler *s, const tram_seq *seq)
{
    int id = seq->req->lora_id, distinct = 0;
    if (!id)
        return 1;
    for (int i = 0; i < s->num_running; i++) {
        int other = s->running[i]->req->lora_id, seen = !other;
        if (other == id)
            return 1;
        for (int j = 0; j < i && !seen; j++)
            seen = s->running[j]->req->lora_id == other;
        distinct += !seen;
    }
    return distinct < s->max_loras;
}

/* Tries to admit the head of the waiting queue; 0 when it cannot be. */
static int admit_one(tram_scheduler *s, int *budget, int *prompt_rows)
{
    tram_seq *seq = s->waiting[0];
    if (s->seats_running + seq->seats > s->max_seqs || !lora_fits(s, seq))
        return 0;
    /* Prompt logprobs and mean or CLS pooling need every prompt row (or the
     * first), so such requests skip the cache. */
    int hit = seq->req->skip_cache ? 0 : tram_bm_match_prefix(s->bm, &seq->table, seq->tokens, seq->num_tokens);
    seq->num_computed = hit;
    int rows = *prompt_rows;
    int n = chunk_size(seq, *budget, &rows);
    if (n == 0 || tram_bm_grow(s->bm, &seq->table, seq->num_computed + n)) {
        tram_bm_release(s->bm, &seq->table);
        seq->num_computed = 0;
        return 0;
    }
    *prompt_rows = rows;
    if (tram_bm_caching(s->bm)) {
        s->cache_queries += (uint64_t)seq->num_tokens;
        s->cache_hits += (uint64_t)hit;
    }
    if (!seq->req->admitted) {
        seq->req->admitted = 1;
        seq->req->cached_tokens = hit;
        s->prompt_tokens += (uint64_t)seq->prompt_len;
    }
    remove_from(s->waiting, &s->num_waiting, seq);
    add_running(s, seq);
    push_item(s, seq, n, 0, budget);
    return 1;
}

void tram_scheduler_schedule(tram_scheduler *s)
{
    int budget = s->max_tokens, prompt_rows = s->prompt_rows;
    s->num_items = 0;
    s->propose_seconds = 0;
    if (schedule_running(s, &budget, &prompt_rows))
        return;
    while (s->num_waiting > 0 && budget > 0 && admit_one(s, &budget, &prompt_rows))
        ;
}
