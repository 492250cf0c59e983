#include "server/api_response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "tokenizer/tokenizer.h"

void tram_api_random_id(const char *prefix, char out[48])
{
    unsigned char r[12] = {0};
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        /* ids need to be unique, not secret: fall back to the clock */
        double t = tram_now();
        memcpy(r, &t, sizeof(t));
    }
    int n = snprintf(out, 48, "%.20s", prefix);
    for (size_t i = 0; i < sizeof(r); i++)
        n += snprintf(out + n, 48 - (size_t)n, "%02x", r[i]);
}

void tram_api_make_id(tram_api_kind kind, char out[48])
{
    tram_api_random_id(kind == TRAM_API_CHAT ? "chatcmpl-" : "cmpl-", out);
}

int tram_api_choice_append(tram_api_choice *c, const char *text, size_t len)
{
    if (c->len + len + 1 > c->cap) {
        size_t cap = TRAM_MAX(c->cap * 2, c->len + len + 64);
        char *p = realloc(c->text, cap);
        if (!p)
            return -1;
        c->text = p;
        c->cap = cap;
    }
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->text[c->len] = 0;
    return 0;
}

void tram_api_choice_free(tram_api_choice *c)
{
    free(c->text);
    json_decref(c->logprobs);
    json_decref(c->tool_calls);
    json_decref(c->error);
    free(c->stop_string);
    memset(c, 0, sizeof(*c));
}

json_t *tram_api_logprobs_new(tram_api_kind kind)
{
    if (kind == TRAM_API_CHAT)
        return json_pack("{s:[], s:n}", "content", "refusal");
    return json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs",
                     "text_offset");
}

/* The token as text (valid UTF-8: a partial character becomes U+FFFD, as the
 * decoder does) and its raw bytes. */
static json_t *token_text(const struct tram_tokenizer *t, int32_t id)
{
    char *text;
    size_t len;
    if (tram_tokenizer_decode(t, &id, 1, 0, &text, &len, NULL))
        return json_string("");
    json_t *s = json_stringn(text, len);
    free(text);
    return s ? s : json_string("");
}

static json_t *token_bytes(const struct tram_tokenizer *t, int32_t id)
{
    size_t len = 0;
    const char *b = tram_tokenizer_token_bytes(t, id, &len);
    json_t *arr = json_array();
    for (size_t i = 0; b && i < len; i++)
        json_array_append_new(arr, json_integer((unsigned char)b[i]));
    return arr;
}

/* A logprob as JSON: NaN (a first prompt token has none) becomes null and
 * -inf becomes a very small number, since JSON has neither. */
static json_t *logprob_json(float lp)
{
    if (lp != lp)
        return json_null();
    return json_real(lp < -9999.0f ? -9999.0 : (double)lp);
}

static json_t *chat_entry(const struct tram_tokenizer *t, int32_t token, float lp)
{
    return json_pack("{s:o, s:o, s:o}", "token", token_text(t, token), "logprob",
                     logprob_json(lp), "bytes", token_bytes(t, token));
}

static int chat_append(json_t *lp, const struct tram_tokenizer *t, const tram_logprob_entry *e)
{
    json_t *item = chat_entry(t, e->token, e->logprob);
    json_t *top = json_array();
    for (int k = 0; k < e->num_top; k++)
        json_array_append_new(top, chat_entry(t, e->top[k].token, e->top[k].logprob));
    if (!item || !top || json_object_set_new(item, "top_logprobs", top)) {
        json_decref(item);
        return -1;
    }
    return json_array_append_new(json_object_get(lp, "content"), item);
}

/* Completions list the chosen token among its alternatives, as vLLM does; the
 * first prompt token has no logprob and no alternatives (null). */
static int completion_append(json_t *lp, const struct tram_tokenizer *t,
                             const tram_logprob_entry *e, size_t *text_offset)
{
    json_t *text = token_text(t, e->token);
    json_t *top = json_object();
    if (e->logprob != e->logprob) {
        json_decref(top);
        top = json_null();
    } else {
        json_object_set_new(top, json_string_value(text), logprob_json(e->logprob));
        for (int k = 0; k < e->num_top; k++) {
            json_t *alt = token_text(t, e->top[k].token);
            json_object_set_new(top, json_string_value(alt), logprob_json(e->top[k].logprob));
            json_decref(alt);
        }
    }
    json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)*text_offset));
    *text_offset += json_string_length(text);
    json_array_append_new(json_object_get(lp, "token_logprobs"), logprob_json(e->logprob));
    json_array_append_new(json_object_get(lp, "top_logprobs"), top);
    return json_array_append_new(json_object_get(lp, "tokens"), text);
}

int tram_api_logprobs_append(json_t *lp, tram_api_kind kind, const struct tram_tokenizer *t,
                             const tram_logprob_entry *entries, int n, size_t *text_offset)
{
    for (int i = 0; i < n; i++) {
        int rc = kind == TRAM_API_CHAT ? chat_append(lp, t, &entries[i])
                                       : completion_append(lp, t, &entries[i], text_offset);
        if (rc)
            return -1;
    }
    return 0;
}

