/* The Hugging Face directory loader: tensor values against numpy's / torch's
 * own float32 conversion (fixtures by tests/fixtures/make_hf_fixtures.py),
 * config.json of each family, name mapping, and malformed files, which must
 * fail with a message and never crash. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/arch.h"
#include "models/safetensors.h"

#define FIX "tests/fixtures/hf"

static const struct {
    const char *gguf;
    int64_t numel;
} float_tensors[] = {
    {"token_embd.weight", 16 * 8},
    {"output_norm.weight", 8},
    {"blk.0.attn_q.weight", 8 * 8},   /* F16 */
    {"blk.0.ffn_down.weight", 8 * 12}, /* BF16 */
};

static void read_expected(const char *gguf, float *out, int64_t n)
{
    char path[256];
    snprintf(path, sizeof(path), FIX "/expect/%s.f32", gguf);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    cr_assert_eq(fread(out, sizeof(float), (size_t)n, f), (size_t)n, "%s is short", path);
    fclose(f);
}

/* Bit-exact, except that any NaN equals any NaN. */
static void assert_same_floats(const float *a, const float *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        cr_assert(!memcmp(&a[i], &b[i], sizeof(float)), "%s[%lld]: %g != %g", what, (long long)i,
                  (double)a[i], (double)b[i]);
    }
}

static void check_values(const char *dir)
{
    tram_hf_model *m;
    tram_model_config c;
    tram_error err;
    cr_assert(!tram_hf_open(&m, dir, &c, &err), "%s", err.msg);
    float got[128], want[128];
    for (size_t i = 0; i < sizeof(float_tensors) / sizeof(float_tensors[0]); i++) {
        cr_assert(tram_hf_has_tensor(m, float_tensors[i].gguf), "%s", float_tensors[i].gguf);
        cr_assert(!tram_hf_read_f32(m, float_tensors[i].gguf, got, float_tensors[i].numel, &err), "%s", err.msg);
        read_expected(float_tensors[i].gguf, want, float_tensors[i].numel);
        assert_same_floats(got, want, float_tensors[i].numel, float_tensors[i].gguf);
    }
    cr_assert(!tram_hf_has_tensor(m, "output.weight"));
    cr_assert(!tram_hf_has_tensor(m, "blk.1.attn_q.weight"));
    cr_assert(tram_hf_read_f32(m, "blk.0.attn_k.weight", got, 32, &err) == -1);
    cr_assert(strstr(err.msg, "I32"), "%s", err.msg);
    cr_assert(tram_hf_read_f32(m, "token_embd.weight", got, 127, &err) == -1);
    cr_assert(strstr(err.msg, "128 elements"), "%s", err.msg);
    cr_assert(tram_hf_read_f32(m, "output.weight", got, 8, &err) == -1);
    tram_hf_close(m);
}

Test(safetensors, single_file_values) { check_values(FIX "/single"); }
Test(safetensors, sharded_values) { check_values(FIX "/sharded"); }

Test(safetensors, name_mapping)
{
    static const char *pairs[][2] = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
        {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
        {"blk.29.ffn_norm.weight", "model.layers.29.post_attention_layernorm.weight"},
        {"blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight"},
        {"blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"},
        {"blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"},
        {"blk.3.attn_q.bias", "model.layers.3.self_attn.q_proj.bias"},
        {"blk.3.attn_k.bias", "model.layers.3.self_attn.k_proj.bias"},
        {"blk.3.attn_v.bias", "model.layers.3.self_attn.v_proj.bias"},
        {"blk.12.attn_output.weight", "model.layers.12.self_attn.o_proj.weight"},
        {"blk.7.ffn_gate.weight", "model.layers.7.mlp.gate_proj.weight"},
        {"blk.7.ffn_up.weight", "model.layers.7.mlp.up_proj.weight"},
        {"blk.7.ffn_down.weight", "model.layers.7.mlp.down_proj.weight"},
    };
    char out[128];
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        cr_assert(!tram_arch_hf_name(tram_arch_by_name("llama"), pairs[i][0], out, sizeof(out)), "%s", pairs[i][0]);
        cr_assert_str_eq(out, pairs[i][1]);
    }
    static const char *unknown[] = {"rope_freqs.weight", "blk.0.attn_qkv.weight", "blk.x.attn_q.weight",
                                    "token_embd", "blk.-1.attn_q.weight", "output.scale", ""};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        cr_assert(tram_arch_hf_name(tram_arch_by_name("llama"), unknown[i], out, sizeof(out)) == -1, "'%s' mapped", unknown[i]);
    cr_assert(tram_arch_hf_name(tram_arch_by_name("llama"), "blk.0.ffn_down.weight", out, 10) == -1,
              "truncated name accepted");
    /* Qwen3's per-head norms are names of its row only */
    cr_assert(tram_arch_hf_name(tram_arch_by_name("llama"), "blk.2.attn_q_norm.weight", out, sizeof(out)) == -1);
    cr_assert(!tram_arch_hf_name(tram_arch_by_name("qwen3"), "blk.2.attn_k_norm.weight", out, sizeof(out)));
    cr_assert_str_eq(out, "model.layers.2.self_attn.k_norm.weight");
}

