/* response_cache.h — the response cache and its single-flight table.
 *
 * One entry per key (cache_key.h makes the keys).  An entry is either in
 * flight, when one request (the leader) is computing it and identical
 * requests (followers) wait on it, or ready, when its result can be replayed.
 * An entry holds the leader's engine events (accepted / rejected / each
 * output) as records, in order: a follower that joins late replays the
 * records so far, then receives the live ones; a hit replays them all.
 *
 * Ready entries are bounded by bytes (least recently used evicted first)
 * and by a TTL; entries in flight are never evicted.  A failed or aborted
 * computation is never made ready: the leader completes it with cache_it 0
 * and it is dropped.  Plain data, owned by the event-loop thread, no lock:
 * what it stores about followers is opaque pointers the caller feeds. */
#ifndef TRAM_RESPONSE_CACHE_H
#define TRAM_RESPONSE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "server/worker.h"

typedef enum {
    TRAM_RCACHE_OFF,            /* no cache, no single-flight */
    TRAM_RCACHE_DETERMINISTIC,  /* requests whose output is a function of the key */
    TRAM_RCACHE_ALL,            /* every request, sampled ones too */
} tram_rcache_mode;

typedef struct {
    size_t max_bytes;           /* ready entries' bytes at most */
    double ttl;                 /* seconds a ready entry lives; 0: until evicted */
} tram_rcache_config;

typedef struct {
    uint64_t hits, misses, coalesced;   /* coalesced: followers of a flight */
    uint64_t evicted_size, evicted_ttl;
    size_t bytes;                       /* of ready entries */
    int entries;                        /* ready ones */
    int in_flight;
} tram_rcache_stats;

typedef enum {
    TRAM_RCACHE_MISS,   /* a new entry in flight: the caller leads it */
    TRAM_RCACHE_JOIN,   /* an entry in flight: the caller follows it */
    TRAM_RCACHE_HIT,    /* a ready entry: the caller replays it */
} tram_rcache_result;

/* One recorded event of the leader, as small as its kind allows: the output
 * of an OUTPUT (its arrays and text follow the record), the error of a
 * REJECTED. */
typedef struct {
    tram_event_kind kind;
    int prompt;                     /* the index of the request's prompt */
    const tram_api_error *error;    /* REJECTED only, else NULL */
    tram_output out;                /* OUTPUT only */
} tram_rcache_record;

typedef struct tram_rcache tram_rcache;
typedef struct tram_rcache_entry tram_rcache_entry;

tram_rcache *tram_rcache_new(const tram_rcache_config *c);
/* Frees every entry; none may still be led or followed. */
void tram_rcache_free(tram_rcache *c);

/* Looks key[0..len) up at time now.  *entry is the entry found or made, or
 * NULL when out of memory (the caller computes without the cache).  An
 * expired entry is dropped and the lookup misses. */
tram_rcache_result tram_rcache_lookup(tram_rcache *c, const char *key, size_t len, double now,
                                      tram_rcache_entry **entry);
/* The same with the key's hash made beforehand, on any thread, by
 * tram_rcache_hash: a long key is hashed off the event loop. */
uint64_t tram_rcache_hash(const char *key, size_t len);
tram_rcache_result tram_rcache_lookup_hashed(tram_rcache *c, const char *key, size_t len, uint64_t hash,
                                             double now, tram_rcache_entry **entry);
/* Drops ready entries whose TTL has passed. */
void tram_rcache_expire(tram_rcache *c, double now);

/* The leader's side.  append() records a deep copy of ev (ACCEPTED, REJECTED
 * or OUTPUT) as the event of prompt `prompt`; when out of memory the entry
 * leaves the table (its leader and followers keep it, new requests miss)
 * and -1 is returned.  complete() ends the flight: with cache_it the entry
 * becomes ready (when it fits), else it is freed.  Every follower must have
 * been unfollowed first; the entry must not be used afterwards. */
int tram_rcache_append(tram_rcache *c, tram_rcache_entry *e, const tram_event *ev, int prompt);
void tram_rcache_complete(tram_rcache *c, tram_rcache_entry *e, int cache_it, double now);

/* The records so far. */
int tram_rcache_num_records(const tram_rcache_entry *e);
const tram_rcache_record *tram_rcache_record_at(const tram_rcache_entry *e, int i);

/* Followers of an entry in flight (counted as coalesced). */
int tram_rcache_follow(tram_rcache *c, tram_rcache_entry *e, void *follower);
void tram_rcache_unfollow(tram_rcache_entry *e, void *follower);
int tram_rcache_num_followers(const tram_rcache_entry *e);
void *tram_rcache_follower(const tram_rcache_entry *e, int i);

void tram_rcache_stats_get(const tram_rcache *c, tram_rcache_stats *s);

#endif
