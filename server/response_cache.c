#include "server/response_cache.h"

#include <stdlib.h>
#include <string.h>

#include "server/output_copy.h"

/* Ready entries sit on two lists: by last use (eviction takes the tail) and
 * by expiry (the TTL is one number, so the order they became ready). */
enum { BY_USE, BY_EXPIRY, NUM_LISTS };

typedef struct {
    tram_rcache_entry *prev, *next;
} link;

typedef struct {
    tram_rcache_entry *head, *tail;
} list;

struct tram_rcache_entry {
    tram_rcache_entry *bucket_next;
    link links[NUM_LISTS];
    uint64_t hash;
    char *key;
    size_t key_len;
    int in_table;          /* findable by its key */
    int ready;
    double expires;
    tram_rcache_record **records;
    int num_records, cap_records;
    void **followers;
    int num_followers, cap_followers;
    size_t bytes;          /* what it holds: struct, key, records */
};

struct tram_rcache {
    tram_rcache_config cfg;
    tram_rcache_entry **buckets;
    size_t num_buckets;    /* a power of two */
    size_t num_in_table;
    list lists[NUM_LISTS];
    tram_rcache_stats stats;
};

/* ------------------------------------------------------------ lists */

static void list_push_front(list *l, int which, tram_rcache_entry *e)
{
    e->links[which] = (link){.prev = NULL, .next = l->head};
    if (l->head)
        l->head->links[which].prev = e;
    else
        l->tail = e;
    l->head = e;
}

static void list_remove(list *l, int which, tram_rcache_entry *e)
{
    link *k = &e->links[which];
    if (k->prev)
        k->prev->links[which].next = k->next;
    else
        l->head = k->next;
    if (k->next)
        k->next->links[which].prev = k->prev;
    else
        l->tail = k->prev;
    *k = (link){0};
}

/* ------------------------------------------------------------ the table */

uint64_t tram_rcache_hash(const char *key, size_t len)
{
    return tram_fnv1a(key, len);
}

static tram_rcache_entry **bucket_of(tram_rcache *c, uint64_t hash)
{
    return &c->buckets[hash & (c->num_buckets - 1)];
}

/* Doubles the buckets when entries outnumber them; on failure the table just
 * gets denser. */
