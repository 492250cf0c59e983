/* gbnf_text.h — writing GBNF text into a tram_strbuf: literals with the
 * escapes GBNF reads back, and choice lists.  The compilers to GBNF
 * (json_schema.c, regex.c) write through it. */
#ifndef TRAM_GRAMMAR_GBNF_TEXT_H
#define TRAM_GRAMMAR_GBNF_TEXT_H

#include <stddef.h>

#include "kernels/base.h"
#include "kernels/strbuf.h"

/* "...": the bytes s[0..n) as a GBNF string literal. */
void tram_gbnf_literal(tram_strbuf *b, const char *s, size_t n);

/* GBNF whose rule `rule` matches exactly one of the n strings. */
int tram_choice_to_gbnf(const char *const *choices, int n, const char *rule, char **gbnf_out,
                        tram_error *err);

#endif
