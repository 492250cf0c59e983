/* dummy.h — the tensors of `--load-format dummy`: random weights of a preset's
 * shape (models/presets.h), under the GGUF tensor names the loader answers.
 *
 * Values come from a counter-based generator keyed by the tensor's name
 * (kernels/dummy_values.h), so a tensor's values depend on nothing else (not on the order of reads, the
 * backend or the thread count): the CPU and CUDA backends get the same model.
 * Every value is exactly representable in bf16, so uploading as bf16 loses
 * nothing and both backends compute with identical weights.
 *
 * Scales keep activations of order one through any depth: matrices are
 * uniform with variance 1/cols (unit-variance outputs from unit-variance
 * inputs; the embedding table too, so tied logits have unit spread), norm
 * weights are 1 ± 0.1, biases ± 0.1. */
#ifndef TRAM_DUMMY_H
#define TRAM_DUMMY_H

#include <stdint.h>

#include "kernels/base.h"
#include "kernels/dequant.h"
#include "kernels/dummy_values.h"
#include "models/model.h"

/* 1 when a model of config c has a tensor of that name. */
int tram_dummy_has_tensor(const tram_model_config *c, const char *name);
/* The generator of the tensor's values (kernels/dummy_values.h: the formula
 * a backend may also compute on its device); fails on an unknown name or a
 * size that differs from the tensor's. */
int tram_dummy_stream_of(const tram_model_config *c, const char *name, int64_t numel, tram_dummy_stream *out,
                         tram_error *err);
/* Fills out[numel] with the tensor's values, failing as tram_dummy_stream_of. */
int tram_dummy_read_f32(const tram_model_config *c, const char *name, float *out, int64_t numel,
                        tram_error *err);

/* 1 when the tensor is a matrix of whole 32-element blocks per row: one a
 * dummy file may give in a GGUF block format. */
int tram_dummy_is_block_matrix(const tram_model_config *c, const char *name);
/* Fills out with the tensor's values quantized to `type` (Q8_0, Q4_0 or
 * Q4_1: kernels/dequant.h), as a GGUF file would store them; fails as
 * tram_dummy_stream_of, or on a tensor that is no such matrix. */
int tram_dummy_read_blocks(const tram_model_config *c, const char *name, tram_ggml_type type, void *out,
                           int64_t numel, tram_error *err);

#endif
