/* The CUDA step's host logic (engine/cuda_runner.h), on the CPU: which steps
 * replay a CUDA graph and how their batch is padded, which rows the device
 * sampler draws and with what parameters, and the seats that hold token
 * counts. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "engine/cuda_runner.h"
#include "engine/sequence.h"

enum { MB = 4, BS = 16, CAP = 16 };

typedef struct {
    int32_t ids[CAP], pos[CAP], slots[CAP], qs[CAP + 1], lens[CAP], tables[CAP * MB], rows[CAP];
} arrays;

/* n decode rows: sequence i at position 10 + i in blocks 100 + 4i... */
static tram_batch decode_batch(arrays *a, int n)
{
    a->qs[0] = 0;
    for (int i = 0; i < n; i++) {
        a->ids[i] = 7 + i;
        a->pos[i] = 10 + i;
        for (int j = 0; j < MB; j++)
            a->tables[i * MB + j] = 100 + MB * i + j;
        a->slots[i] = a->tables[i * MB] * BS + a->pos[i];
        a->qs[i + 1] = i + 1;
        a->lens[i] = a->pos[i] + 1;
        a->rows[i] = i;
    }
    return (tram_batch){.num_tokens = n, .num_seqs = n, .token_ids = a->ids, .positions = a->pos,
                        .slot_mapping = a->slots, .query_start = a->qs, .seq_lens = a->lens,
                        .block_tables = a->tables, .max_blocks_per_seq = MB, .logits_rows = a->rows, .num_logits = n};
}

Test(cuda_runner, graph_bucket_only_for_decode_steps_that_fit)
{
    arrays a;
    for (int n = 1; n <= CAP; n++) {
        tram_batch b = decode_batch(&a, n);
        int want = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : n <= 8 ? 8 : 16;
        cr_assert_eq(tram_cuda_step_bucket(&b, CAP), want, "n %d", n);
        cr_assert_eq(tram_cuda_step_bucket(&b, n), (want <= n ? want : 0), "n %d, max_seqs %d", n, n);
    }
    tram_batch b = decode_batch(&a, 3);
    b.num_tokens = 4;  /* a prefill chunk of two tokens in the step */
    a.qs[3] = 4;
    cr_assert_eq(tram_cuda_step_bucket(&b, CAP), 0);
    b = decode_batch(&a, 3);
    b.num_logits = 2;  /* a row without logits */
    cr_assert_eq(tram_cuda_step_bucket(&b, CAP), 0);
    b = decode_batch(&a, 3);
    a.rows[1] = 2, a.rows[2] = 1;  /* rows out of order */
    cr_assert_eq(tram_cuda_step_bucket(&b, CAP), 0);
    b = decode_batch(&a, 2);
    b.num_tokens = b.num_logits = 3;  /* the second sequence verifies a draft: two tokens, two rows */
    a.qs[2] = 3, a.rows[2] = 2;
    cr_assert_eq(tram_cuda_step_bucket(&b, CAP), 0, "a speculating step runs eagerly");
}

/* A step with an adapter runs eagerly (its LoRA launches follow the step's
 * rows by slot, which a graph would freeze); base rows named -1 do not. */
Test(cuda_runner, a_step_with_an_adapter_gets_no_graph_bucket)
{
    arrays a;
    int32_t slots[3] = {-1, -1, -1};
    tram_batch b = decode_batch(&a, 3);
    b.seq_lora = slots;
    cr_assert_eq(tram_cuda_step_bucket(&b, CAP), 4);
    slots[2] = 0;
    cr_assert_eq(tram_cuda_step_bucket(&b, CAP), 0);
}

Test(cuda_runner, padding_keeps_real_rows_and_sends_pad_rows_to_the_pad_block)
{
    arrays a, out;
    memset(&out, 0x5a, sizeof(out));
    tram_batch b = decode_batch(&a, 5);
    tram_cuda_padded p = {out.ids, out.pos, out.slots, out.qs, out.lens, out.tables, out.rows};
    int pad = 999;
    tram_batch d = tram_cuda_pad_batch(&b, 8, pad, BS, &p);
    cr_assert_eq(d.num_tokens, 8);
    cr_assert_eq(d.num_seqs, 8);
    cr_assert_eq(d.num_logits, 8);
    cr_assert_eq(d.max_blocks_per_seq, MB);
    cr_assert_eq(d.token_ids, out.ids);
    cr_assert_eq(d.block_tables, out.tables);
    cr_assert_null(d.seq_lora);
    cr_assert_eq(memcmp(out.ids, a.ids, 5 * 4), 0);
    cr_assert_eq(memcmp(out.slots, a.slots, 5 * 4), 0);
    int used = tram_batch_used_blocks(&b, BS);  /* the columns a step reads */
    cr_assert_gt(used, 0);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(memcmp(out.tables + i * MB, a.tables + i * MB, used * 4), 0, "row %d", i);
    for (int i = 0; i <= 8; i++)
        cr_assert_eq(out.qs[i], i);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(out.rows[i], i);
    for (int i = 5; i < 8; i++) {
        cr_assert_eq(out.pos[i], 0);
        cr_assert_eq(out.lens[i], 1);
        cr_assert_eq(out.tables[i * MB], pad);
        cr_assert_eq(out.slots[i] / BS, pad, "pad row %d writes slot %d", i, out.slots[i]);
        cr_assert(out.ids[i] >= 0);
    }
    /* no real slot is written by a pad row */
    for (int i = 5; i < 8; i++)
        for (int j = 0; j < 5; j++)
            cr_assert_neq(out.slots[i], a.slots[j]);
}

