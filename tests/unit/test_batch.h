/* Model-level test helpers shared by test_forward.c and test_moe_golden.c:
 * golden fixtures of transformers (cases of prompt ids, greedy ids and the
 * top-20 logits after the prompt), a batch builder over a fixed block layout,
 * and the two checks every model family must pass. */
#ifndef TEST_BATCH_H
#define TEST_BATCH_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "tests/unit/test_util.h"

#define BLOCK 16
#define MAX_BLOCKS 64 /* 1024 tokens per sequence */
#define MAX_SEQS 8

typedef struct {
    int32_t ids[1024];
    int n_prompt, n_greedy;
    int32_t greedy[32];
    int32_t top_ids[20];
    float top_logits[20];
} test_golden_case;

static inline void test_int_array(json_t *arr, int32_t *out, int *n, int cap)
{
    cr_assert(json_is_array(arr));
    *n = (int)json_array_size(arr);
    cr_assert(*n <= cap);
    for (int i = 0; i < *n; i++)
        out[i] = (int32_t)json_integer_value(json_array_get(arr, i));
}

/* Reads at most cap cases of a fixture; returns how many. */
static inline int test_load_golden(const char *path, test_golden_case *cases, int cap)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert(root, "cannot read %s: %s", path, jerr.text);
    json_t *arr = json_object_get(root, "cases");
    int n_cases = (int)json_array_size(arr);
    cr_assert(n_cases >= 1 && n_cases <= cap);
    for (int c = 0; c < n_cases; c++) {
        json_t *jc = json_array_get(arr, c);
        test_golden_case *g = &cases[c];
        int n;
        test_int_array(json_object_get(jc, "prompt_ids"), g->ids, &g->n_prompt, 1024);
        test_int_array(json_object_get(jc, "greedy_ids"), g->greedy, &g->n_greedy, 32);
        test_int_array(json_object_get(jc, "top_ids"), g->top_ids, &n, 20);
        json_t *tl = json_object_get(jc, "top_logits");
        for (int i = 0; i < 20; i++)
            g->top_logits[i] = (float)json_real_value(json_array_get(tl, i));
    }
    json_decref(root);
    return n_cases;
}

static inline tram_model_limits test_model_limits(void)
{
    return (tram_model_limits){.max_tokens = 2048, .max_seqs = MAX_SEQS, .max_blocks_per_seq = MAX_BLOCKS,
                               .num_blocks = MAX_SEQS * MAX_BLOCKS, .block_size = BLOCK,
                               .weight_type = TRAM_W_F32};
}

/* A batch builder over a fixed block layout: sequence s owns blocks
 * [s*MAX_BLOCKS, (s+1)*MAX_BLOCKS) in reverse order, so that the block table
 * really is followed (a kernel that ignored it would read the wrong slots). */
typedef struct {
    int32_t ids[2048], pos[2048], slots[2048], qstart[MAX_SEQS + 1], lens[MAX_SEQS];
    int32_t slot_tables[MAX_SEQS * MAX_BLOCKS]; /* blocks owned by each sequence slot */
    int32_t tables[MAX_SEQS * MAX_BLOCKS], rows[MAX_SEQS];
    int32_t lora[MAX_SEQS];                     /* LoRA slot of each sequence, -1: the base */
    tram_batch b;
} batch_builder;

static inline void bb_init(batch_builder *bb)
{
    memset(bb, 0, sizeof(*bb));
    for (int s = 0; s < MAX_SEQS; s++)
        for (int j = 0; j < MAX_BLOCKS; j++)
            bb->slot_tables[s * MAX_BLOCKS + j] = s * MAX_BLOCKS + (MAX_BLOCKS - 1 - j);
    for (int s = 0; s < MAX_SEQS; s++)
        bb->lora[s] = -1;
    bb->b = (tram_batch){.token_ids = bb->ids, .positions = bb->pos, .slot_mapping = bb->slots,
                         .query_start = bb->qstart, .seq_lens = bb->lens, .block_tables = bb->tables,
                         .max_blocks_per_seq = MAX_BLOCKS, .logits_rows = bb->rows};
}

/* Adds tokens ids[0..n) of the sequence in `slot`, starting at position `start`. */
static inline void bb_add(batch_builder *bb, int slot, const int32_t *ids, int n, int start)
{
    tram_batch *b = &bb->b;
    int s = b->num_seqs++;
    memcpy(bb->tables + s * MAX_BLOCKS, bb->slot_tables + slot * MAX_BLOCKS, MAX_BLOCKS * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        int t = b->num_tokens++, p = start + i;
        bb->ids[t] = ids[i];
        bb->pos[t] = p;
        bb->slots[t] = bb->tables[s * MAX_BLOCKS + p / BLOCK] * BLOCK + p % BLOCK;
    }
    bb->qstart[s + 1] = b->num_tokens;
    bb->lens[s] = start + n;
    bb->rows[b->num_logits++] = b->num_tokens - 1;
}

