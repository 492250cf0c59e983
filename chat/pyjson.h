/* pyjson.h — JSON written exactly as Python's json.dumps(v,
 * ensure_ascii=False) writes it, which is what the `tojson` filter of
 * transformers' chat templates calls: ", " and ": " separators (",\n" and
 * ": " with an indent), keys in their given order, floats as Python's repr
 * writes them (1.0, 1e-05, 1e+16), non-ASCII characters as themselves. */
#ifndef TRAM_PYJSON_H
#define TRAM_PYJSON_H

#include <jansson.h>

#include "kernels/strbuf.h"

/* indent < 0: on one line (indent=None); else that many spaces a level. */
void tram_pyjson_put(tram_strbuf *b, const json_t *v, int indent);
/* The inside of a JSON string of the UTF-8 bytes s[0..n), escaped as
 * json.dumps escapes it (no quotes around it). */
void tram_pyjson_put_chars(tram_strbuf *b, const char *s, size_t n);

/* A JSON string of the n bytes at s, quoted and escaped. */
void tram_pyjson_put_string(tram_strbuf *b, const char *s, size_t n);
/* Python's repr() of a finite float into out. */
void tram_pyjson_float(char out[40], double x);

#endif
