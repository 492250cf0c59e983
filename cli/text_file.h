/* text_file.h — text files the commands read whole: as token ids
 * (perplexity, quantize's calibration) or as a chat template
 * (--chat-template). */
#ifndef TRAM_CLI_TEXT_FILE_H
#define TRAM_CLI_TEXT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "tokenizer/tokenizer.h"

/* The whole file as a malloc'd, NUL-terminated string of *len bytes. */
int tram_read_text_file(const char *path, char **text, size_t *len, tram_error *err);

/* Reads a text file whole and tokenizes it (BOS first when the model adds
 * one; special tokens as plain text).  *ids is malloc'd. */
int tram_tokenize_file(const tram_tokenizer *t, const char *path, int32_t **ids, int *n, tram_error *err);

/* A flag's parse function (flags.h) for --chat-template FILE: the field, a
 * const char *, gets the file's Jinja source once it parses (kept for the
 * life of the process); an unreadable file or a template with a syntax
 * error is an invalid value, named with the reason. */
int tram_chat_template_flag(const char *flag, const char *value, void *field);

#endif
