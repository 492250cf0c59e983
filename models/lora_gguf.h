/* lora_gguf.h — a LoRA adapter in a GGUF file, as llama.cpp's
 * convert_lora_to_gguf.py writes it: general.type "adapter", adapter.type
 * "lora", adapter.lora.alpha, and per adapted projection of each layer the
 * factors blk.N.<proj>.weight.lora_a (A: ne [in, r]) and .lora_b (B: ne
 * [r, out]), in any type the GGUF reader dequantizes.  llama.cpp scales by
 * alpha / r (the converter drops rsLoRA).  Used by tram_lora_open
 * (models/lora.h) when its path is a file. */
#ifndef TRAM_LORA_GGUF_H
#define TRAM_LORA_GGUF_H

#include "models/lora.h"

/* Reads the file at a->path into a (whose n_layers and factor arrays
 * tram_lora_open set) for a base of config base: rank, alpha, scale,
 * targets, the factors, and in *rope the order of B's Q/K rows in the file
 * (llama-arch files permute them as their base's).  Anything else in the
 * file, a rank above max_rank (0: any) or another vocabulary is an error
 * naming it; on failure the caller frees a. */
int tram_lora_gguf_read(tram_lora_adapter *a, const tram_model_config *base, int max_rank, tram_rope_style *rope,
                        tram_error *err);

#endif
