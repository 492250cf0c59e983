/* spm_lib.h — the libsentencepiece shim (spm_lib.cc): tram reads a
 * tokenizer.model through these few C functions, so no C++ leaks out. */
#ifndef TRAM_TOK_SPM_LIB_H
#define TRAM_TOK_SPM_LIB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tram_spm_lib tram_spm_lib;

int tram_spm_lib_load(tram_spm_lib **out, const char *path, char *msg, size_t msg_len);
void tram_spm_lib_free(tram_spm_lib *s);
int tram_spm_lib_size(const tram_spm_lib *s);
/* Piece string, score and TRAM_ATTR_* (tokenizer/token_attr.h) of token id. */
const char *tram_spm_lib_piece(const tram_spm_lib *s, int id, float *score, int *attr);
int tram_spm_lib_special_id(const tram_spm_lib *s, int which);   /* 0 unk, 1 bos, 2 eos */
/* Encodes text into ids (malloc'd); returns the count or -1. */
int tram_spm_lib_encode(const tram_spm_lib *s, const char *text, size_t len, int32_t **ids);
int tram_spm_lib_add_dummy_prefix(const tram_spm_lib *s);

#ifdef __cplusplus
}
#endif

#endif
