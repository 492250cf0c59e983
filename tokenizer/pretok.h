/* pretok.h — the pre-tokenizer: a chain of regex splits that cuts text into
 * words before BPE (every match and every gap between matches is a word). */
#ifndef TRAM_TOK_PRETOK_H
#define TRAM_TOK_PRETOK_H

#include <stddef.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "kernels/base.h"

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

/* Per-call match state, so that one tram_pretok serves several threads. */
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

#endif
