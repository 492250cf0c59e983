/* hf_writer.c — `tram convert`: a GGUF model written as a Hugging Face
 * directory that transformers loads as it would the original checkpoint. */
#include "models/hf_writer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/arch.h"
#include "models/gguf.h"
#include "models/moe_files.h"

/* Token ids from the GGUF's tokenizer metadata; -1 when absent. */
typedef struct {
    long long bos, eos, unk, pad;
    int add_bos;
    uint64_t n_tokens;
    const tram_gguf_value *tokens, *merges, *types;
} gguf_vocab;

/* ---------------------------------------------------------------- JSON files */

static int write_json(const char *dir, const char *name, json_t *root, size_t flags, tram_error *err)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int rc = root && !json_dump_file(root, path, flags) ? 0 : tram_fail(err, "%s: cannot write", path);
    json_decref(root);
    return rc;
}

/* The shortest decimal that reads back as the same float, so that config.json
 * says 1e-05 and not 9.99999975e-06. */
static json_t *json_float(float v)
{
    char buf[32];
    for (int digits = 1; digits < 9; digits++) {
        snprintf(buf, sizeof(buf), "%.*g", digits, (double)v);
        if ((float)strtod(buf, NULL) == v)
            return json_real(strtod(buf, NULL));
    }
    return json_real((double)v);
}

static void set_id(json_t *obj, const char *key, long long id)
{
    if (id >= 0)
        json_object_set_new(obj, key, json_integer(id));
}

/* ---------------------------------------------------------------- config.json */

/* The experts' fields of the row's config class (MixtralConfig, Qwen2MoeConfig). */
static void moe_config(json_t *root, const tram_arch_moe *moe, const tram_model_config *c)
{
    if (!moe)
        return;
    json_object_set_new(root, moe->hf_count_key, json_integer(c->n_experts));
    json_object_set_new(root, "num_experts_per_tok", json_integer(c->n_experts_used));
    if (moe->hf_ffn_key)
        json_object_set_new(root, moe->hf_ffn_key, json_integer(c->ffn_dim));
    if (moe->shared_expert)
        json_object_set_new(root, "shared_expert_intermediate_size", json_integer(c->shared_ffn_dim));
    if (moe->hf_norm_key)
        json_object_set_new(root, moe->hf_norm_key, json_boolean(c->norm_topk_prob));
    if (moe->hf_sparse_step) {
        json_object_set_new(root, "decoder_sparse_step", json_integer(1));
        json_object_set_new(root, "mlp_only_layers", json_array());
    }
}

static json_t *config_json(const tram_model_config *c, const gguf_vocab *v, tram_hf_dtype dtype)
{
    const tram_arch *a = tram_arch_by_name(c->arch);
    json_t *rope = json_null();
    if (c->rope_scaling_llama3)
        rope = json_pack("{s:s, s:o, s:o, s:o, s:i}", "rope_type", "llama3", "factor", json_float(c->rope_factor),
                         "low_freq_factor", json_float(c->rope_low_freq_factor), "high_freq_factor",
                         json_float(c->rope_high_freq_factor), "original_max_position_embeddings",
                         c->rope_original_max_pos);
    json_t *root = json_pack(
        "{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:b, s:s, s:s}",
        "architectures", a->hf_architecture, "model_type", a->hf_model_type, "hidden_size", c->dim,
        "intermediate_size", c->ffn_dim, "num_hidden_layers", c->n_layers, "num_attention_heads", c->n_heads,
        "num_key_value_heads", c->n_kv_heads, "head_dim", c->head_dim, "vocab_size", c->vocab_size,
        "max_position_embeddings", c->max_seq_len, "rms_norm_eps", json_float(c->norm_eps), "rope_theta",
        json_float(c->rope_theta), "rope_scaling", rope, "tie_word_embeddings", c->tied_embeddings,
        "hidden_act", "silu", "torch_dtype", dtype == TRAM_HF_BF16 ? "bfloat16" : "float32");
    if (!root)
        return NULL;
    /* The GGUF carries no window, and MistralConfig defaults to 4096: say none. */
    if (a->window != TRAM_WINDOW_NONE)
        json_object_set_new(root, "sliding_window", json_null());
    if (a->hf_attention_bias_key)
        json_object_set_new(root, "attention_bias", json_false());
    if (a->hf_qkv_bias_key)
        json_object_set_new(root, "qkv_bias", json_boolean(c->qkv_bias));
    moe_config(root, a->moe, c);
    set_id(root, "bos_token_id", v->bos);
    set_id(root, "eos_token_id", v->eos);
    return root;
}

