/* Mixture-of-experts models against transformers: the tiny Mixtral and
 * Qwen2-MoE of tests/fixtures/make_moe_fixtures.py (their directories and
 * GGUFs give transformers' greedy tokens and logits: tests/unit/test_arch.c)
 * saved in transformers 5's fused layout give them too; batching
 * never changes a row's experts; a 3-D tensor's experts read as the
 * directory's (the int8 and Q8_0 expert products: tests/unit/test_moe.c);
 * the experts divided between two tensor-parallel ranks give TP=1's logits;
 * `tram convert` writes the GGUFs back as directories that match again. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ranks.h"
#include "models/hf_writer.h"
#include "models/model.h"
#include "tests/unit/test_batch.h"
#include "tests/unit/test_util.h"
#include "tokenizer/tokenizer.h"

#define MOE_DIR "tests/fixtures/moe/"

static test_golden_case cases[8];

/* One fixture of each family, one from a directory, one from a GGUF. */
static const char *const both[2][2] = {{MOE_DIR "mixtral.json", MOE_DIR "mixtral"},
                                       {MOE_DIR "qwen2moe.json", MOE_DIR "qwen2moe.gguf"}};
static int n_cases;

typedef struct {
    tram_model_file *file;
    tram_backend *be;
    tram_model *model;
} moe_model;

static moe_model open_model(const char *path, const tram_model_limits *lim)
{
    moe_model m;
    tram_error err;
    cr_assert(!tram_model_file_open(&m.file, path, &err), "%s", err.msg);
    cr_assert(!tram_backend_cpu_create(&m.be, 2, &err), "%s", err.msg);
    cr_assert(!tram_model_create(&m.model, m.file, m.be, lim, &err), "%s", err.msg);
    return m;
}

static void close_model(moe_model *m)
{
    tram_model_destroy(m->model);
    m->be->destroy(m->be);
    tram_model_file_close(m->file);
}

/* The fixture's golden cases, checked on the model at path within rel (and
 * its greedy tokens when greedy). */
static void golden(const char *fixture, const char *path, const tram_model_limits *lim, float rel, int greedy)
{
    n_cases = test_load_golden(fixture, cases, 8);
    moe_model m = open_model(path, lim);
    test_golden_check(m.model, cases, n_cases, rel, greedy);
    close_model(&m);
}

static void golden_f32(const char *fixture, const char *path)
{
    tram_model_limits lim = test_model_limits();
    golden(fixture, path, &lim, 1e-3f, 1);
}

TestSuite(moe_golden, .timeout = 120);

/* save_pretrained(save_original_format=False): the experts fused in 3-D
 * gate_up_proj / down_proj, Mixtral's router as mlp.gate. */
Test(moe_golden, mixtral_fused_hf_directory_matches_transformers)
{
    golden_f32(MOE_DIR "mixtral.json", MOE_DIR "mixtral-fused");
}

Test(moe_golden, config_reads_the_experts)
{
    const char *paths[] = {MOE_DIR "mixtral", MOE_DIR "mixtral.gguf", MOE_DIR "qwen2moe", MOE_DIR "qwen2moe.gguf"};
    for (int i = 0; i < 4; i++) {
        tram_model_file *f;
        tram_error err;
        cr_assert(!tram_model_file_open(&f, paths[i], &err), "%s", err.msg);
        const tram_model_config *c = tram_model_file_config(f);
        int qwen = i >= 2;
        cr_expect_eq(c->n_experts, 8, "%s", paths[i]);
        cr_expect_eq(c->n_experts_used, qwen ? 3 : 2, "%s", paths[i]);
        cr_expect_eq(c->norm_topk_prob, !qwen, "%s", paths[i]);
        cr_expect_eq(c->shared_ffn_dim, qwen ? 96 : 0, "%s", paths[i]);
        cr_expect_eq(c->ffn_dim, 64, "%s", paths[i]);
        tram_model_file_close(f);
    }
}

/* The directories' tokenizer files as the tokenizer's save_pretrained wrote
 * them load too, and give the fixture's prompt ids. */
