/* structured.c — structured-output fields to a grammar (see structured.h). */
#include "server/structured.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf_text.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/api_fields.h"

typedef enum { KIND_JSON, KIND_JSON_OBJECT, KIND_REGEX, KIND_CHOICE, KIND_GRAMMAR } kind;

/* One constraint as found: its kind, its value and the field it came from. */
typedef struct {
    kind k;
    const json_t *value;
    char field[64];
} constraint;

static int invalid(tram_api_error *e, const char *field, const char *fmt, const char *detail)
{
    return tram_api_fail(e, 400, field, "invalid_value", fmt, field, detail);
}

/* Records c; a second constraint is an error naming both fields. */
static int found(constraint *c, int *n, kind k, const json_t *value, const char *field,
                 tram_api_error *e)
{
    if (*n)
        return tram_api_fail(e, 400, field, "invalid_value",
                             "'%s' and '%s' both constrain the output; give only one.", c->field, field);
    *c = (constraint){.k = k, .value = value};
    snprintf(c->field, sizeof(c->field), "%s", field);
    (*n)++;
    return 0;
}

static int read_json_schema(const json_t *rf, constraint *c, int *n, tram_api_error *e)
{
    const json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return tram_api_fail(e, 400, "response_format.json_schema", "invalid_value",
                             "'response_format.json_schema' must be an object with a 'schema'.");
    if (tram_api_check_object(js, TRAM_OBJ_JSON_SCHEMA, "response_format.json_schema", NULL, 0, e))
        return -1;
    const json_t *schema = json_object_get(js, "schema");
    if (!schema)
        return tram_api_missing(e, "response_format.json_schema.schema");
    return found(c, n, KIND_JSON, schema, "response_format.json_schema.schema", e);
}

static int read_response_format(const json_t *body, constraint *c, int *n, tram_api_error *e)
{
    const json_t *rf = json_object_get(body, "response_format");
    if (!rf || json_is_null(rf))
        return 0;
    const json_t *type = json_object_get(rf, "type");
    if (!json_is_object(rf) || !json_is_string(type))
        return tram_api_fail(e, 400, "response_format.type", "invalid_value",
                             "'response_format' must be an object with a string 'type'.");
    if (tram_api_check_object(rf, TRAM_OBJ_RESPONSE_FORMAT, "response_format", NULL, 0, e))
        return -1;
    const char *t = json_string_value(type);
    const json_t *schema = json_object_get(rf, "schema"), *js = json_object_get(rf, "json_schema");
    /* each type takes its own key only: another one would be dropped */
    if (schema && strcmp(t, "json_object"))
        return invalid(e, "response_format.schema", "Invalid '%s': it is read with type "
                       "'json_object' only, not '%s'.", t);
    if (js && strcmp(t, "json_schema"))
        return invalid(e, "response_format.json_schema", "Invalid '%s': it is read with type "
                       "'json_schema' only, not '%s'.", t);
    if (!strcmp(t, "text"))
        return 0;
    if (!strcmp(t, "json_object") && schema && !json_is_null(schema))  /* llama.cpp's form */
        return found(c, n, KIND_JSON, schema, "response_format.schema", e);
    if (!strcmp(t, "json_object"))
        return found(c, n, KIND_JSON_OBJECT, rf, "response_format", e);
    if (!strcmp(t, "json_schema"))
        return read_json_schema(rf, c, n, e);
    return invalid(e, "response_format.type",
                   "Invalid value for '%s': '%s' is not supported (supported: 'text', 'json_object', "
                   "'json_schema').", t);
}

static const struct {
    const char *key, *alias;
    kind k;
} fields[] = {
    {"json", "guided_json", KIND_JSON},
    {"regex", "guided_regex", KIND_REGEX},
    {"choice", "guided_choice", KIND_CHOICE},
    {"grammar", "guided_grammar", KIND_GRAMMAR},
    {"json_object", NULL, KIND_JSON_OBJECT},
};

static int read_structured_outputs(const json_t *body, constraint *c, int *n, tram_api_error *e)
{
    const json_t *so = json_object_get(body, "structured_outputs");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return tram_api_fail(e, 400, "structured_outputs", "invalid_type",
                                 "'structured_outputs' must be an object.");
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)so, key, v) {
            size_t i = 0;
            while (i < TRAM_ARRAY_LEN(fields) && strcmp(fields[i].key, key))
                i++;
            char field[64];
            snprintf(field, sizeof(field), "structured_outputs.%s", key);
            if (i == TRAM_ARRAY_LEN(fields))
                return invalid(e, field, "'%s' is not supported by tram%s.", "");
            if (json_is_null(v) || (fields[i].k == KIND_JSON_OBJECT && json_is_false(v)))
                continue;
            if (found(c, n, fields[i].k, v, field, e))
                return -1;
        }
    }
    for (size_t i = 0; i < TRAM_ARRAY_LEN(fields); i++) {
        const json_t *v = fields[i].alias ? json_object_get(body, fields[i].alias) : NULL;
        if (v && !json_is_null(v) && found(c, n, fields[i].k, v, fields[i].alias, e))
            return -1;
    }
    return 0;
}

