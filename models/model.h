/* model.h — model files, hyper-parameters, and the transformer on a backend.
 *
 * A tram_model_file is an opened GGUF file or Hugging Face directory; it
 * answers the hyper-parameters and dequantizes any tensor to f32 on request,
 * under the GGUF tensor names (blk.N.attn_q.weight, ...).  tram_model holds the
 * weights uploaded to a backend and runs forward passes over a paged KV cache. */
#ifndef TRAM_MODEL_H
#define TRAM_MODEL_H

#include <stdint.h>

#include "kernels/batch.h"
#include "kernels/base.h"
#include "kernels/backend.h"
#include "kernels/dequant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How an embedding is pooled from the final hidden states (after the final
 * norm), numbered as GGUF's <arch>.pooling_type. */
typedef enum {
    TRAM_POOLING_UNSET = 0,       /* the model names none (GGUF's NONE) */
    TRAM_POOLING_MEAN = 1,        /* the mean of every token's state */
    TRAM_POOLING_CLS = 2,         /* the first token's */
    TRAM_POOLING_LAST = 3,        /* the last token's (Qwen3-Embedding, gte-Qwen2) */
} tram_pooling;

typedef struct {
    char arch[32];                /* its row's name in models/arch.h: "llama", "qwen3", "mixtral", ... */
    int dim;                      /* hidden size */
    int n_layers, n_heads, n_kv_heads, head_dim;
    int ffn_dim, vocab_size;      /* ffn_dim: the dense FFN's width, or one expert's */
    int max_seq_len;              /* context length the model was trained for */
    float norm_eps;
    float rope_theta;
    tram_rope_style rope_style;   /* from the file, never mixed */
    int rope_scaling_llama3;      /* rope_scaling.rope_type == "llama3" */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    int tied_embeddings;          /* lm_head = token embedding */
    int qkv_bias;                 /* Qwen2; the file's own biases decide */
    /* Mixture of experts (models/moe.h): every layer's FFN is n_experts routed
     * experts of width ffn_dim, n_experts_used per token; 0 experts: dense. */
    int n_experts, n_experts_used;
    int norm_topk_prob;           /* renormalize the top-k weights to sum 1 (Mixtral always) */
    int shared_ffn_dim;           /* Qwen2-MoE's sigmoid-gated shared expert; 0: none */
    /* Embeddings (models/st_modules.c): the pooling the model names (GGUF's
     * <arch>.pooling_type, a sentence-transformers directory's 1_Pooling), L2
     * normalization (sentence-transformers' Normalize module; GGUF: always, as
     * llama.cpp does), Matryoshka truncation allowed (config.json's
     * is_matryoshka or matryoshka_dimensions). */
    tram_pooling pooling;
    int pooling_normalize;
    int matryoshka;
    int embedding_only;           /* no LM head (an HF base model without lm_head): no generation */
} tram_model_config;

/* ---- model files ---- */

typedef struct tram_model_file tram_model_file;
struct tram_gguf;

/* path: a .gguf file, or a directory with config.json + *.safetensors. */
int tram_model_file_open(tram_model_file **out, const char *path, tram_error *err);
/* Random weights of a preset's shape (--load-format dummy, models/dummy.h);
 * preset: a name in models/presets or a .json path.  Its path reads
 * "dummy:<preset>"; it has no GGUF. */
int tram_model_file_open_dummy(tram_model_file **out, const char *preset, tram_error *err);
/* Dummy weights whose matrices come in `blocks` (Q8_0, Q4_0 or Q4_1; F32:
 * as tram_model_file_open_dummy), quantized from the same values, as a GGUF
 * of the preset's shape quantized so would hold them: what `tram bench
 * roofline --preset` runs to measure the native format on any model size. */
int tram_model_file_open_dummy_blocks(tram_model_file **out, const char *preset, tram_ggml_type blocks,
                                      tram_error *err);
/* Dummy weights of any configuration (a preset's, cut to fewer layers, say),
 * named `name` in messages. */
int tram_model_file_open_dummy_config(tram_model_file **out, const tram_model_config *c, const char *name,
                                      tram_error *err);