Test(moe_golden, hf_directory_tokenizer_gives_the_prompt_ids)
{
    n_cases = test_load_golden(MOE_DIR "qwen2moe.json", cases, 8);
    const char *paths[] = {MOE_DIR "qwen2moe", MOE_DIR "qwen2moe.gguf"};
    static const char text[] = "The capital of France is";  /* the fixture's first prompt */
    for (int i = 0; i < 2; i++) {
        tram_tokenizer *t;
        tram_error err;
        int32_t *ids;
        int n;
        cr_assert(!tram_tokenizer_load(&t, paths[i], &err), "%s", err.msg);
        cr_assert(!tram_tokenizer_encode(t, text, sizeof(text) - 1, 0, 0, &ids, &n, &err), "%s", err.msg);
        cr_assert_eq(n, cases[0].n_prompt, "%s: %d ids", paths[i], n);
        for (int k = 0; k < n; k++)
            cr_expect_eq(ids[k], cases[0].ids[k], "%s id %d", paths[i], k);
        free(ids);
        tram_tokenizer_free(t);
    }
}

/* A row's experts depend on the row alone: prompts batched together give
 * each one's logits alone (a router reading its neighbours, or rows added
 * back to the wrong token, would not). */
Test(moe_golden, batching_never_changes_a_rows_experts)
{
    tram_model_limits lim = test_model_limits();
    for (int i = 0; i < 2; i++) {
        n_cases = test_load_golden(both[i][0], cases, 8);
        moe_model m = open_model(both[i][1], &lim);
        test_batched_equals_alone(m.model, cases, n_cases, 1e-4f);
        close_model(&m);
    }
}

/* Expert E of a 3-D ffn_*_exps tensor reads as the HF directory's expert E
 * (both bf16: exactly), and in the Q8_0 file as its blocks, which the model
 * keeps with --weight-format native. */
Test(moe_golden, expert_slices_of_3d_tensors_read_like_the_hf_experts)
{
    tram_model_file *hf, *bf16, *q8;
    tram_error err;
    cr_assert(!tram_model_file_open(&hf, MOE_DIR "mixtral", &err), "%s", err.msg);
    cr_assert(!tram_model_file_open(&bf16, MOE_DIR "mixtral.gguf", &err), "%s", err.msg);
    cr_assert(!tram_model_file_open(&q8, MOE_DIR "mixtral-q8_0.gguf", &err), "%s", err.msg);
    static const char *names[] = {"blk.0.ffn_gate.0.weight", "blk.1.ffn_up.5.weight", "blk.1.ffn_down.7.weight"};
    enum { NUMEL = 64 * 32 };
    static float a[NUMEL], b[NUMEL], c[NUMEL];
    static uint8_t blocks[NUMEL / 32 * 34];
    for (int i = 0; i < 3; i++) {
        cr_assert(!tram_model_file_read_f32(hf, names[i], a, NUMEL, &err), "%s", err.msg);
        cr_assert(!tram_model_file_read_f32(bf16, names[i], b, NUMEL, &err), "%s", err.msg);
        cr_assert(!tram_model_file_read_f32(q8, names[i], c, NUMEL, &err), "%s", err.msg);
        cr_assert(!memcmp(a, b, sizeof(a)), "%s differs between the directory and the GGUF", names[i]);
        float scale = 0;
        for (int k = 0; k < NUMEL; k++)
            scale = fmaxf(scale, fabsf(a[k]));
        for (int k = 0; k < NUMEL; k++)
            cr_assert(fabsf(a[k] - c[k]) <= scale / 127.0f, "%s[%d]: %f, Q8_0 %f", names[i], k, a[k], c[k]);
        size_t bytes;
        cr_assert_eq(tram_model_file_block_type(q8, names[i]), TRAM_W_Q8_0);
        cr_assert(!tram_model_file_read_blocks(q8, names[i], blocks, NUMEL, &bytes, &err), "%s", err.msg);
        cr_assert_eq(bytes, sizeof(blocks));
    }
    cr_assert(!tram_model_file_has_tensor(bf16, "blk.0.ffn_up.8.weight"), "expert 8 of 8 exists");
    cr_assert(tram_model_file_read_f32(bf16, "blk.0.ffn_up.8.weight", a, NUMEL, &err) == -1);
    tram_model_file_close(hf);
    tram_model_file_close(bf16);
    tram_model_file_close(q8);
}

static int ranks_forward(void *ranks, const tram_batch *b, float *logits, tram_error *err)
{
    return tram_ranks_forward(ranks, b, logits, err);
}

