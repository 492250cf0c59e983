/* test_tokenizer_util.h — helpers shared by the tokenizer and chat template
 * tests: golden JSONL fixtures and the default model's tokenizer. */
#ifndef TRAM_TEST_TOKENIZER_UTIL_H
#define TRAM_TEST_TOKENIZER_UTIL_H

#include <jansson.h>
#include <stdint.h>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

#define TOK_FIXTURES "tests/fixtures/tokenizer/"

/* Every line of a JSONL file as one JSON array (criterion-asserts on error). */
json_t *tok_load_jsonl(const char *path);
/* A JSON array of integers as a malloc'd int32 array. */
int32_t *tok_json_ids(const json_t *arr, int *n);
/* The default model's tokenizer, from its GGUF. */
tram_tokenizer *tok_default(void);
tram_tokenizer *tok_from_gguf_path(const char *path);
/* Criterion-asserts that the ids equal the golden array, naming the text. */
void tok_assert_ids(const int32_t *ids, int n, const json_t *golden, const char *what, const char *text);

/* A fixture conversation (OpenAI messages) as tram_chat_msg, borrowing
 * the JSON's strings; null content as "" (the server's way) or as NULL. */
#define TOK_MAX_MSGS 16
#define TOK_MAX_CALLS 4
typedef struct {
    tram_chat_msg msgs[TOK_MAX_MSGS];
    tram_chat_tool_call calls[TOK_MAX_MSGS][TOK_MAX_CALLS];
    int n;
    int tool_parts;   /* some message has tool calls or is a tool result */
} tok_conversation;
void tok_load_conversation(const json_t *messages, int null_as_empty, tok_conversation *c);

#endif
