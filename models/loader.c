/* loader.c — opens a model file (GGUF or Hugging Face directory) and answers
 * its hyper-parameters and tensors under GGUF names, whatever the format. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/kv_format.h"
#include "models/arch.h"
#include "models/dummy.h"
#include "models/gguf.h"
#include "models/model.h"
#include "models/moe_files.h"
#include "models/presets.h"
#include "models/safetensors.h"

struct tram_model_file {
    char path[512];
    tram_model_config cfg;
    tram_gguf *gguf;     /* at most one of gguf / hf is set; neither for dummy weights */
    tram_hf_model *hf;
    int dummy;           /* random weights of a preset's shape (models/dummy.h) */
    tram_ggml_type dummy_blocks; /* their matrices' block format; F32: none */
};

/* Reads "<arch>.<suffix>" as an integer in [lo, hi]. */
static int gguf_arch_int(const tram_gguf *g, const char *arch, const char *suffix, long lo, long hi,
                         int *out, tram_error *err)
{
    char key[128];
    uint64_t v;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    if (tram_gguf_get_u64(g, key, &v, err))
        return -1;
    if ((long)v < lo || v > (uint64_t)hi)
        return tram_fail(err, "%s: %s = %llu is out of range [%ld, %ld]", g->path, key,
                         (unsigned long long)v, lo, hi);
    *out = (int)v;
    return 0;
}

static float gguf_arch_float_or(const tram_gguf *g, const char *arch, const char *suffix, float dflt)
{
    char key[128];
    double v;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return tram_gguf_find_kv(g, key) && !tram_gguf_get_f64(g, key, &v, NULL) && isfinite(v)
               ? (float)v : dflt;
}

static const tram_arch *gguf_arch_row(const tram_gguf *g, const char *arch, tram_error *err)
{
    char known[256];
    const tram_arch *a = tram_arch_of_gguf(g, arch);
    if (a)
        return a;
    tram_arch_list(TRAM_ARCH_LIST_GGUF, known, sizeof(known));
    tram_fail(err, "%s: architecture '%s' is not supported (%s are)", g->path, arch, known);
    return NULL;
}

static int gguf_read_sizes(const tram_gguf *g, const tram_arch *a, tram_model_config *c, tram_error *err)
{
    const char *arch = a->gguf_arch;
    snprintf(c->arch, sizeof(c->arch), "%s", a->name);
    if (gguf_arch_int(g, arch, "embedding_length", 1, 1 << 16, &c->dim, err) ||
        gguf_arch_int(g, arch, "block_count", 1, 1024, &c->n_layers, err) ||
        gguf_arch_int(g, arch, "attention.head_count", 1, 1024, &c->n_heads, err) ||
        gguf_arch_int(g, arch, "feed_forward_length", 1, 1 << 20, &c->ffn_dim, err) ||
        gguf_arch_int(g, arch, "context_length", 1, 1 << 24, &c->max_seq_len, err))
        return -1;
    tram_error ignored;
    if (gguf_arch_int(g, arch, "attention.head_count_kv", 1, c->n_heads, &c->n_kv_heads, &ignored))
        c->n_kv_heads = c->n_heads;
    if (gguf_arch_int(g, arch, "attention.key_length", 1, 4096, &c->head_dim, &ignored))
        c->head_dim = c->dim / c->n_heads;
    c->norm_eps = gguf_arch_float_or(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f);
    c->rope_theta = gguf_arch_float_or(g, arch, "rope.freq_base", 10000.0f);
    c->rope_style = a->gguf_rope;
    return tram_moe_gguf_config(g, a, c, err);
}

/* llama.cpp's pooling_type (NONE, MEAN, CLS, LAST; RANK is a reranker's
 * score, not an embedding); its embeddings are always L2-normalized. */