/* Expert parallelism: at TP=2 each rank runs its 4 of the 8 experts (and half
 * the shared expert) and one all-reduce adds them; the logits after every
 * prompt are TP=1's within 1e-4, and the greedy tokens transformers'. */
Test(moe_golden, tensor_parallel_2_equals_1)
{
    tram_model_limits lim = test_model_limits();
    for (int i = 0; i < 2; i++) {
        n_cases = test_load_golden(both[i][0], cases, 8);
        moe_model one = open_model(both[i][1], &lim);
        tram_ranks *ranks;
        tram_error err;
        tram_ranks_spec spec = {.device = "cpu", .world_size = 2, .num_threads = 2};
        cr_assert(!tram_ranks_create(&ranks, &spec, &err), "%s", err.msg);
        cr_assert(!tram_ranks_load(ranks, one.file, &lim, &err), "%s", err.msg);
        int vocab = tram_model_file_config(one.file)->vocab_size;
        test_runner two = {ranks_forward, ranks, vocab, NULL};
        float *a = malloc((size_t)vocab * sizeof(float)), *b = malloc((size_t)vocab * sizeof(float));
        for (int c = 0; c < n_cases; c++) {
            batch_builder bb;
            bb_init(&bb);
            bb_add(&bb, 0, cases[c].ids, cases[c].n_prompt, 0);
            test_forward_ok(one.model, &bb.b, a);
            test_run_ok(&two, &bb.b, b);
            for (int v = 0; v < vocab; v++)
                cr_assert(fabsf(a[v] - b[v]) <= 1e-4f * fabsf(a[v]) + 1e-4f, "%s case %d logit %d: TP=1 %f, TP=2 %f",
                          both[i][1], c, v, a[v], b[v]);
        }
        test_golden_run(&two, cases, n_cases, 1e-3f, 1);
        free(a);
        free(b);
        tram_ranks_destroy(ranks);
        close_model(&one);
    }
}

/* `tram convert` writes each 3-D expert tensor as the HF directory's experts
 * (and MixtralConfig / Qwen2MoeConfig): the directory gives transformers'
 * tokens and logits again. */
Test(moe_golden, converted_gguf_directories_match_transformers)
{
    const char *ggufs[2] = {MOE_DIR "mixtral.gguf", MOE_DIR "qwen2moe.gguf"};
    for (int i = 0; i < 2; i++) {
        char dir[] = "/tmp/tram_moe_convert_XXXXXX", cmd[64];
        tram_model_file *f;
        tram_error err;
        cr_assert(mkdtemp(dir));
        cr_assert(!tram_model_file_open(&f, ggufs[i], &err), "%s", err.msg);
        cr_assert(!tram_hf_convert(f, dir, TRAM_HF_BF16, &err), "%s", err.msg);
        tram_model_file_close(f);
        golden_f32(both[i][0], dir);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
    }
}

/* The fixture's Qwen2-MoE config.json with one field changed (or removed)
 * must be refused naming it: dense layers among the sparse ones are not
 * computed, and a shared expert of unknown width is not skipped. */
static void refused(const char *field, json_t *value, const char *expect)
{
    char dir[] = "/tmp/tram_moe_config_XXXXXX", path[64], cmd[64];
    cr_assert(mkdtemp(dir));
    json_error_t jerr;
    json_t *cfg = json_load_file(MOE_DIR "qwen2moe/config.json", 0, &jerr);
    cr_assert(cfg, "%s", jerr.text);
    if (value)
        json_object_set_new(cfg, field, value);
    else
        json_object_del(cfg, field);
    snprintf(path, sizeof(path), "%s/config.json", dir);
    cr_assert(!json_dump_file(cfg, path, 0));
    json_decref(cfg);
    tram_model_file *f;
    tram_error err;
    cr_assert_eq(tram_model_file_open(&f, dir, &err), -1, "%s accepted", field);
    cr_assert(strstr(err.msg, expect), "%s: %s", field, err.msg);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(moe_golden, qwen2moe_configs_tram_cannot_run_are_refused_by_name)
{
    refused("decoder_sparse_step", json_integer(2), "decoder_sparse_step");
    refused("mlp_only_layers", json_pack("[i]", 1), "mlp_only_layers");
    refused("shared_expert_intermediate_size", NULL, "shared_expert_intermediate_size");
    refused("num_experts_per_tok", json_integer(9), "num_experts_per_tok");
}