static json_t *generation_config_json(const gguf_vocab *v)
{
    json_t *root = json_object();
    set_id(root, "bos_token_id", v->bos);
    set_id(root, "eos_token_id", v->eos);
    set_id(root, "pad_token_id", v->pad);
    return root;
}

/* ---------------------------------------------------------------- model.safetensors */

typedef struct {
    char src[256];          /* the name tram reads it under (an expert's own, for a 3-D tensor) */
    char name[256];         /* the HF name */
    int bf16;
    int64_t rows, numel;    /* rows: of a matrix, or the length of a vector */
    uint64_t begin, end;
} out_tensor;

/* 1 when t stacks experts ("blk.N.ffn_up_exps.weight", 3-D): its layer and
 * the kind of matrix ("ffn_up") into *layer and kind. */
static int stacked_experts(const tram_gguf_tensor *t, int *layer, char *kind, size_t kind_len)
{
    int used = 0;
    char stem[64];
    if (t->n_dims != 3 || sscanf(t->name, "blk.%d.%63[a-z_]%n", layer, stem, &used) != 2 ||
        strcmp(t->name + used, ".weight"))
        return 0;
    size_t n = strlen(stem);
    if (n <= 5 || strcmp(stem + n - 5, "_exps"))
        return 0;
    snprintf(kind, kind_len, "%.*s", (int)(n - 5), stem);
    return 1;
}

/* A GGUF tensor is one HF tensor, or one per expert when it stacks them:
 * "blk.N.ffn_up_exps.weight" holds experts.E.up_proj for every E. */
static int64_t hf_count(const tram_gguf_tensor *t)
{
    int layer;
    char kind[64];
    return stacked_experts(t, &layer, kind, sizeof(kind)) ? t->ne[2] : 1;
}

static void plan_one(const tram_gguf_tensor *t, int expert, out_tensor *o)
{
    int layer;
    char kind[64];
    if (stacked_experts(t, &layer, kind, sizeof(kind)))
        tram_moe_expert_name(o->src, sizeof(o->src), layer, kind, expert);
    else
        snprintf(o->src, sizeof(o->src), "%s", t->name);
    o->numel = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1);
    o->rows = t->n_dims > 1 ? t->ne[1] : t->ne[0];
}

static int plan_tensors(tram_model_file *f, tram_hf_dtype dtype, out_tensor *out, json_t *header, tram_error *err)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    const tram_arch *a = tram_arch_by_name(tram_model_file_config(f)->arch);
    uint64_t offset = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        for (int64_t e = 0; e < hf_count(t); e++) {
            out_tensor *o = out++;
            plan_one(t, (int)e, o);
            if (tram_arch_hf_name(a, o->src, o->name, sizeof(o->name)))
                return tram_fail(err, "%s: tensor %s has no Hugging Face name", g->path, o->src);
            /* Norms and biases stay F32, as in HF checkpoints: they are tiny and
             * rounding them would move every activation. */
            o->bf16 = dtype == TRAM_HF_BF16 && t->n_dims > 1;
            o->begin = offset;
            o->end = offset += (uint64_t)o->numel * (o->bf16 ? 2 : 4);
            /* ne[0] is innermost: HF lists it last; the shared expert's gate is a [1, dim] Linear */
            json_t *shape = t->n_dims > 1 || strstr(t->name, "gate_inp_shexp")
                                ? json_pack("[I, I]", (json_int_t)(t->n_dims > 1 ? t->ne[1] : 1), (json_int_t)t->ne[0])
                                : json_pack("[I]", (json_int_t)t->ne[0]);
            json_object_set_new(header, o->name,
                                json_pack("{s:s, s:o, s:[I, I]}", "dtype", o->bf16 ? "BF16" : "F32", "shape", shape,
                                          "data_offsets", (json_int_t)o->begin, (json_int_t)o->end));
        }
    }
    return 0;
}

