#include "server/output_copy.h"

#include <string.h>

static size_t entries_bytes(const tram_logprob_entry *e, int n)
{
    size_t bytes = 0;
    for (int i = 0; e && i < n; i++)
        bytes += sizeof(*e) + (size_t)e[i].num_top * sizeof(tram_token_logprob);
    return bytes;
}

/* Both entry and alternative sizes are multiples of 8, so laying them out
 * back to back keeps every one aligned. */
static const tram_logprob_entry *copy_entries(char **p, const tram_logprob_entry *src, int n)
{
    if (!src)
        return NULL;
    tram_logprob_entry *dst = (tram_logprob_entry *)*p;
    memcpy(dst, src, (size_t)n * sizeof(*dst));
    *p += (size_t)n * sizeof(*dst);
    for (int i = 0; i < n; i++) {
        dst[i].top = (const tram_token_logprob *)*p;
        memcpy(*p, src[i].top, (size_t)src[i].num_top * sizeof(tram_token_logprob));
        *p += (size_t)src[i].num_top * sizeof(tram_token_logprob);
    }
    return dst;
}

size_t tram_output_copy_size(const tram_output *o)
{
    return entries_bytes(o->logprobs, o->num_tokens) +
           entries_bytes(o->prompt_logprobs, o->prompt_tokens) +
           (size_t)o->num_tokens * sizeof(int32_t) + (size_t)o->embedding_dim * sizeof(float) + o->text_len + 1 +
           (o->stop_string ? strlen(o->stop_string) + 1 : 0);
}

void tram_output_copy(tram_output *dst, const tram_output *o, void *buf)
{
    char *p = buf;
    size_t ids = (size_t)o->num_tokens * sizeof(int32_t);
    *dst = *o;
    dst->logprobs = copy_entries(&p, o->logprobs, o->num_tokens);
    dst->prompt_logprobs = copy_entries(&p, o->prompt_logprobs, o->prompt_tokens);
    dst->token_ids = memcpy(p, o->token_ids ? (const void *)o->token_ids : "", ids);
    p += ids;
    size_t floats = (size_t)o->embedding_dim * sizeof(float);   /* after the ids: 4-byte aligned */
    dst->embedding = o->embedding ? memcpy(p, o->embedding, floats) : NULL;
    p += floats;
    memcpy(p, o->text ? o->text : "", o->text_len);
    p[o->text_len] = 0;
    dst->text = p;
    p += o->text_len + 1;
    dst->stop_string = o->stop_string ? strcpy(p, o->stop_string) : NULL;
}
