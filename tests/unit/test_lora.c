/* LoRA adapters against peft: the tiny Llama and the three adapters of
 * tests/fixtures/make_lora_fixtures.py, whose PeftModel greedy ids and
 * logits tram must give, one adapter at a time, all of them mixed with the
 * base model in one batch (prefilled in chunks, then decoded together), and
 * at TP=2; the adapters' files refused when they are truncated or ask for
 * what tram does not compute. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ranks.h"
#include "models/lora.h"
#include "models/model.h"
#include "tests/unit/test_batch.h"
#include "tests/unit/test_util.h"

#define LORA_DIR "tests/fixtures/lora/"

static const char *const adapters[3] = {"sql", "chat", "code"};

typedef struct {
    tram_model_file *file;
    tram_backend *be;
    tram_model *model;
} lora_model;

static tram_model_limits lora_limits(int int8)
{
    tram_model_limits lim = test_model_limits();
    lim.max_loras = 3;
    lim.max_lora_rank = 16;
    lim.quantize_int8 = int8;
    return lim;
}

static tram_lora_adapter *open_adapter(const char *name, const tram_model_config *c)
{
    char path[256];
    snprintf(path, sizeof(path), LORA_DIR "%s", name);
    tram_lora_adapter *a;
    tram_error err;
    cr_assert(!tram_lora_open(&a, path, c, 16, &err), "%s", err.msg);
    return a;
}

/* The base with adapter i in slot i. */
static lora_model open_model(int int8)
{
    lora_model m;
    tram_error err;
    tram_model_limits lim = lora_limits(int8);
    cr_assert(!tram_model_file_open(&m.file, LORA_DIR "base", &err), "%s", err.msg);
    cr_assert(!tram_backend_cpu_create(&m.be, 2, &err), "%s", err.msg);
    cr_assert(!tram_model_create(&m.model, m.file, m.be, &lim, &err), "%s", err.msg);
    for (int i = 0; i < 3; i++) {
        tram_lora_adapter *a = open_adapter(adapters[i], tram_model_file_config(m.file));
        cr_assert(!tram_model_lora_load(m.model, i, a, &err), "%s", err.msg);
        tram_lora_free(a);
    }
    return m;
}

static void close_model(lora_model *m)
{
    tram_model_destroy(m->model);
    m->be->destroy(m->be);
    tram_model_file_close(m->file);
}

static int load_cases(const char *name, test_golden_case *cases)
{
    char path[256];
    snprintf(path, sizeof(path), LORA_DIR "%s.json", name);
    return test_load_golden(path, cases, 4);
}

TestSuite(lora, .timeout = 120);

Test(lora, config_reads_rank_alpha_and_targets)
{
    lora_model m = open_model(0);
    const tram_model_config *c = tram_model_file_config(m.file);
    tram_lora_adapter *sql = open_adapter("sql", c), *chat = open_adapter("chat", c);
    cr_expect_eq(sql->rank, 8);
    cr_expect_float_eq(sql->scale, 2.0f, 1e-6);                 /* 16 / 8 */
    cr_expect_eq(sql->targets, 1u << TRAM_LORA_Q | 1u << TRAM_LORA_V);
    cr_expect_eq(chat->rank, 4);
    cr_expect(chat->rslora);
    cr_expect_float_eq(chat->scale, 4.0f, 1e-6);                /* 8 / sqrt(4) */
    cr_expect_eq(chat->targets, (1u << TRAM_LORA_N_TARGETS) - 1);
    tram_lora_free(sql);
    tram_lora_free(chat);
    close_model(&m);
}

/* Each adapter alone gives PeftModel's logits and greedy ids; slot -1 the
 * base model's (the slots do not leak into rows that use none). */
Test(lora, each_adapter_matches_peft)
{
    lora_model m = open_model(0);
    test_golden_case cases[4];
    for (int i = -1; i < 3; i++) {
        int n = load_cases(i < 0 ? "base" : adapters[i], cases);
        test_runner r = test_runner_of(m.model);
        r.lora_slot = i < 0 ? NULL : &i;
        test_golden_run(&r, cases, n, 0, 1);
    }
    close_model(&m);
}

