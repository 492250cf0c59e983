/* `tram convert`: the default GGUF written as a Hugging Face directory and
 * read back must hold the GGUF's dequantized tensors, with Q/K rows in HF's
 * order (checked by re-applying llama.cpp's permutation), and the two files
 * must give the same logits, one with interleaved RoPE and one with NeoX. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "models/gguf.h"
#include "models/hf_writer.h"
#include "models/model.h"

static char dir[64];
static tram_model_file *gguf_file, *hf_file;

static void convert(tram_hf_dtype dtype)
{
    tram_error err;
    snprintf(dir, sizeof(dir), "/tmp/tram_convert_XXXXXX");
    cr_assert(mkdtemp(dir));
    cr_assert(!tram_model_file_open(&gguf_file, TRAM_DEFAULT_MODEL, &err), "%s", err.msg);
    cr_assert(!tram_hf_convert(gguf_file, dir, dtype, &err), "%s", err.msg);
    cr_assert(!tram_model_file_open(&hf_file, dir, &err), "%s", err.msg);
}

static void convert_f32(void) { convert(TRAM_HF_F32); }
static void convert_bf16(void) { convert(TRAM_HF_BF16); }

static void cleanup(void)
{
    tram_model_file_close(hf_file);
    tram_model_file_close(gguf_file);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* llama.cpp's convert script, per head: w.reshape(n_head, 2, hd/2, cols)
 * .swapaxes(1, 2), i.e. GGUF row (h, i, s) is HF row (h, s, i). */
static void llama_cpp_permute(const float *hf, float *out, int64_t rows, int64_t cols, int n_head)
{
    int64_t hd = rows / n_head;
    for (int h = 0; h < n_head; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int s = 0; s < 2; s++)
                memcpy(out + (h * hd + i * 2 + s) * cols, hf + (h * hd + s * hd / 2 + i) * cols,
                       (size_t)cols * sizeof(float));
}

static int permuted_heads(const tram_model_config *c, const char *name)
{
    return strstr(name, ".attn_q.") ? c->n_heads : strstr(name, ".attn_k.") ? c->n_kv_heads : 0;
}

Test(convert, config_survives, .init = convert_f32, .fini = cleanup, .timeout = 120)
{
    const tram_model_config *a = tram_model_file_config(gguf_file), *b = tram_model_file_config(hf_file);
    cr_assert_str_eq(a->arch, b->arch);
    cr_assert(a->dim == b->dim && a->n_layers == b->n_layers && a->n_heads == b->n_heads);
    cr_assert(a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim && a->ffn_dim == b->ffn_dim);
    cr_assert(a->vocab_size == b->vocab_size && a->max_seq_len == b->max_seq_len);
    cr_assert(a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta, "floats must survive exactly");
    cr_assert(a->tied_embeddings == b->tied_embeddings && a->qkv_bias == b->qkv_bias);
    cr_assert(a->rope_style == TRAM_ROPE_INTERLEAVED && b->rope_style == TRAM_ROPE_NEOX);
}

Test(convert, tensors_equal_dequantized_gguf, .init = convert_f32, .fini = cleanup, .timeout = 120)
{
    const tram_gguf *g = tram_model_file_gguf(gguf_file);
    const tram_model_config *c = tram_model_file_config(gguf_file);
    tram_error err;
    float *want = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)c->dim);
    float *got = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)c->dim);
    float *repermuted = malloc(sizeof(float) * (size_t)c->dim * (size_t)c->dim);
    int n_permuted = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        int64_t n = tram_gguf_tensor_numel(t);
        cr_assert(tram_model_file_has_tensor(hf_file, t->name), "%s is missing", t->name);
        cr_assert(!tram_model_file_read_f32(gguf_file, t->name, want, n, &err), "%s", err.msg);
        cr_assert(!tram_model_file_read_f32(hf_file, t->name, got, n, &err), "%s", err.msg);
        int heads = permuted_heads(c, t->name);
        if (heads) {
            /* The test means something only if HF's order differs from the GGUF's. */
            cr_assert(memcmp(got, want, (size_t)n * sizeof(float)), "%s: rows not reordered", t->name);
            llama_cpp_permute(got, repermuted, t->ne[1], t->ne[0], heads);
            memcpy(got, repermuted, (size_t)n * sizeof(float));
            n_permuted++;
        }
        cr_assert(!memcmp(got, want, (size_t)n * sizeof(float)), "%s differs from the GGUF", t->name);
    }
    cr_assert_eq(n_permuted, 2 * c->n_layers);
    cr_assert_eq(g->n_tensors, 2 + 9 * (uint64_t)c->n_layers, "every tensor was compared");
    free(want);
    free(got);
    free(repermuted);
}

