/* vocab.h — the tokenizer struct that the loaders (tok_gguf.c, tok_dir.c)
 * fill and the encoders read, and the calls that build its tables (vocab.c).
 * Not for use outside tokenizer/ (tests aside). */
#ifndef TRAM_TOK_VOCAB_H
#define TRAM_TOK_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "tokenizer/maps.h"
#include "tokenizer/pretok.h"
#include "tokenizer/token_attr.h"
#include "tokenizer/tokenizer.h"

typedef enum { TRAM_TOK_BPE, TRAM_TOK_SPM, TRAM_TOK_SPM_LIB } tram_tok_kind;

struct tram_tokenizer {
    tram_tok_kind kind;
    int n_vocab;
    char *pieces;            /* all pieces, each NUL-terminated */
    uint32_t *piece_off;     /* [n_vocab] */
    uint32_t *piece_len;     /* [n_vocab] */
    char *dec;               /* decoded bytes of every token, back to back */
    uint32_t *dec_off, *dec_len;   /* [n_vocab] */
    uint8_t *attr;           /* [n_vocab] TRAM_ATTR_* */
    float *scores;           /* [n_vocab] SentencePiece scores, or NULL */
    tram_strmap vocab;

    /* byte-level BPE */
    int32_t byte_id[256];    /* id of each byte's single-char token, -1 */
    uint16_t byte_cp[256];   /* tram_bpe_byte_to_cp, tabulated */
    tram_pairmap merges;
    int ignore_merges;       /* whole word in vocab → one token (Llama-3) */
    tram_pretok pretok;

    /* SentencePiece */
    int add_space_prefix;
    int32_t byte_tok[256];   /* <0xXX> tokens for byte fallback, -1 */
    int32_t unk_id;
    struct tram_spm_lib *lib;   /* TRAM_TOK_SPM_LIB: the model (spm_lib.h) */

    /* tokens split out of the text before the model sees it */
    int32_t *added;          /* sorted by length, longest first */
    int n_added;
    uint8_t added_first[256];   /* 1 when some added token starts with the byte */

    int32_t bos, eos;
    int add_bos, add_eos;
    int32_t post_id;         /* the special token a post-processor puts after the text
                                (Qwen3-Embedding's <|endoftext|>), when add_post */
    int add_post;
    int32_t *eog;
    int n_eog;
    char *chat_template;
};

/* Allocates an empty tokenizer of n_vocab tokens (ids -1 everywhere). */
int tram_tok_alloc(tram_tokenizer **out, int n_vocab, tram_error *err);
/* Copies the pieces in (pieces[i] of len[i] bytes) and builds the vocab map. */
int tram_tok_set_pieces(tram_tokenizer *t, const char *const *pieces, const uint32_t *len,
                        tram_error *err);
/* After pieces and attributes are set: decoded bytes, byte tables, added
 * tokens, end-of-generation ids. */
int tram_tok_finish(tram_tokenizer *t, tram_error *err);

/* Decoded bytes of a token; first: it is the first token of the text (the
 * SentencePiece dummy-prefix space is dropped). */
const char *tram_tok_token_text(const tram_tokenizer *t, int32_t id, int first, size_t *len);

#endif
