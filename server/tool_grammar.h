/* tool_grammar.h — tool_choice "required" and a named function, enforced:
 * a grammar (grammar/grammar.h) whose every sentence is a reply of calls in
 * the chat template's own syntax (server/tool_calls.h), each call's
 * arguments a JSON value of that function's `parameters` schema
 * (grammar/json_schema.h), so the arguments always validate.
 *
 *   GENERIC, HERMES  <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>, "\n" between calls
 *   LLAMA3           {"name": "N", "parameters": ARGS}, one call (the
 *                    template renders no more than one)
 *   MISTRAL          [TOOL_CALLS] [{"name": "N", "arguments": ARGS}, ...]
 *
 * parallel_tool_calls false allows exactly one call; a function without
 * `parameters` takes none ({}). */
#ifndef TRAM_TOOL_GRAMMAR_H
#define TRAM_TOOL_GRAMMAR_H

#include "grammar/grammar.h"
#include "server/api_error.h"
#include "server/api_tools.h"
#include "chat/chat_template.h"

/* The grammar's GBNF text (root rule "root"), malloc'd; NULL with e filled
 * (a 400 naming the function's parameters) when a schema cannot be
 * enforced. */
char *tram_tool_grammar_gbnf(tram_tool_format f, const tram_api_tools *t, tram_api_error *e);

/* The same, compiled against tok: one reference, or NULL with e filled. */
const tram_grammar *tram_tool_grammar(tram_tool_format f, const tram_api_tools *t,
                                      const struct tram_tokenizer *tok, tram_api_error *e);

#endif
