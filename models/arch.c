/* arch.c — the table of model architectures (see arch.h). */
#include "models/arch.h"

#include <stdio.h>
#include <string.h>

#include "models/gguf.h"

static const tram_arch_name mixtral_names[] = {
    {"ffn_gate_inp", "block_sparse_moe.gate"},
    {"ffn_gate", "block_sparse_moe.experts.%d.w1"},
    {"ffn_up", "block_sparse_moe.experts.%d.w3"},
    {"ffn_down", "block_sparse_moe.experts.%d.w2"},
    {NULL, NULL},
};

static const tram_arch_name qwen2moe_names[] = {
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate", "mlp.experts.%d.gate_proj"},
    {"ffn_up", "mlp.experts.%d.up_proj"},
    {"ffn_down", "mlp.experts.%d.down_proj"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    {NULL, NULL},
};

/* Mixtral always renormalizes; Qwen1.5-MoE does not unless it says so. */
static const tram_arch_moe mixtral_moe = {.hf_count_key = "num_local_experts", .norm_topk_prob = 1,
                                          .names = mixtral_names, .hf_fused_router = "mlp.gate"};
static const tram_arch_moe qwen2moe_moe = {.hf_count_key = "num_experts", .hf_ffn_key = "moe_intermediate_size",
                                           .hf_norm_key = "norm_topk_prob", .hf_sparse_step = 1,
                                           .shared_expert = 1, .names = qwen2moe_names};

/* One row a family; tests/unit/test_arch.c wants golden fixtures for each. */
static const tram_arch archs[] = {
    {.name = "llama", .gguf_arch = "llama", .hf_architecture = "LlamaForCausalLM", .hf_model_type = "llama",
     .gguf_rope = TRAM_ROPE_INTERLEAVED, .window = TRAM_WINDOW_NONE, .hf_attention_bias_key = 1},
    {.name = "mistral", .gguf_arch = "llama", .hf_architecture = "MistralForCausalLM", .hf_model_type = "mistral",
     .gguf_rope = TRAM_ROPE_INTERLEAVED, .window = TRAM_WINDOW_ALWAYS},
    {.name = "qwen2", .gguf_arch = "qwen2", .hf_architecture = "Qwen2ForCausalLM", .hf_model_type = "qwen2",
     .gguf_rope = TRAM_ROPE_NEOX, .qkv_bias = 1, .window = TRAM_WINDOW_OPT_IN},
    {.name = "qwen3", .gguf_arch = "qwen3", .hf_architecture = "Qwen3ForCausalLM", .hf_model_type = "qwen3",
     .gguf_rope = TRAM_ROPE_NEOX, .qk_norm = 1, .window = TRAM_WINDOW_OPT_IN, .hf_attention_bias_key = 1},
    {.name = "mixtral", .gguf_arch = "llama", .hf_architecture = "MixtralForCausalLM", .hf_model_type = "mixtral",
     .gguf_rope = TRAM_ROPE_INTERLEAVED, .window = TRAM_WINDOW_ALWAYS, .moe = &mixtral_moe},
    {.name = "qwen2moe", .gguf_arch = "qwen2moe", .hf_architecture = "Qwen2MoeForCausalLM",
     .hf_model_type = "qwen2_moe", .gguf_rope = TRAM_ROPE_NEOX, .qkv_bias = 1, .hf_qkv_bias_key = 1,
     .window = TRAM_WINDOW_OPT_IN, .moe = &qwen2moe_moe},
};

int tram_arch_count(void) { return (int)TRAM_ARRAY_LEN(archs); }

const tram_arch *tram_arch_at(int i) { return i >= 0 && i < tram_arch_count() ? &archs[i] : NULL; }

const tram_arch *tram_arch_by_name(const char *name)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(archs); i++)
        if (!strcmp(name, archs[i].name))
            return &archs[i];
    return NULL;
}

/* llama.cpp writes Mistral as "llama" too: the first row of a GGUF name is
 * the one its files load as (Llama and Mistral run the same forward pass). */
const tram_arch *tram_arch_by_gguf(const char *gguf_arch, int has_experts)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(archs); i++)
        if (!strcmp(gguf_arch, archs[i].gguf_arch) && (archs[i].moe != NULL) == (has_experts != 0))
            return &archs[i];
    return NULL;
}

