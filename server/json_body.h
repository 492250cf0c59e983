/* json_body.h — a request body (or a JSON text inside one) read as JSON,
 * including the valid JSON that jansson refuses or cannot hold.
 *
 * jansson refuses "\u0000" inside a string (unless JSON_ALLOW_NUL, and then
 * every const char * reader would see the string cut at it), integers past
 * 64 bits ("too big integer") and numbers past a double ("real number
 * overflow").  All three are valid JSON, so "could not parse" is the wrong
 * answer; none can be used as the request meant it either.  So the text is
 * scanned first, and the first such value found is a 400 naming its path
 * (before jansson's syntax check, which calls a NUL in a key a syntax
 * error): "messages[0].content", "seed", "tools[0].function
 * .parameters.properties.n.enum[1]" (a number that must compare exactly).
 * Two places take a number out of range: a schema's annotations "default"
 * and "examples", which change nothing (JSON Schema), under the fields that
 * hold schemas, jansson then reading it as 0; and the integer value of a
 * key minimum, maximum, exclusiveMinimum or exclusiveMaximum, which is read
 * as the double that keeps it exact (grammar/json_big_bounds.h). */
#ifndef TRAM_JSON_BODY_H
#define TRAM_JSON_BODY_H

#include <jansson.h>
#include <stddef.h>

#include "server/api_error.h"

/* Parses text[0..len) as one JSON value (flags: jansson's decoding flags,
 * JSON_DECODE_ANY for any value).  path names the text in errors ("" for a
 * request body, whose syntax errors name no field).  NULL with e filled
 * (400) when it is not JSON, or holds a value tram cannot take. */
json_t *tram_json_body_load(const char *text, size_t len, size_t flags, const char *path,
                            tram_api_error *e);

#endif