/* bf16 matrices are the f32 values rounded to 8 significant bits; norms stay exact. */
Test(convert, bf16_rounds_matrices_only, .init = convert_bf16, .fini = cleanup, .timeout = 120)
{
    const tram_model_config *c = tram_model_file_config(gguf_file);
    tram_error err;
    static const char *names[] = {"token_embd.weight", "blk.0.ffn_down.weight", "blk.29.attn_v.weight",
                                  "output_norm.weight", "blk.3.attn_norm.weight"};
    float *want = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)c->dim);
    float *got = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)c->dim);
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        int64_t n = strstr(names[k], "norm") ? c->dim
                    : strstr(names[k], "token_embd") ? (int64_t)c->vocab_size * c->dim
                                                     : (int64_t)c->dim * (strstr(names[k], "attn_v")
                                                                              ? c->n_kv_heads * c->head_dim
                                                                              : c->ffn_dim);
        cr_assert(!tram_model_file_read_f32(gguf_file, names[k], want, n, &err), "%s", err.msg);
        cr_assert(!tram_model_file_read_f32(hf_file, names[k], got, n, &err), "%s", err.msg);
        int exact = strstr(names[k], "norm") != NULL, rounded = 0;
        for (int64_t i = 0; i < n; i++) {
            cr_assert(fabsf(got[i] - want[i]) <= ldexpf(fabsf(want[i]), -8), "%s[%lld]: %g vs %g", names[k],
                      (long long)i, (double)got[i], (double)want[i]);
            rounded += got[i] != want[i];
        }
        cr_assert(exact ? rounded == 0 : rounded > 0, "%s: %d values rounded", names[k], rounded);
    }
    free(want);
    free(got);
}

/* ---------------------------------------------------------------- logits */

#define BLOCK 16

static void run_logits(tram_model_file *f, const int32_t *ids, int n, float *logits)
{
    tram_backend *be;
    tram_model *m;
    tram_error err;
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    tram_model_limits lim = {.max_tokens = 64, .max_seqs = 1, .max_blocks_per_seq = 4, .num_blocks = 4,
                             .block_size = BLOCK, .weight_type = TRAM_W_F32};
    cr_assert(!tram_model_create(&m, f, be, &lim, &err), "%s", err.msg);
    int32_t pos[64], slots[64], rows[64], qstart[2] = {0, n}, lens[1] = {n}, table[4] = {2, 0, 3, 1};
    for (int i = 0; i < n; i++) {
        pos[i] = rows[i] = i;
        slots[i] = table[i / BLOCK] * BLOCK + i % BLOCK;
    }
    tram_batch b = {.num_tokens = n, .num_seqs = 1, .token_ids = ids, .positions = pos, .slot_mapping = slots,
                    .query_start = qstart, .seq_lens = lens, .block_tables = table, .max_blocks_per_seq = 4,
                    .logits_rows = rows, .num_logits = n};
    cr_assert(!tram_model_forward(m, &b, logits, &err), "%s", err.msg);
    tram_model_destroy(m);
    be->destroy(be);
}

