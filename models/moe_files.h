/* moe_files.h — how mixture-of-experts models are stored: the hyper-parameters
 * of Mixtral and Qwen2-MoE in GGUF metadata and in config.json, and the names
 * of their expert tensors.
 *
 * The loader answers every expert's matrices under one name per expert,
 * "blk.N.ffn_gate.E.weight" (also ffn_up, ffn_down; llama.cpp's first Mixtral
 * files stored them so).  Current GGUFs stack the experts into 3-D
 * "blk.N.ffn_gate_exps.weight" tensors ([n_experts][rows][cols]), of which
 * expert E is a contiguous slice; Hugging Face directories name them
 * model.layers.N.block_sparse_moe.experts.E.w1 (Mixtral) or
 * model.layers.N.mlp.experts.E.gate_proj (Qwen2-MoE). */
#ifndef TRAM_MOE_FILES_H
#define TRAM_MOE_FILES_H

#include <jansson.h>
#include <stddef.h>

#include "kernels/base.h"
#include "models/arch.h"
#include "models/gguf.h"
#include "models/model.h"

/* "blk.<layer>.<kind>.<expert>.weight", kind "ffn_gate", "ffn_up" or "ffn_down". */
void tram_moe_expert_name(char *out, size_t len, int layer, const char *kind, int expert);

/* When `name` is an expert's matrix and g stacks that kind of matrix in a 3-D
 * tensor, fills *slice with expert E's part of it (named `name`) and returns
 * 0; -1 otherwise. */
int tram_gguf_expert_slice(const tram_gguf *g, const char *name, tram_gguf_tensor *slice);

/* The MoE keys of a GGUF of row a's general.architecture ("llama" for
 * Mixtral, "qwen2moe"): expert_count, expert_used_count,
 * expert_feed_forward_length, expert_shared_feed_forward_length,
 * expert_weights_norm.  A dense row keeps c unchanged. */
int tram_moe_gguf_config(const tram_gguf *g, const tram_arch *a, tram_model_config *c, tram_error *err);

/* The MoE fields of an MoE row's config.json (the keys a->moe names); one
 * whose layers are not all sparse (decoder_sparse_step, mlp_only_layers) is
 * refused. */
int tram_moe_hf_config(const json_t *root, const tram_arch *a, tram_model_config *c, const char *path,
                       tram_error *err);

#endif
