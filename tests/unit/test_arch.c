/* The table of architectures (models/arch.h) against transformers: every
 * row has a Hugging Face directory and a GGUF golden fixture
 * (tests/fixtures/make_arch_fixtures.py, make_moe_fixtures.py), and each
 * gives transformers' greedy tokens and top logits; the dense ones also at
 * two tensor-parallel ranks and after `tram convert` writes the GGUF back as
 * a directory.  A row added without fixtures fails the first test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ranks.h"
#include "models/arch.h"
#include "models/gguf.h"
#include "models/hf_writer.h"
#include "models/model.h"
#include "tests/unit/test_batch.h"

#define ARCH_DIR "tests/fixtures/arch/"
#define MOE_DIR "tests/fixtures/moe/"

/* One golden fixture per row: transformers' outputs, and the same weights
 * as save_pretrained and as llama.cpp's converter write them. */
static const struct {
    const char *row, *golden, *hf, *gguf;
} fixtures[] = {
    {"llama", ARCH_DIR "llama.json", ARCH_DIR "llama", ARCH_DIR "llama.gguf"},
    {"mistral", ARCH_DIR "mistral.json", ARCH_DIR "mistral", ARCH_DIR "mistral.gguf"},
    {"qwen2", ARCH_DIR "qwen2.json", ARCH_DIR "qwen2", ARCH_DIR "qwen2.gguf"},
    {"qwen3", ARCH_DIR "qwen3.json", ARCH_DIR "qwen3", ARCH_DIR "qwen3.gguf"},
    {"mixtral", MOE_DIR "mixtral.json", MOE_DIR "mixtral", MOE_DIR "mixtral.gguf"},
    {"qwen2moe", MOE_DIR "qwen2moe.json", MOE_DIR "qwen2moe", MOE_DIR "qwen2moe.gguf"},
};

static test_golden_case cases[8];

static void golden(const char *fixture, const char *path)
{
    int n = test_load_golden(fixture, cases, 8);
    tram_model_file *f;
    tram_backend *be;
    tram_model *m;
    tram_error err;
    tram_model_limits lim = test_model_limits();
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    cr_assert(!tram_model_create(&m, f, be, &lim, &err), "%s", err.msg);
    test_golden_check(m, cases, n, 1e-3f, 1);
    tram_model_destroy(m);
    be->destroy(be);
    tram_model_file_close(f);
}

