/* Scheduler without a model: a small simulator plays the engine's part
 * (compute the scheduled tokens, append one generated token when a sequence's
 * known tokens are all computed, finish at max_tokens) and the tests check the
 * scheduler's decisions against rules written out here: the token budget and
 * the seat cap, running before waiting, chunked prompts, the preemption
 * victim, admission order under each policy, rejection of what can never fit,
 * and progress for everyone. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/scheduler.h"

enum { VOCAB = 1000, MAXLEN = 256, MAXREQ = 64 };

typedef struct {
    tram_block_manager *bm;
    tram_scheduler s;
    tram_request *reqs[MAXREQ];
    int num_reqs, block_size;
    uint64_t arrival;
    int finished[MAXREQ];      /* request indices in finishing order */
    int num_finished;
} sim;

static void sim_init(sim *m, tram_sched_policy policy, int blocks, int block_size, int budget,
                     int max_seqs)
{
    tram_error err = {{0}};
    memset(m, 0, sizeof(*m));
    m->block_size = block_size;
    cr_assert_eq(tram_bm_create(&m->bm, blocks, block_size, 0, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_scheduler_init(&m->s, m->bm, policy, budget, max_seqs, 0, &err), 0, "%s",
                 err.msg);
}

static void sim_free(sim *m)
{
    for (int i = 0; i < m->num_reqs; i++)
        tram_request_free(m->reqs[i]);
    tram_scheduler_free(&m->s);
    tram_bm_destroy(m->bm);
}

/* A request of n = 1 with its own prompt tokens; NULL with err filled when the
 * scheduler refuses it. */
static tram_request *try_add(sim *m, int prompt_len, int max_tokens, int priority,
                             tram_error *err)
{
    cr_assert_lt(m->num_reqs, MAXREQ);
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.max_tokens = max_tokens;
    int32_t prompt[MAXLEN];
    for (int i = 0; i < prompt_len; i++)
        prompt[i] = (m->num_reqs * 37 + i) % VOCAB;
    tram_request_env env = {NULL, VOCAB, MAXLEN, (MAXLEN + m->block_size - 1) / m->block_size,
                            m->s.max_seqs, 0, m->arrival++};
    tram_request *r;
    cr_assert_eq(tram_request_create(&r, (uint64_t)m->num_reqs, &p, prompt, prompt_len, priority,
                                     &env, err), 0, "%s", err->msg);
    if (tram_scheduler_check_fits(&m->s, &r->seqs[0], err)) {
        tram_request_free(r);
        return NULL;
    }
    cr_assert_eq(tram_scheduler_reserve(&m->s, 1, err), 0);
    m->reqs[m->num_reqs++] = r;
    tram_scheduler_add_waiting(&m->s, &r->seqs[0]);
    return r;
}

static tram_request *add(sim *m, int prompt_len, int max_tokens, int priority)
{
    tram_error err = {{0}};
    tram_request *r = try_add(m, prompt_len, max_tokens, priority, &err);
    cr_assert_not_null(r, "%s", err.msg);
    return r;
}

static tram_seq *seq_of(tram_request *r) { return &r->seqs[0]; }

/* The rules every schedule must keep, whatever the workload. */
static void check_schedule(const sim *m)
{
    int tokens = 0;
    for (int i = 0; i < m->s.num_items; i++) {
        const tram_sched_item *it = &m->s.items[i];
        cr_assert_gt(it->num_new, 0);
        cr_assert_eq(it->seq->status, TRAM_SEQ_RUNNING);
        cr_assert_leq(it->seq->num_computed + it->num_new, it->seq->num_tokens);
        cr_assert_leq(it->seq->num_computed + it->num_new, it->seq->table.num_blocks * m->block_size,
                      "tokens scheduled without blocks to hold their KV");
        for (int j = 0; j < i; j++)
            cr_assert_neq(it->seq, m->s.items[j].seq, "a sequence scheduled twice");
        tokens += it->num_new;
    }
    cr_assert_leq(tokens, m->s.max_tokens, "token budget exceeded");
    cr_assert_leq(m->s.num_items, m->s.max_seqs, "seat cap exceeded");
    cr_assert_leq(m->s.num_running, m->s.max_seqs);
    tram_error err = {{0}};
    cr_assert_eq(tram_bm_check(m->bm, &err), 0, "%s", err.msg);
}

/* One step: schedule, then what the engine does with the result. */
static void step(sim *m)
{
    tram_scheduler_schedule(&m->s);
    check_schedule(m);
    for (int i = 0; i < m->s.num_items; i++) {
        tram_seq *q = m->s.items[i].seq;
        q->num_computed += m->s.items[i].num_new;
        if (q->num_computed < q->num_tokens)
            continue;
        q->tokens[q->num_tokens] = (q->num_tokens * 7) % VOCAB;
        q->num_tokens++;
        if (q->num_tokens - q->prompt_len < q->req->max_tokens)
            continue;
        tram_scheduler_remove(&m->s, q);
        tram_bm_release(m->bm, &q->table);
        q->status = TRAM_SEQ_FINISHED;
        m->finished[m->num_finished++] = (int)q->req->id;
    }
}

/* Steps until every request has finished; returns how many it took. */
static int run_all(sim *m, int max_steps)
{
    int steps = 0;
    while (m->num_finished < m->num_reqs) {
        cr_assert_lt(steps++, max_steps, "no progress: %d of %d finished", m->num_finished,
                     m->num_reqs);
        step(m);
    }
    cr_assert_eq(tram_bm_num_free(m->bm), tram_bm_num_total(m->bm), "blocks leaked");
    return steps;
}

Test(scheduler, budget_and_seats_hold_for_a_random_mix)
{
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, 64, 4, 37, 5);
    srand(7);
    for (int i = 0; i < 40; i++)
        add(&m, 1 + rand() % 100, 1 + rand() % 20, 0);
    run_all(&m, 2000);
    cr_assert_gt(m.s.num_preemptions, 0, "the pool of 64 blocks should run short");
    sim_free(&m);
}