/* llama.cpp stores the rows of each Q/K head as (pair j, half s) for
 * interleaved RoPE; HF keeps them as (half s, pair j). */
static void unpermute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int head_dim)
{
    int half = head_dim / 2;
    for (int64_t r = 0; r < rows; r++) {
        int64_t head = r / head_dim, j = r % head_dim % half, s = r % head_dim / half;
        memcpy(dst + r * cols, src + (head * head_dim + 2 * j + s) * cols, (size_t)cols * sizeof(float));
    }
}

/* Heads whose rows the GGUF permuted: Q and K of interleaved-RoPE files. */
static int permuted_heads(const tram_model_config *c, const char *gguf_name)
{
    if (c->rope_style != TRAM_ROPE_INTERLEAVED)
        return 0;
    if (strstr(gguf_name, ".attn_q."))
        return c->n_heads;
    return strstr(gguf_name, ".attn_k.") ? c->n_kv_heads : 0;
}

static void to_bf16(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &src[i], sizeof(bits));
        if ((bits & 0x7fffffffu) > 0x7f800000u)
            dst[i] = (uint16_t)(bits >> 16 | 0x40);                   /* keep NaN a NaN */
        else
            dst[i] = (uint16_t)((bits + 0x7fff + (bits >> 16 & 1)) >> 16);  /* round to nearest even */
    }
}

/* One tensor's bytes, as the header promised: dequantized, unpermuted, converted. */
static int write_tensor(tram_model_file *f, const out_tensor *o, float *buf, float *scratch, FILE *fp,
                        tram_error *err)
{
    const tram_model_config *c = tram_model_file_config(f);
    if (tram_model_file_read_f32(f, o->src, buf, o->numel, err))
        return -1;
    const float *src = buf;
    int heads = permuted_heads(c, o->src);
    if (heads) {
        if (o->rows != (int64_t)heads * c->head_dim)
            return tram_fail(err, "%s: %lld rows are not %d heads of %d", o->src, (long long)o->rows, heads,
                             c->head_dim);
        unpermute_rows(buf, scratch, o->rows, o->numel / o->rows, c->head_dim);
        src = scratch;
    }
    const void *bytes = src;
    if (o->bf16) {
        uint16_t *half = (uint16_t *)(src == buf ? scratch : buf);
        to_bf16(src, half, o->numel);
        bytes = half;
    }
    size_t n = (size_t)(o->end - o->begin);
    return fwrite(bytes, 1, n, fp) == n ? 0 : tram_fail(err, "cannot write %s: %s", o->name, strerror(errno));
}

static int write_header(FILE *fp, json_t *header, tram_error *err)
{
    char *text = json_dumps(header, JSON_COMPACT);
    if (!text)
        return tram_fail(err, "out of memory building the safetensors header");
    /* Padded with spaces so that the data starts 8-byte aligned, as the
     * reference writer does. */
    uint64_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (uint8_t)(padded >> (8 * i));
    int ok = fwrite(prefix, 1, 8, fp) == 8 && fwrite(text, 1, len, fp) == len;
    for (uint64_t i = len; ok && i < padded; i++)
        ok = fputc(' ', fp) != EOF;
    free(text);
    return ok ? 0 : tram_fail(err, "cannot write the safetensors header: %s", strerror(errno));
}

