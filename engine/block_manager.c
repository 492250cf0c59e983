#include "engine/block_manager.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int ref;
    int prev, next;        /* free list links while ref == 0, else -1 */
    int hnext;             /* next block in the same hash bucket */
    int has_hash;
    uint64_t hash, parent_hash;
} tram_block;

struct tram_block_manager {
    int num_blocks, block_size, caching;
    uint64_t salt;
    tram_block *blocks;    /* [num_blocks] */
    int32_t *tokens;       /* [num_blocks][block_size]: ids of cached blocks, to verify hits */
    int free_head, free_tail, num_free, num_cached;
    int *buckets;          /* [num_buckets] first block of each hash chain, -1 if none */
    uint64_t bucket_mask;
};

int tram_block_table_init(tram_block_table *t, int cap, tram_error *err)
{
    memset(t, 0, sizeof(*t));
    t->blocks = tram_calloc((size_t)cap, sizeof(*t->blocks), err);
    t->hashes = tram_calloc((size_t)cap, sizeof(*t->hashes), err);
    if (!t->blocks || !t->hashes) {
        tram_block_table_free(t);
        return -1;
    }
    t->cap = cap;
    return 0;
}

void tram_block_table_free(tram_block_table *t)
{
    free(t->blocks);
    free(t->hashes);
    memset(t, 0, sizeof(*t));
}

/* ---------------------------------------------------------------- free list */

static void list_remove(tram_block_manager *bm, int b)
{
    tram_block *k = &bm->blocks[b];
    if (k->prev >= 0)
        bm->blocks[k->prev].next = k->next;
    else
        bm->free_head = k->next;
    if (k->next >= 0)
        bm->blocks[k->next].prev = k->prev;
    else
        bm->free_tail = k->prev;
    k->prev = k->next = -1;
    bm->num_free--;
}

static void list_push(tram_block_manager *bm, int b, int at_tail)
{
    tram_block *k = &bm->blocks[b];
    if (at_tail) {
        k->prev = bm->free_tail;
        k->next = -1;
        if (bm->free_tail >= 0)
            bm->blocks[bm->free_tail].next = b;
        else
            bm->free_head = b;
        bm->free_tail = b;
    } else {
        k->prev = -1;
        k->next = bm->free_head;
        if (bm->free_head >= 0)
            bm->blocks[bm->free_head].prev = b;
        else
            bm->free_tail = b;
        bm->free_head = b;
    }
    bm->num_free++;
}

/* ---------------------------------------------------------------- hash map */

static uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t h = tram_mix64(parent + 0x9e3779b97f4a7c15ULL);
    for (int i = 0; i < n; i++)
        h = tram_mix64(h ^ ((uint64_t)(uint32_t)tokens[i] + 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1)));
    return h;
}

static int *bucket_of(tram_block_manager *bm, uint64_t hash)
{
    return &bm->buckets[hash & bm->bucket_mask];
}

static int map_find(tram_block_manager *bm, uint64_t hash, uint64_t parent, const int32_t *tokens)
{
    size_t bytes = (size_t)bm->block_size * sizeof(int32_t);
    for (int b = *bucket_of(bm, hash); b >= 0; b = bm->blocks[b].hnext) {
        const tram_block *k = &bm->blocks[b];
        if (k->hash == hash && k->parent_hash == parent &&
            !memcmp(bm->tokens + (size_t)b * bm->block_size, tokens, bytes))
            return b;
    }
    return -1;
}

static void map_insert(tram_block_manager *bm, int b, uint64_t hash, uint64_t parent,
                       const int32_t *tokens)
{
    tram_block *k = &bm->blocks[b];
    k->has_hash = 1;
    k->hash = hash;
    k->parent_hash = parent;
    memcpy(bm->tokens + (size_t)b * bm->block_size, tokens, (size_t)bm->block_size * sizeof(int32_t));
    int *head = bucket_of(bm, hash);
    k->hnext = *head;
    *head = b;
    bm->num_cached++;
}

static void map_remove(tram_block_manager *bm, int b)
{
    tram_block *k = &bm->blocks[b];
    int *p = bucket_of(bm, k->hash);
    while (*p != b)
        p = &bm->blocks[*p].hnext;
    *p = k->hnext;
    k->hnext = -1;
    k->has_hash = 0;
    bm->num_cached--;
}

/* ---------------------------------------------------------------- pool */

