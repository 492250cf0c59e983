/* api_tools.h — the tool fields of a chat request: `tools`, `tool_choice`,
 * `parallel_tool_calls`, and the tool parts of messages (an assistant's
 * `tool_calls`, a `tool` message's `tool_call_id`), checked as OpenAI
 * checks them. */
#ifndef TRAM_API_TOOLS_H
#define TRAM_API_TOOLS_H

#include <jansson.h>

#include "server/api_error.h"
#include "chat/chat_template.h"

typedef enum {
    TRAM_TOOL_CHOICE_NONE,      /* tools are shown to the model, calls never returned */
    TRAM_TOOL_CHOICE_AUTO,      /* the model writes freely; its calls are parsed out */
    TRAM_TOOL_CHOICE_REQUIRED,  /* a grammar makes it call one of the tools */
    TRAM_TOOL_CHOICE_NAMED,     /* a grammar makes it call `named` */
} tram_tool_choice;

typedef struct {
    const json_t *tools;        /* NULL, or the request's non-empty array (borrowed) */
    tram_tool_choice choice;    /* none without tools, auto with them, unless asked */
    const char *named;          /* TRAM_TOOL_CHOICE_NAMED: the function's name */
    int parallel;               /* parallel_tool_calls (true): more than one call allowed */
} tram_api_tools;

/* Reads tools, tool_choice and parallel_tool_calls from a chat body. */
int tram_api_parse_tools(const json_t *body, tram_api_tools *t, tram_api_error *e);

/* The function object of the tool named name, or NULL. */
const json_t *tram_api_tool_function(const tram_api_tools *t, const char *name);

/* Message i's tool parts: an assistant's tool_calls (into a new array
 * *calls of *n, each call's arguments parsed from its JSON string and owned
 * by the call) and a tool message's tool_call_id (borrowed from m).  The
 * ignored keys of the calls are added to ignored (api_fields.h). */
int tram_api_parse_message_tools(const json_t *m, int i, tram_chat_tool_call **calls, int *n,
                                 const char **tool_call_id, char *ignored, size_t cap, tram_api_error *e);
void tram_api_free_tool_calls(tram_chat_tool_call *calls, int n);

#endif