/* Sequence s of the batch uses LoRA slot `slot` (models/lora_slots.h). */
static inline void bb_set_lora(batch_builder *bb, int s, int slot)
{
    bb->lora[s] = slot;
    bb->b.seq_lora = bb->lora;
}

/* What runs a batch: one model, or tensor-parallel ranks (engine/ranks.h). */
typedef struct {
    int (*forward)(void *ctx, const tram_batch *b, float *logits, tram_error *err);
    void *ctx;
    int vocab;
    const int *lora_slot;   /* the LoRA slot every sequence uses; NULL: the base model */
} test_runner;

static inline int test_model_forward(void *model, const tram_batch *b, float *logits, tram_error *err)
{
    return tram_model_forward(model, b, logits, err);
}

static inline test_runner test_runner_of(tram_model *model)
{
    return (test_runner){test_model_forward, model, tram_model_config_of(model)->vocab_size, NULL};
}

static inline void test_run_ok(const test_runner *r, const tram_batch *b, float *logits)
{
    tram_error err;
    cr_assert(!r->forward(r->ctx, b, logits, &err), "%s", err.msg);
}

static inline void test_forward_ok(tram_model *model, const tram_batch *b, float *logits)
{
    test_runner r = test_runner_of(model);
    test_run_ok(&r, b, logits);
}

/* The top-20 logits after each prompt within rel (relative, plus 1e-4) of
 * transformers', and, when greedy, every greedy token equal. */
static inline void test_golden_run(const test_runner *r, const test_golden_case *cases, int n_cases, float rel,
                                   int greedy)
{
    int vocab = r->vocab;
    float *logits = malloc((size_t)vocab * sizeof(float));
    for (int c = 0; c < n_cases; c++) {
        const test_golden_case *g = &cases[c];
        batch_builder bb;
        bb_init(&bb);
        bb_add(&bb, 0, g->ids, g->n_prompt, 0);
        if (r->lora_slot)
            bb_set_lora(&bb, 0, *r->lora_slot);
        test_run_ok(r, &bb.b, logits);
        for (int i = 0; i < 20; i++) {
            float ours = logits[g->top_ids[i]], ref = g->top_logits[i];
            cr_expect(fabsf(ours - ref) <= rel * fabsf(ref) + 1e-4f,
                      "case %d: logit of token %d is %f, transformers %f", c, g->top_ids[i], ours, ref);
        }
        int pos = g->n_prompt;
        for (int t = 0; greedy && t < g->n_greedy; t++) {
            int32_t next = test_argmax(logits, vocab);
            cr_assert_eq(next, g->greedy[t], "case %d token %d: %d, transformers %d", c, t, next, g->greedy[t]);
            bb_init(&bb);
            bb_add(&bb, 0, &next, 1, pos++);
            if (r->lora_slot)
                bb_set_lora(&bb, 0, *r->lora_slot);
            test_run_ok(r, &bb.b, logits);
        }
    }
    free(logits);
}

static inline void test_golden_check(tram_model *model, const test_golden_case *cases, int n_cases, float rel,
                                     int greedy)
{
    test_runner r = test_runner_of(model);
    test_golden_run(&r, cases, n_cases, rel, greedy);
}

/* The prompts of up to MAX_SEQS cases in one batch give each one's logits
 * alone, within rel. */
static inline void test_batched_equals_alone(tram_model *model, const test_golden_case *cases, int n_cases,
                                             float rel)
{
    int vocab = tram_model_config_of(model)->vocab_size, n = TRAM_MIN(n_cases, MAX_SEQS);
    float *alone = malloc((size_t)n * vocab * sizeof(float));
    float *together = malloc((size_t)n * vocab * sizeof(float));
    batch_builder bb;
    int total = 0;
    for (int c = 0; c < n; c++) {
        bb_init(&bb);
        bb_add(&bb, c, cases[c].ids, cases[c].n_prompt, 0);
        test_forward_ok(model, &bb.b, alone + (size_t)c * vocab);
        total += cases[c].n_prompt;
    }
    cr_assert(total <= 2048, "the golden prompts fit one batch");
    bb_init(&bb);
    for (int c = 0; c < n; c++)
        bb_add(&bb, c, cases[c].ids, cases[c].n_prompt, 0);
    test_forward_ok(model, &bb.b, together);
    for (size_t i = 0; i < (size_t)n * vocab; i++)
        cr_assert(fabsf(alone[i] - together[i]) <= rel * fabsf(alone[i]) + 1e-4f,
                  "logit %zu: alone %f, batched %f", i, alone[i], together[i]);
    free(alone);
    free(together);
}

#endif
