/* dummy.c — random weights of a preset's shape (see dummy.h). */
#include "models/dummy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/arch.h"
#include "models/gguf.h"

typedef enum { DUMMY_MATRIX, DUMMY_NORM, DUMMY_BIAS } dummy_kind;

typedef struct {
    int64_t rows, cols;
    dummy_kind kind;
} dummy_shape;

/* Which models have a per-layer tensor. */
typedef enum { HAS_ALWAYS, HAS_DENSE, HAS_EXPERTS, HAS_SHARED, HAS_BIAS, HAS_QK_NORM } dummy_has;

static int dummy_present(const tram_model_config *c, dummy_has has)
{
    switch (has) {
    case HAS_DENSE: return !c->n_experts;
    case HAS_EXPERTS: return c->n_experts > 0;
    case HAS_SHARED: return c->shared_ffn_dim > 0;
    case HAS_BIAS: return c->qkv_bias;
    case HAS_QK_NORM: return tram_arch_by_name(c->arch)->qk_norm;
    default: return 1;
    }
}

/* Shape of a per-layer tensor, from its name after "blk.N."; an expert's
 * matrix ("ffn_up.E.weight", models/moe_files.h) has a dense FFN matrix's. */
static int layer_shape(const tram_model_config *c, const char *suffix, dummy_shape *s)
{
    int64_t dim = c->dim, qd = (int64_t)c->n_heads * c->head_dim, kd = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t ffn = c->ffn_dim, shared = c->shared_ffn_dim;
    char kind[16], name[32];
    int expert, used = 0;
    if (sscanf(suffix, "%15[a-z_].%d.weight%n", kind, &expert, &used) == 2 && !suffix[used]) {
        if (!c->n_experts || expert < 0 || expert >= c->n_experts ||
            (strcmp(kind, "ffn_gate") && strcmp(kind, "ffn_up") && strcmp(kind, "ffn_down")))
            return -1;
        snprintf(name, sizeof(name), "%s.weight", kind);
        suffix = name;
    }
    const struct {
        const char *name;
        int64_t rows, cols;
        dummy_kind kind;
        dummy_has has;
    } t[] = {
        {"attn_norm.weight", 1, dim, DUMMY_NORM, HAS_ALWAYS},   {"ffn_norm.weight", 1, dim, DUMMY_NORM, HAS_ALWAYS},
        {"attn_q.weight", qd, dim, DUMMY_MATRIX, HAS_ALWAYS},   {"attn_k.weight", kd, dim, DUMMY_MATRIX, HAS_ALWAYS},
        {"attn_v.weight", kd, dim, DUMMY_MATRIX, HAS_ALWAYS},   {"attn_output.weight", dim, qd, DUMMY_MATRIX, HAS_ALWAYS},
        {"ffn_gate.weight", ffn, dim, DUMMY_MATRIX, HAS_DENSE}, {"ffn_up.weight", ffn, dim, DUMMY_MATRIX, HAS_DENSE},
        {"ffn_down.weight", dim, ffn, DUMMY_MATRIX, HAS_DENSE}, {"attn_q.bias", 1, qd, DUMMY_BIAS, HAS_BIAS},
        {"attn_k.bias", 1, kd, DUMMY_BIAS, HAS_BIAS},           {"attn_v.bias", 1, kd, DUMMY_BIAS, HAS_BIAS},
        {"attn_q_norm.weight", 1, c->head_dim, DUMMY_NORM, HAS_QK_NORM},
        {"attn_k_norm.weight", 1, c->head_dim, DUMMY_NORM, HAS_QK_NORM},
        {"ffn_gate_inp.weight", c->n_experts, dim, DUMMY_MATRIX, HAS_EXPERTS},
        {"ffn_gate_inp_shexp.weight", 1, dim, DUMMY_MATRIX, HAS_SHARED},
        {"ffn_gate_shexp.weight", shared, dim, DUMMY_MATRIX, HAS_SHARED},
        {"ffn_up_shexp.weight", shared, dim, DUMMY_MATRIX, HAS_SHARED},
        {"ffn_down_shexp.weight", dim, shared, DUMMY_MATRIX, HAS_SHARED},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(t); i++) {
        if (strcmp(suffix, t[i].name))
            continue;
        /* an expert's matrix stands in for the dense one, in MoE models only */
        if (suffix == name ? !c->n_experts : !dummy_present(c, t[i].has))
            return -1;
        *s = (dummy_shape){.rows = t[i].rows, .cols = t[i].cols, .kind = t[i].kind};
        return 0;
    }
    return -1;
}