/* The "usage" object of a response and of the last stream chunk. */
static json_t *usage_json(const tram_api_usage *u)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)u->prompt_tokens,
                     "completion_tokens", (json_int_t)u->completion_tokens, "total_tokens",
                     (json_int_t)(u->prompt_tokens + u->completion_tokens),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)u->cached_tokens);
}

static json_t *envelope(const tram_api_envelope *env, int chunk)
{
    const char *object = env->kind == TRAM_API_COMPLETION ? "text_completion"
                         : chunk                          ? "chat.completion.chunk"
                                                          : "chat.completion";
    return json_pack("{s:s, s:s, s:I, s:s, s:n, s:[]}", "id", env->id, "object", object,
                     "created", (json_int_t)env->created, "model", env->model,
                     "system_fingerprint", "choices");
}

/* The text a choice carries: a message or delta for chat, "text" for
 * completions. */
static json_t *choice_json(tram_api_kind kind, int index, int chunk, int role, const char *text,
                           size_t len, json_t *logprobs, const char *finish_reason)
{
    json_t *s = text ? json_stringn(text, len) : json_null();
    json_t *c = json_pack("{s:i, s:o, s:o}", "index", index, "logprobs",
                          logprobs ? logprobs : json_null(), "finish_reason",
                          finish_reason ? json_string(finish_reason) : json_null());
    if (!c || !s) {
        json_decref(s);
        json_decref(c);
        return NULL;
    }
    if (kind == TRAM_API_COMPLETION) {
        json_object_set_new(c, "text", s);
        return c;
    }
    json_t *msg = json_object();
    if (role || !chunk)
        json_object_set_new(msg, "role", json_string("assistant"));
    json_object_set_new(msg, "content", s);
    if (!chunk)
        json_object_set_new(msg, "refusal", json_null());
    json_object_set_new(c, chunk ? "delta" : "message", msg);
    return c;
}

json_t *tram_api_response(const tram_api_envelope *env, const tram_api_choice *choices, int n,
                          const tram_api_usage *u)
{
    json_t *r = envelope(env, 0);
    if (!r)
        return NULL;
    json_t *arr = json_object_get(r, "choices");
    for (int i = 0; i < n; i++) {
        const tram_api_choice *c = &choices[i];
        json_incref(c->logprobs);
        const char *text = c->tool_calls && c->len == 0 ? NULL : c->text ? c->text : "";
        json_t *choice = choice_json(env->kind, i, 0, 1, text, c->len, c->logprobs,
                                     c->finish_reason);
        if (choice && c->tool_calls)
            json_object_set(json_object_get(choice, "message"), "tool_calls", c->tool_calls);
        tram_api_choice_set_error(choice, c->error);
        json_array_append_new(arr, choice);
    }
    json_object_set_new(r, "usage", usage_json(u));
    return r;
}

void tram_api_choice_set_error(json_t *choice, const json_t *error)
{
    if (choice && error)
        json_object_set(choice, "error", (json_t *)error);
}

json_t *tram_api_chunk(const tram_api_envelope *env, const tram_api_delta *d, int with_usage)
{
    json_t *r = envelope(env, 1);
    if (!r) {
        json_decref(d->logprobs);
        return NULL;
    }
    json_array_append_new(json_object_get(r, "choices"),
                          choice_json(env->kind, d->index, 1, d->role, d->text, d->len, d->logprobs,
                                      d->finish_reason));
    if (with_usage)
        json_object_set_new(r, "usage", json_null());
    return r;
}

json_t *tram_api_tool_call_chunk(const tram_api_envelope *env, int index, int call_index, const char *id,
                                 const char *name, const char *arguments, size_t len, int with_usage)
{
    json_t *item = name ? json_pack("{s:i, s:s, s:s, s:{s:s, s:s}}", "index", call_index, "id", id, "type",
                                    "function", "function", "name", name, "arguments", "")
                        : json_pack("{s:i, s:{s:s%}}", "index", call_index, "function", "arguments",
                                    arguments, len);
    json_t *r = tram_api_chunk(env, &(tram_api_delta){.index = index}, with_usage);
    json_t *delta = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "delta");
    if (!item || !delta) {
        json_decref(item);
        json_decref(r);
        return NULL;
    }
    json_object_set_new(delta, "tool_calls", json_pack("[o]", item));
    return r;
}

void tram_api_chunk_set_usage(json_t *chunk, const tram_api_usage *u)
{
    if (chunk)
        json_object_set_new(chunk, "usage", usage_json(u));
}

json_t *tram_api_usage_chunk(const tram_api_envelope *env, const tram_api_usage *u)
{
    json_t *r = envelope(env, 1);
    if (r)
        json_object_set_new(r, "usage", usage_json(u));
    return r;
}
