/* text_file.h — text files the commands read whole: as token ids
 * (perplexity, quantize's calibration) or as a chat template
 * (--chat-template). */
#ifndef TRAM_CLI_TEXT_FILE_H
#define TRAM_CLI_TEXT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "models/quantize.h"
#include "tokenizer/tokenizer.h"

/* The whole file as a malloc'd, NUL-terminated string of *len bytes. */
int tram_read_text_file(const char *path, char **text, size_t *len, tram_error *err);

/* Reads a text file whole and tokenizes it (BOS first when the model adds
 * one; special tokens as plain text).  *ids is malloc'd. */
int tram_tokenize_file(const tram_tokenizer *t, const char *path, int32_t **ids, int *n, tram_error *err);

/* Calibration statistics (models/quantize.h) of f's model over the first
 * max_tokens tokens of the text file at path, tokenized by f's own
 * tokenizer, in windows of ctx (samples and hessians: tram_calibrate's); `who`
 * names the command in the progress line. */
int tram_calibrate_file(tram_model_file *f, const char *path, int max_tokens, int ctx, int threads, int samples,
                        int hessians, const char *who, tram_calib_stats *st, tram_error *err);

/* A flag's parse function (flags.h) for --chat-template FILE: the field, a
 * const char *, gets the file's Jinja source once it parses (kept for the
 * life of the process); an unreadable file or a template with a syntax
 * error is an invalid value, named with the reason. */
int tram_chat_template_flag(const char *flag, const char *value, void *field);

#endif