Test(convert, logits_match_gguf, .init = convert_f32, .fini = cleanup, .timeout = 300)
{
    /* "<|im_start|>user\nThe capital of France is" and a run of digits: 21
     * tokens, so that RoPE turns through two KV blocks' worth of positions. */
    static const int32_t ids[] = {1, 4093, 198, 504, 3575, 282, 4649, 314, 216, 33, 34, 35, 216, 36,
                                  37, 38, 39, 30, 40, 41, 2};
    int n = (int)(sizeof(ids) / sizeof(ids[0]));
    int vocab = tram_model_file_config(gguf_file)->vocab_size;
    float *a = malloc(sizeof(float) * (size_t)n * (size_t)vocab);
    float *b = malloc(sizeof(float) * (size_t)n * (size_t)vocab);
    run_logits(gguf_file, ids, n, a);
    run_logits(hf_file, ids, n, b);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * (size_t)vocab; i++) {
        double rel = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1.0);
        worst = rel > worst ? rel : worst;
    }
    cr_assert(worst <= 1e-4, "logits differ by %g (relative) between the GGUF and its conversion", worst);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- tokenizer files */

static json_t *load(const char *name)
{
    char path[128];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert(root, "%s: %s", path, jerr.text);
    return root;
}

static int str_eq(const tram_gguf_str *s, const char *z)
{
    return z && strlen(z) == s->len && !memcmp(s->ptr, z, s->len);
}

Test(convert, tokenizer_files_carry_the_gguf_vocabulary, .init = convert_f32, .fini = cleanup, .timeout = 120)
{
    const tram_gguf *g = tram_model_file_gguf(gguf_file);
    const tram_gguf_value *tokens = &tram_gguf_find_kv(g, "tokenizer.ggml.tokens")->value;
    const tram_gguf_value *merges = &tram_gguf_find_kv(g, "tokenizer.ggml.merges")->value;
    json_t *tok = load("tokenizer.json"), *cfg = load("tokenizer_config.json");
    json_t *model = json_object_get(tok, "model"), *vocab = json_object_get(model, "vocab");
    cr_assert_eq(json_object_size(vocab), tokens->v.arr.count);
    tram_gguf_str s;
    for (uint64_t i = 0; i < tokens->v.arr.count; i += 97) {
        cr_assert(!tram_gguf_arr_str(tokens, i, &s, NULL));
        char key[256];
        snprintf(key, sizeof(key), "%.*s", (int)s.len, s.ptr);
        cr_assert_eq(json_integer_value(json_object_get(vocab, key)), (json_int_t)i, "token %s", key);
    }
    json_t *jm = json_object_get(model, "merges");
    cr_assert_eq(json_array_size(jm), merges->v.arr.count);
    for (uint64_t i = 0; i < merges->v.arr.count; i += 101) {
        cr_assert(!tram_gguf_arr_str(merges, i, &s, NULL));
        cr_assert(str_eq(&s, json_string_value(json_array_get(jm, i))), "merge %llu", (unsigned long long)i);
    }
    /* SmolLM2: 17 control tokens, ids 0..16, all special; digits split one by one. */
    json_t *added = json_object_get(tok, "added_tokens");
    cr_assert_eq(json_array_size(added), 17);
    for (size_t i = 0; i < 17; i++) {
        json_t *a = json_array_get(added, i);
        cr_assert_eq(json_integer_value(json_object_get(a, "id")), (json_int_t)i);
        cr_assert(json_is_true(json_object_get(a, "special")));
    }
    json_t *pre = json_object_get(tok, "pre_tokenizer");
    cr_assert_str_eq(json_string_value(json_object_get(pre, "type")), "Sequence");
    json_t *digits = json_array_get(json_object_get(pre, "pretokenizers"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(digits, "type")), "Digits");
    cr_assert(json_is_true(json_object_get(digits, "individual_digits")));
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "bos_token")), "<|im_start|>");
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "eos_token")), "<|im_end|>");
    cr_assert(json_is_false(json_object_get(cfg, "add_bos_token")));
    const tram_gguf_kv *tmpl = tram_gguf_find_kv(g, "tokenizer.chat_template");
    cr_assert(str_eq(&tmpl->value.v.str, json_string_value(json_object_get(cfg, "chat_template"))));
    json_decref(tok);
    json_decref(cfg);
}
