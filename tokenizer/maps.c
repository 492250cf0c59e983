/* maps.c — the two open-addressing hash maps of the tokenizer: vocabulary
 * strings → ids, and merge pairs → (rank, merged id).  Both are filled once at
 * load and then only read, so there is no deletion and no resizing. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/maps.h"

static uint32_t cap_for(uint32_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n + 1)
        cap <<= 1;
    return cap;
}

static uint64_t hash_bytes(const char *s, uint32_t len)
{
    uint64_t h = tram_fnv1a(s, len);
    return h ^ (h >> 29);
}

int tram_strmap_init(tram_strmap *m, uint32_t n_entries, tram_error *err)
{
    m->cap = cap_for(n_entries);
    m->keys = tram_calloc(m->cap, sizeof(*m->keys), err);
    m->key_len = tram_calloc(m->cap, sizeof(*m->key_len), err);
    m->vals = tram_calloc(m->cap, sizeof(*m->vals), err);
    return m->keys && m->key_len && m->vals ? 0 : -1;
}

void tram_strmap_free(tram_strmap *m)
{
    TRAM_FREE_ALL(m->keys, m->key_len, m->vals);
    memset(m, 0, sizeof(*m));
}

/* A duplicate key keeps its first value, as HF's vocab does for repeated
 * pieces (the later id still decodes, it just is never produced). */
void tram_strmap_put(tram_strmap *m, const char *key, uint32_t len, int32_t val)
{
    uint32_t i = (uint32_t)hash_bytes(key, len) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->key_len[i] == len && !memcmp(m->keys[i], key, len))
            return;
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->key_len[i] = len;
    m->vals[i] = val;
}

int32_t tram_strmap_get(const tram_strmap *m, const char *key, uint32_t len)
{
    if (!m->cap)
        return -1;
    uint32_t i = (uint32_t)hash_bytes(key, len) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->key_len[i] == len && !memcmp(m->keys[i], key, len))
            return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

int tram_pairmap_init(tram_pairmap *m, uint32_t n_entries, tram_error *err)
{
    m->cap = cap_for(n_entries);
    m->keys = malloc(m->cap * sizeof(*m->keys));
    m->rank = tram_calloc(m->cap, sizeof(*m->rank), err);
    m->merged = tram_calloc(m->cap, sizeof(*m->merged), err);
    if (!m->keys || !m->rank || !m->merged)
        return tram_fail(err, "out of memory for %u merges", n_entries);
    memset(m->keys, 0xff, m->cap * sizeof(*m->keys));
    return 0;
}

void tram_pairmap_free(tram_pairmap *m)
{
    TRAM_FREE_ALL(m->keys, m->rank, m->merged);
    memset(m, 0, sizeof(*m));
}

/* A repeated pair keeps its first (lowest) rank, as HF does. */
void tram_pairmap_put(tram_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t i = (uint32_t)tram_mix64(key) & (m->cap - 1);
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == key)
            return;
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->rank[i] = rank;
    m->merged[i] = merged;
}

int32_t tram_pairmap_get(const tram_pairmap *m, int32_t left, int32_t right, int32_t *merged)
{
    if (!m->cap)
        return -1;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t i = (uint32_t)tram_mix64(key) & (m->cap - 1);
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == key) {
            *merged = m->merged[i];
            return m->rank[i];
        }
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