static int gguf_read_pooling(const tram_gguf *g, const char *arch, tram_model_config *c, tram_error *err)
{
    char key[128];
    int pooling = TRAM_POOLING_UNSET;
    snprintf(key, sizeof(key), "%s.pooling_type", arch);
    if (tram_gguf_find_kv(g, key) && gguf_arch_int(g, arch, "pooling_type", 0, TRAM_POOLING_LAST, &pooling, err))
        return -1;
    c->pooling = (tram_pooling)pooling;
    c->pooling_normalize = 1;
    return 0;
}

static int gguf_read_config(const tram_gguf *g, tram_model_config *c, tram_error *err)
{
    char *arch = NULL;
    if (tram_gguf_get_str(g, "general.architecture", &arch, err))
        return -1;
    const tram_arch *a = gguf_arch_row(g, arch, err);
    free(arch);
    if (!a || gguf_read_sizes(g, a, c, err) || gguf_read_pooling(g, a->gguf_arch, c, err))
        return -1;
    const tram_gguf_tensor *emb = tram_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != c->dim)
        return tram_fail(err, "%s: token_embd.weight is missing or not [vocab, %d]", g->path, c->dim);
    c->vocab_size = (int)emb->ne[1];
    c->tied_embeddings = tram_gguf_find_tensor(g, "output.weight") == NULL;
    c->qkv_bias = tram_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    return 0;
}

static int config_check(const tram_model_config *c, const char *path, tram_error *err)
{
    if (!tram_arch_by_name(c->arch))
        return tram_fail(err, "%s: architecture '%s' has no row in models/arch.c", path, c->arch);
    if (c->n_heads % c->n_kv_heads)
        return tram_fail(err, "%s: %d attention heads are not a multiple of %d KV heads", path,
                         c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2 || c->head_dim > 1024)
        return tram_fail(err, "%s: head dimension %d is not supported", path, c->head_dim);
    if (c->vocab_size < 1 || c->vocab_size > (1 << 22))
        return tram_fail(err, "%s: vocabulary size %d is out of range", path, c->vocab_size);
    if (c->n_experts && (c->n_experts_used < 1 || c->n_experts_used > c->n_experts))
        return tram_fail(err, "%s: %d experts per token of %d experts", path, c->n_experts_used, c->n_experts);
    return 0;
}

static int is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tram_model_file_open(tram_model_file **out, const char *path, tram_error *err)
{
    tram_model_file *f = tram_calloc(1, sizeof(*f), err);
    if (!f)
        return -1;
    snprintf(f->path, sizeof(f->path), "%s", path);
    int rc = is_directory(path) ? tram_hf_open(&f->hf, path, &f->cfg, err)
                                : tram_gguf_open(&f->gguf, path, err) || gguf_read_config(f->gguf, &f->cfg, err);
    if (rc || config_check(&f->cfg, path, err)) {
        tram_model_file_close(f);
        return -1;
    }
    /* an embedding model saved without its head (Qwen3-Embedding-8B): the
     * embedding stands in for it, and the engine refuses to generate */
    if (!f->cfg.tied_embeddings && !tram_model_file_has_tensor(f, "output.weight"))
        f->cfg.embedding_only = f->cfg.tied_embeddings = 1;
    *out = f;
    return 0;
}

