/* response_store.c — the stored responses (see response_store.h): a hash
 * table of entries on two lists, one in use order (the eviction by bytes
 * and count takes its least recent end) and one in creation order (the TTL
 * takes its oldest end), all under one mutex. */
#include "server/response_store.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"
#include "kernels/list.h"

typedef struct entry entry;
struct entry {
    entry *chain;                   /* the next in its bucket */
    entry *used_prev, *used_next;   /* use order: head most recent */
    entry *age_prev, *age_next;     /* creation order: head oldest */
    double created;
    size_t bytes;
    char *tenant, *id, *response, *conversation;   /* one allocation, in this order */
};

typedef TRAM_LIST_OF(entry) list;

struct tram_rstore {
    tram_rstore_config cfg;
    pthread_mutex_t lock;
    entry **buckets;
    size_t num_buckets;             /* a power of two */
    list used, age;
    size_t count, bytes;
};

/* FNV-1a over the tenant, a NUL and the id. */
static uint64_t key_hash(const char *tenant, const char *id)
{
    return tram_fnv1a_more(tram_fnv1a(tenant, strlen(tenant) + 1), id, strlen(id));
}

tram_rstore *tram_rstore_new(const tram_rstore_config *c)
{
    tram_rstore *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->cfg = *c;
    s->num_buckets = 64;
    while (s->num_buckets < c->max_count && s->num_buckets < (1u << 20))
        s->num_buckets <<= 1;
    s->buckets = calloc(s->num_buckets, sizeof(*s->buckets));
    if (!s->buckets || pthread_mutex_init(&s->lock, NULL)) {
        free(s->buckets);
        free(s);
        return NULL;
    }
    return s;
}

void tram_rstore_free(tram_rstore *s)
{
    if (!s)
        return;
    for (entry *e = s->age.head, *next; e; e = next) {
        next = e->age_next;
        free(e);
    }
    pthread_mutex_destroy(&s->lock);
    free(s->buckets);
    free(s);
}

static entry **slot_of(tram_rstore *s, const char *tenant, const char *id)
{
    entry **p = &s->buckets[key_hash(tenant, id) & (s->num_buckets - 1)];
    while (*p && (strcmp((*p)->tenant, tenant) || strcmp((*p)->id, id)))
        p = &(*p)->chain;
    return p;
}

static void drop(tram_rstore *s, entry *e)
{
    entry **p = slot_of(s, e->tenant, e->id);
    *p = e->chain;
    TRAM_LIST_REMOVE(&s->used, e, used_prev, used_next);
    TRAM_LIST_REMOVE(&s->age, e, age_prev, age_next);
    s->count--;
    s->bytes -= e->bytes;
    free(e);
}

static void expire(tram_rstore *s, double now)
{
    while (s->cfg.ttl > 0 && s->age.head && now - s->age.head->created >= s->cfg.ttl)
        drop(s, s->age.head);
}

/* Copies the four strings into one block after the entry. */
static entry *entry_new(const char *tenant, const char *id, const char *response,
                        const char *conversation, double now)
{
    const char *parts[4] = {tenant, id, response, conversation};
    size_t lens[4], total = 0;
    for (int i = 0; i < 4; i++)
        total += (lens[i] = strlen(parts[i]) + 1);
    entry *e = calloc(1, sizeof(*e) + total);
    if (!e)
        return NULL;
    char *p = (char *)(e + 1);
    char **fields[4] = {&e->tenant, &e->id, &e->response, &e->conversation};
    for (int i = 0; i < 4; i++) {
        memcpy(p, parts[i], lens[i]);
        *fields[i] = p;
        p += lens[i];
    }
    e->bytes = total;
    e->created = now;
    return e;
}

int tram_rstore_put(tram_rstore *s, const char *tenant, const char *id, const char *response,
                    const char *conversation, double now)
{
    entry *e = entry_new(tenant, id, response, conversation, now);
    if (!e || e->bytes > s->cfg.max_bytes || !s->cfg.max_count) {
        free(e);
        return -1;
    }
    pthread_mutex_lock(&s->lock);
    expire(s, now);
    entry *old = *slot_of(s, tenant, id);
    if (old)
        drop(s, old);
    while (s->used.tail && (s->bytes + e->bytes > s->cfg.max_bytes || s->count + 1 > s->cfg.max_count))
        drop(s, s->used.tail);
    entry **slot = slot_of(s, tenant, id);
    *slot = e;
    TRAM_LIST_PUSH_HEAD(&s->used, e, used_prev, used_next);
    TRAM_LIST_PUSH_TAIL(&s->age, e, age_prev, age_next);
    s->count++;
    s->bytes += e->bytes;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int tram_rstore_get(tram_rstore *s, const char *tenant, const char *id, tram_rstore_part part,
                    char **out, double now)
{
    pthread_mutex_lock(&s->lock);
    expire(s, now);
    entry *e = *slot_of(s, tenant, id);
    *out = NULL;
    if (e) {
        TRAM_LIST_REMOVE(&s->used, e, used_prev, used_next);
        TRAM_LIST_PUSH_HEAD(&s->used, e, used_prev, used_next);
        *out = strdup(part == TRAM_RSTORE_RESPONSE ? e->response : e->conversation);
    }
    pthread_mutex_unlock(&s->lock);
    return *out ? 0 : -1;
}

int tram_rstore_delete(tram_rstore *s, const char *tenant, const char *id, double now)
{
    pthread_mutex_lock(&s->lock);
    expire(s, now);
    entry *e = *slot_of(s, tenant, id);
    if (e)
        drop(s, e);
    pthread_mutex_unlock(&s->lock);
    return e ? 0 : -1;
}

size_t tram_rstore_count(tram_rstore *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

size_t tram_rstore_bytes(tram_rstore *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->bytes;
    pthread_mutex_unlock(&s->lock);
    return n;
}
