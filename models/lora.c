/* lora.c — a LoRA adapter read and checked against its base (see lora.h):
 * a PEFT directory here, a GGUF file through lora_gguf.c. */
#include "models/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/json_util.h"
#include "models/lora_gguf.h"
#include "models/safetensors.h"

static const char *const target_modules[TRAM_LORA_N_TARGETS] = {"self_attn", "self_attn", "self_attn", "self_attn",
                                                                "mlp", "mlp", "mlp"};

/* ---------------------------------------------------------------- adapter_config.json */

/* Keys that say nothing about the adapter's arithmetic at inference:
 * provenance, training-only settings, how the weights were initialized. */
static const char *const inert_keys[] = {
    "base_model_name_or_path", "revision", "task_type", "inference_mode", "peft_version", "auto_mapping",
    "lora_dropout", "init_lora_weights", "loftq_config", "eva_config", "corda_config", "megatron_core",
    "qalora_group_size", "layers_pattern", "peft_type", "r", "lora_alpha", "use_rslora", "target_modules",
    "bias", "ensure_weight_tying",
};

static int is_inert(const char *key)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(inert_keys); i++)
        if (!strcmp(key, inert_keys[i]))
            return 1;
    return 0;
}

/* A value that turns nothing on: null, false, 0, "", {} or []. */
static int is_off(const json_t *v)
{
    return json_is_null(v) || json_is_false(v) || (json_is_integer(v) && !json_integer_value(v)) ||
           (json_is_string(v) && !*json_string_value(v)) || (json_is_object(v) && !json_object_size(v)) ||
           (json_is_array(v) && !json_array_size(v));
}

/* What a key that is on means, for the one sentence that refuses it. */
static const char *refusal_reason(const char *key)
{
    static const struct {
        const char *key, *why;
    } known[] = {
        {"use_dora", "DoRA's weight decomposition is not supported"},
        {"modules_to_save", "modules trained in full beside the adapter are not supported"},
        {"lora_bias", "biases on lora_B are not supported"},
        {"layers_to_transform", "adapting only some layers is not supported"},
        {"rank_pattern", "per-module ranks are not supported"},
        {"alpha_pattern", "per-module alphas are not supported"},
        {"fan_in_fan_out", "transposed (Conv1D) weights are not supported"},
        {"layer_replication", "replicated layers are not supported"},
        {"exclude_modules", "excluded modules are not supported"},
        {"trainable_token_indices", "trained embedding rows are not supported"},
        {"target_parameters", "adapted parameters (rather than modules) are not supported"},
        {"megatron_config", "Megatron-sharded adapters are not supported"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(known); i++)
        if (!strcmp(key, known[i].key))
            return known[i].why;
    return "tram does not know what it changes, and will not guess";
}

/* Every key that is neither inert nor off is refused, known or not: a PEFT
 * release that adds a new variant of the math adds a key. */
static int config_refusals(const json_t *root, const char *path, tram_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        if (!is_inert(key) && !is_off(v))
            return tram_fail(err, "%s: \"%s\" is set: %s", path, key, refusal_reason(key));
    }
    const char *bias = "none", *type = "LORA";
    if (tram_json_get_string(root, "bias", 0, &bias, path, err) ||
        tram_json_get_string(root, "peft_type", 0, &type, path, err))
        return -1;
    if (strcmp(bias, "none"))
        return tram_fail(err, "%s: \"bias\" is \"%s\": only adapters without trained biases (\"none\") are supported",
                         path, bias);
    if (strcmp(type, "LORA"))
        return tram_fail(err, "%s: peft_type \"%s\" is not a LoRA adapter", path, type);
    json_t *init = json_object_get(root, "init_lora_weights");
    if (json_is_string(init) && strcmp(json_string_value(init), "gaussian"))
        return tram_fail(err, "%s: init_lora_weights \"%s\" rewrites the base model's weights, which tram "
                              "does not: convert the adapter to a plain LoRA first", path, json_string_value(init));
    return 0;
}