Test(scheduler, running_first_then_waiting)
{
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, 64, 4, 16, 8);
    tram_request *a = add(&m, 5, 10, 0);
    step(&m); /* a's prompt */
    tram_request *b = add(&m, 50, 10, 0);
    step(&m);
    cr_assert_eq(m.s.num_items, 2);
    cr_assert_eq(m.s.items[0].seq, seq_of(a), "the running sequence comes first");
    cr_assert_eq(m.s.items[0].num_new, 1, "a decode is one token");
    cr_assert_eq(m.s.items[1].seq, seq_of(b));
    cr_assert_eq(m.s.items[1].num_new, 15, "the newcomer gets what the budget has left");
    sim_free(&m);
}

Test(scheduler, long_prompt_is_chunked_alongside_decodes)
{
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, 64, 4, 32, 8);
    tram_request *a = add(&m, 3, 20, 0);
    step(&m);
    tram_request *b = add(&m, 100, 2, 0);
    int chunks[8], n = 0;
    while (seq_of(b)->num_computed < 100) {
        step(&m);
        cr_assert_eq(m.s.items[0].seq, seq_of(a));
        cr_assert_eq(m.s.items[0].num_new, 1, "the decode rides along every chunk");
        chunks[n++] = m.s.items[1].num_new;
    }
    int want[] = {31, 31, 31, 7};
    cr_assert_eq(n, 4);
    cr_assert_arr_eq(chunks, want, sizeof(want));
    cr_assert_eq(seq_of(b)->num_tokens, 101, "the last chunk's logits give the first token");
    sim_free(&m);
}

/* Four running sequences with one block each, whose next token needs a second
 * block; the pool has two spare, so exactly one of them must give way.  A
 * fifth request, too long to be admitted yet, waits behind with the lowest
 * priority.  Returns the victim's index. */
static int lone_victim(tram_sched_policy policy, const int *priorities)
{
    sim m;
    sim_init(&m, policy, 6, 4, 64, 8);
    tram_request *r[4];
    for (int i = 0; i < 4; i++)
        r[i] = add(&m, 4, 5, priorities[i]);
    tram_request *late = add(&m, 12, 5, 9);
    step(&m); /* the four prompts take 4 blocks; the fifth needs 3 of the 2 left */
    cr_assert_eq(m.s.num_waiting, 1);
    step(&m); /* two grow into the spares; the third forces a preemption */
    cr_assert_eq(m.s.num_preemptions, 1);
    int victim = -1;
    for (int i = 0; i < 4; i++)
        if (seq_of(r[i])->status == TRAM_SEQ_WAITING) {
            cr_assert_eq(victim, -1, "only one victim");
            victim = i;
            cr_assert_eq(seq_of(r[i])->num_computed, 0);
            cr_assert_eq(seq_of(r[i])->table.num_blocks, 0, "a victim keeps no blocks");
            cr_assert_eq(seq_of(r[i])->num_tokens, 5, "a victim keeps its generated token");
        }
    cr_assert_neq(victim, -1);
    cr_assert_eq(m.s.num_waiting, 2);
    cr_assert_eq(m.s.waiting[0], seq_of(r[victim]), "the victim waits at the front");
    cr_assert_eq(m.s.waiting[1], seq_of(late));
    run_all(&m, 100);
    sim_free(&m);
    return victim;
}

Test(scheduler, preemption_victim_is_lowest_priority_then_latest)
{
    int prio[] = {0, 2, 1, 0};
    cr_assert_eq(lone_victim(TRAM_POLICY_PRIORITY, prio), 1, "priority 2 is the lowest");
    int ties[] = {0, 1, 1, 0};
    cr_assert_eq(lone_victim(TRAM_POLICY_PRIORITY, ties), 2, "of equal priority, the latest");
    cr_assert_eq(lone_victim(TRAM_POLICY_FCFS, prio), 3, "fcfs ignores priority");
}