void tram_model_file_close(tram_model_file *f);
const tram_model_config *tram_model_file_config(const tram_model_file *f);
const char *tram_model_file_path(const tram_model_file *f);
/* The GGUF behind the file, or NULL for a Hugging Face directory. */
struct tram_gguf *tram_model_file_gguf(const tram_model_file *f);
int tram_model_file_has_tensor(const tram_model_file *f, const char *name);
/* 1 when the file stores `name` as int8 with per-row scales ("<name>.scale",
 * as `tram quantize` writes); read_f32 then returns q * scale. */
int tram_model_file_is_int8(const tram_model_file *f, const char *name);
/* 1 when the file stores `name` as FP8 (E4M3) codes with row or tensor
 * scales: a GGUF I8 tensor with "<name>.fp8_scale" (tram quantize --format
 * fp8), or an HF checkpoint's F8_E4M3 weight with its weight_scale
 * (models/safetensors.h); read_f32 then returns the dequantized values. */
int tram_model_file_is_fp8(const tram_model_file *f, const char *name);
/* Such a tensor's codes [rows][cols] and one scale per row (a tensor's one
 * scale repeated), as stored: for backend.h's upload_weight_fp8. */
int tram_model_file_read_fp8(tram_model_file *f, const char *name, uint8_t *codes, float *scales, int64_t rows,
                             int64_t cols, tram_error *err);
/* The bound on activation scales FP8 weights carry (an FBGEMM checkpoint's
 * activation_scale_ub, tram_weight's act_max); 0: none. */
float tram_model_file_fp8_act_max(const tram_model_file *f);
/* Dequantizes tensor `name` into out[numel]; fails if its size differs. */
/* 1 when f is dummy weights (--load-format dummy), whose values a backend
 * may draw itself from *out (kernels/dummy_values.h); 0 when f holds values;
 * -1 for a tensor it lacks or of another size. */
int tram_model_file_dummy_stream(const tram_model_file *f, const char *name, int64_t numel,
                                 tram_dummy_stream *out, tram_error *err);
int tram_model_file_read_f32(tram_model_file *f, const char *name, float *out, int64_t numel,
                             tram_error *err);

/* The weight type of `name` when the file stores it in a GGUF block format
 * that backends can run as stored (TRAM_W_Q8_0, TRAM_W_Q4_0, TRAM_W_Q4_1);
 * TRAM_W_F32 for every other tensor (read those with read_f32). */
tram_wtype tram_model_file_block_type(const tram_model_file *f, const char *name);
/* Copies the blocks of such a tensor into out and sets *bytes to their size;
 * fails if it does not hold numel weights. */
int tram_model_file_read_blocks(tram_model_file *f, const char *name, void *out, int64_t numel,
                                size_t *bytes, tram_error *err);

/* Inverse RoPE frequencies [head_dim/2], with llama3 scaling applied. */
void tram_rope_inv_freq(const tram_model_config *c, float *inv_freq);

/* ---- the model on a backend ---- */

typedef struct {
    int max_tokens;          /* most tokens in one forward pass */
    int max_seqs;            /* most sequences in one forward pass */
    int max_logits;          /* most logits rows tram_model_prepare's pass keeps on the device
                                (speculation's drafts add rows); 0: max_seqs */
    int max_blocks_per_seq;
    int num_blocks, block_size;  /* KV pool */
    tram_wtype weight_type;  /* TRAM_W_F32 on the CPU, TRAM_W_BF16 on CUDA */
    int quantize_int8;       /* matrices to TRAM_W_INT8 at load (W8A8, no smoothing); matrices
                                the file stores as int8 load as int8 regardless */
    int quantize_fp8;        /* matrices to TRAM_W_FP8 at load (per row, as tram quantize --format
                                fp8 writes them); a tied embedding stays at weight_type */
    const char *int8_exclude;/* comma-separated names kept at weight_type (models/quantize.h), for
                                either quantization at load */
    int keep_blocks;         /* matrices the file stores in GGUF block formats stay in them on a
                                backend with upload_weight_blocks (--weight-format native) */
    tram_kv_dtype kv_dtype;  /* the KV cache's format (--kv-cache-dtype; either backend) */
    int max_loras;           /* LoRA adapter slots (--max-loras); 0: none */
    int max_lora_rank;       /* the largest rank a slot takes (--max-lora-rank) */
} tram_model_limits;

