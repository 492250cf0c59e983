/* json_big_bounds.h — a JSON Schema's number bounds past 64 bits, read
 * exactly enough to be honoured.
 *
 * jansson refuses an integer past 64 bits ("too big integer"), yet real
 * schemas bound integers so (`"maximum": 9223372036854776000`, the 2^63 a
 * JavaScript writer prints, or 18446744073709551615).  As the value of
 * `minimum`, `maximum`, `exclusiveMinimum` or `exclusiveMaximum` such an
 * integer B is rewritten as a double D chosen for the keyword's
 * comparison: `x <= B` holds exactly when `x <= D` for every double and
 * every 64-bit integer x (D is B rounded down; up for `x < B` and
 * `x >= B`, down for `x > B`; draft 4's boolean exclusiveMaximum/Minimum
 * beside it count), so the validator (which compares a 64-bit integer and
 * a double exactly, in long double) and the grammar (which writes at most
 * 16 integer digits) honour B itself.  An integer past 64 bits anywhere
 * else (an enum, a const) stays jansson's error: tram could neither write
 * nor compare it exactly.  Bounds past a double's range (over 308 digits)
 * are refused the same way. */
#ifndef TRAM_JSON_BIG_BOUNDS_H
#define TRAM_JSON_BIG_BOUNDS_H

#include <jansson.h>
#include <stddef.h>

/* The text with every such bound rewritten: 1 and a malloc'd *out of
 * *out_len bytes (NUL-terminated); 0 when there is none to rewrite (*out
 * NULL); -1 when out of memory.  roots (NULL-terminated; NULL: the whole
 * text is a schema) names the members of a top-level object that hold
 * schemas, where alone bounds are rewritten.  Text that is not JSON is
 * left to jansson (0), never read past its end. */
int tram_json_big_bounds_rewrite(const char *text, size_t len, const char *const *roots, char **out,
                                 size_t *out_len);

/* 1 when the integer text[0..n) (digits, maybe a minus) is past what a
 * 64-bit integer holds. */
int tram_json_int_past_64_bits(const char *text, size_t n);

/* json_loadb for a schema's text, its bounds past 64 bits read as above. */
json_t *tram_json_schema_loadb(const char *text, size_t len, size_t flags, json_error_t *je);
/* The same for a file (the benchmarks' schema files). */
json_t *tram_json_schema_load_file(const char *path, size_t flags, json_error_t *je);

#endif