static int is_dir(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* The GGUF's general.architecture, into out. */
static void gguf_arch(const char *path, char *out, size_t len)
{
    tram_gguf *g;
    tram_error err;
    char *arch;
    cr_assert(!tram_gguf_open(&g, path, &err), "%s", err.msg);
    cr_assert(!tram_gguf_get_str(g, "general.architecture", &arch, &err), "%s", err.msg);
    snprintf(out, len, "%s", arch);
    free(arch);
    tram_gguf_close(g);
}

TestSuite(arch, .timeout = 120);

/* Each row's directory reads as that row, and its GGUF carries the row's
 * general.architecture (a Mistral's is llama.cpp's "llama"). */
Test(arch, every_row_has_an_hf_and_a_gguf_golden)
{
    cr_assert_eq(tram_arch_count(), (int)TRAM_ARRAY_LEN(fixtures), "a row without fixtures, or fixtures without a row");
    for (int i = 0; i < tram_arch_count(); i++) {
        const tram_arch *a = tram_arch_at(i);
        size_t k = 0;
        while (k < TRAM_ARRAY_LEN(fixtures) && strcmp(fixtures[k].row, a->name))
            k++;
        cr_assert(k < TRAM_ARRAY_LEN(fixtures), "row %s has no golden fixtures in tests/unit/test_arch.c", a->name);
        cr_assert(is_dir(fixtures[k].hf) && !access(fixtures[k].golden, R_OK), "%s: %s or %s is missing", a->name,
                  fixtures[k].hf, fixtures[k].golden);
        tram_model_file *f;
        tram_error err;
        cr_assert(!tram_model_file_open(&f, fixtures[k].hf, &err), "%s", err.msg);
        cr_expect_str_eq(tram_model_file_config(f)->arch, a->name, "%s", fixtures[k].hf);
        tram_model_file_close(f);
        char arch[64];
        gguf_arch(fixtures[k].gguf, arch, sizeof(arch));
        cr_expect_str_eq(arch, a->gguf_arch, "%s", fixtures[k].gguf);
    }
}

Test(arch, hf_directories_match_transformers)
{
    for (size_t k = 0; k < TRAM_ARRAY_LEN(fixtures); k++)
        golden(fixtures[k].golden, fixtures[k].hf);
}

Test(arch, ggufs_match_transformers)
{
    for (size_t k = 0; k < TRAM_ARRAY_LEN(fixtures); k++)
        golden(fixtures[k].golden, fixtures[k].gguf);
}

/* Lookups by each key give the row back; unknown names give none. */
Test(arch, rows_are_found_by_every_name)
{
    for (int i = 0; i < tram_arch_count(); i++) {
        const tram_arch *a = tram_arch_at(i);
        cr_assert_eq(tram_arch_by_name(a->name), a);
        cr_assert_eq(tram_arch_by_hf(a->hf_architecture, NULL), a);
        cr_assert_eq(tram_arch_by_hf(NULL, a->hf_model_type), a);
        cr_assert(tram_arch_by_gguf(a->gguf_arch, a->moe != NULL));
    }
    cr_assert_str_eq(tram_arch_by_gguf("llama", 1)->name, "mixtral");
    cr_assert_str_eq(tram_arch_by_gguf("llama", 0)->name, "llama");
    cr_assert_null(tram_arch_by_gguf("qwen2", 1));
    cr_assert_null(tram_arch_by_name("gemma"));
    cr_assert_null(tram_arch_by_hf("GemmaForCausalLM", "gemma"));
    const tram_arch *qwen3 = tram_arch_by_name("qwen3"), *qwen2moe = tram_arch_by_name("qwen2moe");
    cr_assert_eq(tram_arch_split(qwen3, "blk.3.attn_q.weight"), TRAM_SPLIT_Q_ROWS);
    cr_assert_eq(tram_arch_split(qwen3, "blk.3.attn_v.bias"), TRAM_SPLIT_KV_ROWS);
    cr_assert_eq(tram_arch_split(qwen3, "blk.3.attn_output.weight"), TRAM_SPLIT_Q_COLS);
    cr_assert_eq(tram_arch_split(qwen3, "blk.3.attn_q_norm.weight"), TRAM_SPLIT_NONE);
    cr_assert_eq(tram_arch_split(qwen2moe, "blk.0.ffn_down_shexp.weight"), TRAM_SPLIT_SHARED_COLS);
    cr_assert_eq(tram_arch_split(qwen2moe, "blk.0.ffn_up.5.weight"), TRAM_SPLIT_NONE);
    cr_assert_eq(tram_arch_split(qwen2moe, "blk.0.ffn_up.weight"), TRAM_SPLIT_FFN_ROWS);
    char list[256];
    tram_arch_list(TRAM_ARCH_LIST_GGUF, list, sizeof(list));
    cr_assert_str_eq(list, "llama, qwen2, qwen3, qwen2moe");
}

static int ranks_forward(void *ranks, const tram_batch *b, float *logits, tram_error *err)
{
    return tram_ranks_forward(ranks, b, logits, err);
}

/* Two ranks split the heads (Qwen3's q/k norms replicated on both) and the
 * FFN: transformers' tokens and logits again. */
Test(arch, dense_rows_at_tensor_parallel_2_match_transformers)
{
    tram_model_limits lim = test_model_limits();
    for (size_t k = 0; k < 4; k++) {
        int n = test_load_golden(fixtures[k].golden, cases, 8);
        tram_model_file *f;
        tram_ranks *ranks;
        tram_error err;
        tram_ranks_spec spec = {.device = "cpu", .world_size = 2, .num_threads = 2};
        cr_assert(!tram_model_file_open(&f, fixtures[k].gguf, &err), "%s", err.msg);
        cr_assert(!tram_ranks_create(&ranks, &spec, &err), "%s", err.msg);
        cr_assert(!tram_ranks_load(ranks, f, &lim, &err), "%s", err.msg);
        test_runner two = {ranks_forward, ranks, tram_model_file_config(f)->vocab_size, NULL};
        test_golden_run(&two, cases, n, 1e-3f, 1);
        tram_ranks_destroy(ranks);
        tram_model_file_close(f);
    }
}

/* `tram convert` writes each dense GGUF as its row's HF class (Mistral's
 * GGUF is llama.cpp's "llama": a LlamaForCausalLM): the directory gives
 * transformers' tokens and logits again. */
Test(arch, converted_dense_ggufs_match_transformers)
{
    for (size_t k = 0; k < 4; k++) {
        char dir[] = "/tmp/tram_arch_convert_XXXXXX", cmd[64];
        tram_model_file *f;
        tram_error err;
        cr_assert(mkdtemp(dir));
        cr_assert(!tram_model_file_open(&f, fixtures[k].gguf, &err), "%s", err.msg);
        cr_assert(!tram_hf_convert(f, dir, TRAM_HF_BF16, &err), "%s", err.msg);
        tram_model_file_close(f);
        golden(fixtures[k].golden, dir);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
    }
}
