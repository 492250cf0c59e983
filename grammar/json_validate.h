/* json_validate.h — a JSON Schema validator: the guard behind every output
 * that a schema constrains.  The grammar (grammar/json_schema.c) shapes what
 * the model may write; some assertions it over-approximates (uniqueItems on
 * free strings, overlapping oneOf, not, if/then/else), so the finished output
 * is checked here, against the schema's own meaning, before it is returned.
 *
 * Drafts 4, 6, 7, 2019-09 and 2020-12, chosen by the root's `$schema`
 * (absent or unknown: 2020-12; draft 3 is refused).  Every assertion keyword
 * of those drafts is checked; annotations and unknown keywords are ignored,
 * as the specification says.  Also, whatever the draft, `dependencies` and an
 * array-form `items` with `additionalItems` keep their draft-07 meaning (real
 * schemas mix drafts; asserting them is never looser than the schema).
 * References: $ref, $recursiveRef, $dynamicRef to `$id`s, `$anchor`s and JSON
 * pointers of the same document; a reference to anything outside it is a
 * compile error.  `pattern` and `patternProperties` use PCRE2 in UTF mode
 * with JavaScript's `$` (end only) and `\uXXXX`: close to ECMA-262, not
 * equal (PCRE2 has no `u`-flag class semantics).  `format` asserts date,
 * date-time, time, email, uuid, uri, uri-reference, hostname, ipv4, ipv6,
 * duration, json-pointer and regex; other formats are annotations.
 * Work is bounded: nesting depth and a step budget per check end it with an
 * error, never a crash or a stall. */
#ifndef TRAM_GRAMMAR_JSON_VALIDATE_H
#define TRAM_GRAMMAR_JSON_VALIDATE_H

#include <stddef.h>

#include "kernels/base.h"

typedef struct tram_jv_schema tram_jv_schema;

/* Where and why an instance failed: path is a JSON pointer into the
 * instance ("" for the whole), keyword the schema keyword that failed,
 * message both of them and the reason, for a person. */
typedef struct {
    char path[256];
    char keyword[32];
    char message[512];
} tram_jv_failure;

/* A check's budget: steps (schema applications and comparisons) per check. */
#define TRAM_JV_MAX_STEPS 2000000
#define TRAM_JV_MAX_DEPTH 256

/* Compiles schema_json (len bytes); an invalid schema, an unresolvable
 * reference or an unsupported draft fails with err naming the place. */
int tram_jv_compile(const char *schema_json, size_t len, tram_jv_schema **out, tram_error *err);

/* Formats are asserted unless turned off (the test suite checks 2019-09 and
 * 2020-12 with format as an annotation, their default). */
void tram_jv_set_format_assertion(tram_jv_schema *s, int on);

/* Which draft the schema is read as: 4, 6, 7, 2019 or 2020. */
int tram_jv_draft(const tram_jv_schema *s);

/* 0: the instance (JSON text, len bytes) validates; 1: it does not, f says
 * where; -1: no verdict (the instance is not JSON, or the check ran out of
 * steps or depth), f says why.  Safe to call from several threads at once. */
int tram_jv_check(const tram_jv_schema *s, const char *instance, size_t len, tram_jv_failure *f);

void tram_jv_free(tram_jv_schema *s);

/* One call for both: 0 valid, 1 invalid, -1 bad schema or no verdict; err
 * (errlen bytes) gets the reason. */
int tram_json_validate(const char *schema_json, const char *instance_json, char *err, size_t errlen);

#endif
