/* gbnf_text.h — writing GBNF text: a growing buffer, literals with the
 * escapes GBNF reads back, and choice lists.  The compilers to GBNF
 * (json_schema.c, regex.c) write through it. */
#ifndef TRAM_GRAMMAR_GBNF_TEXT_H
#define TRAM_GRAMMAR_GBNF_TEXT_H

#include <stddef.h>

#include "kernels/base.h"

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} tram_gbuf;

void tram_gbuf_addf(tram_gbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tram_gbuf_add(tram_gbuf *b, const char *s, size_t n);
/* "...": the bytes s[0..n) as a GBNF string literal. */
void tram_gbuf_literal(tram_gbuf *b, const char *s, size_t n);
/* Hands the text over (NUL-terminated) and empties b; NULL when out of memory. */
char *tram_gbuf_take(tram_gbuf *b);
void tram_gbuf_free(tram_gbuf *b);

/* GBNF whose rule `rule` matches exactly one of the n strings. */
int tram_choice_to_gbnf(const char *const *choices, int n, const char *rule, char **gbnf_out,
                        tram_error *err);

#endif
