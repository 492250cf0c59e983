/* tool_calls.h — the tool calls a model wrote, read out of its text in its
 * chat template's format (tokenizer/chat_template.h), and shaped as the
 * OpenAI API returns them.
 *
 *   GENERIC, HERMES  [content] <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call> ...
 *   LLAMA3           [<|python_tag|>] {"name": N, "parameters": {...}} [; {...}]
 *   MISTRAL          [content] [TOOL_CALLS] [{"name": N, "arguments": {...}}, ...]
 *
 * Text that is not wholly calls of the request's functions after its
 * content (a call to an unknown function, JSON that does not parse, text
 * between or after the calls) holds no calls: it is all content. */
#ifndef TRAM_TOOL_CALLS_H
#define TRAM_TOOL_CALLS_H

#include <jansson.h>
#include <stddef.h>

#include "server/api_tools.h"
#include "tokenizer/chat_template.h"

typedef struct {
    size_t content_len;   /* the text before the calls is the message's content */
    json_t *calls;        /* message.tool_calls: [{id, type, function: {name, arguments}}], or
                             NULL when the text holds no calls */
} tram_tool_calls;

/* Reads text[0..len); cut: max_tokens cut the reply short, so in the
 * <tool_call> formats the calls it completed count and an unfinished last
 * one is dropped.  Returns 0 (out->calls NULL when none), -1 when out of
 * memory. */
int tram_tool_calls_parse(tram_tool_format f, const char *text, size_t len, const tram_api_tools *tools,
                          int cut, tram_tool_calls *out);

/* While a reply streams: how many bytes from the start of text[0..len) are
 * content whatever comes next (none of it can begin a call). */
size_t tram_tool_calls_content_prefix(tram_tool_format f, const char *text, size_t len);

/* A new call id: "call_" and 24 letters and digits; Mistral's templates
 * insist on 9 letters and digits. */
void tram_tool_call_id(tram_tool_format f, char out[32]);

#endif
