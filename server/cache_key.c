#include "server/cache_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/api_fields.h"

/* Honoured fields that never change what the model outputs; they, and the
 * fields the field table ignores (api_fields.c: user, metadata, request_id,
 * ...), stay out of the key; everything else in the body is part of it.
 * "model" is replaced by the served model itself, so every name of it
 * (--served-model-name a,b) shares the entries. */
static const char *const fields_outside_key[] = {
    "model", "stream", "stream_options", "priority", "response_cache",
};

static int outside_key(const char *name)
{
    for (size_t i = 0; i < sizeof(fields_outside_key) / sizeof(fields_outside_key[0]); i++)
        if (!strcmp(name, fields_outside_key[i]))
            return 1;
    for (size_t i = 0; i < tram_api_num_fields; i++)
        if (tram_api_fields[i].kind == TRAM_FIELD_IGNORED && !strcmp(name, tram_api_fields[i].name))
            return 1;
    return 0;
}

int tram_cache_control_bypasses(const char *header)
{
    for (const char *p = header; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, " \t,=");
        if ((n == 8 && !strncasecmp(p, "no-cache", 8)) || (n == 8 && !strncasecmp(p, "no-store", 8)))
            return 1;
        p += strcspn(p, ",");
    }
    return 0;
}

int tram_cache_eligible(const tram_api_request *r, tram_rcache_mode mode)
{
    if (mode == TRAM_RCACHE_ALL)
        return 1;
    return mode == TRAM_RCACHE_DETERMINISTIC &&
           (r->params.temperature == 0.0f || r->params.has_seed);
}

/* The body without the fields outside the key, as canonical JSON. */
static char *canonical_body(const json_t *root)
{
    json_t *copy = json_copy((json_t *)root);
    if (!copy)
        return NULL;
    const char *name;
    json_t *value;
    void *next;
    json_object_foreach_safe(copy, next, name, value)
        if (outside_key(name))
            json_object_del(copy, name);
    char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(copy);
    return text;
}

int tram_cache_key(const tram_api_request *r, const char *model, const char *tenant,
                   const tram_cache_prompts *p, char **key, size_t *len)
{
    char *body = canonical_body(r->root);
    if (!body)
        return -1;
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    if (!f) {
        free(body);
        return -1;
    }
    /* kind, body, model, tenant and prompts, each ended by a byte JSON never holds raw */
    fprintf(f, "%d%c%s%c%s%c%s%c", (int)r->kind, 0, body, 0, model, 0, tenant, 0);
    for (int i = 0; i < p->num_prompts; i++) {
        fwrite(&p->num_ids[i], sizeof(int), 1, f);
        fwrite(p->ids[i], sizeof(int32_t), (size_t)p->num_ids[i], f);
    }
    free(body);
    if (fclose(f)) {
        free(out);
        return -1;
    }
    *key = out;
    *len = size;
    return 0;
}