/* Runs the op on groups whose factors f (A, Bᵀ: host, NULL where a group
 * leaves a part alone) are uploaded as type, on a copy of y0 into y. */
static void run_lora_op(tram_backend *be, const tram_lora_site *site, tram_lora_group *groups, int n_groups,
                        float *const (*f)[TRAM_LORA_MAX_PARTS][2], const int *rank, tram_wtype type,
                        const tram_lora_scratch *sc, const float *x, const float *y0, float *y, int stride, int rows)
{
    tram_weight w[2][TRAM_LORA_MAX_PARTS][2];
    tram_error err;
    memcpy(y, y0, sizeof(float) * rows * stride);
    for (int g = 0; g < n_groups; g++)
        for (int p = 0; p < site->n_parts; p++) {
            groups[g].a[p] = groups[g].bt[p] = NULL;
            if (!f[g][p][0])
                continue;
            be->upload_weight(be, &w[g][p][0], f[g][p][0], rank[g], site->in, type);
            be->upload_weight(be, &w[g][p][1], f[g][p][1], rank[g], site->out[p], type);
            groups[g].a[p] = &w[g][p][0];
            groups[g].bt[p] = &w[g][p][1];
        }
    be->lora(be, y, stride, x, site, groups, n_groups, sc);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    for (int g = 0; g < n_groups; g++)
        for (int p = 0; p < site->n_parts; p++)
            if (groups[g].a[p]) {
                be->free_weight(be, &w[g][p][0]);
                be->free_weight(be, &w[g][p][1]);
            }
}

/* The op itself against the plain sum, on a site of n_parts parts (the
 * first out columns wide, the others out / 4, as q beside k and v), the
 * first adapter leaving the middle part alone (as one on q and v only): on
 * a narrow site (one stealable job, each item in a thread's scratch) and on
 * one too wide for that scratch (the ordinary job, in the model's); the
 * groups' rows out of order and in runs that break, and y's rows wider than
 * the site.  The factors are bf16 values, and held as bf16 they give the
 * same bits as held as f32. */