const tram_arch *tram_arch_of_gguf(const tram_gguf *g, const char *gguf_arch)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.expert_count", gguf_arch);
    const tram_arch *a = tram_arch_by_gguf(gguf_arch, tram_gguf_find_kv(g, key) != NULL);
    /* an MoE name without expert_count: reading the MoE keys says what is missing */
    return a ? a : tram_arch_by_gguf(gguf_arch, 1);
}

const tram_arch *tram_arch_by_hf(const char *architecture, const char *model_type)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(archs); i++)
        if (architecture ? !strcmp(architecture, archs[i].hf_architecture)
                         : model_type && !strcmp(model_type, archs[i].hf_model_type))
            return &archs[i];
    return NULL;
}

static const char *list_field(const tram_arch *a, int which)
{
    return which == TRAM_ARCH_LIST_NAME ? a->name : which == TRAM_ARCH_LIST_GGUF ? a->gguf_arch : a->hf_architecture;
}

void tram_arch_list(int which, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < TRAM_ARRAY_LEN(archs); i++) {
        const char *s = list_field(&archs[i], which);
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(s, list_field(&archs[j], which));
        if (!seen && used < len)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "", s);
    }
}

/* ---------------------------------------------------------------- tensor names */

static const tram_arch_name global_names[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"},
}, layer_names[] = {
    {"attn_norm", "input_layernorm"},      {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},        {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},        {"attn_output", "self_attn.o_proj"},
    {"ffn_gate", "mlp.gate_proj"},         {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
}, qk_norm_names[] = {
    {"attn_q_norm", "self_attn.q_norm"},   {"attn_k_norm", "self_attn.k_norm"},
};

/* The entry of names[n] whose GGUF module is module[0, len), or NULL. */
static const tram_arch_name *find_name(const tram_arch_name *names, size_t n, const char *module, size_t len)
{
    for (size_t i = 0; i < n && names[i].gguf; i++)
        if (strlen(names[i].gguf) == len && !strncmp(module, names[i].gguf, len))
            return &names[i];
    return NULL;
}

/* An MoE module ("ffn_gate_inp", "ffn_up.3", "ffn_down_shexp") of layer. */
static int moe_name(const tram_arch *a, int layer, const char *module, size_t module_len, const char *suffix,
                    char *out, size_t len)
{
    char whole[32], kind[32];
    int expert = -1, used = 0;
    if (!a->moe || module_len >= sizeof(whole))
        return -1;
    snprintf(whole, sizeof(whole), "%.*s", (int)module_len, module);
    int per_expert = sscanf(whole, "%31[a-z_].%d%n", kind, &expert, &used) == 2;
    if (!per_expert && (sscanf(whole, "%31[a-z_]%n", kind, &used) != 1))
        return -1;
    if ((size_t)used != module_len || (per_expert && expert < 0))
        return -1;
    const tram_arch_name *n = find_name(a->moe->names, (size_t)-1, kind, strlen(kind));
    if (!n || per_expert != (strchr(n->hf, '%') != NULL))
        return -1;
    char stem[96];
    snprintf(stem, sizeof(stem), n->hf, expert);
    return snprintf(out, len, "model.layers.%d.%s%s", layer, stem, suffix) < (int)len ? 0 : -1;
}

int tram_arch_hf_name(const tram_arch *a, const char *gguf_name, char *out, size_t len)
{
    const char *suffix = strrchr(gguf_name, '.');
    if (!suffix || (strcmp(suffix, ".weight") && strcmp(suffix, ".bias")))
        return -1;
    int layer, used = 0;
    const tram_arch_name *n;
    if (sscanf(gguf_name, "blk.%9d.%n", &layer, &used) == 1 && used && layer >= 0) {
        const char *module = gguf_name + used;
        size_t module_len = (size_t)(suffix - module);
        if ((n = find_name(layer_names, TRAM_ARRAY_LEN(layer_names), module, module_len)) ||
            (a->qk_norm && (n = find_name(qk_norm_names, TRAM_ARRAY_LEN(qk_norm_names), module, module_len))))
            return snprintf(out, len, "model.layers.%d.%s%s", layer, n->hf, suffix) < (int)len ? 0 : -1;
        return moe_name(a, layer, module, module_len, suffix, out, len);
    }
    n = find_name(global_names, TRAM_ARRAY_LEN(global_names), gguf_name, (size_t)(suffix - gguf_name));
    return n && snprintf(out, len, "%s%s", n->hf, suffix) < (int)len ? 0 : -1;
}
