/* hf_quant.h — a Hugging Face checkpoint's quantization_config: the FP8
 * W8A8 layouts tram runs, everything else refused by name.
 *
 * Two layouts carry FP8 (E4M3) weights, each an F8_E4M3 "<module>.weight"
 * beside a "<module>.weight_scale" (one scale per output row, [rows, 1], or
 * one for the tensor), with activations quantized per token when the model
 * runs:
 *   quant_method "compressed-tensors" (llm-compressor), format
 *     "float-quantized" or "naive-quantized", every config group's weights
 *     {type float, num_bits 8, strategy channel or tensor, symmetric} and
 *     input_activations {type float, num_bits 8, strategy token, dynamic};
 *   quant_method "fbgemm_fp8" (transformers' FBGEMM layout): per-row weight
 *     scales, activation_scale_ub the largest max|x| a token's scale covers.
 * Which modules stay unquantized (ignore, modules_to_not_convert) the
 * tensors' dtypes say.  Static input scales, blocks or groups, other bit
 * widths or E5M2, weight-only FP8 (unquantized activations), a KV-cache
 * scheme or sparsity are refused with the key and value that ask for them. */
#ifndef TRAM_HF_QUANT_H
#define TRAM_HF_QUANT_H

#include <jansson.h>

#include "kernels/base.h"

typedef struct {
    int fp8;              /* FP8 W8A8 weights */
    float act_max;        /* a token's max|x| clamped to this before its scale (fbgemm); 0: none */
} tram_hf_quant;

/* root: config.json's object; no quantization_config leaves *q zero. */
int tram_hf_quant_config(const json_t *root, tram_hf_quant *q, const char *path, tram_error *err);

#endif