static void check_lora_op(int out, int n_parts)
{
    enum { IN = 40, ROWS = 6, STRIDE_PAD = 3, GROUPS = 2 };
    static const int32_t order[ROWS] = {4, 1, 2, 3, 0, 5};
    const int rank[GROUPS] = {3, 5}, first[GROUPS] = {0, 4}, count[GROUPS] = {4, 2};
    const float scale[GROUPS] = {0.5f, 2.0f};
    tram_backend *be;
    tram_error err;
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    tram_lora_site site = {.n_parts = n_parts, .in = IN};
    int width = 0, col[TRAM_LORA_MAX_PARTS];
    for (int p = 0; p < n_parts; p++) {
        site.out[p] = p ? out / 4 : out;
        col[p] = width;
        width += site.out[p];
    }
    int stride = width + STRIDE_PAD;
    float *x = malloc(sizeof(float) * ROWS * IN), *y0 = malloc(sizeof(float) * ROWS * stride);
    float *want = malloc(sizeof(float) * ROWS * stride), *f[GROUPS][TRAM_LORA_MAX_PARTS][2] = {{{0}}};
    float *y_f32 = malloc(sizeof(float) * ROWS * stride), *y_bf16 = malloc(sizeof(float) * ROWS * stride);
    for (int i = 0; i < ROWS * IN; i++)
        x[i] = (float)((i * 37 % 23) - 11) / 16;
    for (int i = 0; i < ROWS * stride; i++)
        y0[i] = want[i] = (float)(i % 7) / 8;
    tram_lora_group groups[GROUPS];
    for (int g = 0; g < GROUPS; g++) {
        groups[g] = (tram_lora_group){.scale = scale[g], .first = first[g], .count = count[g]};
        for (int p = 0; p < n_parts; p++) {
            if (g == 0 && p == 1)
                continue;
            int po = site.out[p];
            f[g][p][0] = malloc(sizeof(float) * rank[g] * IN);
            f[g][p][1] = malloc(sizeof(float) * rank[g] * po); /* Bᵀ */
            for (int i = 0; i < rank[g] * IN; i++)
                f[g][p][0][i] = (float)((i * 13 + g + p) % 17 - 8) / 32;
            for (int i = 0; i < rank[g] * po; i++)
                f[g][p][1][i] = (float)((i * 7 + 3 * g + p) % 19 - 9) / 32;
            for (int i = first[g]; i < first[g] + count[g]; i++)
                for (int c = 0; c < po; c++) {
                    double sum = 0;
                    for (int r = 0; r < rank[g]; r++) {
                        double t = 0;
                        for (int k = 0; k < IN; k++)
                            t += (double)x[order[i] * IN + k] * f[g][p][0][r * IN + k];
                        sum += t * f[g][p][1][r * po + c];
                    }
                    want[order[i] * stride + col[p] + c] += (float)(scale[g] * sum);
                }
        }
    }
    tram_lora_scratch sc = {.max_rows = ROWS, .max_in = IN, .max_rank = 5, .max_out = width};
    sc.order = be->alloc(be, sizeof(order));
    sc.t = be->alloc(be, sizeof(float) * ROWS * TRAM_LORA_MAX_PARTS * sc.max_rank);
    sc.ys = be->alloc(be, sizeof(float) * ROWS * width);
    memcpy(sc.order, order, sizeof(order));
    run_lora_op(be, &site, groups, GROUPS, f, rank, TRAM_W_F32, &sc, x, y0, y_f32, stride, ROWS);
    run_lora_op(be, &site, groups, GROUPS, f, rank, TRAM_W_BF16, &sc, x, y0, y_bf16, stride, ROWS);
    for (int i = 0; i < ROWS * stride; i++)
        cr_assert_float_eq(y_f32[i], want[i], 1e-4, "out %d, %d parts: element %d is %g, want %g", out, n_parts, i,
                           y_f32[i], want[i]);
    cr_assert(!memcmp(y_f32, y_bf16, sizeof(float) * ROWS * stride), "out %d, %d parts: bf16 factors differ", out,
              n_parts);
    for (int g = 0; g < GROUPS; g++)
        for (int p = 0; p < n_parts; p++)
            TRAM_FREE_ALL(f[g][p][0], f[g][p][1]);
    be->free(be, sc.order);
    be->free(be, sc.t);
    be->free(be, sc.ys);
    be->destroy(be);
    TRAM_FREE_ALL(x, y0, want, y_f32, y_bf16);
}

Test(lora, op_adds_the_plain_sum_on_both_of_its_paths)
{
    for (int parts = 1; parts <= TRAM_LORA_MAX_PARTS; parts++) {
        check_lora_op(80, parts);     /* vectors of the expand and a tail */
        check_lora_op(20000, parts);  /* a row's t and ys exceed a thread's 64 KiB scratch */
    }
}

/* Over a base in llama.cpp's interleaved Q/K order (a llama GGUF), the PEFT
 * directory's B rows are permuted as the converter permutes them: the GGUF
 * file's rows, which stay as they are. */
static void expect_same_rows_over_a_llama_gguf_base(const char *name, const tram_model_config *hf)
{
    tram_model_config c = *hf;
    c.rope_style = TRAM_ROPE_INTERLEAVED;
    char path[256];
    snprintf(path, sizeof(path), LORA_DIR "%s.gguf", name);
    tram_lora_adapter *g, *peft = open_adapter(name, &c);
    tram_error err;
    cr_assert(!tram_lora_open(&g, path, &c, 16, &err), "%s", err.msg);
    for (int k = 0; k < c.n_layers * TRAM_LORA_N_TARGETS; k++) {
        int in, out;
        tram_lora_target_dims(&c, k % TRAM_LORA_N_TARGETS, &in, &out);
        if (peft->b[k])
            cr_expect(!memcmp(g->b[k], peft->b[k], sizeof(float) * peft->rank * out), "%s: B %d differs", name, k);
    }
    tram_lora_free(g);
    tram_lora_free(peft);
}

