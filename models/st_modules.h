/* st_modules.h — what a sentence-transformers directory says about its
 * embeddings: modules.json's pipeline (Transformer, Pooling, Normalize),
 * 1_Pooling/config.json's mode (6.x's "pooling_mode" and the earlier
 * "pooling_mode_*" flags), config_sentence_transformers.json's default
 * prompt, sentence_bert_config.json's lower-casing and max_seq_length, and
 * config.json's Matryoshka keys.
 *
 * tram computes the Transformer, last-token, mean and CLS pooling and L2
 * normalization; a module or a pooling mode beyond those (Dense, max, weighted
 * mean, a default prompt, lower-casing) would change every embedding, so the
 * directory is refused with the name of what tram lacks. */
#ifndef TRAM_ST_MODULES_H
#define TRAM_ST_MODULES_H

#include <jansson.h>

#include "kernels/base.h"
#include "models/model.h"

/* Fills c->pooling, c->pooling_normalize and c->matryoshka from the files of
 * dir and its config.json (root).  A directory without modules.json names no
 * pooling (TRAM_POOLING_UNSET) and normalizes. */
int tram_st_read_pooling(const char *dir, const json_t *root, tram_model_config *c, tram_error *err);

#endif
