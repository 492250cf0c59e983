/* arch.h — the table of model architectures: one row per family with every
 * way the families differ, so that readers, writers, presets, `tram info`
 * and the forward pass look a row up instead of comparing names.
 *
 * What every row shares is written once: the decoder layer (RMSNorm before
 * attention and before the FFN, grouped-query attention with RoPE, a
 * SiLU-gated FFN or routed experts of such FFNs, in models/llama.c), and in
 * arch.c beside the rows the dense tensors' names (blk.N.attn_q.weight <->
 * model.layers.N.self_attn.q_proj.weight, ...) with each tensor's
 * tensor-parallel split (tram_split, which goes by tensor kind: Qwen2's
 * biases split like their matrices, Qwen3's q/k norms are held whole, a
 * shared expert splits like a dense FFN).  Not in the table is the chat format:
 * one family's models use several (Llama 2, Llama 3, SmolLM2's ChatML are
 * all llama), so the model's own template decides (chat/chat_template.c).
 *
 * Adding a family is a row here, plus its forward op when it has one the
 * others lack (docs/models.md walks through Qwen3). */
#ifndef TRAM_ARCH_H
#define TRAM_ARCH_H

#include <stddef.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How config.json's sliding window applies. */
typedef enum {
    TRAM_WINDOW_NONE = 0,     /* the family has none (LlamaConfig) */
    TRAM_WINDOW_ALWAYS = 1,   /* sliding_window applies when set (Mistral) */
    TRAM_WINDOW_OPT_IN = 2,   /* only with use_sliding_window: true (Qwen) */
} tram_window_rule;

/* How tensor parallelism divides a tensor among the ranks (models/shard.h):
 * Megatron's split.  Rows are a vector's (bias's) elements. */
typedef enum {
    TRAM_SPLIT_NONE = 0,      /* held whole: norms, the embedding, routers, routed experts */
    TRAM_SPLIT_Q_ROWS,        /* rows by query heads: q and its bias */
    TRAM_SPLIT_KV_ROWS,       /* rows by KV heads: k, v and their biases */
    TRAM_SPLIT_FFN_ROWS,      /* rows by FFN slice: gate, up */
    TRAM_SPLIT_Q_COLS,        /* columns by query heads: o_proj, then all_reduce */
    TRAM_SPLIT_FFN_COLS,      /* columns by FFN slice: down, then all_reduce */
    TRAM_SPLIT_SHARED_ROWS,   /* a shared expert's gate and up, by its FFN slice */
    TRAM_SPLIT_SHARED_COLS,   /* its down */
} tram_split;

/* A tensor: the GGUF module between "blk.N." and ".weight" (or a global
 * name), the HF name after "model.layers.N." ("%d" is the expert, for
 * per-expert ones), and its tensor-parallel split. */
typedef struct {
    const char *gguf, *hf;
    tram_split split;
} tram_arch_name;

/* Routing, the same in every row: softmax over the router's logits, the top
 * k experts, their probabilities renormalized to sum 1 or not. */
typedef struct {
    const char *hf_count_key;       /* config.json's expert count */
    const char *hf_ffn_key;         /* one expert's width; NULL: intermediate_size */
    int norm_topk_prob;             /* the default; the GGUF's expert_weights_norm overrides it */
    const char *hf_norm_key;        /* config.json's override; NULL: the default always holds */
    int hf_sparse_step;             /* config.json may make layers dense (decoder_sparse_step,
                                       mlp_only_layers): refused when it does, written all-sparse */
    int shared_expert;              /* a sigmoid-gated shared expert (Qwen2-MoE) */
    const tram_arch_name *names;    /* HF names, ending at {NULL} */
    const char *hf_fused_router;    /* the router in transformers 5's fused layout
                                       (save_original_format=False); NULL: as in names */
} tram_arch_moe;

typedef struct {
    const char *name;               /* tram's: model config arch, presets' "arch" */
    const char *gguf_arch;          /* llama.cpp's general.architecture (and key prefix) */
    const char *hf_architecture;    /* config.json architectures[0] */
    const char *hf_model_type;      /* config.json model_type */
    /* llama.cpp permutes the Q/K rows of llama-arch files for interleaved
     * RoPE; other GGUFs and every HF checkpoint keep the NeoX halves. */
    tram_rope_style gguf_rope;
    int qkv_bias;                   /* q/k/v have biases in HF checkpoints (in a GGUF, its
                                       own tensors decide) */
    int hf_qkv_bias_key;            /* config.json's qkv_bias overrides it */
    int qk_norm;                    /* RMSNorm of each q and k head before RoPE (Qwen3):
                                       blk.N.attn_q_norm / attn_k_norm, [head_dim] */
    tram_window_rule window;
    int hf_attention_bias_key;      /* the config class has attention_bias (written false) */
    const tram_arch_moe *moe;       /* NULL: dense */
} tram_arch;

int tram_arch_count(void);
const tram_arch *tram_arch_at(int i);
/* NULL when no row has that name. */
const tram_arch *tram_arch_by_name(const char *name);
/* The row of a GGUF's general.architecture, with experts or without (a
 * "llama" file with expert_count is a Mixtral); NULL when none. */
const tram_arch *tram_arch_by_gguf(const char *gguf_arch, int has_experts);
/* The row a GGUF of that general.architecture loads as: with experts when
 * it has "<arch>.expert_count"; NULL when no row has the name. */
struct tram_gguf;
const tram_arch *tram_arch_of_gguf(const struct tram_gguf *g, const char *gguf_arch);
/* The row of config.json's architectures[0], or of its model_type when
 * architecture is NULL; NULL when none. */
const tram_arch *tram_arch_by_hf(const char *architecture, const char *model_type);
/* "a, b, c": every row's name, gguf_arch (deduplicated) or hf_architecture,
 * for messages that say what is supported. */
enum { TRAM_ARCH_LIST_NAME, TRAM_ARCH_LIST_GGUF, TRAM_ARCH_LIST_HF };
void tram_arch_list(int which, char *out, size_t len);

/* The HF name of a GGUF tensor name of a model of this row, into out; -1
 * when it has none or out is too short. */
int tram_arch_hf_name(const tram_arch *a, const char *gguf_name, char *out, size_t len);
/* How tensor parallelism splits that tensor; TRAM_SPLIT_NONE for a name the
 * row does not have (loading it whole then fails on its size if it had to
 * be split). */
tram_split tram_arch_split(const tram_arch *a, const char *gguf_name);

#ifdef __cplusplus
}
#endif

#endif