/* The GGUF files of tests/fixtures/make_lora_gguf.py (llama.cpp's
 * converter's layout: llama arch, so B's Q/K rows permuted) against the
 * PEFT directories they were written from: the same factors, bit for bit,
 * once tram puts the rows back for this HF base, the same scale, and
 * PeftModel's greedy ids and logits. */
Test(lora, gguf_adapters_equal_their_peft_directories)
{
    lora_model m = open_model(0);
    const tram_model_config *c = tram_model_file_config(m.file);
    static const int slots[] = {0, 2};           /* sql's and code's in open_model */
    for (size_t i = 0; i < TRAM_ARRAY_LEN(slots); i++) {
        const char *name = adapters[slots[i]];
        char path[256];
        snprintf(path, sizeof(path), LORA_DIR "%s.gguf", name);
        tram_lora_adapter *g, *peft = open_adapter(name, c);
        tram_error err;
        cr_assert(!tram_lora_open(&g, path, c, 16, &err), "%s", err.msg);
        cr_expect_eq(g->rank, peft->rank);
        cr_expect_eq(g->targets, peft->targets);
        cr_expect_float_eq(g->scale, peft->scale, 1e-6);
        for (int k = 0; k < c->n_layers * TRAM_LORA_N_TARGETS; k++) {
            if (!peft->a[k])
                continue;
            int in, out;
            tram_lora_target_dims(c, k % TRAM_LORA_N_TARGETS, &in, &out);
            cr_expect(!memcmp(g->a[k], peft->a[k], sizeof(float) * peft->rank * in), "%s: A %d differs", name, k);
            cr_expect(!memcmp(g->b[k], peft->b[k], sizeof(float) * peft->rank * out), "%s: B %d differs", name, k);
        }
        cr_assert(!tram_model_lora_load(m.model, slots[i], g, &err), "%s", err.msg);
        tram_lora_free(g);
        tram_lora_free(peft);
        expect_same_rows_over_a_llama_gguf_base(name, c);
        test_golden_case cases[4];
        int n = load_cases(name, cases);
        test_runner r = test_runner_of(m.model);
        r.lora_slot = &slots[i];
        test_golden_run(&r, cases, n, 0, 1);
    }
    close_model(&m);
}

typedef struct {
    int slot;            /* -1: the base */
    const test_golden_case *g;
    int pos;             /* tokens computed so far */
    int32_t next;        /* the token to feed next */
} mixed_seq;

/* One pass of every sequence, each in its own slot of blocks: the next
 * third of its prompt when prefilling (every prompt ends in the third
 * pass), else its next token. */
static void add_step(batch_builder *bb, mixed_seq *q, int n_seqs, int prefill)
{
    bb_init(bb);
    for (int s = 0; s < n_seqs; s++) {
        int n = prefill ? TRAM_MIN((q[s].g->n_prompt + 2) / 3, q[s].g->n_prompt - q[s].pos) : 1;
        bb_add(bb, s, prefill ? q[s].g->ids + q[s].pos : &q[s].next, n, q[s].pos);
        bb_set_lora(bb, s, q[s].slot);
        q[s].pos += n;
    }
}

/* Rows of the same adapter apart in the batch (sql at both ends), the base
 * among them: each prompt prefilled in three chunks, the logits after it
 * within 1e-4 of PeftModel's, then every greedy step decoded together. */
static void mixed_batch(tram_model *model)
{
    static test_golden_case cases[4][4];
    const char *names[4] = {"base", "sql", "chat", "code"};
    for (int i = 0; i < 4; i++)
        load_cases(names[i], cases[i]);
    mixed_seq q[5] = {{0, &cases[1][0], 0, 0}, {-1, &cases[0][1], 0, 0}, {1, &cases[2][2], 0, 0},
                      {2, &cases[3][0], 0, 0}, {0, &cases[1][1], 0, 0}};
    int vocab = tram_model_config_of(model)->vocab_size;
    float *logits = malloc((size_t)5 * vocab * sizeof(float));
    batch_builder bb;
    for (int chunk = 0; chunk < 3; chunk++) {
        add_step(&bb, q, 5, 1);
        test_forward_ok(model, &bb.b, logits);
    }
    for (int s = 0; s < 5; s++)
        for (int i = 0; i < 20; i++) {
            float ours = logits[(size_t)s * vocab + q[s].g->top_ids[i]], ref = q[s].g->top_logits[i];
            cr_expect(fabsf(ours - ref) <= 1e-4f, "sequence %d token %d: %f, peft %f", s, q[s].g->top_ids[i], ours,
                      ref);
        }
    for (int t = 0; t < q[0].g->n_greedy; t++) {
        for (int s = 0; s < 5; s++) {
            q[s].next = test_argmax(logits + (size_t)s * vocab, vocab);
            cr_assert_eq(q[s].next, q[s].g->greedy[t], "sequence %d step %d: %d, peft %d", s, t, q[s].next,
                         q[s].g->greedy[t]);
        }
        add_step(&bb, q, 5, 0);
        test_forward_ok(model, &bb.b, logits);
    }
    free(logits);
}