static int tensor_shape(const tram_model_config *c, const char *name, dummy_shape *s)
{
    int layer, used = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &used) == 1 && used > 0)
        return layer >= 0 && layer < c->n_layers ? layer_shape(c, name + used, s) : -1;
    if (!strcmp(name, "token_embd.weight") || (!strcmp(name, "output.weight") && !c->tied_embeddings)) {
        *s = (dummy_shape){.rows = c->vocab_size, .cols = c->dim, .kind = DUMMY_MATRIX};
        return 0;
    }
    if (!strcmp(name, "output_norm.weight")) {
        *s = (dummy_shape){.rows = 1, .cols = c->dim, .kind = DUMMY_NORM};
        return 0;
    }
    return -1;
}

int tram_dummy_has_tensor(const tram_model_config *c, const char *name)
{
    dummy_shape s;
    return tensor_shape(c, name, &s) == 0;
}

int tram_dummy_stream_of(const tram_model_config *c, const char *name, int64_t numel, tram_dummy_stream *out,
                         tram_error *err)
{
    dummy_shape s;
    if (tensor_shape(c, name, &s))
        return tram_fail(err, "dummy weights: %s has no tensor %s", c->arch, name);
    if (s.rows * s.cols != numel)
        return tram_fail(err, "dummy weights: tensor %s has %lld elements, expected %lld", name,
                         (long long)(s.rows * s.cols), (long long)numel);
    /* uniform on [-a, a] has variance a^2 / 3 */
    *out = (tram_dummy_stream){
        .key = tram_fnv1a(name, strlen(name)),
        .scale = s.kind == DUMMY_MATRIX ? sqrtf(3.0f / (float)s.cols) : 0.1f,
        .offset = s.kind == DUMMY_NORM ? 1.0f : 0.0f,
    };
    return 0;
}

int tram_dummy_read_f32(const tram_model_config *c, const char *name, float *out, int64_t numel,
                        tram_error *err)
{
    tram_dummy_stream st;
    if (tram_dummy_stream_of(c, name, numel, &st, err))
        return -1;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < numel; i++)
        out[i] = tram_dummy_value(&st, (uint64_t)i);
    return 0;
}

int tram_dummy_is_block_matrix(const tram_model_config *c, const char *name)
{
    dummy_shape s;
    return !tensor_shape(c, name, &s) && s.kind == DUMMY_MATRIX && s.cols % 32 == 0;
}

int tram_dummy_read_blocks(const tram_model_config *c, const char *name, tram_ggml_type type, void *out,
                           int64_t numel, tram_error *err)
{
    enum { QK = 32 };
    tram_dummy_stream st;
    int64_t block_bytes = tram_ggml_type_size(type, QK);
    if (tram_dummy_stream_of(c, name, numel, &st, err))
        return -1;
    if (!tram_dummy_is_block_matrix(c, name) || block_bytes < 0)
        return tram_fail(err, "dummy weights: tensor %s is no matrix of %s blocks", name, tram_ggml_type_name(type));
    float probe[QK] = {0}; /* the type's check, once rather than per block */
    if (tram_quantize_blocks(type, probe, out, QK, err))
        return -1;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < numel / QK; b++) {
        float v[QK];
        for (int j = 0; j < QK; j++)
            v[j] = tram_dummy_value(&st, (uint64_t)(b * QK + j));
        tram_quantize_blocks(type, v, (char *)out + b * block_bytes, QK, NULL);
    }
    return 0;
}
