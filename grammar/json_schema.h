/* json_schema.h — JSON Schema compiled to GBNF, as structured outputs use it.
 *
 * Supported keywords: type (one or a list; "null" included), properties,
 * required, additionalProperties, items, prefixItems, enum, const, anyOf,
 * oneOf (when its branches cannot overlap: different types, or a required
 * property whose const/enum values differ), $ref into $defs/definitions
 * (recursion included) or any JSON pointer of the document, string
 * minLength/maxLength/pattern/format (date-time, date, time, email, uuid),
 * minimum/maximum/exclusiveMinimum/exclusiveMaximum for integers and
 * numbers, minItems/maxItems, minProperties/maxProperties of an object made
 * of additionalProperties only, nullable, unevaluatedProperties: false, and
 * the annotations (title, description, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly, discriminator).  Any other
 * keyword, or a supported one used in a way tram cannot enforce, is an
 * error naming it: never ignored.
 *
 * What the grammar generates is a subset of what the schema accepts, so
 * every output validates: properties come in the schema's order, optional
 * ones may be left out, additional properties are generated only for an
 * object with no named ones; numbers have at most 16 integer digits; a
 * bounded number's fraction is used only where no value of it can cross a
 * bound. */
#ifndef TRAM_GRAMMAR_JSON_SCHEMA_H
#define TRAM_GRAMMAR_JSON_SCHEMA_H

#include "kernels/base.h"

/* GBNF text (malloc'd) whose rule `rule_prefix` matches the JSON values the
 * schema (JSON text) accepts; every helper rule's name starts with
 * rule_prefix and "-", so several schemas can share one grammar.  On an
 * unsupported keyword err names it and the place ("... at
 * #/properties/age"). */
int tram_json_schema_to_gbnf(const char *schema_json, const char *rule_prefix, char **gbnf_out,
                             tram_error *err);

/* GBNF for any JSON object (response_format json_object), rule rule_prefix. */
int tram_json_object_gbnf(const char *rule_prefix, char **gbnf_out, tram_error *err);

#endif
