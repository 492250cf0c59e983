/* embed_request.c — a /v1/embeddings body (see embed_request.h). */
#include "server/embed_request.h"

#include <stdlib.h>
#include <string.h>

#include "server/api_fields.h"
#include "server/api_request.h"

/* One input: a non-empty string, or a non-empty list of token ids. */
static int parse_input(const json_t *v, const char *param, tram_prompt *out, tram_api_error *e)
{
    if (json_is_string(v)) {
        if (!json_string_length(v))
            return tram_api_fail(e, 400, param, "invalid_value", "Invalid '%s': an input cannot be empty.", param);
        out->text = json_string_value(v);
        return 0;
    }
    int32_t *ids;
    if (tram_api_token_ids(v, param, &ids, &out->num_tokens, e))
        return -1;
    if (!out->num_tokens) {
        free(ids);
        return tram_api_fail(e, 400, param, "invalid_value", "Invalid '%s': an input cannot be empty.", param);
    }
    out->token_ids = ids;
    return 0;
}

/* A string, a list of strings, a list of token ids, or a list of lists;
 * a list holds one kind. */
static int parse_inputs(const json_t *o, tram_embed_request *r, tram_api_error *e)
{
    const json_t *v = json_object_get(o, "input");
    if (!v || json_is_null(v))
        return tram_api_missing(e, "input");
    if (!json_is_string(v) && !json_is_array(v))
        return tram_api_type_error(e, "input", "a string, an array of strings, an array of token ids or an array of "
                                      "token-id arrays", v);
    if (json_is_array(v) && !json_array_size(v))
        return tram_api_fail(e, 400, "input", "invalid_value", "Invalid 'input': empty array.");
    int single = json_is_string(v) || json_is_integer(json_array_get(v, 0));
    size_t count = single ? 1 : json_array_size(v);
    if (count > TRAM_EMBED_MAX_INPUTS)
        return tram_api_fail(e, 400, "input", "invalid_value", "Invalid 'input': %zu inputs, at most %d in one "
                             "request.", count, TRAM_EMBED_MAX_INPUTS);
    if (!(r->inputs = calloc(count, sizeof(*r->inputs))))
        return tram_api_out_of_memory(e);
    const json_t *first = single ? v : json_array_get(v, 0);
    for (size_t i = 0; i < count; i++) {
        const json_t *item = single ? v : json_array_get(v, i);
        char param[32];
        snprintf(param, sizeof(param), single ? "input" : "input[%zu]", i);
        if (json_typeof(item) != json_typeof(first))
            return tram_api_type_error(e, param, json_is_string(first) ? "a string, as input[0]" : "a token-id array, as "
                                                                                          "input[0]", item);
        if (!json_is_string(item) && !json_is_array(item))
            return tram_api_type_error(e, param, "a string or an array of token ids", item);
        if (parse_input(item, param, &r->inputs[i], e))
            return -1;
        r->num_inputs++;
    }
    return 0;
}

static int parse_options(const json_t *o, tram_embed_request *r, tram_api_error *e)
{
    const json_t *model = json_object_get(o, "model"), *format = json_object_get(o, "encoding_format");
    const json_t *dims = json_object_get(o, "dimensions"), *special = json_object_get(o, "add_special_tokens");
    const json_t *priority = json_object_get(o, "priority");
    if (model && !json_is_null(model) && !json_is_string(model))
        return tram_api_type_error(e, "model", "a string", model);
    r->model = json_string_value(model);
    if (format && !json_is_null(format) && !json_is_string(format))
        return tram_api_type_error(e, "encoding_format", "a string", format);
    const char *f = json_string_value(format);
    if (f && strcmp(f, "float") && strcmp(f, "base64"))
        return tram_api_fail(e, 400, "encoding_format", "invalid_value",
                             "Invalid 'encoding_format': '%.64s' (expected 'float' or 'base64').", f);
    r->base64 = f && !strcmp(f, "base64");
    if (dims && !json_is_null(dims) && !json_is_integer(dims))
        return tram_api_type_error(e, "dimensions", "an integer", dims);
    if (dims && json_is_integer(dims) && (json_integer_value(dims) < 1 || json_integer_value(dims) > 1 << 20))
        return tram_api_fail(e, 400, "dimensions", "invalid_value", "Invalid 'dimensions': %lld (expected an "
                             "integer >= 1).", (long long)json_integer_value(dims));
    r->params.dimensions = dims && json_is_integer(dims) ? (int)json_integer_value(dims) : 0;
    if (special && !json_is_null(special) && !json_is_boolean(special))
        return tram_api_type_error(e, "add_special_tokens", "a boolean", special);
    r->add_special_tokens = !json_is_false(special);
    if (priority && !json_is_null(priority) && !json_is_integer(priority))
        return tram_api_type_error(e, "priority", "an integer", priority);
    r->priority = priority && json_is_integer(priority) ? (int)json_integer_value(priority) : 0;
    return 0;
}

int tram_embed_request_parse(tram_embed_request *r, const char *body, size_t len, tram_api_error *e)
{
    memset(r, 0, sizeof(*r));
    if (!(r->root = tram_api_parse_object(body, len, e)))
        return -1;
    if (tram_api_check_fields(r->root, TRAM_FIELD_EMBEDDINGS, r->ignored, sizeof(r->ignored), e) ||
        parse_options(r->root, r, e) || parse_inputs(r->root, r, e)) {
        tram_embed_request_free(r);
        return -1;
    }
    return 0;
}

void tram_embed_request_free(tram_embed_request *r)
{
    for (int i = 0; r->inputs && i < r->num_inputs; i++)
        free((void *)r->inputs[i].token_ids);
    free(r->inputs);
    json_decref(r->root);
    memset(r, 0, sizeof(*r));
}
