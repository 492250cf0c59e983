/* msgs.c — the Messages API's dialects (msgs.h): a request's state is its
 * translation (for naming errors) and its stream's place. */
#include "server/msgs.h"

#include <stdlib.h>

#include "server/msgs_request.h"
#include "server/msgs_response.h"

typedef struct {
    tram_msgs_translation *translation;
    tram_msgs_stream stream;
} msgs_state;

static json_t *to_chat(const tram_dialect_request *in, void **state, tram_api_error *e, int count_only)
{
    msgs_state *st = calloc(1, sizeof(*st));
    *state = st;
    if (!st) {
        tram_api_out_of_memory(e);
        return NULL;
    }
    return tram_msgs_to_chat(in->body, count_only, &st->translation, in->ignored, in->ignored_cap, e);
}

static json_t *messages_to_chat(const tram_dialect_request *in, void **state, tram_api_error *e)
{
    return to_chat(in, state, e, 0);
}

static json_t *count_to_chat(const tram_dialect_request *in, void **state, tram_api_error *e)
{
    return to_chat(in, state, e, 1);
}

static void rename_error(void *state, tram_api_error *e)
{
    msgs_state *st = state;
    tram_msgs_rename_error(st ? st->translation : NULL, e);
}

static void stream_start(void *state, struct evhttp_request *req, const tram_api_envelope *env,
                         long long prompt_tokens)
{
    msgs_state *st = state;
    if (req)
        tram_msgs_stream_start(&st->stream, req, env, prompt_tokens);
}

static void chunk(void *state, const json_t *chunk, struct evhttp_request *req)
{
    msgs_state *st = state;
    if (req)
        tram_msgs_stream_chunk(&st->stream, req, chunk);
}

static void stream_end(void *state, const tram_dialect_end *end, struct evhttp_request *req)
{
    msgs_state *st = state;
    const tram_api_choice *choice = end->error || !end->num_choices ? NULL : &end->choices[0];
    if (req)
        tram_msgs_stream_end(&st->stream, req, choice, end->error, end->usage);
}

/* A choice aborted or failed is an error: the Messages API has no such message. */
static json_t *response(void *state, const tram_dialect_end *end, tram_api_error *e)
{
    (void)state;
    const tram_api_choice *choice = end->num_choices ? &end->choices[0] : NULL;
    if (!choice || !tram_msgs_stop_reason(choice)) {
        tram_msgs_choice_error(choice, e);
        return NULL;
    }
    json_t *message = tram_msgs_message(end->env, choice, end->usage);
    if (!message)
        tram_api_out_of_memory(e);
    return message;
}

static void free_state(void *state)
{
    msgs_state *st = state;
    if (st)
        tram_msgs_translation_free(st->translation);
    free(st);
}

const tram_dialect tram_msgs_dialect = {
    .id_prefix = "msg_",
    .errors = TRAM_PROTOCOL_ANTHROPIC,
    .to_chat = messages_to_chat,
    .rename_error = rename_error,
    .stream_start = stream_start,
    .chunk = chunk,
    .stream_end = stream_end,
    .response = response,
    .free_state = free_state,
};

const tram_dialect tram_msgs_count_dialect = {
    .id_prefix = "msg_",
    .errors = TRAM_PROTOCOL_ANTHROPIC,
    .count_only = 1,
    .to_chat = count_to_chat,
    .rename_error = rename_error,
    .free_state = free_state,
};
