/* lora.h — LoRA adapters as PEFT writes them (a directory with
 * adapter_config.json and adapter_model.safetensors) or as llama.cpp's
 * converter writes them (a GGUF file: models/lora_gguf.h).
 *
 * An adapter adds to a projection W of the base model the low-rank update
 * delta(x) = scale · (x · Aᵀ) · Bᵀ, A (r, in) and B (out, r), with scale =
 * lora_alpha / r (lora_alpha / sqrt(r) with rsLoRA).  The targets are the
 * seven projections of a Llama layer; anything else in the config that
 * changes the math (DoRA, modules_to_save, biases, embedding targets, layer
 * subsets, per-module ranks...) is refused with one sentence naming it, so
 * an adapter either runs exactly as PEFT runs it or not at all.  The factors
 * are held on the host in f32, whole: a model's slots (models/lora_slots.h)
 * take each rank's part when they upload them. */
#ifndef TRAM_LORA_H
#define TRAM_LORA_H

#include "kernels/base.h"
#include "models/model.h"

typedef enum {
    TRAM_LORA_Q, TRAM_LORA_K, TRAM_LORA_V, TRAM_LORA_O, TRAM_LORA_GATE, TRAM_LORA_UP, TRAM_LORA_DOWN,
    TRAM_LORA_N_TARGETS
} tram_lora_target;

typedef struct tram_lora_adapter {
    char path[512];
    int rank;
    double alpha;
    int rslora;
    float scale;               /* alpha / rank, or alpha / sqrt(rank) under rsLoRA */
    unsigned targets;          /* bit t: projection t (tram_lora_target) is adapted */
    int n_layers;
    /* [n_layers * TRAM_LORA_N_TARGETS], NULL where not targeted: A is (rank,
     * in), B is (out, rank), row-major, the base's full (unsharded) sizes */
    float **a, **b;
} tram_lora_adapter;

/* "q_proj" ... "down_proj": the module names of PEFT's target_modules. */
const char *tram_lora_target_name(tram_lora_target t);
/* The base's GGUF name of layer l's projection t ("blk.3.attn_q.weight"). */
void tram_lora_base_name(tram_lora_target t, int layer, char *out, size_t cap);
/* Input and output widths of projection t in a model of config c. */
void tram_lora_target_dims(const tram_model_config *c, tram_lora_target t, int *in, int *out);

/* Opens the adapter directory (or GGUF file) at path for a base model of
 * config base, B's Q/K rows in the base's RoPE order; a rank above
 * max_rank (0: any), a target the base lacks, a tensor of the wrong size or
 * one the adapter should not hold are errors naming it. */
int tram_lora_open(tram_lora_adapter **out, const char *path, const tram_model_config *base, int max_rank,
                   tram_error *err);
void tram_lora_free(tram_lora_adapter *a);
/* Only dir's adapter_config.json, checked as tram_lora_open checks it,
 * into *a (rank, alpha, scale, targets; no factors, nothing to free):
 * what an adapter is without its base (`tram info`). */
int tram_lora_read_config(tram_lora_adapter *a, const char *dir, tram_error *err);
/* Host bytes the factors take. */
size_t tram_lora_bytes(const tram_lora_adapter *a, const tram_model_config *base);

#endif
