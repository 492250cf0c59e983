/* Helpers for the quantization and perplexity tests: a tiny random Llama
 * GGUF written with models/gguf_writer.c, and forward passes over one
 * sequence. */
#ifndef TEST_QUANTIZE_UTIL_H
#define TEST_QUANTIZE_UTIL_H

#include <stdint.h>

#include "models/model.h"

#define TINY_DIM 64
#define TINY_LAYERS 2
#define TINY_HEADS 4
#define TINY_KV_HEADS 2
#define TINY_FFN 96
#define TINY_VOCAB 128
#define TEST_MAX_TOKENS 512   /* tokens of the one sequence a test model runs */

/* F32 weights, tied embeddings; a few channels of the norm weights are 20x
 * the others, so activations have the outliers SmoothQuant is for. */
void tiny_model_write(const char *path, unsigned seed);

/* A CPU model for one sequence of up to TEST_MAX_TOKENS (block size 16);
 * int8: matrices quantized at load. */
tram_model *test_model_load(tram_model_file *f, tram_backend *be, int int8);

/* logits[n][vocab] of every position of ids[n], run as one sequence. */
void test_forward_all(tram_model *m, const int32_t *ids, int n, float *logits);

#endif