static void maybe_grow(tram_rcache *c)
{
    if (c->num_in_table < c->num_buckets)
        return;
    size_t n = c->num_buckets * 2;
    tram_rcache_entry **b = calloc(n, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < c->num_buckets; i++) {
        for (tram_rcache_entry *e = c->buckets[i], *next; e; e = next) {
            next = e->bucket_next;
            e->bucket_next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->num_buckets = n;
}

static void table_remove(tram_rcache *c, tram_rcache_entry *e)
{
    if (!e->in_table)
        return;
    for (tram_rcache_entry **p = bucket_of(c, e->hash); *p; p = &(*p)->bucket_next) {
        if (*p == e) {
            *p = e->bucket_next;
            break;
        }
    }
    e->in_table = 0;
    c->num_in_table--;
}

static tram_rcache_entry *table_find(tram_rcache *c, const char *key, size_t len, uint64_t hash)
{
    for (tram_rcache_entry *e = *bucket_of(c, hash); e; e = e->bucket_next)
        if (e->hash == hash && e->key_len == len && !memcmp(e->key, key, len))
            return e;
    return NULL;
}

/* ------------------------------------------------------------ entries */

static void entry_free(tram_rcache_entry *e)
{
    for (int i = 0; i < e->num_records; i++)
        free(e->records[i]);
    TRAM_FREE_ALL(e->records, e->followers, e->key, e);
}

static tram_rcache_entry *entry_new(const char *key, size_t len, uint64_t hash)
{
    tram_rcache_entry *e = calloc(1, sizeof(*e));
    if (!e || !(e->key = malloc(len ? len : 1))) {
        free(e);
        return NULL;
    }
    memcpy(e->key, key, len);
    e->key_len = len;
    e->hash = hash;
    e->bytes = sizeof(*e) + len;
    return e;
}

/* A ready entry leaves the lists, the table and the byte count, and is freed. */
static void drop_ready(tram_rcache *c, tram_rcache_entry *e)
{
    for (int which = 0; which < NUM_LISTS; which++)
        list_remove(&c->lists[which], which, e);
    table_remove(c, e);
    c->stats.bytes -= e->bytes;
    c->stats.entries--;
    entry_free(e);
}

/* ------------------------------------------------------------ public */

tram_rcache *tram_rcache_new(const tram_rcache_config *cfg)
{
    tram_rcache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->num_buckets = 64;
    c->buckets = calloc(c->num_buckets, sizeof(*c->buckets));
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    return c;
}

void tram_rcache_free(tram_rcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->num_buckets; i++) {
        for (tram_rcache_entry *e = c->buckets[i], *next; e; e = next) {
            next = e->bucket_next;
            entry_free(e);
        }
    }
    free(c->buckets);
    free(c);
}

void tram_rcache_expire(tram_rcache *c, double now)
{
    tram_rcache_entry *e;
    while (c->cfg.ttl > 0 && (e = c->lists[BY_EXPIRY].tail) && e->expires <= now) {
        c->stats.evicted_ttl++;
        drop_ready(c, e);
    }
}

tram_rcache_result tram_rcache_lookup(tram_rcache *c, const char *key, size_t len, double now,
                                      tram_rcache_entry **entry)
{
    return tram_rcache_lookup_hashed(c, key, len, tram_rcache_hash(key, len), now, entry);
}

tram_rcache_result tram_rcache_lookup_hashed(tram_rcache *c, const char *key, size_t len, uint64_t hash,
                                             double now, tram_rcache_entry **entry)
{
    tram_rcache_expire(c, now);
    tram_rcache_entry *e = table_find(c, key, len, hash);
    if (e && e->ready) {
        c->stats.hits++;
        list_remove(&c->lists[BY_USE], BY_USE, e);
        list_push_front(&c->lists[BY_USE], BY_USE, e);
        *entry = e;
        return TRAM_RCACHE_HIT;
    }
    if (e) {
        *entry = e;
        return TRAM_RCACHE_JOIN;  /* counted as coalesced once it follows */
    }
    c->stats.misses++;
    *entry = e = entry_new(key, len, hash);
    if (!e)
        return TRAM_RCACHE_MISS;
    maybe_grow(c);
    e->bucket_next = *bucket_of(c, hash);
    *bucket_of(c, hash) = e;
    e->in_table = 1;
    c->num_in_table++;
    c->stats.in_flight++;
    return TRAM_RCACHE_MISS;
}

/* Out of memory while recording: the entry can no longer be replayed whole,
 * so new requests must not find it. */
static int orphan(tram_rcache *c, tram_rcache_entry *e)
{
    if (e->in_table)
        c->stats.in_flight--;
    table_remove(c, e);
    return -1;
}

int tram_rcache_append(tram_rcache *c, tram_rcache_entry *e, const tram_event *ev, int prompt)
{
    size_t payload = ev->kind == TRAM_EV_OUTPUT     ? tram_output_copy_size(&ev->out)
                     : ev->kind == TRAM_EV_REJECTED ? sizeof(tram_api_error)
                                                    : 0;
    if (e->num_records == e->cap_records) {
        int cap = e->cap_records ? 2 * e->cap_records : 8;
        tram_rcache_record **r = realloc(e->records, (size_t)cap * sizeof(*r));
        if (!r)
            return orphan(c, e);
        e->records = r;
        e->bytes += (size_t)(cap - e->cap_records) * sizeof(*r);
        e->cap_records = cap;
    }
    tram_rcache_record *copy = malloc(sizeof(*copy) + payload);
    if (!copy)
        return orphan(c, e);
    *copy = (tram_rcache_record){.kind = ev->kind, .prompt = prompt};
    if (ev->kind == TRAM_EV_OUTPUT)
        tram_output_copy(&copy->out, &ev->out, copy + 1);
    if (ev->kind == TRAM_EV_REJECTED)
        copy->error = memcpy(copy + 1, &ev->error, sizeof(ev->error));
    e->records[e->num_records++] = copy;
    e->bytes += sizeof(*copy) + payload;
    return 0;
}

/* Frees least recently used ready entries until `need` more bytes fit. */
static void make_room(tram_rcache *c, size_t need)
{
    tram_rcache_entry *e;
    while (c->stats.bytes + need > c->cfg.max_bytes && (e = c->lists[BY_USE].tail)) {
        c->stats.evicted_size++;
        drop_ready(c, e);
    }
}

void tram_rcache_complete(tram_rcache *c, tram_rcache_entry *e, int cache_it, double now)
{
    if (e->in_table)
        c->stats.in_flight--;
    if (!cache_it || !e->in_table || e->bytes > c->cfg.max_bytes) {
        table_remove(c, e);
        entry_free(e);
        return;
    }
    make_room(c, e->bytes);
    e->ready = 1;
    e->expires = now + c->cfg.ttl;
    free(e->followers);
    e->followers = NULL;
    e->num_followers = e->cap_followers = 0;
    list_push_front(&c->lists[BY_USE], BY_USE, e);
    list_push_front(&c->lists[BY_EXPIRY], BY_EXPIRY, e);
    c->stats.bytes += e->bytes;
    c->stats.entries++;
}

int tram_rcache_num_records(const tram_rcache_entry *e)
{
    return e->num_records;
}

const tram_rcache_record *tram_rcache_record_at(const tram_rcache_entry *e, int i)
{
    return e->records[i];
}

int tram_rcache_follow(tram_rcache *c, tram_rcache_entry *e, void *follower)
{
    if (e->num_followers == e->cap_followers) {
        int cap = e->cap_followers ? 2 * e->cap_followers : 4;
        void **f = realloc(e->followers, (size_t)cap * sizeof(*f));
        if (!f)
            return -1;
        e->followers = f;
        e->cap_followers = cap;
    }
    e->followers[e->num_followers++] = follower;
    c->stats.coalesced++;
    return 0;
}

/* The last follower takes the place of the one leaving, so a caller walking
 * the followers from the last to the first may unfollow the current one. */
void tram_rcache_unfollow(tram_rcache_entry *e, void *follower)
{
    for (int i = 0; i < e->num_followers; i++) {
        if (e->followers[i] == follower) {
            e->followers[i] = e->followers[--e->num_followers];
            return;
        }
    }
}

int tram_rcache_num_followers(const tram_rcache_entry *e)
{
    return e->num_followers;
}

void *tram_rcache_follower(const tram_rcache_entry *e, int i)
{
    return e->followers[i];
}

void tram_rcache_stats_get(const tram_rcache *c, tram_rcache_stats *s)
{
    *s = c->stats;
}
