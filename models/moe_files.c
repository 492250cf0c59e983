/* moe_files.c — Mixtral and Qwen2-MoE in GGUF and Hugging Face files (see
 * moe_files.h). */
#include "models/moe_files.h"

#include <stdio.h>
#include <string.h>

#include "models/json_util.h"

void tram_moe_expert_name(char *out, size_t len, int layer, const char *kind, int expert)
{
    snprintf(out, len, "blk.%d.%s.%d.weight", layer, kind, expert);
}

int tram_gguf_expert_slice(const tram_gguf *g, const char *name, tram_gguf_tensor *slice)
{
    int layer, expert, used = 0;
    char kind[16], stacked[64];
    if (sscanf(name, "blk.%d.%15[a-z_].%d.weight%n", &layer, kind, &expert, &used) != 3 ||
        name[used] != '\0' || expert < 0)
        return -1;
    snprintf(stacked, sizeof(stacked), "blk.%d.%s_exps.weight", layer, kind);
    const tram_gguf_tensor *t = tram_gguf_find_tensor(g, stacked);
    if (!t || t->n_dims != 3 || expert >= t->ne[2])
        return -1;
    int64_t bytes = tram_ggml_type_size(t->type, t->ne[0] * t->ne[1]);
    if (bytes < 0)
        return -1;
    *slice = *t;
    snprintf(slice->name, sizeof(slice->name), "%s", name);
    slice->n_dims = 2;
    slice->ne[2] = 1;
    slice->offset += (uint64_t)expert * (uint64_t)bytes;
    slice->data += (size_t)expert * (size_t)bytes;
    slice->nbytes = (uint64_t)bytes;
    return 0;
}

/* "<arch>.<suffix>" as an integer in [lo, hi]; absent leaves *out alone
 * unless required. */
static int gguf_moe_int(const tram_gguf *g, const char *arch, const char *suffix, int required, long lo,
                        long hi, int *out, tram_error *err)
{
    char key[128];
    uint64_t v;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    if (!tram_gguf_find_kv(g, key))
        return required ? tram_fail(err, "%s: %s is missing", g->path, key) : 0;
    if (tram_gguf_get_u64(g, key, &v, err))
        return -1;
    if (v < (uint64_t)lo || v > (uint64_t)hi)
        return tram_fail(err, "%s: %s = %llu is out of range [%ld, %ld]", g->path, key, (unsigned long long)v,
                         lo, hi);
    *out = (int)v;
    return 0;
}

int tram_moe_gguf_config(const tram_gguf *g, const tram_arch *a, tram_model_config *c, tram_error *err)
{
    char key[128];
    const char *arch = a->gguf_arch;
    if (!a->moe)
        return 0;
    if (gguf_moe_int(g, arch, "expert_count", 1, 1, 1024, &c->n_experts, err))
        return -1;
    /* llama.cpp runs qwen2moe files without renormalizing (Qwen1.5-MoE's
     * norm_topk_prob is false) unless the file says so. */
    c->norm_topk_prob = a->moe->norm_topk_prob;
    snprintf(key, sizeof(key), "%s.expert_weights_norm", arch);
    if (tram_gguf_find_kv(g, key) && tram_gguf_get_bool(g, key, &c->norm_topk_prob, err))
        return -1;
    if (gguf_moe_int(g, arch, "expert_used_count", 1, 1, c->n_experts, &c->n_experts_used, err) ||
        gguf_moe_int(g, arch, "expert_feed_forward_length", 0, 1, 1 << 20, &c->ffn_dim, err) ||
        gguf_moe_int(g, arch, "expert_shared_feed_forward_length", 0, 1, 1 << 20, &c->shared_ffn_dim, err))
        return -1;
    /* a file with shared-expert tensors but no width for them must not run
     * without them: the width is the tensor's */
    const tram_gguf_tensor *shared = tram_gguf_find_tensor(g, "blk.0.ffn_up_shexp.weight");
    if (!c->shared_ffn_dim && shared && shared->n_dims == 2 && shared->ne[1] > 0 && shared->ne[1] <= 1 << 20)
        c->shared_ffn_dim = (int)shared->ne[1];
    return 0;
}

/* Qwen2-MoE's dense layers (decoder_sparse_step, mlp_only_layers) are not
 * computed: refused by name rather than run as sparse. */
static int hf_all_layers_sparse(const json_t *root, const char *path, tram_error *err)
{
    long long step = 1;
    json_t *dense = json_object_get(root, "mlp_only_layers");
    if (tram_json_get_int(root, "decoder_sparse_step", 0, 1, 1 << 20, &step, path, err))
        return -1;
    if (step != 1 || (dense && !json_is_null(dense) && (!json_is_array(dense) || json_array_size(dense))))
        return tram_fail(err, "%s: decoder_sparse_step != 1 and mlp_only_layers (dense layers among the "
                         "sparse ones) are not supported", path);
    return 0;
}

int tram_moe_hf_config(const json_t *root, const tram_arch *a, tram_model_config *c, const char *path,
                       tram_error *err)
{
    const tram_arch_moe *moe = a->moe;
    long long experts, used, ffn = c->ffn_dim, shared = 0;
    c->norm_topk_prob = moe->norm_topk_prob;
    if (tram_json_get_int(root, moe->hf_count_key, 1, 1, 1024, &experts, path, err) ||
        tram_json_get_int(root, "num_experts_per_tok", 1, 1, experts, &used, path, err) ||
        (moe->hf_ffn_key && tram_json_get_int(root, moe->hf_ffn_key, 1, 1, 1 << 20, &ffn, path, err)) ||
        (moe->shared_expert &&
         tram_json_get_int(root, "shared_expert_intermediate_size", 1, 0, 1 << 20, &shared, path, err)) ||
        (moe->hf_norm_key && tram_json_get_bool(root, moe->hf_norm_key, 0, &c->norm_topk_prob, path, err)))
        return -1;
    c->n_experts = (int)experts;
    c->n_experts_used = (int)used;
    c->ffn_dim = (int)ffn;
    c->shared_ffn_dim = (int)shared;
    return moe->hf_sparse_step ? hf_all_layers_sparse(root, path, err) : 0;
}