Test(scheduler, admission_order_fcfs_vs_priority)
{
    int prio[] = {5, 0, 1, 0};
    int fcfs[] = {0, 1, 2, 3}, by_prio[] = {1, 3, 2, 0};
    for (int pol = 0; pol < 2; pol++) {
        sim m;
        sim_init(&m, pol ? TRAM_POLICY_PRIORITY : TRAM_POLICY_FCFS, 64, 4, 64, 1);
        for (int i = 0; i < 4; i++)
            add(&m, 6, 3, prio[i]);
        run_all(&m, 100);
        cr_assert_arr_eq(m.finished, pol ? by_prio : fcfs, sizeof(fcfs), "policy %d", pol);
        sim_free(&m);
    }
}

Test(scheduler, what_can_never_fit_is_rejected)
{
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, 4, 4, 64, 8); /* the pool holds 16 tokens */
    tram_error err = {{0}};
    cr_assert_null(try_add(&m, 10, 7, 0, &err));
    cr_assert(strstr(err.msg, "10 tokens") && strstr(err.msg, "max_tokens 7") &&
              strstr(err.msg, "5 KV blocks") && strstr(err.msg, "at most 4"), "%s", err.msg);
    cr_assert_eq(m.s.num_waiting, 0);
    cr_assert_not_null(try_add(&m, 10, 6, 0, &err), "%s", err.msg);
    run_all(&m, 100);
    sim_free(&m);
}

Test(scheduler, no_starvation_under_a_steady_stream)
{
    /* A long request arrives among short ones that keep coming, in a pool so
     * small that one long sequence fills most of it. */
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, 24, 4, 16, 4);
    for (int i = 0; i < 3; i++)
        add(&m, 8, 4, 0);
    tram_request *big = add(&m, 60, 30, 0);
    int steps = 0;
    while (seq_of(big)->status != TRAM_SEQ_FINISHED) {
        cr_assert_lt(steps++, 500, "the long request starves");
        if (steps % 2 == 0 && m.num_reqs < MAXREQ)
            add(&m, 8, 4, 0);
        step(&m);
    }
    run_all(&m, 2000);
    sim_free(&m);
}

Test(scheduler, pool_of_one_max_length_sequence_never_deadlocks)
{
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, MAXLEN / 16, 16, 64, 8);
    for (int i = 0; i < 6; i++)
        add(&m, 100 + 20 * i, MAXLEN - 100 - 20 * i, 0);
    run_all(&m, 20000);
    cr_assert_gt(m.s.num_preemptions, 0);
    sim_free(&m);
}

/* A proposer that guesses every draft asked for. */
static int guess_all(tram_proposer *p, tram_propose_seq *seqs, int num_seqs, tram_error *err)
{
    (void)p;
    (void)err;
    for (int i = 0; i < num_seqs; i++) {
        for (int j = 0; j < seqs[i].max_k; j++)
            seqs[i].out[j] = 1;
        seqs[i].got = seqs[i].max_k;
    }
    return 0;
}

/* Before the automatic rule has a cost line, its measuring steps verify
 * few drafts, then more: one, then k, in all for guesses without a model
 * (in a batch of 16, k guesses each would make a measuring step 9 times a
 * plain one); none, then just enough for the sizes to differ by 4 (one
 * each at 16), per sequence for a draft model, whose passes the sequences
 * share. */
static void measuring_steps(int runs_model)
{
    sim m;
    sim_init(&m, TRAM_POLICY_FCFS, 256, 4, 512, 16);
    for (int i = 0; i < 16; i++)
        add(&m, 8, 40, 0);
    step(&m);
    tram_proposer guesser = {.name = "all", .runs_model = runs_model, .propose = guess_all};
    tram_scheduler_set_spec(&m.s, &guesser, 8, 32, 0);
    int few = runs_model ? 0 : 1, many = runs_model ? 16 : 8;
    for (int round = 0; round < 4; round++) {
        tram_scheduler_schedule(&m.s);
        int drafts = 0;
        for (int i = 0; i < m.s.num_items; i++) {
            tram_sched_item *it = &m.s.items[i];
            drafts += it->num_draft;
            /* the engine's part: the real token computed, the drafts rejected */
            it->seq->num_computed++;
            it->seq->tokens[it->seq->num_tokens++] = 2;
        }
        cr_assert_eq(m.s.num_items, 16);
        cr_assert_eq(drafts, round % 2 ? many : few, "round %d", round);
        tram_step_cost_add(&m.s.cost, 16 + drafts, 0.01 + 0.001 * (16 + drafts));
    }
    double a, b;
    cr_assert_eq(tram_step_cost_line(&m.s.cost, &a, &b), 1, "the measuring steps fit the line");
    cr_assert_float_eq(b, 0.001, 1e-6);
    sim_free(&m);
}

Test(scheduler, measuring_guesses_are_few_in_all) { measuring_steps(0); }

Test(scheduler, measuring_drafts_are_alike_per_sequence) { measuring_steps(1); }
