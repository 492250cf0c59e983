#include "server/batch_line.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const batch_keys[] = {"custom_id", "method", "url", "body"};

static int is_batch_key(const char *key)
{
    for (size_t i = 0; i < sizeof(batch_keys) / sizeof(batch_keys[0]); i++)
        if (!strcmp(key, batch_keys[i]))
            return 1;
    return 0;
}

static int line_fail(tram_api_error *e, const char *param, const char *message)
{
    return tram_api_fail(e, 400, param, "invalid_value", "%s", message);
}

/* The Batch form: the envelope checked, the body kept as text. */
static int parse_batch(const json_t *o, tram_batch_line *out, tram_api_error *e)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (!is_batch_key(key))
            return tram_api_fail(e, 400, key, "invalid_value",
                                 "Unknown field '%.100s' in a batch line (expected custom_id, method, url, body).", key);
    }
    const json_t *id = json_object_get(o, "custom_id"), *method = json_object_get(o, "method");
    const char *url = json_string_value(json_object_get(o, "url"));
    const json_t *body = json_object_get(o, "body");
    if (id && !json_is_string(id))
        return line_fail(e, "custom_id", "'custom_id' must be a string.");
    if (method && (!json_is_string(method) || strcmp(json_string_value(method), "POST")))
        return line_fail(e, "method", "'method' must be \"POST\".");
    if (!url || (strcmp(url, "/v1/chat/completions") && strcmp(url, "/v1/completions")))
        return line_fail(e, "url", "'url' must be \"/v1/chat/completions\" or \"/v1/completions\".");
    if (!json_is_object(body))
        return line_fail(e, "body", "'body' must be a JSON object.");
    out->kind = strcmp(url, "/v1/completions") ? TRAM_API_CHAT : TRAM_API_COMPLETION;
    out->stream = json_is_true(json_object_get(body, "stream"));
    out->body = json_dumps(body, JSON_COMPACT);
    return out->body ? 0 : tram_api_out_of_memory(e);
}

/* The plain form: the line is the body. */
static int parse_plain(const json_t *o, const char *text, size_t len, tram_batch_line *out, tram_api_error *e)
{
    out->kind = json_object_get(o, "messages") ? TRAM_API_CHAT : TRAM_API_COMPLETION;
    out->stream = json_is_true(json_object_get(o, "stream"));
    if (!(out->body = malloc(len + 1)))
        return tram_api_out_of_memory(e);
    memcpy(out->body, text, len);
    out->body[len] = 0;
    return 0;
}

static int has_batch_key(const json_t *o)
{
    for (size_t i = 0; i < sizeof(batch_keys) / sizeof(batch_keys[0]); i++)
        if (json_object_get(o, batch_keys[i]))
            return 1;
    return 0;
}

int tram_batch_line_parse(const char *text, size_t len, tram_batch_line *out, tram_api_error *e)
{
    memset(out, 0, sizeof(*out));
    /* read as the server reads a body, so that both take the same JSON */
    json_t *o = tram_api_parse_object(text, len, e);
    if (!o) {
        char why[sizeof(e->message)];
        snprintf(why, sizeof(why), "%s", e->message);
        return tram_api_fail(e, 400, NULL, "invalid_value", "The line is not a JSON object: %s", why);
    }
    const json_t *id = json_object_get(o, "custom_id");
    if (json_is_string(id) && !(out->custom_id = strdup(json_string_value(id)))) {
        json_decref(o);
        return tram_api_out_of_memory(e);
    }
    int rc = has_batch_key(o) ? parse_batch(o, out, e) : parse_plain(o, text, len, out, e);
    json_decref(o);
    return rc;
}

void tram_batch_line_free(tram_batch_line *l)
{
    free(l->custom_id);
    free(l->body);
    memset(l, 0, sizeof(*l));
}