/* A KIND_JSON constraint's schema as JSON text (malloc'd), or NULL with e
 * filled. */
static char *schema_text(const constraint *c, tram_api_error *e)
{
    const json_t *v = c->value;
    char *text = json_is_string(v) ? strdup(json_string_value(v))
               : json_is_object(v) || json_is_boolean(v) ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    if (!text)
        tram_api_fail(e, 400, c->field, "invalid_type",
                      "'%s' must be a JSON Schema (an object, or its JSON text).", c->field);
    return text;
}

/* For tests only: when TRAM_TEST_SCHEMA_GBNF is set, its GBNF replaces the
 * grammar of every response's JSON Schema (not tool parameters), so a test
 * can make the grammar looser than the schema and see the validator catch
 * the output (tests/api/test_structured_validation.py). */
static const char *test_grammar(void)
{
    return getenv("TRAM_TEST_SCHEMA_GBNF");
}

/* strict_schema: true makes an unknown JSON Schema keyword a 400 instead
 * of the annotation the specification says it is. */
static int read_strict_schema(const json_t *body, int *strict, tram_api_error *e)
{
    const json_t *v = json_object_get(body, "strict_schema");
    *strict = json_is_true(v);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return tram_api_fail(e, 400, "strict_schema", "invalid_type", "'strict_schema' must be a boolean.");
    return 0;
}

/* The constraint as GBNF with root rule "root". */
static int to_gbnf(const constraint *c, int strict, char **gbnf, tram_api_error *e)
{
    tram_error err = {{0}};
    int rc = 0;
    const json_t *v = c->value;
    if (c->k == KIND_JSON_OBJECT) {
        rc = tram_json_object_gbnf("root", gbnf, &err);
    } else if (c->k == KIND_JSON) {
        char *text = schema_text(c, e);
        if (!text)
            return -1;
        const char *loose = test_grammar();
        tram_json_schema_opts opts = {.strict = strict};
        tram_json_schema_result r = {0};
        rc = loose ? !(*gbnf = strdup(loose)) : tram_json_schema_compile(text, "root", &opts, &r, &err);
        if (!loose)
            *gbnf = r.gbnf;
        free(text);
    } else if (c->k == KIND_REGEX || c->k == KIND_GRAMMAR) {
        if (!json_is_string(v))
            return tram_api_fail(e, 400, c->field, "invalid_type", "'%s' must be a string.", c->field);
        rc = c->k == KIND_REGEX ? tram_regex_to_gbnf(json_string_value(v), "root", gbnf, &err)
                                : !(*gbnf = strdup(json_string_value(v)));
    } else {
        size_t n = json_is_array(v) ? json_array_size(v) : 0;
        const char **choices = calloc(n + 1, sizeof(*choices));
        for (size_t i = 0; choices && i < n; i++)
            choices[i] = json_string_value(json_array_get(v, i));
        rc = !json_is_array(v) ? tram_fail(&err, "it must be an array of strings")
           : choices ? tram_choice_to_gbnf(choices, (int)n, "root", gbnf, &err) : -1;
        free(choices);
    }
    if (rc)
        return tram_api_fail(e, 400, c->field, "invalid_value", "Invalid '%s': %s", c->field,
                             err.msg[0] ? err.msg : "out of memory.");
    return 0;
}

/* Applications send the same schema on call after call: compiled
 * grammars are kept, keyed by their GBNF text and tokenizer, least
 * recently used first out, while their memory (tram_grammar_bytes, the
 * key's text included) stays within TRAM_GRAMMAR_CACHE_BYTES.  A grammar
 * grows as its positions are first used (grammar/token_mask.h), so the
 * sum is taken afresh at each insertion.  Only what
 * compiled is kept: a refused grammar leaves the cache as it was.  The
 * entry count is capped too, so that a lookup's scan stays short. */
#define CACHE_MAX_ENTRIES 1024

