/* structured.h — a request's structured-output constraint, read from its
 * body and compiled into a grammar (grammar/grammar.h).
 *
 * Fields (at most one constraint per request; two are a 400):
 *   response_format  {"type": "text"} | {"type": "json_object"} |
 *                    {"type": "json_object", "schema": {...}} (llama.cpp's
 *                     form: the schema holds) |
 *                    {"type": "json_schema", "json_schema": {"name", "schema",
 *                     "strict", "description"}}
 *                    (a key of another type's, or unknown, is a 400 naming it)
 *   structured_outputs  vLLM's {"json" | "regex" | "choice" | "grammar" |
 *                    "json_object"}: one key
 *   guided_json, guided_regex, guided_choice, guided_grammar  its older aliases
 *   strict_schema    true: an unknown JSON Schema keyword is a 400 (by
 *                    default it is an annotation, as the specification says)
 * json takes a schema object or its JSON text; grammar is GBNF with a rule
 * "root".  Every problem (an unknown type, an unsupported schema keyword,
 * a bad regex or grammar) is a 400 naming the field.  The CLI's `tram
 * generate --input` lines read the same fields through the same call.
 * Compiled grammars are kept (keyed by GBNF text and tokenizer, which
 * lives as long as the process in the server and the CLI), since
 * applications send one schema on call after call: the least recently
 * used go first once their memory passes TRAM_GRAMMAR_CACHE_BYTES; a
 * grammar refused is never kept. */
#ifndef TRAM_SERVER_STRUCTURED_H
#define TRAM_SERVER_STRUCTURED_H

#include <jansson.h>

#include "grammar/grammar.h"
#include "grammar/json_validate.h"
#include "server/api_error.h"

struct tram_tokenizer;

/* The most memory the compiled grammars kept may hold. */
#define TRAM_GRAMMAR_CACHE_BYTES ((size_t)256 << 20)

/* *out: the compiled grammar (one reference, the caller releases it), or
 * NULL when the body asks for no constraint. */
int tram_structured_grammar(const json_t *body, const struct tram_tokenizer *tok,
                            const tram_grammar **out, tram_api_error *e);

/* The grammars kept now and their memory (for tests and metrics). */
void tram_structured_cache_stats(int *entries, size_t *bytes);

/* The validator of the body's JSON Schema constraint (response_format
 * json_schema, structured_outputs.json, guided_json): *out a compiled schema
 * (one reference), or NULL for any other constraint or none.  A schema the
 * validator cannot read is a 400 naming the field: tram returns no output it
 * could not check.  Call after tram_structured_grammar accepted the body. */
int tram_structured_validator(const json_t *body, tram_jv_schema **out, tram_api_error *e);

#endif
