/* hf_writer.c — `tram convert`: a GGUF model written as a Hugging Face
 * directory that transformers loads as it would the original checkpoint. */
#include "models/hf_writer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/gguf.h"
#include "models/safetensors.h"

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

static json_t *config_json(const tram_model_config *c, const gguf_vocab *v, tram_hf_dtype dtype)
{
    json_t *rope = json_null();
    if (c->rope_scaling_llama3)
        rope = json_pack("{s:s, s:o, s:o, s:o, s:i}", "rope_type", "llama3", "factor", json_float(c->rope_factor),
                         "low_freq_factor", json_float(c->rope_low_freq_factor), "high_freq_factor",
                         json_float(c->rope_high_freq_factor), "original_max_position_embeddings",
                         c->rope_original_max_pos);
    json_t *root = json_pack(
        "{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:b, s:s, s:s}",
        "architectures", tram_hf_architecture(c->arch), "model_type", c->arch, "hidden_size", c->dim,
        "intermediate_size", c->ffn_dim, "num_hidden_layers", c->n_layers, "num_attention_heads", c->n_heads,
        "num_key_value_heads", c->n_kv_heads, "head_dim", c->head_dim, "vocab_size", c->vocab_size,
        "max_position_embeddings", c->max_seq_len, "rms_norm_eps", json_float(c->norm_eps), "rope_theta",
        json_float(c->rope_theta), "rope_scaling", rope, "tie_word_embeddings", c->tied_embeddings,
        "hidden_act", "silu", "torch_dtype", dtype == TRAM_HF_BF16 ? "bfloat16" : "float32");
    if (!root)
        return NULL;
    /* The GGUF carries no window, and MistralConfig defaults to 4096: say none. */
    if (strcmp(c->arch, "llama"))
        json_object_set_new(root, "sliding_window", json_null());
    else
        json_object_set_new(root, "attention_bias", json_false());
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
    const tram_gguf_tensor *t;
    char name[256];
    int bf16;
    int64_t numel;
    uint64_t begin, end;
} out_tensor;

static int plan_tensors(const tram_gguf *g, tram_hf_dtype dtype, out_tensor *out, json_t *header,
                        tram_error *err)
{
    uint64_t offset = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        out_tensor *o = &out[i];
        o->t = &g->tensors[i];
        if (tram_hf_tensor_name("llama", o->t->name, o->name, sizeof(o->name)))
            return tram_fail(err, "%s: tensor %s has no Hugging Face name", g->path, o->t->name);
        /* Norms and biases stay F32, as in HF checkpoints: they are tiny and
         * rounding them would move every activation. */
        o->bf16 = dtype == TRAM_HF_BF16 && o->t->n_dims > 1;
        o->numel = tram_gguf_tensor_numel(o->t);
        o->begin = offset;
        o->end = offset += (uint64_t)o->numel * (o->bf16 ? 2 : 4);
        json_t *shape = json_array();
        for (uint32_t d = o->t->n_dims; d-- > 0;)   /* ne[0] is innermost: HF lists it last */
            json_array_append_new(shape, json_integer(o->t->ne[d]));
        json_object_set_new(header, o->name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", o->bf16 ? "BF16" : "F32", "shape", shape,
                                      "data_offsets", (json_int_t)o->begin, (json_int_t)o->end));
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
    if (tram_model_file_read_f32(f, o->t->name, buf, o->numel, err))
        return -1;
    const float *src = buf;
    int heads = permuted_heads(c, o->t->name);
    if (heads) {
        int64_t rows = o->t->n_dims > 1 ? o->t->ne[1] : o->t->ne[0];
        if (rows != (int64_t)heads * c->head_dim)
            return tram_fail(err, "%s: %lld rows are not %d heads of %d", o->t->name, (long long)rows, heads,
                             c->head_dim);
        unpermute_rows(buf, scratch, rows, o->numel / rows, c->head_dim);
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
    out_tensor *plan = tram_calloc(g->n_tensors, sizeof(*plan), err);
    json_t *header = json_pack("{s:{s:s}}", "__metadata__", "format", "pt");
    char path[1024];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    FILE *fp = NULL;
    float *buf = NULL, *scratch = NULL;
    int rc = !plan || plan_tensors(g, dtype, plan, header, err) ? -1 : 0;
    int64_t most = 0;
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++)
        most = TRAM_MAX(most, plan[i].numel);
    if (!rc && (!(buf = tram_calloc((size_t)most, sizeof(float), err)) ||
                !(scratch = tram_calloc((size_t)most, sizeof(float), err))))
        rc = -1;
    if (!rc && !(fp = fopen(path, "wb")))
        rc = tram_fail(err, "%s: cannot create: %s", path, strerror(errno));
    if (!rc)
        rc = write_header(fp, header, err);
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++)
        rc = write_tensor(f, &plan[i], buf, scratch, fp, err);
    if (fp && fclose(fp) && !rc)
        rc = tram_fail(err, "%s: cannot write: %s", path, strerror(errno));
    json_decref(header);
    free(buf);
    free(scratch);
    free(plan);
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
    else
        tram_fail(err, "%s: pre-tokenizer '%s' cannot be converted yet (gpt2, smollm can)", g->path, pre);
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
                             "tokenizer_class", "GPT2Tokenizer");
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
    if (!tram_hf_architecture(c->arch))
        return tram_fail(err, "%s: architecture '%s' has no Hugging Face class", g->path, c->arch);
    if (c->n_experts)
        return tram_fail(err, "%s: convert writes dense models only; this one has %d experts", g->path,
                         c->n_experts);
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