typedef struct {
    char *gbnf;
    uint64_t hash;
    const struct tram_tokenizer *tok;
    const tram_grammar *g;
    size_t key_bytes;
    uint64_t used;
} cache_entry;

static cache_entry cache[CACHE_MAX_ENTRIES];
static int cache_n;
static uint64_t cache_clock;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t text_hash(const char *s)
{
    return tram_mix64(tram_fnv1a(s, strlen(s)));
}

static const tram_grammar *cache_get(const char *gbnf, uint64_t hash, const struct tram_tokenizer *tok)
{
    const tram_grammar *g = NULL;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < cache_n && !g; i++)
        if (cache[i].hash == hash && cache[i].tok == tok && !strcmp(cache[i].gbnf, gbnf)) {
            cache[i].used = ++cache_clock;
            g = tram_grammar_retain(cache[i].g);
        }
    pthread_mutex_unlock(&cache_lock);
    return g;
}

/* Drops the least recently used entry (the lock held); returns its memory. */
static size_t cache_evict(void)
{
    int victim = 0;
    for (int i = 1; i < cache_n; i++)
        if (cache[i].used < cache[victim].used)
            victim = i;
    size_t bytes = cache[victim].key_bytes + tram_grammar_bytes(cache[victim].g);
    tram_grammar_release(cache[victim].g);
    free(cache[victim].gbnf);
    cache[victim] = cache[--cache_n];
    return bytes;
}

/* The entries' memory as it is now (the lock held). */
static size_t cache_sum(void)
{
    size_t bytes = 0;
    for (int i = 0; i < cache_n; i++)
        bytes += cache[i].key_bytes + tram_grammar_bytes(cache[i].g);
    return bytes;
}

static void cache_put(const char *gbnf, uint64_t hash, const struct tram_tokenizer *tok, const tram_grammar *g)
{
    size_t key_bytes = strlen(gbnf) + 1, bytes = tram_grammar_bytes(g) + key_bytes;
    char *copy = bytes <= TRAM_GRAMMAR_CACHE_BYTES ? strdup(gbnf) : NULL;
    if (!copy)
        return;  /* (one grammar larger than the whole cache is not kept) */
    pthread_mutex_lock(&cache_lock);
    size_t held = cache_sum();
    while (cache_n > 0 && (cache_n == CACHE_MAX_ENTRIES || held + bytes > TRAM_GRAMMAR_CACHE_BYTES))
        held -= TRAM_MIN(held, cache_evict());
    cache[cache_n++] = (cache_entry){.gbnf = copy, .hash = hash, .tok = tok, .g = tram_grammar_retain(g),
                                     .key_bytes = key_bytes, .used = ++cache_clock};
    pthread_mutex_unlock(&cache_lock);
}

void tram_structured_cache_stats(int *entries, size_t *bytes)
{
    pthread_mutex_lock(&cache_lock);
    *entries = cache_n;
    *bytes = cache_sum();
    pthread_mutex_unlock(&cache_lock);
}

int tram_structured_grammar(const json_t *body, const struct tram_tokenizer *tok,
                            const tram_grammar **out, tram_api_error *e)
{
    constraint c;
    int n = 0;
    char *gbnf = NULL;
    *out = NULL;
    int strict;
    if (read_strict_schema(body, &strict, e) || read_response_format(body, &c, &n, e) ||
        read_structured_outputs(body, &c, &n, e))
        return -1;
    if (!n)
        return 0;
    if (to_gbnf(&c, strict, &gbnf, e))
        return -1;
    tram_error err = {{0}};
    uint64_t hash = text_hash(gbnf);
    if (!(*out = cache_get(gbnf, hash, tok)) && (*out = tram_grammar_compile(gbnf, "root", tok, &err)))
        cache_put(gbnf, hash, tok, *out);
    free(gbnf);
    if (!*out)
        return tram_api_fail(e, 400, c.field, "invalid_value", "Invalid '%s': %s", c.field, err.msg);
    return 0;
}

int tram_structured_validator(const json_t *body, tram_jv_schema **out, tram_api_error *e)
{
    constraint c;
    int n = 0;
    *out = NULL;
    if (read_response_format(body, &c, &n, e) || read_structured_outputs(body, &c, &n, e))
        return -1;
    if (!n || c.k != KIND_JSON)
        return 0;
    char *text = schema_text(&c, e);
    if (!text)
        return -1;
    tram_error err = {{0}};
    int rc = tram_jv_compile(text, strlen(text), out, &err);
    free(text);
    if (rc)
        return tram_api_fail(e, 400, c.field, "invalid_value", "Invalid '%s': %s", c.field, err.msg);
    return 0;
}