static int write_safetensors(tram_model_file *f, const char *dir, tram_hf_dtype dtype, tram_error *err)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    int64_t n_out = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        n_out += hf_count(&g->tensors[i]);
    out_tensor *plan = tram_calloc((size_t)n_out, sizeof(*plan), err);
    json_t *header = json_pack("{s:{s:s}}", "__metadata__", "format", "pt");
    char path[1024];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    FILE *fp = NULL;
    float *buf = NULL, *scratch = NULL;
    int rc = !plan || plan_tensors(f, dtype, plan, header, err) ? -1 : 0;
    int64_t most = 0;
    for (int64_t i = 0; !rc && i < n_out; i++)
        most = TRAM_MAX(most, plan[i].numel);
    if (!rc && (!(buf = tram_calloc((size_t)most, sizeof(float), err)) ||
                !(scratch = tram_calloc((size_t)most, sizeof(float), err))))
        rc = -1;
    if (!rc && !(fp = fopen(path, "wb")))
        rc = tram_fail(err, "%s: cannot create: %s", path, strerror(errno));
    if (!rc)
        rc = write_header(fp, header, err);
    for (int64_t i = 0; !rc && i < n_out; i++)
        rc = write_tensor(f, &plan[i], buf, scratch, fp, err);
    if (fp && fclose(fp) && !rc)
        rc = tram_fail(err, "%s: cannot write: %s", path, strerror(errno));
    json_decref(header);
    TRAM_FREE_ALL(buf, scratch, plan);
    return rc;
}

/* ---------------------------------------------------------------- tokenizer */

static long long optional_id(const tram_gguf *g, const char *key, uint64_t n_tokens)
{
    uint64_t id;
    return tram_gguf_find_kv(g, key) && !tram_gguf_get_u64(g, key, &id, NULL) && id < n_tokens
               ? (long long)id : -1;
}

static const tram_gguf_value *string_array(const tram_gguf *g, const char *key, tram_error *err)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, key);
    if (!kv || kv->value.type != TRAM_GGUF_ARRAY || kv->value.v.arr.elem_type != TRAM_GGUF_STRING)
        return tram_fail(err, "%s: %s is missing or not an array of strings", g->path, key), NULL;
    return &kv->value;
}

static int read_vocab(const tram_gguf *g, gguf_vocab *v, tram_error *err)
{
    if (!(v->tokens = string_array(g, "tokenizer.ggml.tokens", err)) ||
        !(v->merges = string_array(g, "tokenizer.ggml.merges", err)))
        return -1;
    v->n_tokens = v->tokens->v.arr.count;
    const tram_gguf_kv *types = tram_gguf_find_kv(g, "tokenizer.ggml.token_type");
    v->types = types && types->value.type == TRAM_GGUF_ARRAY ? &types->value : NULL;
    v->bos = optional_id(g, "tokenizer.ggml.bos_token_id", v->n_tokens);
    v->eos = optional_id(g, "tokenizer.ggml.eos_token_id", v->n_tokens);
    v->unk = optional_id(g, "tokenizer.ggml.unknown_token_id", v->n_tokens);
    v->pad = optional_id(g, "tokenizer.ggml.padding_token_id", v->n_tokens);
    v->add_bos = 0;
    if (tram_gguf_find_kv(g, "tokenizer.ggml.add_bos_token"))
        tram_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, NULL);
    return 0;
}

/* GGUF token types: 3 = control (HF special), 4 = user-defined (HF added, not special). */
static int token_type(const gguf_vocab *v, uint64_t i)
{
    int64_t type = 1;
    if (v->types)
        tram_gguf_arr_i64(v->types, i, &type, NULL);
    return (int)type;
}

static json_t *token_string(const tram_gguf_value *arr, uint64_t i, tram_error *err)
{
    tram_gguf_str s;
    if (tram_gguf_arr_str(arr, i, &s, err))
        return NULL;
    json_t *str = json_stringn(s.ptr, (size_t)s.len);
    if (!str)
        tram_fail(err, "tokenizer entry %llu is not valid UTF-8", (unsigned long long)i);
    return str;
}

static json_t *added_token(json_t *content, int special)
{
    return json_pack("{s:o, s:b, s:b, s:b, s:b, s:b}", "content", content, "single_word", 0, "lstrip", 0,
                     "rstrip", 0, "normalized", 0, "special", special);
}