int tram_bm_create(tram_block_manager **out, int num_blocks, int block_size, int enable_caching,
                   uint64_t salt, tram_error *err)
{
    *out = NULL;
    if (num_blocks < 1 || block_size < 1)
        return tram_fail(err, "block manager: need at least one block of at least one token "
                              "(got %d blocks of %d)", num_blocks, block_size);
    tram_block_manager *bm = tram_calloc(1, sizeof(*bm), err);
    if (!bm)
        return -1;
    size_t nb = 1;
    while (nb < 2 * (size_t)num_blocks)
        nb *= 2;
    bm->blocks = tram_calloc((size_t)num_blocks, sizeof(*bm->blocks), err);
    bm->tokens = tram_calloc((size_t)num_blocks * block_size, sizeof(int32_t), err);
    bm->buckets = tram_calloc(nb, sizeof(int), err);
    if (!bm->blocks || !bm->tokens || !bm->buckets) {
        tram_bm_destroy(bm);
        return -1;
    }
    memset(bm->buckets, -1, nb * sizeof(int));
    bm->bucket_mask = nb - 1;
    bm->num_blocks = num_blocks;
    bm->block_size = block_size;
    bm->caching = enable_caching;
    bm->salt = tram_mix64(salt);
    bm->free_head = bm->free_tail = -1;
    for (int b = 0; b < num_blocks; b++) {
        bm->blocks[b].hnext = -1;
        list_push(bm, b, 1);
    }
    *out = bm;
    return 0;
}

void tram_bm_destroy(tram_block_manager *bm)
{
    if (!bm)
        return;
    TRAM_FREE_ALL(bm->blocks, bm->tokens, bm->buckets, bm);
}

int tram_bm_block_size(const tram_block_manager *bm) { return bm->block_size; }
int tram_bm_num_total(const tram_block_manager *bm) { return bm->num_blocks; }
int tram_bm_num_free(const tram_block_manager *bm) { return bm->num_free; }
int tram_bm_num_cached(const tram_block_manager *bm) { return bm->num_cached; }
int tram_bm_caching(const tram_block_manager *bm) { return bm->caching; }
int tram_bm_ref_count(const tram_block_manager *bm, int block) { return bm->blocks[block].ref; }

/* Takes a block from the head of the free list, evicting its cached content. */
static int take_free_block(tram_block_manager *bm)
{
    int b = bm->free_head;
    list_remove(bm, b);
    if (bm->blocks[b].has_hash)
        map_remove(bm, b);
    bm->blocks[b].ref = 1;
    return b;
}

static void add_ref(tram_block_manager *bm, int b)
{
    if (bm->blocks[b].ref++ == 0)
        list_remove(bm, b);
}

static void drop_ref(tram_block_manager *bm, int b)
{
    tram_block *k = &bm->blocks[b];
    if (--k->ref == 0)
        list_push(bm, b, k->has_hash);
}

/* ---------------------------------------------------------------- tables */

static uint64_t parent_hash_of(const tram_block_manager *bm, const tram_block_table *t, int i)
{
    return i == 0 ? bm->salt ^ t->salt : t->hashes[i - 1];
}

int tram_bm_match_prefix(tram_block_manager *bm, tram_block_table *t, const int32_t *tokens, int n)
{
    if (!bm->caching || t->num_blocks || n < 1)
        return 0;
    int max_blocks = TRAM_MIN((n - 1) / bm->block_size, t->cap);
    int i = 0;
    for (; i < max_blocks; i++) {
        const int32_t *bt = tokens + (size_t)i * bm->block_size;
        uint64_t parent = parent_hash_of(bm, t, i);
        uint64_t h = block_hash(parent, bt, bm->block_size);
        int b = map_find(bm, h, parent, bt);
        if (b < 0)
            break;
        add_ref(bm, b);
        t->blocks[i] = b;
        t->hashes[i] = h;
    }
    t->num_blocks = t->num_hashed = i;
    return i * bm->block_size;
}

int tram_bm_blocks_needed(const tram_block_manager *bm, const tram_block_table *t, int n)
{
    int want = (n + bm->block_size - 1) / bm->block_size;
    return want > t->num_blocks ? want - t->num_blocks : 0;
}

int tram_bm_grow(tram_block_manager *bm, tram_block_table *t, int n)
{
    int need = tram_bm_blocks_needed(bm, t, n);
    if (need > bm->num_free || t->num_blocks + need > t->cap)
        return -1;
    for (int i = 0; i < need; i++)
        t->blocks[t->num_blocks++] = take_free_block(bm);
    return 0;
}

