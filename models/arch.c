/* arch.c — the table of model architectures (see arch.h). */
#include "models/arch.h"

#include <stdio.h>
#include <string.h>

#include "models/gguf.h"

/* Routers and routed experts are held whole (each rank its own experts). */
static const tram_arch_name mixtral_names[] = {
    {"ffn_gate_inp", "block_sparse_moe.gate", TRAM_SPLIT_NONE},
    {"ffn_gate", "block_sparse_moe.experts.%d.w1", TRAM_SPLIT_NONE},
    {"ffn_up", "block_sparse_moe.experts.%d.w3", TRAM_SPLIT_NONE},
    {"ffn_down", "block_sparse_moe.experts.%d.w2", TRAM_SPLIT_NONE},
    {NULL, NULL, TRAM_SPLIT_NONE},
};

static const tram_arch_name qwen2moe_names[] = {
    {"ffn_gate_inp", "mlp.gate", TRAM_SPLIT_NONE},
    {"ffn_gate", "mlp.experts.%d.gate_proj", TRAM_SPLIT_NONE},
    {"ffn_up", "mlp.experts.%d.up_proj", TRAM_SPLIT_NONE},
    {"ffn_down", "mlp.experts.%d.down_proj", TRAM_SPLIT_NONE},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj", TRAM_SPLIT_SHARED_ROWS},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj", TRAM_SPLIT_SHARED_ROWS},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj", TRAM_SPLIT_SHARED_COLS},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate", TRAM_SPLIT_NONE},
    {NULL, NULL, TRAM_SPLIT_NONE},
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
    {"token_embd", "model.embed_tokens", TRAM_SPLIT_NONE}, {"output_norm", "model.norm", TRAM_SPLIT_NONE},
    {"output", "lm_head", TRAM_SPLIT_NONE},  /* rank 0 alone holds it (models/llama.c) */
}, layer_names[] = {
    {"attn_norm", "input_layernorm", TRAM_SPLIT_NONE},  {"ffn_norm", "post_attention_layernorm", TRAM_SPLIT_NONE},
    {"attn_q", "self_attn.q_proj", TRAM_SPLIT_Q_ROWS},  {"attn_k", "self_attn.k_proj", TRAM_SPLIT_KV_ROWS},
    {"attn_v", "self_attn.v_proj", TRAM_SPLIT_KV_ROWS}, {"attn_output", "self_attn.o_proj", TRAM_SPLIT_Q_COLS},
    {"ffn_gate", "mlp.gate_proj", TRAM_SPLIT_FFN_ROWS}, {"ffn_up", "mlp.up_proj", TRAM_SPLIT_FFN_ROWS},
    {"ffn_down", "mlp.down_proj", TRAM_SPLIT_FFN_COLS},
}, qk_norm_names[] = {
    {"attn_q_norm", "self_attn.q_norm", TRAM_SPLIT_NONE}, {"attn_k_norm", "self_attn.k_norm", TRAM_SPLIT_NONE},
};

/* The entry of names[n] whose GGUF module is module[0, len), or NULL. */
static const tram_arch_name *find_name(const tram_arch_name *names, size_t n, const char *module, size_t len)
{
    for (size_t i = 0; i < n && names[i].gguf; i++)
        if (strlen(names[i].gguf) == len && !strncmp(module, names[i].gguf, len))
            return &names[i];
    return NULL;
}

/* A GGUF tensor name taken apart: its table entry, layer (-1: a global
 * tensor), expert (-1: none) and suffix (".weight" or ".bias"). */
typedef struct {
    const tram_arch_name *entry;
    int layer, expert;
    const char *suffix;
} name_parts;

/* An MoE module ("ffn_gate_inp", "ffn_up.3", "ffn_down_shexp"). */
static int moe_entry(const tram_arch *a, const char *module, size_t module_len, name_parts *p)
{
    char whole[32], kind[32];
    int used = 0;
    if (!a->moe || module_len >= sizeof(whole))
        return -1;
    snprintf(whole, sizeof(whole), "%.*s", (int)module_len, module);
    int per_expert = sscanf(whole, "%31[a-z_].%d%n", kind, &p->expert, &used) == 2;
    if (!per_expert && (sscanf(whole, "%31[a-z_]%n", kind, &used) != 1))
        return -1;
    if ((size_t)used != module_len || (per_expert && p->expert < 0))
        return -1;
    p->entry = find_name(a->moe->names, (size_t)-1, kind, strlen(kind));
    return p->entry && per_expert == (strchr(p->entry->hf, '%') != NULL) ? 0 : -1;
}

static int parse_name(const tram_arch *a, const char *gguf_name, name_parts *p)
{
    *p = (name_parts){.suffix = strrchr(gguf_name, '.'), .layer = -1, .expert = -1};
    if (!p->suffix || (strcmp(p->suffix, ".weight") && strcmp(p->suffix, ".bias")))
        return -1;
    int used = 0;
    if (sscanf(gguf_name, "blk.%9d.%n", &p->layer, &used) == 1 && used && p->layer >= 0) {
        const char *module = gguf_name + used;
        size_t module_len = (size_t)(p->suffix - module);
        if ((p->entry = find_name(layer_names, TRAM_ARRAY_LEN(layer_names), module, module_len)) ||
            (a->qk_norm && (p->entry = find_name(qk_norm_names, TRAM_ARRAY_LEN(qk_norm_names), module, module_len))))
            return 0;
        return moe_entry(a, module, module_len, p);
    }
    p->layer = -1;
    p->entry = find_name(global_names, TRAM_ARRAY_LEN(global_names), gguf_name, (size_t)(p->suffix - gguf_name));
    return p->entry ? 0 : -1;
}

int tram_arch_hf_name(const tram_arch *a, const char *gguf_name, char *out, size_t len)
{
    name_parts p;
    if (parse_name(a, gguf_name, &p))
        return -1;
    if (p.layer < 0)
        return snprintf(out, len, "%s%s", p.entry->hf, p.suffix) < (int)len ? 0 : -1;
    char stem[96];
    snprintf(stem, sizeof(stem), p.entry->hf, p.expert);  /* "%d" only in per-expert names */
    return snprintf(out, len, "model.layers.%d.%s%s", p.layer, stem, p.suffix) < (int)len ? 0 : -1;
}

tram_split tram_arch_split(const tram_arch *a, const char *gguf_name)
{
    name_parts p;
    return parse_name(a, gguf_name, &p) ? TRAM_SPLIT_NONE : p.entry->split;
}