#define QWEN2_SPLIT                                                                        \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* The pre-tokenizer HF ships for each llama.cpp pre-tokenizer name. */
static json_t *pre_tokenizer(const tram_gguf *g, tram_error *err)
{
    char *pre = NULL;
    json_t *byte_level = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                                   "trim_offsets", 1, "use_regex", 1);
    if (!tram_gguf_find_kv(g, "tokenizer.ggml.pre") || tram_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL))
        return byte_level;
    json_t *out = NULL;
    if (!strcmp(pre, "gpt2") || !strcmp(pre, "default"))
        out = byte_level;
    else if (!strcmp(pre, "smollm"))   /* digits one by one, then GPT-2's regex */
        out = json_pack("{s:s, s:[{s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type", "Digits",
                        "individual_digits", 1, byte_level);
    else if (!strcmp(pre, "qwen2")) {  /* Qwen2's split regex (its tokenizer.json's), then bytes */
        json_decref(byte_level);
        byte_level = NULL;
        out = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}", "type", "Sequence",
                        "pretokenizers", "type", "Split", "pattern", "Regex", QWEN2_SPLIT, "behavior", "Isolated",
                        "invert", 0, "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0);
    } else
        tram_fail(err, "%s: pre-tokenizer '%s' cannot be converted yet (gpt2, smollm, qwen2 can)", g->path, pre);
    if (!out)
        json_decref(byte_level);
    free(pre);
    return out;
}

/* A BOS-adding tokenizer says so in its post-processor, as HF's Llama 3 does. */
static json_t *post_processor(const gguf_vocab *v, json_t *bos_content)
{
    if (!v->add_bos || v->bos < 0)
        return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 0,
                         "use_regex", 1);
    const char *bos = json_string_value(bos_content);
    return json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, "
                     "{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[I], s:[s]}}}",
                     "type", "TemplateProcessing",
                     "single", "SpecialToken", "id", bos, "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                     "pair", "SpecialToken", "id", bos, "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                     "SpecialToken", "id", bos, "type_id", 1, "Sequence", "id", "B", "type_id", 1,
                     "special_tokens", bos, "id", bos, "ids", (json_int_t)v->bos, "tokens", bos);
}

/* vocab in id order, added tokens, merges: the BPE model of tokenizer.json. */
static int bpe_tables(const gguf_vocab *v, json_t *vocab, json_t *added, json_t *merges, tram_error *err)
{
    for (uint64_t i = 0; i < v->n_tokens; i++) {
        json_t *tok = token_string(v->tokens, i, err);
        if (!tok)
            return -1;
        json_object_setn_new(vocab, json_string_value(tok), json_string_length(tok), json_integer((json_int_t)i));
        int type = token_type(v, i);
        if (type == 3 || type == 4) {
            json_t *entry = added_token(json_incref(tok), type == 3);
            json_object_set_new(entry, "id", json_integer((json_int_t)i));
            json_array_append_new(added, entry);
        }
        json_decref(tok);
    }
    for (uint64_t i = 0; i < v->merges->v.arr.count; i++) {
        json_t *m = token_string(v->merges, i, err);
        if (!m)
            return -1;
        json_array_append_new(merges, m);
    }
    return 0;
}

static json_t *tokenizer_json(const tram_gguf *g, const gguf_vocab *v, tram_error *err)
{
    json_t *vocab = json_object(), *added = json_array(), *merges = json_array();
    json_t *pre = NULL, *bos = v->bos >= 0 ? token_string(v->tokens, (uint64_t)v->bos, err) : json_null();
    if (!bos || bpe_tables(v, vocab, added, merges, err) || !(pre = pre_tokenizer(g, err))) {
        json_decref(vocab), json_decref(added), json_decref(merges), json_decref(bos);
        return NULL;
    }
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout",
                              "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
    json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:o, s:{s:s, s:b, s:b, s:b}, s:o}", "version", "1.0",
                             "truncation", "padding", "added_tokens", added, "normalizer", "pre_tokenizer", pre,
                             "post_processor", post_processor(v, bos), "decoder", "type", "ByteLevel",
                             "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model", model);
    json_decref(bos);
    return root ? root : (tram_fail(err, "out of memory building tokenizer.json"), NULL);
}

