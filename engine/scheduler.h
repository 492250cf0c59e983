/* scheduler.h — which sequences run in the next step, and how many tokens each.
 *
 * One token budget per step (max_num_batched_tokens) and a cap on running
 * sequences (max_num_seqs).  Running sequences are served first, in key order
 * (priority under the priority policy, then arrival): one decode token, or the
 * next chunk of their prompt.  When the pool runs out of blocks, the running
 * sequence with the largest key is preempted by recompute: it drops its blocks
 * and goes back to the waiting queue, keeping its generated tokens.  Only if
 * nothing was preempted are waiting sequences admitted, in order, while budget,
 * seats and blocks allow (prefix-cache hits first, so they cost nothing).
 *
 * Speculative decoding (tram_scheduler_set_spec): a decoding sequence also
 * runs the tokens its proposer guesses, written after its tokens, as extra
 * query tokens of the same step, as long as the step has at most
 * spec_max_batch decoding sequences, the automatic rule expects them to pay
 * (engine/spec.h: the sequence's acceptance against the measured cost of a
 * step's extra tokens, in `cost`) and the blocks for them are free.  Drafts
 * never preempt anyone: short of blocks, the sequence runs without them. */
#ifndef TRAM_SCHEDULER_H
#define TRAM_SCHEDULER_H

#include <stdint.h>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine/spec.h"

typedef struct {
    tram_seq *seq;
    int num_new;               /* tokens to run, starting at seq->num_computed */
    int num_draft;             /* of those, proposed tokens (the last ones) to verify */
} tram_sched_item;

typedef struct {
    tram_sched_policy policy;
    int max_tokens, max_seqs;  /* per-step token budget, running-seat cap */
    int prompt_rows;           /* per-step logits rows for prompt logprobs */
    int max_loras;             /* the most distinct LoRA adapters among running sequences */
    tram_block_manager *bm;
    tram_seq **waiting;        /* [cap_waiting], front first */
    int num_waiting, cap_waiting;
    tram_seq **running;        /* [max_seqs], in key order */
    int num_running, seats_running;
    tram_sched_item *items;    /* [max_seqs]: the last schedule */
    int num_items;
    uint64_t num_preemptions;
    uint64_t cache_queries, cache_hits; /* prompt tokens looked up / found, at admission */
    uint64_t prompt_tokens;    /* prompts of requests admitted for the first time */
    tram_proposer *proposer;   /* NULL: no speculation */
    tram_propose_seq *proposals; /* [max_seqs]: the step's sequences that asked for drafts */
    int num_proposals;
    int spec_k, spec_max_batch;
    int spec_always;           /* verify every proposal: no automatic rule */
    tram_step_cost cost;       /* decode steps' measured time, less the proposer's (the engine adds to it) */
    tram_step_cost pass_cost;  /* a draft model's passes' measured time (the proposer adds to it) */
    double propose_seconds;    /* the last schedule's time in the proposer */
    const tram_spec_record **spec_recs; /* [max_seqs]: the step's decoding sequences' records, */
    int *spec_proposed;        /* [max_seqs]: and their most drafts (tram_spec_depth) */
    uint64_t spec_off_steps;   /* steps whose batch was too large to speculate */
    uint64_t spec_declined;    /* draft tokens proposed that the automatic rule declined */
} tram_scheduler;

int tram_scheduler_init(tram_scheduler *s, tram_block_manager *bm, tram_sched_policy policy,
                        int max_tokens, int max_seqs, int prompt_rows, tram_error *err);
void tram_scheduler_free(tram_scheduler *s);

/* Fails, with the lengths and the pool size in the message, when the
 * sequence could never be served: at its longest (prompt + max_tokens) it
 * would need more blocks than its table or the whole pool holds. */
int tram_scheduler_check_fits(const tram_scheduler *s, const tram_seq *seq, tram_error *err);

/* Turns speculation on: up to k drafts per decoding sequence, in steps with
 * at most max_batch decoding sequences, those the automatic rule keeps (all
 * of them if `always`).  The proposer stays the caller's. */
void tram_scheduler_set_spec(tram_scheduler *s, tram_proposer *proposer, int k, int max_batch, int always);

/* Makes room so that `more` further sequences can wait without allocating
 * during a step (called when a request is added). */
int tram_scheduler_reserve(tram_scheduler *s, int more, tram_error *err);
void tram_scheduler_add_waiting(tram_scheduler *s, tram_seq *seq);
/* The samples forked from a running parent join the running queue in the
 * seats the parent reserved for them. */
void tram_scheduler_add_forked(tram_scheduler *s, tram_seq *parent, tram_seq *children, int count);
/* Takes a sequence out of whichever queue holds it (finish, abort); its
 * blocks are the caller's to release. */
void tram_scheduler_remove(tram_scheduler *s, tram_seq *seq);

/* Fills s->items for the next step. */
void tram_scheduler_schedule(tram_scheduler *s);

/* 1 when the sequence still needs logits rows for prompt logprobs. */
int tram_seq_wants_prompt_logprobs(const tram_seq *seq);

#endif