/* ---------------------------------------------------------------- config.json */

static tram_model_config open_config(const char *name)
{
    char dir[256];
    snprintf(dir, sizeof(dir), FIX "/config_%s", name);
    tram_hf_model *m;
    tram_model_config c;
    tram_error err;
    cr_assert(!tram_hf_open(&m, dir, &c, &err), "%s: %s", name, err.msg);
    tram_hf_close(m);
    return c;
}

static void config_fails(const char *name, const char *needle)
{
    char dir[256];
    snprintf(dir, sizeof(dir), FIX "/config_%s", name);
    tram_hf_model *m = NULL;
    tram_model_config c;
    tram_error err = {{0}};
    cr_assert(tram_hf_open(&m, dir, &c, &err) == -1, "%s opened", name);
    cr_assert(strstr(err.msg, needle), "%s: '%s' lacks '%s'", name, err.msg, needle);
}

Test(safetensors, config_llama)
{
    tram_model_config c = open_config("llama");
    cr_assert_str_eq(c.arch, "llama");
    cr_assert(c.dim == 576 && c.n_layers == 30 && c.n_heads == 9 && c.n_kv_heads == 3 && c.head_dim == 64);
    cr_assert(c.ffn_dim == 1536 && c.vocab_size == 49152 && c.max_seq_len == 8192);
    cr_assert_float_eq(c.norm_eps, 1e-5f, 1e-12);
    cr_assert_float_eq(c.rope_theta, 100000.0f, 1e-3);
    cr_assert(c.rope_style == TRAM_ROPE_NEOX && !c.rope_scaling_llama3);
    cr_assert(c.tied_embeddings && !c.qkv_bias);
}

Test(safetensors, config_mistral)
{
    tram_model_config c = open_config("mistral");
    cr_assert_str_eq(c.arch, "mistral");
    cr_assert(c.n_heads == 32 && c.n_kv_heads == 8 && c.head_dim == 128 && !c.tied_embeddings);
    cr_assert_eq(c.max_seq_len, 4096, "the sliding window bounds the context");
    cr_assert_float_eq(c.rope_theta, 10000.0f, 1e-3);
}

Test(safetensors, config_qwen2)
{
    tram_model_config c = open_config("qwen2");
    cr_assert_str_eq(c.arch, "qwen2");
    cr_assert(c.qkv_bias && c.tied_embeddings && c.rope_style == TRAM_ROPE_NEOX);
    cr_assert(c.n_heads == 14 && c.n_kv_heads == 2 && c.head_dim == 64 && c.vocab_size == 151936);
    cr_assert_eq(c.max_seq_len, 131072, "use_sliding_window is false");
    cr_assert_float_eq(c.norm_eps, 1e-6f, 1e-13);
    cr_assert_float_eq(c.rope_theta, 1e6f, 1e-1);
}

static void assert_llama3_rope(tram_model_config c)
{
    cr_assert(c.rope_scaling_llama3);
    cr_assert_float_eq(c.rope_theta, 500000.0f, 1e-1);
    cr_assert_float_eq(c.rope_factor, 32.0f, 1e-6);
    cr_assert_float_eq(c.rope_low_freq_factor, 1.0f, 1e-6);
    cr_assert_float_eq(c.rope_high_freq_factor, 4.0f, 1e-6);
    cr_assert_eq(c.rope_original_max_pos, 8192);
    cr_assert(c.head_dim == 64 && c.n_kv_heads == 8 && c.max_seq_len == 131072);
}

Test(safetensors, config_llama3_rope) { assert_llama3_rope(open_config("llama3")); }
Test(safetensors, config_rope_parameters) { assert_llama3_rope(open_config("llama3_v5")); }

Test(safetensors, config_errors)
{
    config_fails("yarn", "yarn");
    config_fails("gpt2", "GPT2LMHeadModel");
    config_fails("no_hidden_size", "hidden_size");
    config_fails("does_not_exist", "config.json");
}

/* ---------------------------------------------------------------- malformed files */

static char tmp[64];

static void make_tmp(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/tram_st_XXXXXX");
    cr_assert(mkdtemp(tmp));
    char path[128];
    snprintf(path, sizeof(path), "%s/config.json", tmp);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1,"
          " \"num_attention_heads\": 2, \"intermediate_size\": 12, \"vocab_size\": 16}", f);
    fclose(f);
}

