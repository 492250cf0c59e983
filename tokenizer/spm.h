/* spm.h — SentencePiece vocabularies (spm.c): the encoder of one text
 * segment, and what a piece decodes to. */
#ifndef TRAM_TOK_SPM_H
#define TRAM_TOK_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "tokenizer/ids.h"
#include "tokenizer/tokenizer.h"

/* Appends the ids of text (no added tokens in it) to out; at_start: the
 * segment begins the text, so the dummy prefix goes before it. */
int tram_spm_encode_text(const tram_tokenizer *t, const char *text, size_t len, int at_start,
                         tram_ids *out, tram_error *err);
/* Decoded bytes of token id into out (U+2581 → space, <0xXX> → the byte). */
size_t tram_spm_piece_bytes(const tram_tokenizer *t, int32_t id, char *out);

#endif
