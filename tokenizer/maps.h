/* maps.h — the tokenizer's two hash maps, filled once at load and then only
 * read: vocabulary strings → ids, and BPE merge pairs → (rank, merged id). */
#ifndef TRAM_TOK_MAPS_H
#define TRAM_TOK_MAPS_H

#include <stdint.h>

#include "kernels/base.h"

/* String → int32 (vocabulary lookup).  Keys point into caller-owned memory. */
typedef struct {
    const char **keys;
    uint32_t *key_len;
    int32_t *vals;
    uint32_t cap;   /* power of two, at least twice the entries */
} tram_strmap;

int tram_strmap_init(tram_strmap *m, uint32_t n_entries, tram_error *err);
void tram_strmap_free(tram_strmap *m);
void tram_strmap_put(tram_strmap *m, const char *key, uint32_t len, int32_t val);
int32_t tram_strmap_get(const tram_strmap *m, const char *key, uint32_t len);   /* -1: absent */

/* (left id, right id) → merge rank and merged id (BPE merges). */
typedef struct {
    uint64_t *keys;      /* left << 32 | right; UINT64_MAX = empty */
    int32_t *rank, *merged;
    uint32_t cap;
} tram_pairmap;

int tram_pairmap_init(tram_pairmap *m, uint32_t n_entries, tram_error *err);
void tram_pairmap_free(tram_pairmap *m);
void tram_pairmap_put(tram_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
/* Returns the rank (and *merged), or -1 when the pair does not merge. */
int32_t tram_pairmap_get(const tram_pairmap *m, int32_t left, int32_t right, int32_t *merged);

#endif