/* A request of one running sequence, its prompt computed, out_len tokens out. */
typedef struct {
    tram_request r;
    tram_seq s;
    int32_t tokens[64];
    int32_t banned[2];
} one_seq;

static void one_seq_init(one_seq *o, int out_len)
{
    memset(o, 0, sizeof(*o));
    tram_sampling_params_init(&o->r.p);
    o->r.n = o->r.num_seqs = 1;
    o->r.seed = 77;
    o->banned[0] = 2, o->banned[1] = 9;
    o->r.banned = o->banned;
    o->r.num_banned = 2;
    o->s.req = &o->r;
    o->s.tokens = o->tokens;
    o->s.prompt_len = 10;
    o->s.num_tokens = o->s.num_computed = 10 + out_len;
    o->s.arrival = 5;
}

Test(cuda_runner, device_sampling_parameters_follow_the_host_sampler)
{
    one_seq o;
    one_seq_init(&o, 3);
    o.s.sample_index = 2;
    o.r.p.temperature = 1e-6f;  /* greedy on the host */
    o.r.p.top_k = -1;
    o.r.p.top_p = 0.9f, o.r.p.min_p = 0.05f;
    o.r.p.repetition_penalty = 1.2f, o.r.p.presence_penalty = 0.5f, o.r.p.frequency_penalty = -0.25f;
    tram_logit_bias lb[2] = {{4, 1.5f}, {6, -3}}, bias[TRAM_CUDA_MAX_BIAS];
    o.r.p.logit_bias = lb, o.r.p.num_logit_bias = 2;
    tram_cuda_sampling sp;
    int nb = -1;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 1);
    cr_assert_eq(sp.p.temperature, 0);
    cr_assert_eq(sp.p.top_k, 0);
    cr_assert_float_eq(sp.p.top_p, 0.9f, 0);
    cr_assert_float_eq(sp.p.min_p, 0.05f, 0);
    cr_assert_float_eq(sp.p.repetition_penalty, 1.2f, 0);
    cr_assert_float_eq(sp.p.presence_penalty, 0.5f, 0);
    cr_assert_float_eq(sp.p.frequency_penalty, -0.25f, 0);
    cr_assert_eq(sp.seat, -1);
    cr_assert_eq(sp.p.seed, 77);
    cr_assert_eq(sp.step, (2ull << 32) | 3, "sample 2, position 3");
    cr_assert_eq(nb, 2);
    cr_assert_eq(sp.num_bias, 2);
    cr_assert_eq(bias[0].token, 4);
    cr_assert_eq(bias[1].token, 6);
    o.r.p.min_tokens = 5;  /* still held: the banned ids follow the bias */
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 1);
    cr_assert_eq(nb, 4);
    cr_assert_eq(bias[2].token, 2);
    cr_assert(isinf(bias[3].bias) && bias[3].bias < 0);
    o.r.p.min_tokens = 3;  /* released at position 3 */
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 1);
    cr_assert_eq(nb, 2);
}

Test(cuda_runner, host_features_stay_on_the_host)
{
    one_seq o;
    tram_cuda_sampling sp;
    tram_logit_bias bias[TRAM_CUDA_MAX_BIAS], many[TRAM_CUDA_MAX_BIAS + 1];
    int nb;
    one_seq_init(&o, 0);
    o.r.p.logprobs = 0;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 0, "logprobs need the full row");
    one_seq_init(&o, 0);
    o.r.n = 3;  /* the fork step: every sample draws from the parent's row */
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 0);
    o.r.num_seqs = 3;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 1, "after the fork, each sample has its row");
    one_seq_init(&o, 0);
    o.r.p.prompt_logprobs = 1;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 0);
    o.r.prompt_lp_done = o.s.prompt_len;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 1, "prompt logprobs done");
    one_seq_init(&o, 0);
    for (int i = 0; i <= TRAM_CUDA_MAX_BIAS; i++)
        many[i] = (tram_logit_bias){i, 1};
    o.r.p.logit_bias = many, o.r.p.num_logit_bias = TRAM_CUDA_MAX_BIAS + 1;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 0);
    o.r.p.num_logit_bias = TRAM_CUDA_MAX_BIAS;
    cr_assert_eq(tram_cuda_sampling_of(&o.s, &sp, bias, &nb), 1);
}

