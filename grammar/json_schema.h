/* json_schema.h — JSON Schema compiled to GBNF, as structured outputs use it.
 *
 * Drafts 4, 6, 7, 2019-09 and 2020-12, read from "$schema" (2020-12 when
 * absent); draft-4 boolean exclusiveMinimum/Maximum, "id", the array form of
 * "items" with "additionalItems" and "dependencies" keep their meaning in
 * any draft.  Annotations and unknown keywords are ignored, as the
 * specification says (an unknown keyword is an annotation); with
 * opts.strict an unknown keyword is an error.  docs/structured-outputs.md
 * lists what is asserted, and how.
 *
 * What the grammar generates is, as far as a context-free grammar can
 * express the schema, a subset of what the schema accepts: properties come
 * in the schema's order, optional ones may be left out, additional
 * properties are generated only for an object with no named ones; numbers
 * have at most 16 integer digits.  Where the grammar cannot express a
 * keyword (uniqueItems of free values, multipleOf, overlapping oneOf, if/
 * then/else, not of a complex schema, ...) it accepts more than the schema
 * and the result says so (exact = 0): the caller must validate the output
 * against the schema (grammar/json_validate.h) before returning it.  A
 * keyword or value that tram cannot honour at all is an error naming it
 * and its place ("... at #/properties/age"); a schema no value satisfies is
 * an error saying why. */
#ifndef TRAM_GRAMMAR_JSON_SCHEMA_H
#define TRAM_GRAMMAR_JSON_SCHEMA_H

#include "kernels/base.h"

typedef struct {
    int strict;     /* an unknown keyword is an error, not an annotation */
    int exact_only; /* an approximation is an error naming the keyword: for
                       outputs nothing validates after generation */
} tram_json_schema_opts;

typedef struct {
    char *gbnf;             /* malloc'd */
    int exact;              /* 1: every output the grammar allows validates */
    char approximated[256]; /* exact == 0: the first keyword approximated, and where */
} tram_json_schema_result;

/* GBNF text whose rule `rule_prefix` matches the JSON values the schema
 * (JSON text) accepts; every helper rule's name starts with rule_prefix and
 * "-", so several schemas can share one grammar.  opts may be NULL. */
int tram_json_schema_compile(const char *schema_json, const char *rule_prefix,
                             const tram_json_schema_opts *opts, tram_json_schema_result *out,
                             tram_error *err);

/* tram_json_schema_compile with the default options, for a caller that
 * only needs the GBNF (and validates, or accepts the approximation). */
int tram_json_schema_to_gbnf(const char *schema_json, const char *rule_prefix, char **gbnf_out,
                             tram_error *err);

/* GBNF for any JSON object (response_format json_object), rule rule_prefix. */
int tram_json_object_gbnf(const char *rule_prefix, char **gbnf_out, tram_error *err);

#endif
