/* fuzz_api.c — libFuzzer on the request parser and validator
 * (server/api_request.c): any bytes, as a chat or a completions body, give
 * either a parsed request whose invariants hold or a 4xx/5xx error with an
 * OpenAI-shaped body; never a crash, a leak or undefined behaviour.
 * `make fuzz-api` (FUZZ_SECONDS=600). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_request.h"

static void check_error(const tram_api_error *e)
{
    if (e->status < 400 || e->status > 599 || !e->message[0] ||
        strlen(e->message) >= sizeof(e->message))
        abort();
    json_t *body = tram_api_error_json(e);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (!text)
        abort();  /* the message must be valid UTF-8 JSON, whatever the input */
    free(text);
    json_decref(body);
}

static void check_request(const tram_api_request *r, const tram_sampling_params *defaults)
{
    const tram_sampling_params *p = &r->params;
    if (r->kind == TRAM_API_CHAT && r->num_messages < 1)
        abort();
    for (int i = 0; i < r->num_messages; i++)
        if (!r->messages[i].role || !r->messages[i].content)
            abort();
    if (r->kind == TRAM_API_COMPLETION && r->num_prompts < 1)
        abort();
    for (int i = 0; i < r->num_prompts; i++)
        if (!r->prompts[i].text && (r->prompts[i].num_tokens < 0 ||
                                    (r->prompts[i].num_tokens && !r->prompts[i].token_ids)))
            abort();
    for (int i = 0; i < p->num_stop; i++)
        if (!p->stop[i] || !p->stop[i][0])
            abort();
    if (p->max_tokens < 0 || (p->max_tokens == 0 && r->kind == TRAM_API_COMPLETION) ||
        p->logprobs > TRAM_MAX_LOGPROBS || p->prompt_logprobs > TRAM_MAX_LOGPROBS ||
        (r->include_usage && !r->stream) || (p->prompt_logprobs >= 0 && !r->echo) ||
        (p->num_logit_bias && !p->logit_bias) || p->skip_special_tokens != (p->skip_special_tokens & 1) ||
        (defaults->top_k == 0 && p->top_k == -1))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the defaults tram.h documents for tram_sampling_params_init */
    tram_sampling_params defaults = {.n = 1, .temperature = 1, .top_p = 1, .repetition_penalty = 1,
                                     .max_tokens = 16, .logprobs = -1, .prompt_logprobs = -1,
                                     .skip_special_tokens = 1};
    for (int kind = TRAM_API_CHAT; kind <= TRAM_API_COMPLETION; kind++) {
        tram_api_request r;
        tram_api_error e = {0};
        if (tram_api_request_parse(&r, (tram_api_kind)kind, &defaults, (const char *)data, size, &e)) {
            check_error(&e);
            if (r.root)
                abort();  /* a failed parse leaves nothing behind */
            continue;
        }
        check_request(&r, &defaults);
        tram_api_request_free(&r);
    }
    return 0;
}