static int target_of(const char *name)
{
    for (int t = 0; t < TRAM_LORA_N_TARGETS; t++)
        if (!strcmp(name, tram_lora_target_name(t)))
            return t;
    return -1;
}

static int parse_target_list(const json_t *list, unsigned *targets, const char *path, tram_error *err)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        const char *name = json_string_value(v);
        int t = name ? target_of(name) : -1;
        if (t < 0)
            return tram_fail(err, "%s: target module \"%s\": the base model has no such projection (q_proj, "
                                  "k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj are)",
                             path, name ? name : "(not a string)");
        *targets |= 1u << t;
    }
    return 0;
}

static int parse_targets(const json_t *root, unsigned *targets, const char *path, tram_error *err)
{
    json_t *list = json_object_get(root, "target_modules");
    if (json_is_string(list) && !strcmp(json_string_value(list), "all-linear"))
        *targets = (1u << TRAM_LORA_N_TARGETS) - 1;
    else if (!json_is_array(list) || !json_array_size(list))
        return tram_fail(err, "%s: target_modules must be a list of module names (q_proj ... down_proj) or "
                              "\"all-linear\"", path);
    else if (parse_target_list(list, targets, path, err))
        return -1;
    return 0;
}

/* The targets against the base: a mixture of experts has no single FFN. */
static int check_targets(const tram_lora_adapter *a, const tram_model_config *base, tram_error *err)
{
    if (base->n_experts && (a->targets & (7u << TRAM_LORA_GATE)))
        return tram_fail(err, "%s: target modules gate_proj/up_proj/down_proj: the base model's FFN is a mixture "
                              "of experts, which has no such single projection", a->path);
    return 0;
}

static int read_config(tram_lora_adapter *a, int max_rank, tram_error *err)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/adapter_config.json", a->path);
    json_t *root;
    if (tram_json_load_object(&root, path, err))
        return -1;
    long long r = 0;
    int rc = config_refusals(root, path, err) || tram_json_get_int(root, "r", 1, 1, 1 << 16, &r, path, err) ||
             tram_json_get_number(root, "lora_alpha", 1, &a->alpha, path, err) ||
             tram_json_get_bool(root, "use_rslora", 0, &a->rslora, path, err) ||
             parse_targets(root, &a->targets, path, err);
    json_decref(root);
    if (rc)
        return -1;
    a->rank = (int)r;
    if (max_rank > 0 && a->rank > max_rank)
        return tram_fail(err, "%s: rank %d exceeds --max-lora-rank %d", path, a->rank, max_rank);
    a->scale = (float)(a->rslora ? a->alpha / sqrt((double)a->rank) : a->alpha / a->rank);
    return 0;
}

/* ---------------------------------------------------------------- adapter_model.safetensors */

/* PEFT's name of a factor: base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight */
static void factor_name(char *out, size_t cap, int layer, int t, char which)
{
    snprintf(out, cap, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", layer, target_modules[t],
             tram_lora_target_name(t), which);
}

/* The vocabulary rows of tensor i when it is the embedding's or the output
 * head's (a full copy saved beside the adapter, or one of its LoRA
 * factors: lora_embedding_A is (r, vocab), lm_head's lora_B (vocab, r));
 * -1 for any other tensor, and for the factors with no vocabulary side. */
static int64_t vocab_rows(const tram_hf_model *st, int i)
{
    const char *name = tram_st_name(st, i);
    if (!strstr(name, "embed_tokens") && !strstr(name, "lm_head"))
        return -1;
    if (strstr(name, "lora_embedding_A"))
        return tram_st_dim(st, i, 1);
    if (strstr(name, "lora_A") || strstr(name, "lora_embedding_B"))
        return -1;
    return tram_st_dim(st, i, 0);
}

/* An adapter trained after resizing the vocabulary (new tokens) carries an
 * embedding or head of another size: named with both sizes, since "not a
 * factor" would hide why. */