Test(lora, mixed_batch_of_three_adapters_and_the_base_matches_peft)
{
    lora_model m = open_model(0);
    mixed_batch(m.model);
    close_model(&m);
}

/* The adapters beside int8 base matrices (W8A8): the updates read the f32
 * input rows beside the int8 products, so the logits are peft's within the
 * int8 base's own error (a few percent here; the adapter moves them much
 * further: its top tokens are not the base's). */
Test(lora, adapters_over_an_int8_base)
{
    lora_model m = open_model(1);
    test_golden_case cases[4];
    int slot = 1;
    int n = load_cases("chat", cases);
    test_runner r = test_runner_of(m.model);
    r.lora_slot = &slot;
    test_golden_run(&r, cases, n, 0.05f, 0);
    close_model(&m);
}

/* ---------------------------------------------------------------- TP=2 */

typedef struct {
    const tram_lora_adapter *a[3];
} lora_load_job;

static int load_on_rank(tram_ranks *r, int rank, void *ctx, tram_error *err)
{
    lora_load_job *job = ctx;
    for (int i = 0; i < 3; i++)
        if (tram_model_lora_load(tram_ranks_model(r, rank), i, job->a[i], err))
            return -1;
    return 0;
}

static int ranks_forward(void *ctx, const tram_batch *b, float *logits, tram_error *err)
{
    return tram_ranks_forward(ctx, b, logits, err);
}

/* A and B cut as their base matrices are: two ranks give PeftModel's logits
 * and greedy ids for every adapter. */
Test(lora, two_tensor_parallel_ranks_match_peft)
{
    tram_model_file *f;
    tram_ranks *r;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, LORA_DIR "base", &err), "%s", err.msg);
    tram_ranks_spec spec = {.device = "cpu", .world_size = 2, .num_threads = 2};
    tram_model_limits lim = lora_limits(0);
    cr_assert(!tram_ranks_create(&r, &spec, &err), "%s", err.msg);
    cr_assert(!tram_ranks_load(r, f, &lim, &err), "%s", err.msg);
    lora_load_job job;
    for (int i = 0; i < 3; i++)
        job.a[i] = open_adapter(adapters[i], tram_model_file_config(f));
    cr_assert(!tram_ranks_run(r, load_on_rank, &job, &err), "%s", err.msg);
    test_golden_case cases[4];
    for (int i = 0; i < 3; i++) {
        int n = load_cases(adapters[i], cases);
        test_runner run = {ranks_forward, r, tram_model_file_config(f)->vocab_size, &i};
        test_golden_run(&run, cases, n, 0, 1);
        tram_lora_free((tram_lora_adapter *)job.a[i]);
    }
    tram_ranks_destroy(r);
    tram_model_file_close(f);
}

/* ---------------------------------------------------------------- bad adapters */

/* A copy of the sql adapter in a fresh directory, its config edited by
 * edit (key = value, a JSON text; value NULL: deleted). */
static void copy_adapter(char *dir, const char *key, const char *value)
{
    strcpy(dir, "/tmp/tram-lora-XXXXXX");
    cr_assert(mkdtemp(dir));
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp " LORA_DIR "sql/adapter_config.json " LORA_DIR "sql/adapter_model.safetensors %s",
             dir);
    cr_assert_eq(system(cmd), 0);
    if (!key)
        return;
    char path[300];
    snprintf(path, sizeof(path), "%s/adapter_config.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    cr_assert(root);
    json_t *v = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
    cr_assert(!value || v, "%s", value);
    if (v)
        json_object_set_new(root, key, v);
    else
        json_object_del(root, key);
    cr_assert_eq(json_dump_file(root, path, 0), 0);
    json_decref(root);
}