int tram_model_file_open_dummy_config(tram_model_file **out, const tram_model_config *c, const char *name,
                                      tram_error *err)
{
    tram_model_file *f = tram_calloc(1, sizeof(*f), err);
    if (!f)
        return -1;
    snprintf(f->path, sizeof(f->path), "dummy:%s", name);
    f->dummy = 1;
    f->cfg = *c;
    if (config_check(&f->cfg, f->path, err)) {
        tram_model_file_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int tram_model_file_open_dummy(tram_model_file **out, const char *preset, tram_error *err)
{
    tram_model_config c;
    if (tram_preset_load(preset, &c, err))
        return -1;
    return tram_model_file_open_dummy_config(out, &c, preset, err);
}

int tram_model_file_open_dummy_blocks(tram_model_file **out, const char *preset, tram_ggml_type blocks,
                                      tram_error *err)
{
    if (blocks != TRAM_GGML_F32 && blocks != TRAM_GGML_Q8_0 && blocks != TRAM_GGML_Q4_0 && blocks != TRAM_GGML_Q4_1)
        return tram_fail(err, "dummy weights come in F32, Q8_0, Q4_0 or Q4_1, not %s", tram_ggml_type_name(blocks));
    if (tram_model_file_open_dummy(out, preset, err))
        return -1;
    (*out)->dummy_blocks = blocks;
    return 0;
}

void tram_model_file_close(tram_model_file *f)
{
    if (!f)
        return;
    if (f->gguf)
        tram_gguf_close(f->gguf);
    if (f->hf)
        tram_hf_close(f->hf);
    free(f);
}

const tram_model_config *tram_model_file_config(const tram_model_file *f) { return &f->cfg; }
const char *tram_model_file_path(const tram_model_file *f) { return f->path; }
struct tram_gguf *tram_model_file_gguf(const tram_model_file *f) { return f->gguf; }

/* The GGUF tensor `name`, or the slice of a 3-D expert tensor that stands for
 * it (models/moe_files.h); NULL when neither exists or f is no GGUF. */
static const tram_gguf_tensor *gguf_tensor(const tram_model_file *f, const char *name, tram_gguf_tensor *slice)
{
    const tram_gguf_tensor *t = f->gguf ? tram_gguf_find_tensor(f->gguf, name) : NULL;
    if (t || !f->gguf)
        return t;
    return tram_gguf_expert_slice(f->gguf, name, slice) ? NULL : slice;
}

int tram_model_file_has_tensor(const tram_model_file *f, const char *name)
{
    tram_gguf_tensor slice;
    if (f->dummy)
        return tram_dummy_has_tensor(&f->cfg, name);
    return f->gguf ? gguf_tensor(f, name, &slice) != NULL : tram_hf_has_tensor(f->hf, name);
}

/* The F32 "<name>.<suffix>" tensor `tram quantize` writes beside an I8
 * tensor: "scale" for int8 values, "fp8_scale" for E4M3 codes. */
static const tram_gguf_tensor *i8_scales(const tram_model_file *f, const tram_gguf_tensor *t, const char *suffix)
{
    char scale_name[sizeof(t->name) + 12];
    if (!f->gguf || t->type != TRAM_GGML_I8)
        return NULL;
    snprintf(scale_name, sizeof(scale_name), "%s.%s", t->name, suffix);
    return tram_gguf_find_tensor(f->gguf, scale_name);
}

static const tram_gguf_tensor *int8_scales(const tram_model_file *f, const tram_gguf_tensor *t)
{
    return i8_scales(f, t, "scale");
}

static const tram_gguf_tensor *fp8_scales(const tram_model_file *f, const tram_gguf_tensor *t)
{
    return i8_scales(f, t, "fp8_scale");
}

int tram_model_file_is_int8(const tram_model_file *f, const char *name)
{
    tram_gguf_tensor slice;
    const tram_gguf_tensor *t = gguf_tensor(f, name, &slice);
    return t && int8_scales(f, t);
}

int tram_model_file_is_fp8(const tram_model_file *f, const char *name)
{
    tram_gguf_tensor slice;
    if (f->hf)
        return tram_hf_is_fp8(f->hf, name);
    const tram_gguf_tensor *t = gguf_tensor(f, name, &slice);
    return t && fp8_scales(f, t);
}

/* A GGUF FP8 tensor's codes and row scales, checked against rows x cols. */
static int gguf_read_fp8(const tram_model_file *f, const char *name, uint8_t *codes, float *scales, int64_t rows,
                         int64_t cols, tram_error *err)
{
    tram_gguf_tensor slice;
    const tram_gguf_tensor *t = gguf_tensor(f, name, &slice);
    const tram_gguf_tensor *s = t ? fp8_scales(f, t) : NULL;
    if (!s)
        return tram_fail(err, "%s: tensor %s is missing or not FP8", f->path, name);
    if (tram_gguf_tensor_numel(t) != rows * cols || t->ne[0] != cols)
        return tram_fail(err, "%s: FP8 tensor %s is not %lld x %lld", f->path, name, (long long)rows,
                         (long long)cols);
    if (s->type != TRAM_GGML_F32 || tram_gguf_tensor_numel(s) != rows)
        return tram_fail(err, "%s: %s is not an F32 tensor of %lld row scales", f->path, s->name, (long long)rows);
    memcpy(codes, t->data, (size_t)(rows * cols));
    memcpy(scales, s->data, (size_t)rows * sizeof(float));
    return 0;
}

float tram_model_file_fp8_act_max(const tram_model_file *f) { return f->hf ? tram_hf_fp8_act_max(f->hf) : 0.0f; }

int tram_model_file_read_fp8(tram_model_file *f, const char *name, uint8_t *codes, float *scales, int64_t rows,
                             int64_t cols, tram_error *err)
{
    if (f->hf)
        return tram_hf_read_fp8(f->hf, name, codes, scales, rows, cols, err);
    return gguf_read_fp8(f, name, codes, scales, rows, cols, err);
}

/* An FP8 tensor's values, e4m3(code) * scale[row]. */
static int gguf_dequantize_fp8(const tram_model_file *f, const tram_gguf_tensor *t, float *out, tram_error *err)
{
    int64_t cols = t->ne[0], rows = cols ? tram_gguf_tensor_numel(t) / cols : 0;
    float *scales = tram_calloc(rows ? rows : 1, sizeof(float), err);
    uint8_t *codes = scales ? tram_calloc((size_t)TRAM_MAX(rows * cols, 1), 1, err) : NULL;
    int rc = codes ? gguf_read_fp8(f, t->name, codes, scales, rows, cols, err) : -1;
    for (int64_t i = 0; !rc && i < rows * cols; i++)
        out[i] = tram_fp8_e4m3_decode(codes[i]) * scales[i / cols];
    free(scales);
    free(codes);
    return rc;
}

/* q * scale[row], rows of t->ne[0] values. */
static int apply_int8_scales(const tram_model_file *f, const tram_gguf_tensor *t, const tram_gguf_tensor *s,
                             float *out, tram_error *err)
{
    int64_t cols = t->ne[0], rows = cols ? tram_gguf_tensor_numel(t) / cols : 0;
    if (s->type != TRAM_GGML_F32 || tram_gguf_tensor_numel(s) != rows)
        return tram_fail(err, "%s: %s is not an F32 tensor of %lld row scales", f->path, s->name,
                         (long long)rows);
    const uint8_t *p = s->data;
    for (int64_t r = 0; r < rows; r++) {
        float scale;
        memcpy(&scale, p + r * 4, 4);
        for (int64_t k = 0; k < cols; k++)
            out[r * cols + k] *= scale;
    }
    return 0;
}

int tram_model_file_dummy_stream(const tram_model_file *f, const char *name, int64_t numel,
                                 tram_dummy_stream *out, tram_error *err)
{
    if (!f->dummy || tram_model_file_block_type(f, name) != TRAM_W_F32) /* blocks: values as stored */
        return 0;
    return tram_dummy_stream_of(&f->cfg, name, numel, out, err) ? -1 : 1;
}

/* A dummy block matrix's values: its blocks dequantized, as a GGUF's read. */
static int dummy_read_block_values(tram_model_file *f, const char *name, float *out, int64_t numel,
                                   tram_error *err)
{
    void *blocks = tram_calloc((size_t)TRAM_MAX(tram_ggml_type_size(f->dummy_blocks, numel), 1), 1, err);
    int rc = blocks ? tram_dummy_read_blocks(&f->cfg, name, f->dummy_blocks, blocks, numel, err) : -1;
    rc = rc ? rc : tram_dequantize(f->dummy_blocks, blocks, out, numel, err);
    free(blocks);
    return rc;
}

int tram_model_file_read_f32(tram_model_file *f, const char *name, float *out, int64_t numel,
                             tram_error *err)
{
    if (f->dummy)
        return tram_model_file_block_type(f, name) != TRAM_W_F32 ? dummy_read_block_values(f, name, out, numel, err)
                                                                 : tram_dummy_read_f32(&f->cfg, name, out, numel, err);
    if (f->hf)
        return tram_hf_read_f32(f->hf, name, out, numel, err);
    tram_gguf_tensor slice;
    const tram_gguf_tensor *t = gguf_tensor(f, name, &slice);
    if (!t)
        return tram_fail(err, "%s: tensor %s is missing", f->path, name);
    if (tram_gguf_tensor_numel(t) != numel)
        return tram_fail(err, "%s: tensor %s has %lld elements, expected %lld", f->path, name,
                         (long long)tram_gguf_tensor_numel(t), (long long)numel);
    if (fp8_scales(f, t))
        return gguf_dequantize_fp8(f, t, out, err);
    const tram_gguf_tensor *scales = int8_scales(f, t);
    if (tram_gguf_dequantize(t, out, err))
        return -1;
    return scales ? apply_int8_scales(f, t, scales, out, err) : 0;
}

static tram_wtype block_wtype(tram_ggml_type type)
{
    switch (type) {
    case TRAM_GGML_Q8_0: return TRAM_W_Q8_0;
    case TRAM_GGML_Q4_0: return TRAM_W_Q4_0;
    case TRAM_GGML_Q4_1: return TRAM_W_Q4_1;
    default: return TRAM_W_F32;
    }
}

tram_wtype tram_model_file_block_type(const tram_model_file *f, const char *name)
{
    if (f->dummy)
        return tram_dummy_is_block_matrix(&f->cfg, name) ? block_wtype(f->dummy_blocks) : TRAM_W_F32;
    tram_gguf_tensor slice;
    const tram_gguf_tensor *t = gguf_tensor(f, name, &slice);
    return t ? block_wtype(t->type) : TRAM_W_F32;
}

int tram_model_file_read_blocks(tram_model_file *f, const char *name, void *out, int64_t numel,
                                size_t *bytes, tram_error *err)
{
    if (f->dummy && tram_model_file_block_type(f, name) != TRAM_W_F32) {
        *bytes = (size_t)tram_ggml_type_size(f->dummy_blocks, numel);
        return tram_dummy_read_blocks(&f->cfg, name, f->dummy_blocks, out, numel, err);
    }
    tram_gguf_tensor slice;
    const tram_gguf_tensor *t = gguf_tensor(f, name, &slice);
    if (!t || tram_model_file_block_type(f, name) == TRAM_W_F32)
        return tram_fail(err, "%s: tensor %s is missing or not in a block format", f->path, name);
    int64_t size = tram_ggml_type_size(t->type, numel);
    if (tram_gguf_tensor_numel(t) != numel || size < 0)
        return tram_fail(err, "%s: tensor %s has %lld elements, expected %lld", f->path, name,
                         (long long)tram_gguf_tensor_numel(t), (long long)numel);
    memcpy(out, t->data, (size_t)size);
    *bytes = (size_t)size;
    return 0;
}

/* HF's rotary embedding: inv_freq[i] = theta^(-2i/d), reshaped by llama3's
 * piecewise rule when the config asks for it. */
void tram_rope_inv_freq(const tram_model_config *c, float *inv_freq)
{
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float inv = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
        if (c->rope_scaling_llama3) {
            float wavelen = 2.0f * (float)M_PI / inv;
            float low_wavelen = c->rope_original_max_pos / c->rope_low_freq_factor;
            float high_wavelen = c->rope_original_max_pos / c->rope_high_freq_factor;
            if (wavelen > low_wavelen) {
                inv /= c->rope_factor;
            } else if (wavelen >= high_wavelen) {
                float smooth = (c->rope_original_max_pos / wavelen - c->rope_low_freq_factor) /
                               (c->rope_high_freq_factor - c->rope_low_freq_factor);
                inv = (1.0f - smooth) * inv / c->rope_factor + smooth * inv;
            }
        }
        inv_freq[i] = inv;
    }
}