static int check_vocab(tram_hf_model *st, int i, const tram_model_config *base, const char *path, tram_error *err)
{
    int64_t rows = vocab_rows(st, i);
    if (rows >= 0 && rows != base->vocab_size)
        return tram_fail(err, "%s: tensor %s has a vocabulary of %lld tokens, the base model's has %d: the adapter "
                              "was trained on another vocabulary", path, tram_st_name(st, i), (long long)rows,
                         base->vocab_size);
    return 0;
}

/* Every tensor of the file must be a factor of a targeted projection of a
 * layer the base has: anything else (a DoRA magnitude, a saved module, an
 * embedding's factors, a layer the base lacks) changes the model. */
static int check_names(const tram_lora_adapter *a, tram_hf_model *st, const tram_model_config *base,
                       const char *path, tram_error *err)
{
    for (int i = 0; i < tram_st_count(st); i++) {
        const char *name = tram_st_name(st, i);
        int layer, used = 0;
        char module[16], proj[16], which;
        if (sscanf(name, "base_model.model.model.layers.%d.%15[a-z_].%15[a-z_].lora_%c.weight%n", &layer, module,
                   proj, &which, &used) == 4 && !name[used]) {
            int t = target_of(proj);
            if (t >= 0 && !strcmp(module, target_modules[t]) && (which == 'A' || which == 'B')) {
                if (!(a->targets & (1u << t)))
                    return tram_fail(err, "%s: tensor %s adapts %s, which target_modules does not list", path, name,
                                     proj);
                if (layer < 0 || layer >= a->n_layers)
                    return tram_fail(err, "%s: tensor %s is for layer %d; the base model has %d layers", path, name,
                                     layer, a->n_layers);
                continue;
            }
        }
        if (check_vocab(st, i, base, path, err))
            return -1;
        return tram_fail(err, "%s: tensor %s is not the lora_A/lora_B factor of a q/k/v/o/gate/up/down projection, "
                              "and tram runs nothing else", path, name);
    }
    return 0;
}

/* A targeted projection needs both factors in every layer (PEFT adapts every
 * layer unless layers_to_transform says otherwise, which is refused). */
static int read_factors(tram_lora_adapter *a, tram_hf_model *st, const tram_model_config *base, tram_error *err)
{
    for (int l = 0; l < a->n_layers; l++)
        for (int t = 0; t < TRAM_LORA_N_TARGETS; t++) {
            if (!(a->targets & (1u << t)))
                continue;
            int in, out, k = l * TRAM_LORA_N_TARGETS + t;
            tram_lora_target_dims(base, t, &in, &out);
            char na[160], nb[160];
            factor_name(na, sizeof(na), l, t, 'A');
            factor_name(nb, sizeof(nb), l, t, 'B');
            a->a[k] = tram_calloc((size_t)a->rank * in, sizeof(float), err);
            a->b[k] = a->a[k] ? tram_calloc((size_t)out * a->rank, sizeof(float), err) : NULL;
            if (!a->b[k] || tram_st_read_named(st, na, a->a[k], (int64_t)a->rank * in, err) ||
                tram_st_read_named(st, nb, a->b[k], (int64_t)out * a->rank, err))
                return -1;
        }
    return 0;
}

static int read_tensors(tram_lora_adapter *a, const tram_model_config *base, tram_error *err)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/adapter_model.safetensors", a->path);
    tram_hf_model *st;
    if (tram_st_open_file(&st, path, err))
        return -1;
    int rc = check_names(a, st, base, path, err) || read_factors(a, st, base, err) ? -1 : 0;
    tram_hf_close(st);
    return rc;
}

/* ---------------------------------------------------------------- both formats */

/* B's rows of Q and K in the base's order: llama.cpp permutes each head's
 * rows of a llama-arch GGUF for interleaved RoPE, pair j's halves s at
 * 2j + s, where HF keeps NeoX's s * half + j; `rows` is the adapter's. */