static void set_token(json_t *obj, const char *key, const gguf_vocab *v, long long id)
{
    if (id >= 0)
        json_object_set_new(obj, key, token_string(v->tokens, (uint64_t)id, NULL));
}

/* transformers 5 rebuilds a GPT2Tokenizer's pipeline with GPT-2's regex, so
 * a Qwen2 vocabulary must name its own class. */
static int is_qwen2_pre(const tram_gguf *g)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, "tokenizer.ggml.pre");
    return kv && kv->value.type == TRAM_GGUF_STRING && kv->value.v.str.len == 5 &&
           !memcmp(kv->value.v.str.ptr, "qwen2", 5);
}

static json_t *tokenizer_config_json(const tram_gguf *g, const tram_model_config *c, const gguf_vocab *v)
{
    json_t *decoder = json_object();
    for (uint64_t i = 0; i < v->n_tokens; i++) {
        int type = token_type(v, i);
        if (type == 3 || type == 4) {
            char id[24];
            snprintf(id, sizeof(id), "%llu", (unsigned long long)i);
            json_object_set_new(decoder, id, added_token(token_string(v->tokens, i, NULL), type == 3));
        }
    }
    json_t *root = json_pack("{s:b, s:b, s:b, s:o, s:b, s:i, s:s}", "add_bos_token", v->add_bos, "add_eos_token", 0,
                             "add_prefix_space", 0, "added_tokens_decoder", decoder,
                             "clean_up_tokenization_spaces", 0, "model_max_length", c->max_seq_len,
                             "tokenizer_class", is_qwen2_pre(g) ? "Qwen2Tokenizer" : "GPT2Tokenizer");
    set_token(root, "bos_token", v, v->bos);
    set_token(root, "eos_token", v, v->eos);
    set_token(root, "pad_token", v, v->pad);
    set_token(root, "unk_token", v, v->unk);
    char *tmpl = NULL;
    if (tram_gguf_find_kv(g, "tokenizer.chat_template") && !tram_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL))
        json_object_set_new(root, "chat_template", json_string(tmpl));
    free(tmpl);
    return root;
}

static int check_tokenizer_model(const tram_gguf *g, tram_error *err)
{
    char *model = NULL;
    if (tram_gguf_get_str(g, "tokenizer.ggml.model", &model, err))
        return -1;
    int ok = !strcmp(model, "gpt2");
    if (!ok)
        tram_fail(err, "%s: tokenizer '%s' cannot be converted yet (byte-level BPE, 'gpt2', can)", g->path, model);
    free(model);
    return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- API */

static int make_dir(const char *dir, tram_error *err)
{
    struct stat st;
    if (mkdir(dir, 0755) && (errno != EEXIST || stat(dir, &st) || !S_ISDIR(st.st_mode)))
        return tram_fail(err, "%s: cannot create the directory: %s", dir, strerror(errno));
    return 0;
}

int tram_hf_convert(tram_model_file *f, const char *outdir, tram_hf_dtype dtype, tram_error *err)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    const tram_model_config *c = tram_model_file_config(f);
    if (!g)
        return tram_fail(err, "%s: convert reads GGUF files", tram_model_file_path(f));
    gguf_vocab v;
    json_t *tok = NULL;
    if (check_tokenizer_model(g, err) || read_vocab(g, &v, err) || !(tok = tokenizer_json(g, &v, err)) ||
        make_dir(outdir, err)) {
        json_decref(tok);
        return -1;
    }
    size_t pretty = JSON_INDENT(2) | JSON_REAL_PRECISION(9);
    return write_json(outdir, "tokenizer.json", tok, JSON_INDENT(2), err) ||
                   write_json(outdir, "tokenizer_config.json", tokenizer_config_json(g, c, &v), pretty, err) ||
                   write_json(outdir, "config.json", config_json(c, &v, dtype), pretty, err) ||
                   write_json(outdir, "generation_config.json", generation_config_json(&v), pretty, err) ||
                   write_safetensors(f, outdir, dtype, err)
               ? -1 : 0;
}
