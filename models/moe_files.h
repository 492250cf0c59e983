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
#include "models/gguf.h"
#include "models/model.h"

/* "blk.<layer>.<kind>.<expert>.weight", kind "ffn_gate", "ffn_up" or "ffn_down". */
void tram_moe_expert_name(char *out, size_t len, int layer, const char *kind, int expert);

/* When `name` is an expert's matrix and g stacks that kind of matrix in a 3-D
 * tensor, fills *slice with expert E's part of it (named `name`) and returns
 * 0; -1 otherwise. */
int tram_gguf_expert_slice(const tram_gguf *g, const char *name, tram_gguf_tensor *slice);

/* The MoE keys of a GGUF of architecture arch ("llama" for Mixtral,
 * "qwen2moe"): expert_count, expert_used_count, expert_feed_forward_length,
 * expert_shared_feed_forward_length, expert_weights_norm.  A file without
 * expert_count is dense and keeps c unchanged. */
int tram_moe_gguf_config(const tram_gguf *g, const char *arch, tram_model_config *c, tram_error *err);

/* The MoE fields of a Mixtral or Qwen2-MoE config.json (c->arch "mixtral" or
 * "qwen2moe"); a Qwen2-MoE whose layers are not all sparse is refused. */
int tram_moe_hf_config(const json_t *root, tram_model_config *c, const char *path, tram_error *err);

/* The HF name of layer `layer`'s MoE tensor `module` ("ffn_gate_inp",
 * "ffn_up.3", "ffn_down_shexp", ...; the GGUF name between "blk.N." and the
 * suffix ".weight") for architecture arch, into out; -1 when it is not an MoE
 * tensor of that architecture or out is too short. */
int tram_moe_hf_name(const char *arch, int layer, const char *module, const char *suffix, char *out,
                     size_t out_len);

#endif
