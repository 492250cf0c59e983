/* api_fields.c — the field table (see api_fields.h) and the check every
 * chat and text completion body passes before its fields are parsed. */
#include "server/api_fields.h"

#include <stdio.h>
#include <string.h>

#include "kernels/base.h"

static int is_false(const json_t *v, const json_t *body)
{
    (void)body;
    return json_is_false(v);
}

static int is_true(const json_t *v, const json_t *body)
{
    (void)body;
    return json_is_true(v);
}

static int is_empty_string(const json_t *v, const json_t *body)
{
    (void)body;
    return json_is_string(v) && json_string_length(v) == 0;
}

/* best_of = n: the n samples are all returned, nothing is chosen among them. */
static int equals_n(const json_t *v, const json_t *body)
{
    const json_t *n = json_object_get(body, "n");
    double want = json_is_number(n) ? json_number_value(n) : 1;
    return json_is_number(v) && json_number_value(v) == want;
}

static int text_only(const json_t *v, const json_t *body)
{
    (void)body;
    const json_t *first = json_array_get(v, 0);
    return json_array_size(v) == 1 && json_is_string(first) &&
           !strcmp(json_string_value(first), "text");
}

static int is_one(const json_t *v, const json_t *body)
{
    (void)body;
    return json_is_number(v) && json_number_value(v) == 1.0;
}

/* {"type": "disabled"} (thinking) or {"type": "direct"} (a call's caller). */
static int has_type(const json_t *v, const char *type)
{
    const json_t *t = json_object_get(v, "type");
    return json_is_object(v) && json_object_size(v) == 1 && json_is_string(t) &&
           !strcmp(json_string_value(t), type);
}

static int is_disabled(const json_t *v, const json_t *body)
{
    (void)body;
    return has_type(v, "disabled");
}

/* truncation "disabled" (the Responses API's) */
static int is_disabled_string(const json_t *v, const json_t *body)
{
    (void)body;
    return json_is_string(v) && !strcmp(json_string_value(v), "disabled");
}

static int is_direct(const json_t *v, const json_t *body)
{
    (void)body;
    return has_type(v, "direct");
}

static int only_direct(const json_t *v, const json_t *body)
{
    (void)body;
    const json_t *first = json_array_get(v, 0);
    return json_array_size(v) == 1 && json_is_string(first) && !strcmp(json_string_value(first), "direct");
}

#define HONOURED(name, where, bad) {name, where, TRAM_FIELD_HONOURED, NULL, NULL, bad, NULL}
#define IGNORED(name, where) {name, where, TRAM_FIELD_IGNORED, NULL, NULL, "\"x\"", NULL}
#define REJECTED(name, where, ok, why, bad, good) {name, where, TRAM_FIELD_REJECTED, ok, why, bad, good}