void tram_bm_commit(tram_block_manager *bm, tram_block_table *t, const int32_t *tokens,
                    int n_computed)
{
    if (!bm->caching)
        return;
    int full = TRAM_MIN(n_computed / bm->block_size, t->num_blocks);
    for (int i = t->num_hashed; i < full; i++) {
        const int32_t *bt = tokens + (size_t)i * bm->block_size;
        uint64_t parent = parent_hash_of(bm, t, i);
        uint64_t h = block_hash(parent, bt, bm->block_size);
        int b = t->blocks[i];
        t->hashes[i] = h;
        /* A block shared with a fork parent is registered already; an equal
         * block computed by another sequence keeps the first one cached. */
        if (!bm->blocks[b].has_hash && map_find(bm, h, parent, bt) < 0)
            map_insert(bm, b, h, parent, bt);
    }
    if (full > t->num_hashed)
        t->num_hashed = full;
}

void tram_bm_fork(tram_block_manager *bm, const tram_block_table *parent, tram_block_table *child,
                  int n_blocks)
{
    for (int i = 0; i < n_blocks; i++) {
        add_ref(bm, parent->blocks[i]);
        child->blocks[i] = parent->blocks[i];
        child->hashes[i] = parent->hashes[i];
    }
    child->num_blocks = n_blocks;
    child->num_hashed = TRAM_MIN(parent->num_hashed, n_blocks);
}

void tram_bm_release(tram_block_manager *bm, tram_block_table *t)
{
    for (int i = t->num_blocks - 1; i >= 0; i--)
        drop_ref(bm, t->blocks[i]);
    t->num_blocks = t->num_hashed = 0;
}

void tram_bm_truncate(tram_block_manager *bm, tram_block_table *t, int n)
{
    int keep = (n + bm->block_size - 1) / bm->block_size;
    for (int i = t->num_blocks - 1; i >= keep; i--)
        drop_ref(bm, t->blocks[i]);
    t->num_blocks = TRAM_MIN(t->num_blocks, keep);
    t->num_hashed = TRAM_MIN(t->num_hashed, t->num_blocks);
}

/* ---------------------------------------------------------------- checks */

static int check_free_list(const tram_block_manager *bm, tram_error *err)
{
    int count = 0, prev = -1;
    for (int b = bm->free_head; b >= 0; b = bm->blocks[b].next) {
        if (bm->blocks[b].ref != 0)
            return tram_fail(err, "block %d is in the free list with ref %d", b, bm->blocks[b].ref);
        if (bm->blocks[b].prev != prev)
            return tram_fail(err, "block %d: broken free-list back link", b);
        if (++count > bm->num_blocks)
            return tram_fail(err, "free list has a cycle");
        prev = b;
    }
    if (prev != bm->free_tail || count != bm->num_free)
        return tram_fail(err, "free list holds %d blocks, counter says %d", count, bm->num_free);
    int zero = 0;
    for (int b = 0; b < bm->num_blocks; b++) {
        if (bm->blocks[b].ref < 0)
            return tram_fail(err, "block %d has ref %d", b, bm->blocks[b].ref);
        zero += bm->blocks[b].ref == 0;
    }
    if (zero != bm->num_free)
        return tram_fail(err, "%d blocks have ref 0 but %d are free", zero, bm->num_free);
    return 0;
}

static int check_map(const tram_block_manager *bm, tram_error *err)
{
    int in_map = 0, hashed = 0;
    for (uint64_t i = 0; i <= bm->bucket_mask; i++) {
        for (int b = bm->buckets[i]; b >= 0; b = bm->blocks[b].hnext) {
            if (!bm->blocks[b].has_hash || (bm->blocks[b].hash & bm->bucket_mask) != i)
                return tram_fail(err, "block %d is in hash bucket %llu wrongly", b,
                                 (unsigned long long)i);
            if (++in_map > bm->num_blocks)
                return tram_fail(err, "hash chain has a cycle");
        }
    }
    for (int b = 0; b < bm->num_blocks; b++)
        hashed += bm->blocks[b].has_hash;
    if (in_map != hashed || hashed != bm->num_cached)
        return tram_fail(err, "hash map holds %d blocks, %d are marked, counter says %d", in_map,
                         hashed, bm->num_cached);
    return 0;
}

int tram_bm_check(const tram_block_manager *bm, tram_error *err)
{
    if (check_free_list(bm, err) || check_map(bm, err))
        return -1;
    return 0;
}