/* Row j of a verification is drawn as decoding without drafts would draw
 * the token j further on: its parameters equal those tram_cuda_sampling_of
 * gives the sequence once j more tokens are in (position, bans, the rest),
 * with the rows following one another from row 0's. */
Test(cuda_runner, verification_rows_are_drawn_as_later_decode_steps)
{
    tram_logit_bias lb[2] = {{4, 1.5f}, {6, -3}}, bias[TRAM_CUDA_MAX_BIAS], later_bias[TRAM_CUDA_MAX_BIAS];
    for (int min_tokens = 0; min_tokens <= 8; min_tokens++) {
        one_seq o;
        one_seq_init(&o, 3);
        o.s.sample_index = 1;
        o.r.p.temperature = 0.8f, o.r.p.top_k = 7, o.r.p.presence_penalty = 0.5f;
        o.r.p.logit_bias = lb, o.r.p.num_logit_bias = 2;
        o.r.p.min_tokens = min_tokens;
        tram_cuda_sampling first, later;
        int nb, later_nb;
        cr_assert_eq(tram_cuda_sampling_of(&o.s, &first, bias, &nb), 1);
        first.row = 7;
        for (int j = 1; j <= 4; j++) {
            tram_cuda_sampling ahead = tram_cuda_sampling_ahead(&o.s, &first, j);
            one_seq moved = o;
            moved.s.req = &moved.r;
            moved.s.num_tokens += j;
            cr_assert_eq(tram_cuda_sampling_of(&moved.s, &later, later_bias, &later_nb), 1);
            cr_assert_eq(ahead.row, 7 + j);
            cr_assert_eq(ahead.step, later.step, "min_tokens %d, row %d: the uniform of position %d",
                         min_tokens, j, 3 + j);
            cr_assert_eq(ahead.num_bias, later.num_bias, "min_tokens %d, row %d: bans", min_tokens, j);
            cr_assert_eq(ahead.bias_start, first.bias_start);
            cr_assert_eq(ahead.seat, first.seat);
            cr_assert(ahead.p.temperature == later.p.temperature && ahead.p.top_k == later.p.top_k &&
                      ahead.p.presence_penalty == later.p.presence_penalty && ahead.p.seed == later.p.seed);
            cr_assert(!memcmp(bias, later_bias, (size_t)later_nb * sizeof(*bias)),
                      "row %d's entries are a prefix of row 0's", j);
        }
    }
}

Test(cuda_runner, seats_reload_only_when_the_history_moved)
{
    tram_cuda_seat seats[3];
    memset(seats, 0, sizeof(seats));
    int load;
    int a = tram_cuda_seat_for(seats, 3, 11, 20, 1, &load);
    cr_assert(a >= 0 && load);
    cr_assert_eq(tram_cuda_seat_for(seats, 3, 11, 21, 2, &load), a);
    cr_assert_eq(load, 0, "the device added the drawn token itself");
    cr_assert_eq(tram_cuda_seat_for(seats, 3, 11, 25, 3, &load), a);
    cr_assert_eq(load, 1, "tokens appended behind the device's back");
    int b = tram_cuda_seat_for(seats, 3, 12, 5, 3, &load);
    int c = tram_cuda_seat_for(seats, 3, 13, 5, 3, &load);
    cr_assert(b >= 0 && c >= 0 && b != a && c != a && b != c);
    cr_assert_eq(tram_cuda_seat_for(seats, 3, 14, 5, 3, &load), -1, "every seat is in use in step 3");
    /* step 4: 12 and 13 are used, so the least recently used (11) goes */
    tram_cuda_seat_for(seats, 3, 12, 6, 4, &load);
    tram_cuda_seat_for(seats, 3, 13, 6, 4, &load);
    cr_assert_eq(tram_cuda_seat_for(seats, 3, 14, 5, 4, &load), a);
    cr_assert_eq(load, 1);
    tram_cuda_seat_for(seats, 3, 13, 7, 5, &load);
    int d = tram_cuda_seat_for(seats, 3, 11, 26, 5, &load);
    cr_assert(d >= 0 && d != c && load, "11 comes back to a seat not used in step 5, reloaded");
}

Test(cuda_runner, sequence_keys_are_distinct)
{
    tram_seq a = {0}, b = {0}, c = {0};
    a.arrival = 0, a.sample_index = 1;
    b.arrival = 1, b.sample_index = 0;
    c.arrival = 0, c.sample_index = 0;
    cr_assert_neq(tram_cuda_seq_key(&a), tram_cuda_seq_key(&b));
    cr_assert_neq(tram_cuda_seq_key(&a), tram_cuda_seq_key(&c));
    cr_assert_neq(tram_cuda_seq_key(&c), 0, "0 marks an empty seat");
}