static int to_base_rows(tram_lora_adapter *a, const tram_model_config *base, tram_rope_style rows, tram_error *err)
{
    if (rows == base->rope_style || !(a->targets & (1u << TRAM_LORA_Q | 1u << TRAM_LORA_K)))
        return 0;
    int hd = base->head_dim, half = hd / 2, r = a->rank;
    float *tmp = tram_calloc((size_t)base->n_heads * hd * r, sizeof(float), err);
    if (!tmp)
        return -1;
    for (int l = 0; l < a->n_layers; l++)
        for (int p = TRAM_LORA_Q; p <= TRAM_LORA_K; p++) {
            float *b = a->b[l * TRAM_LORA_N_TARGETS + p];
            int in, out;
            tram_lora_target_dims(base, p, &in, &out);
            for (int row = 0; b && row < out; row++) {
                int i = row % hd, neox = base->rope_style == TRAM_ROPE_NEOX;
                int j = neox ? i % half : i / 2, s = neox ? i / half : i % 2;
                int src = row - i + (rows == TRAM_ROPE_NEOX ? s * half + j : 2 * j + s);
                memcpy(tmp + (size_t)row * r, b + (size_t)src * r, (size_t)r * sizeof(float));
            }
            if (b)
                memcpy(b, tmp, (size_t)out * r * sizeof(float));
        }
    free(tmp);
    return 0;
}

/* A PEFT directory, its rows as HF's; or a GGUF file, its rows as its
 * architecture's. */
static int read_adapter(tram_lora_adapter *a, const tram_model_config *base, int max_rank, tram_error *err)
{
    struct stat st;
    tram_rope_style rows = TRAM_ROPE_NEOX;
    int rc = !stat(a->path, &st) && S_ISREG(st.st_mode)
                 ? tram_lora_gguf_read(a, base, max_rank, &rows, err) || check_targets(a, base, err)
                 : read_config(a, max_rank, err) || check_targets(a, base, err) || read_tensors(a, base, err);
    return rc ? -1 : to_base_rows(a, base, rows, err);
}

int tram_lora_open(tram_lora_adapter **out, const char *path, const tram_model_config *base, int max_rank,
                   tram_error *err)
{
    *out = NULL;
    tram_lora_adapter *a = tram_calloc(1, sizeof(*a), err);
    if (!a)
        return -1;
    if (snprintf(a->path, sizeof(a->path), "%s", path) >= (int)sizeof(a->path)) {
        free(a);
        return tram_fail(err, "%s: the adapter's path is too long", path);
    }
    a->n_layers = base->n_layers;
    size_t n = (size_t)a->n_layers * TRAM_LORA_N_TARGETS;
    a->a = tram_calloc(n, sizeof(*a->a), err);
    a->b = a->a ? tram_calloc(n, sizeof(*a->b), err) : NULL;
    if (!a->b || read_adapter(a, base, max_rank, err)) {
        tram_lora_free(a);
        return -1;
    }
    *out = a;
    return 0;
}

int tram_lora_read_config(tram_lora_adapter *a, const char *dir, tram_error *err)
{
    *a = (tram_lora_adapter){0};
    if (snprintf(a->path, sizeof(a->path), "%s", dir) >= (int)sizeof(a->path))
        return tram_fail(err, "%s: the adapter's path is too long", dir);
    return read_config(a, 0, err);
}

void tram_lora_free(tram_lora_adapter *a)
{
    if (!a)
        return;
    for (int k = 0; a->a && a->b && k < a->n_layers * TRAM_LORA_N_TARGETS; k++) {
        free(a->a[k]);
        free(a->b[k]);
    }
    TRAM_FREE_ALL(a->a, a->b, a);
}

size_t tram_lora_bytes(const tram_lora_adapter *a, const tram_model_config *base)
{
    size_t floats = 0;
    for (int t = 0; t < TRAM_LORA_N_TARGETS; t++)
        if (a->targets & (1u << t)) {
            int in, out;
            tram_lora_target_dims(base, t, &in, &out);
            floats += (size_t)a->rank * (in + out);
        }
    return floats * a->n_layers * sizeof(float);
}