static void remove_adapter(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Opening the adapter at dir fails with a message holding want. */
static void expect_refused(const char *dir, const tram_model_config *c, int max_rank, const char *want)
{
    tram_lora_adapter *a = NULL;
    tram_error err;
    cr_assert_eq(tram_lora_open(&a, dir, c, max_rank, &err), -1, "%s opened, expected '%s'", dir, want);
    cr_expect(strstr(err.msg, want), "'%s' does not say '%s'", err.msg, want);
    cr_expect_null(a);
}

Test(lora, configs_that_change_the_math_are_refused_by_name)
{
    static const struct {
        const char *key, *value, *want;
    } bad[] = {
        {"use_dora", "true", "\"use_dora\" is set: DoRA"},
        {"modules_to_save", "[\"lm_head\"]", "\"modules_to_save\" is set"},
        {"bias", "\"all\"", "\"bias\" is \"all\""},
        {"layers_to_transform", "[0]", "\"layers_to_transform\" is set"},
        {"rank_pattern", "{\"q_proj\": 4}", "\"rank_pattern\" is set"},
        {"target_modules", "[\"q_proj\", \"embed_tokens\"]", "target module \"embed_tokens\""},
        {"target_modules", "[\"c_attn\"]", "target module \"c_attn\": the base model has no such projection"},
        {"use_future_variant", "true", "\"use_future_variant\" is set: tram does not know what it changes"},
        {"peft_type", "\"IA3\"", "peft_type \"IA3\""},
        {"init_lora_weights", "\"pissa\"", "init_lora_weights \"pissa\""},
        {"r", NULL, "r"},
    };
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, LORA_DIR "base", &err), "%s", err.msg);
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bad); i++) {
        char dir[64];
        copy_adapter(dir, bad[i].key, bad[i].value);
        expect_refused(dir, tram_model_file_config(f), 16, bad[i].want);
        remove_adapter(dir);
    }
    /* inert keys and keys that are off change nothing */
    char dir[64];
    copy_adapter(dir, "lora_dropout", "0.1");
    tram_lora_adapter *a;
    cr_assert(!tram_lora_open(&a, dir, tram_model_file_config(f), 16, &err), "%s", err.msg);
    tram_lora_free(a);
    remove_adapter(dir);
    tram_model_file_close(f);
}

Test(lora, bad_files_and_sizes_are_clear_errors)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, LORA_DIR "base", &err), "%s", err.msg);
    tram_model_config c = *tram_model_file_config(f);
    char dir[64], path[128];
    copy_adapter(dir, NULL, NULL);
    expect_refused(dir, &c, 4, "rank 8 exceeds --max-lora-rank 4");
    c.dim = 16;   /* an adapter made for another base */
    expect_refused(dir, &c, 16, "elements, expected");
    c = *tram_model_file_config(f);
    c.n_layers = 1;
    expect_refused(dir, &c, 16, "is for layer 1; the base model has 1 layers");
    snprintf(path, sizeof(path), "%s/adapter_model.safetensors", dir);
    cr_assert_eq(truncate(path, 4000), 0);
    expect_refused(dir, tram_model_file_config(f), 16, "data_offsets");
    cr_assert_eq(truncate(path, 6), 0);
    expect_refused(dir, tram_model_file_config(f), 16, "too short");
    remove_adapter(dir);
    expect_refused("/nonexistent/adapter", tram_model_file_config(f), 16, "/nonexistent/adapter");
    tram_model_file_close(f);
}

/* A batch naming a slot that holds nothing fails: the pass never reads an
 * empty slot's factors. */
