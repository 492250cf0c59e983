/* tool_calls.h — the tool calls a model writes, read out of its text in its
 * chat template's format (chat/chat_template.h) as the text arrives,
 * and shaped as the OpenAI API returns them, whole or streamed.
 *
 *   GENERIC, HERMES  [content] <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call> ...
 *   LLAMA3           [<|python_tag|>] {"name": N, "parameters": {...}} [; {...}]
 *   MISTRAL          [content] [TOOL_CALLS] [{"name": N, "arguments": {...}}, ...] [</s>]
 *
 * Text that is not wholly calls of the request's functions after its
 * content (a call to an unknown function, JSON that does not parse, a key
 * "name" or "arguments" twice, text between or after the calls) holds no
 * calls: it is all content.  A call's arguments string is its arguments
 * object as Python's json.dumps writes it (server/json_scan.h), as vLLM
 * returns them; the keys "name" and "arguments" may come in either order
 * (Llama 3 also says "parameters").
 *
 * Streaming: the reader says, after each piece of text, what is sure so
 * far: the content that no call can begin in, each call once its name is
 * complete, and each call's arguments string as far as it is written.
 * Their concatenation is always what the whole reply is read as, unless
 * the reply turns out not to be calls (then the content that follows is
 * all of the text from where the content stopped, and calls already begun
 * stay begun), or max_tokens cuts it inside a call (which the whole reply
 * drops).
 *
 * Cut by max_tokens: the markup of a call is never content, in any format
 * or tool_choice.  The calls completed before the cut count (the reason
 * stays "length"), an unfinished one is dropped, and the content is the
 * text before the calls; a marker begun at the very end ("<tool_") is
 * dropped too.  As OpenAI and vLLM answer a forced call cut short: no
 * tool_calls and empty content. */
#ifndef TRAM_TOOL_CALLS_H
#define TRAM_TOOL_CALLS_H

#include <jansson.h>
#include <stddef.h>

#include "kernels/strbuf.h"
#include "server/api_tools.h"
#include "server/json_scan.h"
#include "chat/chat_template.h"

typedef struct {
    char id[32];
    const char *name;          /* the request's function (borrowed) once its name ended, else NULL */
    tram_strbuf out;           /* the call's object, as json_scan writes it */
    int member;                /* the member whose value is being read */
    int seen;                  /* the members met so far, as bits */
    size_t args_at, args_end;  /* the arguments' value in out; args_end is 0 while it is open */
    int done;                  /* the object closed */
    int named_sent;            /* streaming: the chunk with the name went out */
    size_t args_sent;          /* streaming: bytes of the arguments that went out */
} tram_tool_call;

typedef struct {
    tram_tool_format format;
    const tram_api_tools *tools;
    int state, after_literal;  /* the place in the format; where a fixed string leads */
    const char *literal;       /* the fixed string being matched (a tag, Mistral's </s>) */
    size_t matched;
    size_t pos, len;           /* bytes of the text read; of the text so far */
    size_t content_end;        /* text[0..content_end) is content whatever follows */
    size_t calls_at;           /* where the calls begin */
    int invalid;               /* the text is not calls: all of it is content */
    int finished;
    tram_json_scan scan;
    tram_tool_call *calls;
    int num_calls, cap_calls;
    int num_final;             /* once finished: the calls the reply holds */
    size_t content_sent;       /* streaming: bytes of content that went out */
} tram_tool_reader;

void tram_tool_reader_init(tram_tool_reader *r, tram_tool_format f, const tram_api_tools *tools);
void tram_tool_reader_free(tram_tool_reader *r);

/* Reads on: text[0..len) is the whole reply so far (a longer text each
 * time, the earlier one its prefix). */
void tram_tool_reader_feed(tram_tool_reader *r, const char *text, size_t len);

/* The reply ended; cut: max_tokens cut it short (see above: the calls it
 * completed count, the rest of the markup is dropped).  abort: it was
 * aborted (all content). */
void tram_tool_reader_finish(tram_tool_reader *r, int cut, int abort);

/* message.tool_calls once finished: [{id, type, function: {name,
 * arguments}}] (the first only without parallel_tool_calls), or NULL when
 * the reply holds no calls or out of memory. */
json_t *tram_tool_reader_calls(const tram_tool_reader *r);

typedef enum {
    TRAM_TOOL_DELTA_CONTENT,   /* text[from..to) of the reply is content */
    TRAM_TOOL_DELTA_NAME,      /* call index begins: id and name */
    TRAM_TOOL_DELTA_ARGUMENTS, /* the next piece of call index's arguments */
} tram_tool_delta_kind;

typedef struct {
    tram_tool_delta_kind kind;
    int index;
    size_t from, to;           /* CONTENT */
    const char *id, *name;     /* NAME */
    const char *text;          /* ARGUMENTS: text[0..len), valid until the next feed */
    size_t len;
} tram_tool_delta;

/* The next piece to stream, in order, marked as gone: 1 when *d is one, 0
 * when everything sure so far went out. */
int tram_tool_reader_next(tram_tool_reader *r, tram_tool_delta *d);

typedef struct {
    size_t content_len;   /* the text before the calls is the message's content */
    json_t *calls;        /* message.tool_calls, or NULL when the text holds no calls */
} tram_tool_calls;

/* Reads a whole reply text[0..len) (cut as above).  Returns 0 (out->calls
 * NULL when none), -1 when out of memory. */
int tram_tool_calls_parse(tram_tool_format f, const char *text, size_t len, const tram_api_tools *tools,
                          int cut, tram_tool_calls *out);

/* A new call id: "call_" and 24 letters and digits; Mistral's templates
 * insist on 9 letters and digits. */
void tram_tool_call_id(tram_tool_format f, char out[32]);

#endif
