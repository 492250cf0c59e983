/* Response bodies and stream chunks (server/api_response.c), checked field by
 * field against the shapes of the OpenAI API reference. */
#include <criterion/criterion.h>
#include <string.h>

#include "server/api_response.h"

static const char *str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_string(v), "%s is not a string", key);
    return json_string_value(v);
}

static long long num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "%s is not an integer", key);
    return json_integer_value(v);
}

Test(server_response, ids_have_openai_prefixes_and_differ)
{
    char a[48], b[48];
    tram_api_make_id(TRAM_API_CHAT, a);
    tram_api_make_id(TRAM_API_CHAT, b);
    cr_assert(!strncmp(a, "chatcmpl-", 9) && strlen(a) > 20);
    cr_assert_str_neq(a, b);
    tram_api_make_id(TRAM_API_COMPLETION, a);
    cr_assert(!strncmp(a, "cmpl-", 5));
}

Test(server_response, chat_completion_body)
{
    tram_api_choice c[2] = {{0}};
    tram_api_choice_append(&c[0], "Hello", 5);
    tram_api_choice_append(&c[0], ", world", 7);
    c[0].finish_reason = "stop";
    c[1].finish_reason = "length";
    tram_api_envelope env = {
        .kind = TRAM_API_CHAT, .id = "chatcmpl-x", .created = 1700000000, .model = "smol"};
    tram_api_usage u = {.prompt_tokens = 11, .completion_tokens = 9, .cached_tokens = 4};
    json_t *r = tram_api_response(&env, c, 2, &u);
    cr_assert_str_eq(str(r, "id"), "chatcmpl-x");
    cr_assert_str_eq(str(r, "object"), "chat.completion");
    cr_assert_eq(num(r, "created"), 1700000000);
    cr_assert_str_eq(str(r, "model"), "smol");
    json_t *choices = json_object_get(r, "choices");
    cr_assert_eq(json_array_size(choices), 2);
    json_t *c0 = json_array_get(choices, 0);
    cr_assert_eq(num(c0, "index"), 0);
    cr_assert_str_eq(str(c0, "finish_reason"), "stop");
    cr_assert(json_is_null(json_object_get(c0, "logprobs")));
    json_t *msg = json_object_get(c0, "message");
    cr_assert_str_eq(str(msg, "role"), "assistant");
    cr_assert_str_eq(str(msg, "content"), "Hello, world");
    cr_assert_str_eq(str(json_array_get(choices, 1), "finish_reason"), "length");
    cr_assert_str_eq(str(json_object_get(json_array_get(choices, 1), "message"), "content"), "");
    json_t *usage = json_object_get(r, "usage");
    cr_assert_eq(num(usage, "prompt_tokens"), 11);
    cr_assert_eq(num(usage, "completion_tokens"), 9);
    cr_assert_eq(num(usage, "total_tokens"), 20);
    cr_assert_eq(num(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"), 4);
    json_decref(r);
    tram_api_choice_free(&c[0]);
    tram_api_choice_free(&c[1]);
}

Test(server_response, stream_chunks)
{
    tram_api_envelope env = {.kind = TRAM_API_CHAT, .id = "chatcmpl-y", .created = 5, .model = "smol"};
    json_t *first = tram_api_chunk(&env, &(tram_api_delta){.index = 2, .role = 1, .text = ""}, 1);
    cr_assert_str_eq(str(first, "object"), "chat.completion.chunk");
    json_t *c = json_array_get(json_object_get(first, "choices"), 0);
    cr_assert_eq(num(c, "index"), 2);
    cr_assert_str_eq(str(json_object_get(c, "delta"), "role"), "assistant");
    cr_assert(json_is_null(json_object_get(c, "finish_reason")));
    cr_assert(json_is_null(json_object_get(first, "usage")), "include_usage: usage is null until the end");
    cr_assert_not_null(json_object_get(first, "usage"));
    json_decref(first);

    json_t *last = tram_api_chunk(&env, &(tram_api_delta){.text = "end", .len = 3, .finish_reason = "stop"}, 0);
    c = json_array_get(json_object_get(last, "choices"), 0);
    cr_assert_null(json_object_get(json_object_get(c, "delta"), "role"), "only the first chunk has the role");
    cr_assert_str_eq(str(json_object_get(c, "delta"), "content"), "end");
    cr_assert_str_eq(str(c, "finish_reason"), "stop");
    cr_assert_null(json_object_get(last, "usage"));
    json_decref(last);

    tram_api_usage u = {.prompt_tokens = 3, .completion_tokens = 2};
    json_t *usage = tram_api_usage_chunk(&env, &u);
    cr_assert_eq(json_array_size(json_object_get(usage, "choices")), 0);
    cr_assert_eq(num(json_object_get(usage, "usage"), "total_tokens"), 5);
    json_decref(usage);

    tram_api_envelope cenv = {
        .kind = TRAM_API_COMPLETION, .id = "cmpl-z", .created = 5, .model = "smol"};
    json_t *tc = tram_api_chunk(&cenv, &(tram_api_delta){.index = 1, .text = "abc", .len = 3}, 0);
    cr_assert_str_eq(str(tc, "object"), "text_completion");
    c = json_array_get(json_object_get(tc, "choices"), 0);
    cr_assert_str_eq(str(c, "text"), "abc");
    cr_assert_null(json_object_get(c, "delta"));
    json_decref(tc);
}

Test(server_response, logprobs_shapes)
{
    json_t *chat = tram_api_logprobs_new(TRAM_API_CHAT);
    cr_assert(json_is_array(json_object_get(chat, "content")));
    json_decref(chat);
    json_t *cmpl = tram_api_logprobs_new(TRAM_API_COMPLETION);
    const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    for (int i = 0; i < 4; i++)
        cr_assert(json_is_array(json_object_get(cmpl, keys[i])), "%s", keys[i]);
    json_decref(cmpl);
}