Test(lora, a_batch_naming_an_empty_slot_fails)
{
    lora_model m = open_model(0);
    tram_model_lora_unload(m.model, 2);
    batch_builder bb;
    bb_init(&bb);
    int32_t ids[2] = {1, 2};
    bb_add(&bb, 0, ids, 2, 0);
    bb_set_lora(&bb, 0, 2);
    float *logits = malloc((size_t)tram_model_config_of(m.model)->vocab_size * sizeof(float));
    tram_error err;
    cr_expect_eq(tram_model_forward(m.model, &bb.b, logits, &err), -1);
    cr_expect(strstr(err.msg, "LoRA slot 2 is not loaded"), "%s", err.msg);
    bb_set_lora(&bb, 0, 7);
    cr_expect_eq(tram_model_forward(m.model, &bb.b, logits, &err), -1);
    free(logits);
    close_model(&m);
}

/* ---------------------------------------------------------------- the engine */

static tram_engine *lora_engine(void)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 2;
    c.num_kv_blocks = 64;
    c.max_loras = 2;
    c.max_cpu_loras = 3;
    tram_engine *e;
    tram_error err;
    cr_assert(!tram_engine_create(&e, &c, LORA_DIR "base", &err), "%s", err.msg);
    for (int i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof(path), LORA_DIR "%s", adapters[i]);
        cr_assert(!tram_engine_add_lora(e, adapters[i], path, &err), "%s", err.msg);
    }
    return e;
}

/* A request holds its adapter from add_request to its last output: the
 * adapter is listed as waiting, then running, and unloading it is refused
 * meanwhile; the tokens are peft's. */
Test(lora, engine_pins_a_requests_adapter_until_it_finishes)
{
    tram_engine *e = lora_engine();
    test_golden_case cases[4];
    load_cases("code", cases);
    tram_sampling_params p = test_greedy_params(cases[0].n_greedy);
    tram_prompt pr = {.token_ids = cases[0].ids, .num_tokens = cases[0].n_prompt, .lora = "code"};
    tram_error err;
    tram_engine_stats st;
    cr_assert(!tram_engine_add_request(e, 1, &pr, &p, 0, &err), "%s", err.msg);
    tram_engine_stats_get(e, &st);
    cr_expect_str_eq(st.waiting_loras, "code");
    cr_expect_eq(st.max_loras, 2);
    int got = 0;
    while (tram_engine_has_unfinished(e)) {
        cr_assert_eq(tram_engine_remove_lora(e, "code", &err), -1, "unloaded while in use");
        cr_expect(strstr(err.msg, "in use by 1 unfinished request"), "%s", err.msg);
        const tram_output *outs;
        int n;
        cr_assert(!tram_engine_step(e, &outs, &n, &err), "%s", err.msg);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < outs[i].num_tokens; k++, got++)
                cr_expect_eq(outs[i].token_ids[k], cases[0].greedy[got], "token %d", got);
        tram_engine_stats_get(e, &st);
        if (tram_engine_has_unfinished(e))
            cr_expect_str_eq(st.running_loras, "code");
    }
    cr_expect_eq(got, cases[0].n_greedy);
    cr_expect_str_eq(st.running_loras, "");
    cr_expect(!tram_engine_remove_lora(e, "code", &err), "%s", err.msg);
    pr.lora = "code";
    cr_expect_eq(tram_engine_add_request(e, 2, &pr, &p, 0, &err), -1);
    cr_expect(strstr(err.msg, "'code' does not exist"), "%s", err.msg);
    char names[4][TRAM_LORA_NAME_MAX];
    cr_expect_eq(tram_engine_lora_names(e, names, 4), 2);
    tram_engine_destroy(e);
}

Test(lora, engine_refuses_duplicate_names_and_more_than_max_cpu_loras)
{
    tram_engine *e = lora_engine();
    tram_error err;
    cr_expect_eq(tram_engine_add_lora(e, "sql", LORA_DIR "sql", &err), -1);
    cr_expect(strstr(err.msg, "'sql' is already loaded"), "%s", err.msg);
    cr_expect_eq(tram_engine_add_lora(e, "sql2", LORA_DIR "sql", &err), -1);
    cr_expect(strstr(err.msg, "--max-cpu-loras"), "%s", err.msg);
    tram_engine_destroy(e);
}