static void remove_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    cr_assert_eq(system(cmd), 0);
}

static void write_raw(const char *name, const void *bytes, size_t n)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

/* A safetensors file: header_len (normally strlen(header)), header, data_len zero bytes. */
static void write_st(const char *name, uint64_t header_len, const char *header, size_t data_len)
{
    size_t n = strlen(header);
    uint8_t *buf = calloc(1, 8 + n + data_len);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(header_len >> (8 * i));
    memcpy(buf + 8, header, n);
    write_raw(name, buf, 8 + n + data_len);
    free(buf);
}

static void open_fails(const char *needle)
{
    tram_hf_model *m = NULL;
    tram_model_config c;
    tram_error err = {{0}};
    cr_assert(tram_hf_open(&m, tmp, &c, &err) == -1, "a malformed file opened (expected '%s')", needle);
    cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
}

static void st_case(const char *header, size_t data_len, const char *needle)
{
    write_st("model.safetensors", strlen(header), header, data_len);
    open_fails(needle);
}

Test(safetensors, malformed_files, .init = make_tmp, .fini = remove_tmp)
{
    open_fails("neither model.safetensors");
    write_raw("model.safetensors", "\x10\0\0\0\0", 5);
    open_fails("too short");
    write_st("model.safetensors", UINT64_MAX, "{}", 0);
    open_fails("header length");
    write_st("model.safetensors", 3, "{}", 0);
    open_fails("header length");
    st_case("{\"a\": ", 0, "JSON");
    st_case("[1, 2]", 0, "not a JSON object");
    static const char *f32 = "\"model.norm.weight\": {\"dtype\": \"F32\", ";
    char h[512];
#define CASE(rest, data_len, needle) \
    (snprintf(h, sizeof(h), "{%s%s}", f32, rest), st_case(h, data_len, needle))
    CASE("\"shape\": [8], \"data_offsets\": [0, 64]}", 32, "data_offsets");
    CASE("\"shape\": [8], \"data_offsets\": [16, 0]}", 32, "data_offsets");
    CASE("\"shape\": [8], \"data_offsets\": [-4, 28]}", 32, "data_offsets");
    CASE("\"shape\": [8], \"data_offsets\": [0]}", 32, "data_offsets");
    CASE("\"shape\": [2, 2], \"data_offsets\": [0, 12]}", 32, "do not hold");
    CASE("\"shape\": [-8], \"data_offsets\": [0, 32]}", 32, "shape");
    CASE("\"shape\": [1099511627776, 1099511627776], \"data_offsets\": [0, 32]}", 32, "shape");
    CASE("\"shape\": \"8\", \"data_offsets\": [0, 32]}", 32, "shape");
    CASE("\"shape\": [8], \"data_offsets\": [0, 32]}, \"model.norm.weight\": {}", 32, "JSON");
#undef CASE
    st_case("{\"model.norm.weight\": {\"dtype\": \"F12\", \"shape\": [8], \"data_offsets\": [0, 32]}}", 32,
            "unknown dtype 'F12'");
    st_case("{\"model.norm.weight\": {\"shape\": [8], \"data_offsets\": [0, 32]}}", 32, "no dtype");
    st_case("{\"model.norm.weight\": 5}", 32, "no dtype");
}

static void write_index(const char *weight_map)
{
    char json[512];
    snprintf(json, sizeof(json), "{\"weight_map\": {%s}}", weight_map);
    write_raw("model.safetensors.index.json", json, strlen(json));
}

Test(safetensors, malformed_shards, .init = make_tmp, .fini = remove_tmp)
{
    static const char *norm = "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]}}";
    write_st("a.safetensors", strlen(norm), norm, 32);
    write_st("b.safetensors", strlen(norm), norm, 32);
    write_index("\"model.norm.weight\": \"a.safetensors\", \"model.embed_tokens.weight\": \"b.safetensors\"");
    open_fails("appears in both");
    write_index("\"model.norm.weight\": \"a.safetensors\", \"lm_head.weight\": \"a.safetensors\"");
    open_fails("does not hold");
    write_index("\"model.norm.weight\": \"../a.safetensors\"");
    open_fails("not a file name");
    write_index("\"model.norm.weight\": \"c.safetensors\"");
    open_fails("cannot open");
    write_index("\"model.norm.weight\": 3");
    open_fails("not a file name");
    write_raw("model.safetensors.index.json", "{\"weight_map\": []}", 18);
    open_fails("weight_map");
    write_index("\"model.norm.weight\": \"a.safetensors\"");
    tram_hf_model *m;
    tram_model_config c;
    tram_error err;
    cr_assert(!tram_hf_open(&m, tmp, &c, &err), "a valid index failed: %s", err.msg);
    cr_assert(tram_hf_has_tensor(m, "output_norm.weight"));
    tram_hf_close(m);
}
