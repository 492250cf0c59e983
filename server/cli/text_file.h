/* text_file.h — a text file as token ids, for the commands that read one
 * (perplexity, quantize's calibration). */
#ifndef TRAM_CLI_TEXT_FILE_H
#define TRAM_CLI_TEXT_FILE_H

#include <stdint.h>

#include "kernels/base.h"
#include "tokenizer/tokenizer.h"

/* Reads a text file whole and tokenizes it (BOS first when the model adds
 * one; special tokens as plain text).  *ids is malloc'd. */
int tram_tokenize_file(const tram_tokenizer *t, const char *path, int32_t **ids, int *n, tram_error *err);

#endif
