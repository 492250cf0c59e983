/* safetensors.h — Hugging Face model directories: config.json plus single or
 * sharded *.safetensors (with model.safetensors.index.json), F32/F16/BF16,
 * and FP8 (E4M3) checkpoints.
 * Tensors are looked up under GGUF names (blk.N.attn_q.weight, ...), mapped to
 * the HF names (model.layers.N.self_attn.q_proj.weight, ...) inside. */
#ifndef TRAM_SAFETENSORS_H
#define TRAM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "models/model.h"

typedef struct tram_hf_model tram_hf_model;

/* Reads dir/config.json into cfg (rope_style = TRAM_ROPE_NEOX) and indexes
 * every tensor of the safetensors files. */
int tram_hf_open(tram_hf_model **out, const char *dir, tram_model_config *cfg, tram_error *err);
void tram_hf_close(tram_hf_model *m);
int tram_hf_has_tensor(const tram_hf_model *m, const char *gguf_name);
int tram_hf_read_f32(tram_hf_model *m, const char *gguf_name, float *out, int64_t numel,
                     tram_error *err);
/* FP8 checkpoints (models/hf_quant.h): whether `gguf_name` is an F8_E4M3
 * weight with its weight_scale, its codes and row scales (a tensor's one
 * scale repeated), and the activation bound its config sets (0: none).
 * read_f32 returns such a weight dequantized. */
int tram_hf_is_fp8(const tram_hf_model *m, const char *gguf_name);
int tram_hf_read_fp8(tram_hf_model *m, const char *gguf_name, uint8_t *codes, float *scales, int64_t rows,
                     int64_t cols, tram_error *err);
float tram_hf_fp8_act_max(const tram_hf_model *m);

/* One safetensors file read by the names it stores (a PEFT adapter's
 * adapter_model.safetensors), checked as a model's files are.  Names are
 * sorted: tram_st_name(m, i) for i < tram_st_count(m). */
int tram_st_open_file(tram_hf_model **out, const char *path, tram_error *err);
int tram_st_count(const tram_hf_model *m);
const char *tram_st_name(const tram_hf_model *m, int i);
/* Size of dimension d of tensor i's shape; -1 past its last. */
int64_t tram_st_dim(const tram_hf_model *m, int i, int d);
int tram_st_read_named(tram_hf_model *m, const char *name, float *out, int64_t numel, tram_error *err);
#endif
