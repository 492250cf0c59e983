#include "server/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int tram_prompt_render_chat(const tram_chat_template *ct, const tram_api_request *r, char **text,
                            tram_api_error *err)
{
    const tram_api_message *m = r->messages;
    int n = r->num_messages;
    tram_chat_msg *msgs = calloc((size_t)n, sizeof(*msgs));
    if (!msgs)
        return tram_api_out_of_memory(err);
    for (int i = 0; i < n; i++)
        msgs[i] = (tram_chat_msg){.role = m[i].role,
                                  .content = m[i].content,
                                  .tool_calls = m[i].tool_calls,
                                  .num_tool_calls = m[i].num_tool_calls,
                                  .tool_call_id = m[i].tool_call_id};
    tram_error terr = {{0}};
    const tram_chat_conversation c = {
        .msgs = msgs, .n = n, .tools = r->tools.tools, .kwargs = r->chat_template_kwargs, .ending = r->ending};
    int rc = tram_chat_template_render(ct, &c, text, &terr);
    free(msgs);
    if (rc)
        return tram_api_fail(err, 400, "messages", "invalid_value", "%s", terr.msg);
    return 0;
}

int tram_prompt_encode(const tram_engine *e, const char *text, int add_bos, int32_t **ids, int *n,
                       tram_api_error *err)
{
    tram_error terr = {{0}};
    if (tram_tokenizer_encode(tram_engine_tokenizer(e), text, strlen(text), add_bos, 1, ids, n,
                              &terr))
        return tram_api_fail(err, 400, NULL, "invalid_value", "The prompt cannot be tokenized: %s",
                             terr.msg);
    return 0;
}

int tram_prompt_check(const tram_engine *e, const int32_t *ids, int n, int max_tokens,
                      const char *param, tram_api_error *err)
{
    int vocab = tram_tokenizer_vocab_size(tram_engine_tokenizer(e));
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return tram_api_fail(err, 400, param, "invalid_value",
                                 "Token id %d is out of the vocabulary [0, %d).", ids[i], vocab);
    int limit = tram_engine_max_model_len(e);
    if (max_tokens < 0)
        return 0;
    if (max_tokens == 0 && n >= limit)
        return tram_api_fail(err, 400, param, "context_length_exceeded",
                             "This model's maximum context length is %d tokens. However, your "
                             "prompt has %d tokens, which leaves no room for a completion.",
                             limit, n);
    if ((long long)n + max_tokens > limit)
        return tram_api_fail(err, 400, param, "context_length_exceeded",
                             "This model's maximum context length is %d tokens. However, you "
                             "requested %lld tokens (%d in the prompt, %d for the completion).",
                             limit, (long long)n + max_tokens, n, max_tokens);
    return 0;
}