/* Sorted by endpoint, then: OpenAI's fields, vLLM's extras. */
const tram_api_field tram_api_fields[] = {
    /* both endpoints, OpenAI */
    HONOURED("model", TRAM_FIELD_BOTH, "5"),
    HONOURED("frequency_penalty", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("presence_penalty", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("logit_bias", TRAM_FIELD_BOTH, "5"),
    HONOURED("logprobs", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("max_tokens", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("max_completion_tokens", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("n", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("seed", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("stop", TRAM_FIELD_BOTH, "5"),
    HONOURED("stream", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("stream_options", TRAM_FIELD_BOTH, "5"),
    HONOURED("temperature", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("top_p", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("response_format", TRAM_FIELD_BOTH, "5"),
    IGNORED("user", TRAM_FIELD_BOTH),
    /* both endpoints, vLLM */
    HONOURED("top_k", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("min_p", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("repetition_penalty", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("min_tokens", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("ignore_eos", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("skip_special_tokens", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("stop_token_ids", TRAM_FIELD_BOTH, "5"),
    HONOURED("priority", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("response_cache", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("structured_outputs", TRAM_FIELD_BOTH, "5"),
    HONOURED("guided_json", TRAM_FIELD_BOTH, "5"),
    HONOURED("guided_regex", TRAM_FIELD_BOTH, "5"),
    HONOURED("guided_choice", TRAM_FIELD_BOTH, "5"),
    HONOURED("guided_grammar", TRAM_FIELD_BOTH, "5"),
    /* both endpoints, tram's own */
    HONOURED("strict_schema", TRAM_FIELD_BOTH, "5"),
    IGNORED("request_id", TRAM_FIELD_BOTH),
    REJECTED("use_beam_search", TRAM_FIELD_BOTH, is_false, "beam search is not implemented",
             "true", "false"),
    REJECTED("length_penalty", TRAM_FIELD_BOTH, is_one, "it applies to beam search, which is not "
             "implemented", "0.5", "1.0"),
    REJECTED("include_stop_str_in_output", TRAM_FIELD_BOTH, is_false,
             "stop strings are never included in the output", "true", "false"),
    REJECTED("spaces_between_special_tokens", TRAM_FIELD_BOTH, is_true,
             "special tokens are always decoded with spaces between them", "false", "true"),
    REJECTED("prompt_logprobs", TRAM_FIELD_BOTH, NULL,
             "use 'echo' with 'logprobs' on /v1/completions", "1", NULL),
    REJECTED("truncate_prompt_tokens", TRAM_FIELD_BOTH, NULL, "prompts are never truncated",
             "10", NULL),
    REJECTED("bad_words", TRAM_FIELD_BOTH, NULL, "use 'logit_bias'", "[\"x\"]", NULL),
    REJECTED("allowed_token_ids", TRAM_FIELD_BOTH, NULL, "use 'logit_bias' or 'structured_outputs'",
             "[1]", NULL),
    REJECTED("logits_processors", TRAM_FIELD_BOTH, NULL, "custom logits processors are not "
             "supported", "[\"x\"]", NULL),
    REJECTED("return_tokens_as_token_ids", TRAM_FIELD_BOTH, is_false, "tokens are returned as "
             "text", "true", "false"),
    REJECTED("guided_decoding_backend", TRAM_FIELD_BOTH, NULL, "tram has one grammar engine",
             "\"xgrammar\"", NULL),
    REJECTED("guided_whitespace_pattern", TRAM_FIELD_BOTH, NULL, "the JSON whitespace of "
             "structured outputs is fixed", "\"\\\\s*\"", NULL),

    /* chat, OpenAI */
    HONOURED("messages", TRAM_FIELD_CHAT, "5"),
    HONOURED("top_logprobs", TRAM_FIELD_CHAT, "\"x\""),
    HONOURED("tools", TRAM_FIELD_CHAT, "5"),
    HONOURED("tool_choice", TRAM_FIELD_CHAT, "5"),
    HONOURED("parallel_tool_calls", TRAM_FIELD_CHAT, "\"x\""),
    HONOURED("chat_template_kwargs", TRAM_FIELD_CHAT, "{\"messages\": []}"),
    IGNORED("metadata", TRAM_FIELD_CHAT),
    IGNORED("store", TRAM_FIELD_CHAT),
    IGNORED("service_tier", TRAM_FIELD_CHAT),
    IGNORED("prompt_cache_key", TRAM_FIELD_CHAT),
    IGNORED("safety_identifier", TRAM_FIELD_CHAT),
    REJECTED("audio", TRAM_FIELD_CHAT, NULL, "tram produces text only", "{\"voice\": \"alloy\"}",
             NULL),
    REJECTED("modalities", TRAM_FIELD_CHAT, text_only, "tram produces text only",
             "[\"text\", \"audio\"]", "[\"text\"]"),
    REJECTED("prediction", TRAM_FIELD_CHAT, NULL, "predicted outputs are not implemented",
             "{\"type\": \"content\", \"content\": \"x\"}", NULL),
    REJECTED("functions", TRAM_FIELD_CHAT, NULL, "it is deprecated: use 'tools'", "[]", NULL),
    REJECTED("function_call", TRAM_FIELD_CHAT, NULL, "it is deprecated: use 'tool_choice'",
             "\"auto\"", NULL),
    REJECTED("reasoning_effort", TRAM_FIELD_CHAT, NULL, "the model is not a reasoning model",
             "\"low\"", NULL),
    REJECTED("verbosity", TRAM_FIELD_CHAT, NULL, "tram does not rewrite the model's style",
             "\"low\"", NULL),
    REJECTED("web_search_options", TRAM_FIELD_CHAT, NULL, "tram has no web search", "{}", NULL),
    /* chat, vLLM */
    REJECTED("echo", TRAM_FIELD_CHAT, is_false, "it is supported on /v1/completions only", "true",
             "false"),
    HONOURED("add_generation_prompt", TRAM_FIELD_CHAT, "\"x\""),
    HONOURED("continue_final_message", TRAM_FIELD_CHAT, "\"x\""),
    REJECTED("add_special_tokens", TRAM_FIELD_CHAT, is_false, "the chat template writes the "
             "special tokens", "true", "false"),
    REJECTED("chat_template", TRAM_FIELD_CHAT, NULL, "the model's own template is used",
             "\"{{ messages }}\"", NULL),
    REJECTED("documents", TRAM_FIELD_CHAT, NULL, "retrieval documents are not rendered", "[]",
             NULL),
    REJECTED("mm_processor_kwargs", TRAM_FIELD_CHAT, NULL, "the model takes text only", "{}",
             NULL),

    /* completions, OpenAI */
    HONOURED("prompt", TRAM_FIELD_COMPLETION, "5"),
    HONOURED("echo", TRAM_FIELD_COMPLETION, "\"x\""),
    REJECTED("best_of", TRAM_FIELD_COMPLETION, equals_n, "only best_of equal to n is supported "
             "(every sample is returned)", "3", "1"),
    REJECTED("suffix", TRAM_FIELD_COMPLETION, is_empty_string, "insertion (fill in the middle) "
             "is not implemented", "\"end\"", "\"\""),

    /* responses, OpenAI (server/responses_request.c reads them) */
#define RESP TRAM_FIELD_RESPONSES
    HONOURED("model", RESP, "5"),
    HONOURED("input", RESP, "5"),
    HONOURED("instructions", RESP, "5"),
    HONOURED("max_output_tokens", RESP, "\"x\""),
    HONOURED("temperature", RESP, "\"x\""),
    HONOURED("top_p", RESP, "\"x\""),
    HONOURED("tools", RESP, "5"),
    HONOURED("tool_choice", RESP, "5"),
    HONOURED("parallel_tool_calls", RESP, "\"x\""),
    HONOURED("text", RESP, "5"),
    HONOURED("stream", RESP, "\"x\""),
    HONOURED("stream_options", RESP, "5"),
    HONOURED("store", RESP, "\"x\""),
    HONOURED("previous_response_id", RESP, "5"),
    HONOURED("metadata", RESP, "5"),   /* echoed in the response object */
    IGNORED("user", RESP),
    IGNORED("safety_identifier", RESP),
    IGNORED("prompt_cache_key", RESP),
    IGNORED("prompt_cache_retention", RESP),
    IGNORED("service_tier", RESP),
    /* it bounds calls to built-in tools, which are refused */
    IGNORED("max_tool_calls", RESP),
    HONOURED("background", RESP, "\"x\""),
    REJECTED("conversation", RESP, NULL, "the Conversations API is not implemented: use "
             "'previous_response_id'", "\"conv_1\"", NULL),
    HONOURED("include", RESP, "5"),     /* the output text's logprobs; the rest names nothing tram makes */
    HONOURED("top_logprobs", RESP, "\"x\""),
    REJECTED("prompt", RESP, NULL, "stored prompt templates are not implemented",
             "{\"id\": \"pmpt_1\"}", NULL),
    REJECTED("reasoning", RESP, NULL, "the model is not a reasoning model", "{\"effort\": \"low\"}",
             NULL),
    REJECTED("truncation", RESP, is_disabled_string, "prompts are never truncated", "\"auto\"",
             "\"disabled\""),
    REJECTED("context_management", RESP, NULL, "context compaction is not implemented",
             "[{\"type\": \"compaction\"}]", NULL),
    /* vLLM's and tram's own */
    HONOURED("seed", RESP, "\"x\""),

    /* Anthropic's /v1/messages (MSGS) and /v1/messages/count_tokens (MSGS_ALL: both) */
#define MSGS TRAM_FIELD_MESSAGES
#define MSGS_ALL (TRAM_FIELD_MESSAGES | TRAM_FIELD_COUNT_TOKENS)
    HONOURED("model", MSGS_ALL, "5"),
    HONOURED("messages", MSGS_ALL, "5"),
    HONOURED("system", MSGS_ALL, "5"),
    HONOURED("max_tokens", MSGS, "\"x\""),
    HONOURED("stop_sequences", MSGS, "5"),
    HONOURED("stream", MSGS, "\"x\""),
    HONOURED("temperature", MSGS, "\"x\""),
    HONOURED("top_p", MSGS, "\"x\""),
    HONOURED("top_k", MSGS, "\"x\""),
    HONOURED("tools", MSGS_ALL, "5"),
    HONOURED("tool_choice", MSGS_ALL, "5"),
    HONOURED("output_config", MSGS_ALL, "5"),
    IGNORED("metadata", MSGS),
    IGNORED("service_tier", MSGS),
    IGNORED("inference_geo", MSGS),
    IGNORED("speed", MSGS_ALL),
    /* prompt caching: tram caches every prompt's prefix by itself */
    IGNORED("cache_control", MSGS_ALL),
    IGNORED("user_profile_id", MSGS_ALL),
    IGNORED("workspace_id", MSGS_ALL),
    REJECTED("thinking", MSGS_ALL, is_disabled, "extended thinking is not supported",
             "{\"type\": \"enabled\", \"budget_tokens\": 1024}", "{\"type\": \"disabled\"}"),
    REJECTED("container", MSGS, NULL, "tram runs no code execution container", "\"c1\"", NULL),
    REJECTED("mcp_servers", MSGS_ALL, NULL, "tram connects to no MCP server", "[]", NULL),
    REJECTED("context_management", MSGS_ALL, NULL, "tram does not edit the context", "{}", NULL),
    REJECTED("diagnostics", MSGS, NULL, "tram reports no prompt-cache diagnostics", "{}", NULL),
    /* embeddings, OpenAI (server/embed_request.c parses them) */
    HONOURED("model", TRAM_FIELD_EMBEDDINGS, "5"),
    HONOURED("input", TRAM_FIELD_EMBEDDINGS, "5"),
    HONOURED("encoding_format", TRAM_FIELD_EMBEDDINGS, "5"),
    HONOURED("dimensions", TRAM_FIELD_EMBEDDINGS, "\"x\""),
    IGNORED("user", TRAM_FIELD_EMBEDDINGS),
    /* embeddings, vLLM */
    HONOURED("add_special_tokens", TRAM_FIELD_EMBEDDINGS, "\"x\""),
    HONOURED("priority", TRAM_FIELD_EMBEDDINGS, "\"x\""),
    IGNORED("request_id", TRAM_FIELD_EMBEDDINGS),
    REJECTED("truncate_prompt_tokens", TRAM_FIELD_EMBEDDINGS, NULL, "inputs are never truncated", "10", NULL),
    REJECTED("normalize", TRAM_FIELD_EMBEDDINGS, NULL, "the model's own normalization is applied "
             "(--pooling chooses the pooling)", "false", NULL),
};

const size_t tram_api_num_fields = sizeof(tram_api_fields) / sizeof(tram_api_fields[0]);

/* ---- the objects nested in a request, a table each ---- */

static const tram_api_field stream_options_keys[] = {
    HONOURED("include_usage", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("continuous_usage_stats", TRAM_FIELD_BOTH, "\"x\""),
};
static const tram_api_field tool_choice_keys[] = {
    HONOURED("type", TRAM_FIELD_CHAT, "5"),
    HONOURED("function", TRAM_FIELD_CHAT, "5"),
};
static const tram_api_field named_function_keys[] = {
    HONOURED("name", TRAM_FIELD_CHAT, "5"),
};
static const tram_api_field tool_keys[] = {
    HONOURED("type", TRAM_FIELD_CHAT, "5"),
    HONOURED("function", TRAM_FIELD_CHAT, "5"),
};
static const tram_api_field function_keys[] = {
    HONOURED("name", TRAM_FIELD_CHAT, "5"),
    HONOURED("description", TRAM_FIELD_CHAT, "5"),
    HONOURED("parameters", TRAM_FIELD_CHAT, "5"),
    HONOURED("strict", TRAM_FIELD_CHAT, "\"x\""),
};
static const tram_api_field message_keys[] = {
    HONOURED("role", TRAM_FIELD_CHAT, "5"),
    HONOURED("content", TRAM_FIELD_CHAT, "5"),
    HONOURED("tool_calls", TRAM_FIELD_CHAT, "5"),
    HONOURED("tool_call_id", TRAM_FIELD_CHAT, "5"),
    /* OpenAI's participant name: the chat templates tram renders show none */
    IGNORED("name", TRAM_FIELD_CHAT),
    REJECTED("refusal", TRAM_FIELD_CHAT, NULL, "a refusal is not rendered into the prompt: put its "
             "text in 'content'", "\"no\"", NULL),
    REJECTED("audio", TRAM_FIELD_CHAT, NULL, "tram takes text only", "{\"id\": \"a\"}", NULL),
    REJECTED("function_call", TRAM_FIELD_CHAT, NULL, "it is deprecated: use 'tool_calls'", "{}", NULL),
};
static const tram_api_field content_part_keys[] = {
    HONOURED("type", TRAM_FIELD_CHAT, "5"),
    HONOURED("text", TRAM_FIELD_CHAT, "5"),
};
static const tram_api_field tool_call_keys[] = {
    HONOURED("id", TRAM_FIELD_CHAT, "5"),
    HONOURED("type", TRAM_FIELD_CHAT, "5"),
    HONOURED("function", TRAM_FIELD_CHAT, "5"),
    /* the call's place in a stream, which the OpenAI SDK's accumulated
     * message keeps: its order in the array is the order */
    IGNORED("index", TRAM_FIELD_CHAT),
};
static const tram_api_field call_function_keys[] = {
    HONOURED("name", TRAM_FIELD_CHAT, "5"),
    HONOURED("arguments", TRAM_FIELD_CHAT, "5"),
    /* the OpenAI SDK's parse of the arguments, sent back with them */
    IGNORED("parsed_arguments", TRAM_FIELD_CHAT),
};
static const tram_api_field response_format_keys[] = {
    HONOURED("type", TRAM_FIELD_BOTH, "5"),
    HONOURED("json_schema", TRAM_FIELD_BOTH, "5"),
    HONOURED("schema", TRAM_FIELD_BOTH, "5"),   /* llama.cpp's: with "json_object" */
};
/* the Responses API's objects */
static const tram_api_field resp_message_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("role", RESP, "5"),
    HONOURED("content", RESP, "5"),
    IGNORED("id", RESP),
    IGNORED("status", RESP),
};
static const tram_api_field resp_content_part_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("text", RESP, "5"),
    /* what an output_text part sent back carries: the text is the part */
    IGNORED("annotations", RESP),
    IGNORED("logprobs", RESP),
};
static const tram_api_field resp_function_call_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("call_id", RESP, "5"),
    HONOURED("name", RESP, "5"),
    HONOURED("arguments", RESP, "5"),
    IGNORED("id", RESP),
    IGNORED("status", RESP),
};
static const tram_api_field resp_call_output_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("call_id", RESP, "5"),
    HONOURED("output", RESP, "5"),
    IGNORED("id", RESP),
    IGNORED("status", RESP),
};
static const tram_api_field resp_tool_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("name", RESP, "5"),
    HONOURED("description", RESP, "5"),
    HONOURED("parameters", RESP, "5"),
    HONOURED("strict", RESP, "\"x\""),
};
static const tram_api_field resp_tool_choice_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("name", RESP, "5"),
};
static const tram_api_field resp_text_keys[] = {
    HONOURED("format", RESP, "5"),
    REJECTED("verbosity", RESP, NULL, "tram does not rewrite the model's style", "\"low\"", NULL),
};
static const tram_api_field resp_format_keys[] = {
    HONOURED("type", RESP, "5"),
    HONOURED("name", RESP, "5"),
    HONOURED("schema", RESP, "5"),
    HONOURED("strict", RESP, "\"x\""),
    HONOURED("description", RESP, "5"),
};
static const tram_api_field resp_stream_options_keys[] = {
    /* random padding of the deltas against length side channels */
    IGNORED("include_obfuscation", RESP),
};

static const tram_api_field json_schema_keys[] = {
    HONOURED("name", TRAM_FIELD_BOTH, "5"),
    HONOURED("schema", TRAM_FIELD_BOTH, "5"),
    HONOURED("strict", TRAM_FIELD_BOTH, "\"x\""),
    HONOURED("description", TRAM_FIELD_BOTH, "5"),
};

static const tram_api_field msgs_message_keys[] = {
    HONOURED("role", MSGS_ALL, "5"),
    HONOURED("content", MSGS_ALL, "5"),
};
static const tram_api_field msgs_text_keys[] = {
    HONOURED("type", MSGS_ALL, "5"),
    HONOURED("text", MSGS_ALL, "5"),
    IGNORED("cache_control", MSGS_ALL),
    REJECTED("citations", MSGS_ALL, NULL, "citations are not rendered into the prompt", "[{}]", NULL),
};
static const tram_api_field msgs_tool_use_keys[] = {
    HONOURED("type", MSGS_ALL, "5"),
    HONOURED("id", MSGS_ALL, "5"),
    HONOURED("name", MSGS_ALL, "5"),
    HONOURED("input", MSGS_ALL, "5"),
    IGNORED("cache_control", MSGS_ALL),
    REJECTED("caller", MSGS_ALL, is_direct, "tram makes direct tool calls only", "{\"type\": \"code_execution_20250825\"}",
             "{\"type\": \"direct\"}"),
    REJECTED("toolset_name", MSGS_ALL, NULL, "tram has no toolsets", "\"t\"", NULL),
};
static const tram_api_field msgs_tool_result_keys[] = {
    HONOURED("type", MSGS_ALL, "5"),
    HONOURED("tool_use_id", MSGS_ALL, "5"),
    HONOURED("content", MSGS_ALL, "5"),
    HONOURED("is_error", MSGS_ALL, "\"x\""),
    IGNORED("cache_control", MSGS_ALL),
    REJECTED("toolset_name", MSGS_ALL, NULL, "tram has no toolsets", "\"t\"", NULL),
};
static const tram_api_field msgs_tool_keys[] = {
    HONOURED("type", MSGS_ALL, "5"),
    HONOURED("name", MSGS_ALL, "5"),
    HONOURED("description", MSGS_ALL, "5"),
    HONOURED("input_schema", MSGS_ALL, "5"),
    HONOURED("strict", MSGS_ALL, "\"x\""),
    IGNORED("cache_control", MSGS_ALL),
    /* tram streams a call's input as it is written anyway */
    IGNORED("eager_input_streaming", MSGS_ALL),
    REJECTED("input_examples", MSGS_ALL, NULL, "input examples are not rendered into the prompt", "[{}]", NULL),
    REJECTED("defer_loading", MSGS_ALL, is_false, "tool search is not implemented", "true", "false"),
    REJECTED("allowed_callers", MSGS_ALL, only_direct, "tram makes direct tool calls only",
             "[\"code_execution_20250825\"]", "[\"direct\"]"),
};
static const tram_api_field msgs_tool_choice_keys[] = {
    HONOURED("type", MSGS_ALL, "5"),
    HONOURED("name", MSGS_ALL, "5"),
    HONOURED("disable_parallel_tool_use", MSGS_ALL, "\"x\""),
};
static const tram_api_field msgs_output_config_keys[] = {
    HONOURED("format", MSGS_ALL, "5"),
    REJECTED("effort", MSGS_ALL, NULL, "the model has no effort setting", "\"low\"", NULL),
};
static const tram_api_field msgs_output_format_keys[] = {
    HONOURED("type", MSGS_ALL, "5"),
    HONOURED("schema", MSGS_ALL, "5"),
};

#define CHAT_BODY(extra) "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]" extra "}"
#define TOOLS ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]"
#define NAMED_CHOICE CHAT_BODY(TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}")
#define CALLED "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", " \
    "\"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", " \
    "\"arguments\": \"{}\"}}]}]}"
#define OBJECT(rows, path, example, at) {path, rows, TRAM_ARRAY_LEN(rows), TRAM_FIELD_BOTH, example, at}
#define RESP_OBJECT(rows, path, example, at) {path, rows, TRAM_ARRAY_LEN(rows), RESP, example, at}
#define RESP_TOOLS "\"tools\": [{\"type\": \"function\", \"name\": \"f\"}]"
#define RESP_CALLED "{\"input\": [{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", " \
    "\"arguments\": \"{}\"}, {\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"1\"}]}"

#define MSGS_BODY(messages, extra) "{\"model\": \"m\", \"max_tokens\": 5, \"messages\": " messages extra "}"
#define MSGS_HI "[{\"role\": \"user\", \"content\": \"hi\"}]"
#define MSGS_TOOLS ", \"tools\": [{\"name\": \"f\", \"input_schema\": {\"type\": \"object\"}}]"
#define MSGS_CALLED "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": " \
    "[{\"type\": \"tool_use\", \"id\": \"t1\", \"name\": \"f\", \"input\": {}}]}, {\"role\": \"user\", " \
    "\"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"content\": \"ok\"}]}]"
#define MSGS_OBJECT(rows, path, example, at) {path, rows, TRAM_ARRAY_LEN(rows), MSGS_ALL, example, at}

const tram_api_object tram_api_objects[TRAM_OBJ_COUNT] = {
    [TRAM_OBJ_STREAM_OPTIONS] = OBJECT(stream_options_keys, "stream_options",
        CHAT_BODY(", \"stream\": true, \"stream_options\": {}"), "stream_options"),
    [TRAM_OBJ_TOOL_CHOICE] = OBJECT(tool_choice_keys, "tool_choice", NAMED_CHOICE, "tool_choice"),
    [TRAM_OBJ_TOOL_CHOICE_FUNCTION] = OBJECT(named_function_keys, "tool_choice.function", NAMED_CHOICE,
                                             "tool_choice.function"),
    [TRAM_OBJ_TOOL] = OBJECT(tool_keys, "tools[]", CHAT_BODY(TOOLS), "tools[0]"),
    [TRAM_OBJ_TOOL_FUNCTION] = OBJECT(function_keys, "tools[].function", CHAT_BODY(TOOLS),
                                      "tools[0].function"),
    [TRAM_OBJ_MESSAGE] = OBJECT(message_keys, "messages[]", CHAT_BODY(""), "messages[0]"),
    [TRAM_OBJ_CONTENT_PART] = OBJECT(content_part_keys, "messages[].content[]",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}]}",
        "messages[0].content[0]"),
    [TRAM_OBJ_TOOL_CALL] = OBJECT(tool_call_keys, "messages[].tool_calls[]",
        CALLED, "messages[1].tool_calls[0]"),
    [TRAM_OBJ_TOOL_CALL_FUNCTION] = OBJECT(call_function_keys, "messages[].tool_calls[].function",
        CALLED, "messages[1].tool_calls[0].function"),
    [TRAM_OBJ_RESPONSE_FORMAT] = OBJECT(response_format_keys, "response_format",
        CHAT_BODY(", \"response_format\": {\"type\": \"json_object\"}"), "response_format"),
    [TRAM_OBJ_JSON_SCHEMA] = OBJECT(json_schema_keys, "response_format.json_schema",
        CHAT_BODY(", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", "
                  "\"schema\": {\"type\": \"object\"}}}"), "response_format.json_schema"),
    [TRAM_OBJ_RESP_MESSAGE] = RESP_OBJECT(resp_message_keys, "input[] (a message)",
        "{\"input\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "input[0]"),
    [TRAM_OBJ_RESP_CONTENT_PART] = RESP_OBJECT(resp_content_part_keys, "input[].content[]",
        "{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"hi\"}]}]}",
        "input[0].content[0]"),
    [TRAM_OBJ_RESP_FUNCTION_CALL] = RESP_OBJECT(resp_function_call_keys, "input[] (a function_call)",
        RESP_CALLED, "input[0]"),
    [TRAM_OBJ_RESP_CALL_OUTPUT] = RESP_OBJECT(resp_call_output_keys, "input[] (a function_call_output)",
        RESP_CALLED, "input[1]"),
    [TRAM_OBJ_RESP_TOOL] = RESP_OBJECT(resp_tool_keys, "tools[]", "{\"input\": \"hi\", " RESP_TOOLS "}",
        "tools[0]"),
    [TRAM_OBJ_RESP_TOOL_CHOICE] = RESP_OBJECT(resp_tool_choice_keys, "tool_choice",
        "{\"input\": \"hi\", " RESP_TOOLS ", \"tool_choice\": {\"type\": \"function\", \"name\": \"f\"}}",
        "tool_choice"),
    [TRAM_OBJ_RESP_TEXT] = RESP_OBJECT(resp_text_keys, "text",
        "{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"text\"}}}", "text"),
    [TRAM_OBJ_RESP_FORMAT] = RESP_OBJECT(resp_format_keys, "text.format",
        "{\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\", "
        "\"schema\": {\"type\": \"object\"}}}}", "text.format"),
    [TRAM_OBJ_RESP_STREAM_OPTIONS] = RESP_OBJECT(resp_stream_options_keys, "stream_options",
        "{\"input\": \"hi\", \"stream\": true, \"stream_options\": {}}", "stream_options"),
    [TRAM_OBJ_MSGS_MESSAGE] = MSGS_OBJECT(msgs_message_keys, "messages[]", MSGS_BODY(MSGS_HI, ""),
                                          "messages[0]"),
    [TRAM_OBJ_MSGS_TEXT] = MSGS_OBJECT(msgs_text_keys, "messages[].content[]",
        MSGS_BODY("[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}]", ""),
        "messages[0].content[0]"),
    [TRAM_OBJ_MSGS_TOOL_USE] = MSGS_OBJECT(msgs_tool_use_keys, "messages[].content[] (tool_use)",
        MSGS_BODY(MSGS_CALLED, MSGS_TOOLS), "messages[1].content[0]"),
    [TRAM_OBJ_MSGS_TOOL_RESULT] = MSGS_OBJECT(msgs_tool_result_keys, "messages[].content[] (tool_result)",
        MSGS_BODY(MSGS_CALLED, MSGS_TOOLS), "messages[2].content[0]"),
    [TRAM_OBJ_MSGS_TOOL] = MSGS_OBJECT(msgs_tool_keys, "tools[]", MSGS_BODY(MSGS_HI, MSGS_TOOLS), "tools[0]"),
    [TRAM_OBJ_MSGS_TOOL_CHOICE] = MSGS_OBJECT(msgs_tool_choice_keys, "tool_choice",
        MSGS_BODY(MSGS_HI, MSGS_TOOLS ", \"tool_choice\": {\"type\": \"tool\", \"name\": \"f\"}"), "tool_choice"),
    [TRAM_OBJ_MSGS_OUTPUT_CONFIG] = MSGS_OBJECT(msgs_output_config_keys, "output_config",
        MSGS_BODY(MSGS_HI, ", \"output_config\": {}"), "output_config"),
    [TRAM_OBJ_MSGS_OUTPUT_FORMAT] = MSGS_OBJECT(msgs_output_format_keys, "output_config.format",
        MSGS_BODY(MSGS_HI, ", \"output_config\": {\"format\": {\"type\": \"json_schema\", \"schema\": "
                  "{\"type\": \"object\"}}}"), "output_config.format"),
};

static const tram_api_field *find(const tram_api_field *rows, size_t n, const char *name,
                                  unsigned endpoint)
{
    for (size_t i = 0; i < n; i++)
        if ((rows[i].endpoints & endpoint) && !strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

static void note_ignored(char *ignored, size_t cap, const char *name)
{
    if (!cap)
        return;
    size_t used = strlen(ignored);
    snprintf(ignored + used, cap - used, "%s%s", used ? ", " : "", name);
}

/* The rule of api_fields.h for every key of o, a value at path ("" at the
 * top) in the rows; within names o as the harmless tests see it. */
static int check_keys(const json_t *o, const char *path, const tram_api_field *rows, size_t n,
                      unsigned endpoint, char *ignored, size_t cap, tram_api_error *e)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        char name[128];
        snprintf(name, sizeof(name), "%s%s%s", path, path[0] ? "." : "", key);
        const tram_api_field *f = find(rows, n, key, endpoint);
        if (!f)
            return tram_api_fail(e, 400, name, "unknown_parameter",
                                 "Unrecognized request argument supplied: %s", name);
        if (f->kind == TRAM_FIELD_IGNORED)
            note_ignored(ignored, cap, name);
        if (f->kind == TRAM_FIELD_REJECTED && !json_is_null(v) &&
            !(f->harmless && f->harmless(v, o)))
            return tram_api_fail(e, 400, name, "unsupported_parameter",
                                 "Unsupported parameter: '%s': %s.", name, f->why);
    }
    return 0;
}

int tram_api_check_fields(const json_t *body, unsigned endpoint, char *ignored, size_t cap,
                          tram_api_error *e)
{
    ignored[0] = 0;
    return check_keys(body, "", tram_api_fields, tram_api_num_fields, endpoint, ignored, cap, e);
}

int tram_api_check_object(const json_t *o, tram_api_object_id id, const char *path, char *ignored,
                          size_t cap, tram_api_error *e)
{
    const tram_api_object *t = &tram_api_objects[id];
    return check_keys(o, path, t->keys, t->num_keys, t->endpoints, ignored, cap, e);
}
