/* tok_internal.h — what the tokenizer's modules share: the tokenizer struct,
 * the hash maps, UTF-8 helpers, and the per-kind encoders.  Not for use
 * outside tokenizer/. */
#ifndef TRAM_TOK_INTERNAL_H
#define TRAM_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "kernels/base.h"
#include "tokenizer/tokenizer.h"

/* ---- hash maps ---- */

/* String → int32 (vocabulary lookup).  Keys point into caller-owned memory. */
typedef struct {
    const char **keys;
    uint32_t *key_len;
    int32_t *vals;
    uint32_t cap;   /* power of two, at least twice the entries */
} tram_strmap;

int tram_strmap_init(tram_strmap *m, uint32_t n_entries, tram_error *err);
void tram_strmap_free(tram_strmap *m);
void tram_strmap_put(tram_strmap *m, const char *key, uint32_t len, int32_t val);
int32_t tram_strmap_get(const tram_strmap *m, const char *key, uint32_t len);   /* -1: absent */

/* (left id, right id) → merge rank and merged id (BPE merges). */
typedef struct {
    uint64_t *keys;      /* left << 32 | right; UINT64_MAX = empty */
    int32_t *rank, *merged;
    uint32_t cap;
} tram_pairmap;

int tram_pairmap_init(tram_pairmap *m, uint32_t n_entries, tram_error *err);
void tram_pairmap_free(tram_pairmap *m);
void tram_pairmap_put(tram_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
/* Returns the rank (and *merged), or -1 when the pair does not merge. */
int32_t tram_pairmap_get(const tram_pairmap *m, int32_t left, int32_t right, int32_t *merged);

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0
 * when it is invalid or cut short. */
int tram_utf8_seq_len(const unsigned char *s, size_t n);
/* Offset of the first invalid byte, or len when s is valid UTF-8. */
size_t tram_utf8_validate(const char *s, size_t len);
/* Appends the code point's UTF-8 form to out; returns its length (1..4). */
int tram_utf8_put(uint32_t cp, char *out);
/* Copies s[0..n) to out (capacity 3n) with every maximal invalid subpart
 * replaced by U+FFFD; unless final, an incomplete sequence at the end is left
 * unconsumed.  Returns the bytes written; *consumed the bytes read. */
size_t tram_utf8_lossy(const char *s, size_t n, int final, char *out, size_t *consumed);

/* ---- pre-tokenizer: a chain of regex splits (matches and gaps isolated) ---- */

#define TRAM_PRETOK_MAX 2
typedef struct {
    pcre2_code *re[TRAM_PRETOK_MAX];
    int n;
} tram_pretok;

/* name: a tokenizer.ggml.pre value (gpt2, llama-bpe, qwen2, smollm, ...). */
int tram_pretok_init_named(tram_pretok *p, const char *name, tram_error *err);
/* One regex given as a pattern (tokenizer.json Split), appended to the chain. */
int tram_pretok_add(tram_pretok *p, const char *pattern, tram_error *err);
void tram_pretok_free(tram_pretok *p);

typedef int (*tram_pretok_fn)(void *ctx, const char *word, size_t len);
typedef struct {
    pcre2_match_data *md[TRAM_PRETOK_MAX];
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
} tram_pretok_scratch;

int tram_pretok_scratch_init(tram_pretok_scratch *s, const tram_pretok *p, tram_error *err);
void tram_pretok_scratch_free(tram_pretok_scratch *s);
/* Calls fn on every word of text, in order; stops at fn's first nonzero. */
int tram_pretok_split(const tram_pretok *p, tram_pretok_scratch *s, const char *text, size_t len,
                      tram_pretok_fn fn, void *ctx, tram_error *err);

/* ---- the tokenizer ---- */

typedef enum { TRAM_TOK_BPE, TRAM_TOK_SPM, TRAM_TOK_SPM_LIB } tram_tok_kind;

/* Token attributes (GGUF token_type numbering). */
enum {
    TRAM_ATTR_NORMAL = 1, TRAM_ATTR_UNKNOWN = 2, TRAM_ATTR_CONTROL = 3,
    TRAM_ATTR_USER = 4, TRAM_ATTR_UNUSED = 5, TRAM_ATTR_BYTE = 6,
};

/* A growable id array used while encoding. */
typedef struct {
    int32_t *v;
    int n, cap;
} tram_ids;

int tram_ids_push(tram_ids *a, int32_t id);

typedef struct tram_spm_lib tram_spm_lib;

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
    tram_spm_lib *lib;

    /* tokens split out of the text before the model sees it */
    int32_t *added;          /* sorted by length, longest first */
    int n_added;
    uint8_t added_first[256];   /* 1 when some added token starts with the byte */

    int32_t bos, eos;
    int add_bos, add_eos;
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

/* Byte-level BPE: the GPT-2 byte ↔ code point table. */
uint32_t tram_bpe_byte_to_cp(uint8_t b);
int tram_bpe_cp_to_byte(uint32_t cp);   /* -1 when cp is not a byte char */
/* Adds merges given as "left right" strings, rank = index. */
int tram_bpe_add_merge(tram_tokenizer *t, const char *merge, size_t len, int32_t rank, tram_error *err);
int tram_bpe_encode_text(const tram_tokenizer *t, const char *text, size_t len, tram_ids *out,
                         tram_error *err);
/* Decoded bytes of a byte-level piece into out (at most piece_len bytes). */
size_t tram_bpe_piece_bytes(const char *piece, size_t len, char *out);

int tram_spm_encode_text(const tram_tokenizer *t, const char *text, size_t len, int at_start,
                         tram_ids *out, tram_error *err);
size_t tram_spm_piece_bytes(const tram_tokenizer *t, int32_t id, char *out);

/* libsentencepiece shim (spm_lib.cc). */
int tram_spm_lib_load(tram_spm_lib **out, const char *path, char *msg, size_t msg_len);
void tram_spm_lib_free(tram_spm_lib *s);
int tram_spm_lib_size(const tram_spm_lib *s);
/* Piece string, score and TRAM_ATTR_* of token id. */
const char *tram_spm_lib_piece(const tram_spm_lib *s, int id, float *score, int *attr);
int tram_spm_lib_special_id(const tram_spm_lib *s, int which);   /* 0 unk, 1 bos, 2 eos */
/* Encodes text into ids (malloc'd); returns the count or -1. */
int tram_spm_lib_encode(const tram_spm_lib *s, const char *text, size_t len, int32_t **ids);
int tram_spm_lib_add_dummy_prefix(const tram_spm_lib *s);

#endif