typedef struct tram_model tram_model;

/* Bytes of KV cache one block takes across all layers on one rank of
 * world_size (1: unsharded) in format kv, to size the pool. */
size_t tram_model_kv_block_bytes(const tram_model_config *c, int block_size, int act_bytes, int world_size,
                                 tram_kv_dtype kv);

/* Loads be's tensor-parallel part of the model (be->rank of be->world_size,
 * models/shard.h): its own heads, FFN slice and KV pool; the ranks of one
 * world are created on the same file with the same limits. */
int tram_model_create(tram_model **out, tram_model_file *f, tram_backend *be,
                      const tram_model_limits *lim, tram_error *err);
void tram_model_destroy(tram_model *m);
/* Replaces the KV pool by one of num_blocks blocks (its contents are lost): a
 * GPU engine sizes the pool after a profiling forward pass. */
int tram_model_resize_kv(tram_model *m, int num_blocks, tram_error *err);
/* Makes m read and write from's KV pool instead of its own (freed): a
 * model of the same layers, KV heads, head size, KV format and blocks on the
 * same backend, such as the quantized self-draft of engine/spec_draft.c,
 * whose guesses then need no KV of their own for what from has computed.
 * from must outlive m and keep its pool (no resize). */
int tram_model_share_kv(tram_model *m, const tram_model *from, tram_error *err);
const tram_model_config *tram_model_config_of(const tram_model *m);

/* Runs the batch and writes logits[num_logits][vocab] (host, f32).  Under
 * tensor parallelism every rank runs every batch (their all-reduces meet) and
 * only rank 0 computes logits: the others pass logits = NULL. */
int tram_model_forward(tram_model *m, const tram_batch *b, float *logits, tram_error *err);

/* The final hidden states (after the final norm) of rows (token indices)
 * of the last pass's batch, out[n][dim] on the host: what an embedding
 * pools.  Any number of rows; valid until the next pass. */
int tram_model_hidden_rows(tram_model *m, const int32_t *rows, int n, float *out, tram_error *err);

/* The same pass in two halves, for a GPU engine that samples on the device
 * and replays CUDA graphs: prepare checks the batch (at most max_logits
 * logits rows) and uploads its arrays into buffers whose addresses never change;
 * run queues the whole forward pass on those buffers (device work only, so a
 * graph can capture it, all-reduces included) and returns the logits, backend
 * memory [num_logits][vocab] in the backend's activation type, valid until
 * the next pass (NULL on ranks other than 0).  Neither syncs. */
int tram_model_prepare(tram_model *m, const tram_batch *b, tram_error *err);
const void *tram_model_run(tram_model *m);

/* LoRA adapters (models/lora.h) in the model's lim.max_loras slots: load
 * uploads this rank's part of adapter a into slot (replacing what it held);
 * a batch's seq_lora names the slot of each sequence. */
struct tram_lora_adapter;
int tram_model_lora_load(tram_model *m, int slot, const struct tram_lora_adapter *a, tram_error *err);
void tram_model_lora_unload(tram_model *m, int slot);

/* Inputs of the linear layers, shown to an observer (calibration). */
typedef enum {
    TRAM_ACT_ATTN_IN = 0,     /* normed input of q/k/v, [n, dim] */
    TRAM_ACT_ATTN_OUT = 1,    /* attention output, input of o_proj, [n, n_heads*head_dim] */
    TRAM_ACT_FFN_IN = 2,      /* normed input of gate/up, [n, dim] */
    TRAM_ACT_FFN_HIDDEN = 3,  /* silu(gate)*up, input of down_proj, [n, ffn] */
    TRAM_ACT_HEAD_IN = 4,     /* final normed rows of every token, [n, dim]; layer = n_layers */
} tram_act_site;

/* act is backend memory (f32 host rows on the CPU backend). */
typedef void (*tram_act_observer)(void *ctx, int layer, tram_act_site site, const void *act, int n,
                                  int dim);
/* Calls fn during every later forward pass; NULL stops. */
void tram_model_set_observer(tram_model *m, tram_act_observer fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
