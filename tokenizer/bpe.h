/* bpe.h — byte-level BPE (bpe.c): the GPT-2 byte alphabet, merges, and the
 * encoder of one text segment. */
#ifndef TRAM_TOK_BPE_H
#define TRAM_TOK_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "tokenizer/ids.h"
#include "tokenizer/tokenizer.h"

/* The code point GPT-2's byte-to-unicode table gives byte b. */
uint32_t tram_bpe_byte_to_cp(uint8_t b);
/* Decoded bytes of a byte-level piece into out (at most len bytes). */
size_t tram_bpe_piece_bytes(const char *piece, size_t len, char *out);
/* Adds a merge given as "left right" (both pieces and their concatenation in
 * the vocabulary); rank = its index in the model's list. */
int tram_bpe_add_merge(tram_tokenizer *t, const char *merge, size_t len, int32_t rank, tram_error *err);
/* Appends the ids of text (no added tokens in it) to out. */
int tram_bpe_encode_text(const tram_tokenizer *t, const char *text, size_t len, tram_ids *out,
                         tram_error *err);

#endif
