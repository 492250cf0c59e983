/* block_manager.h — the paged KV pool: reference-counted blocks, per-sequence
 * block tables, and automatic prefix caching.
 *
 * Every full block that has been computed gets a chained hash (the previous
 * block's hash, its token ids; the first block chains from a salt naming the
 * model).  A hash → block map finds blocks to reuse; a hit is only taken after
 * the block's token ids and parent hash compare equal, so a hash collision can
 * never hand out wrong KV.  Blocks nobody owns sit in one free list: plain
 * blocks at its head (reused first), cached blocks appended at its tail in the
 * order they were released, so eviction takes the least recently used. */
#ifndef TRAM_BLOCK_MANAGER_H
#define TRAM_BLOCK_MANAGER_H

#include <stdint.h>

#include "kernels/base.h"

typedef struct tram_block_manager tram_block_manager;

/* The blocks of one sequence, in order: token t lives in block
 * blocks[t / block_size] at offset t % block_size. */
typedef struct {
    int32_t *blocks;   /* [cap] */
    uint64_t *hashes;  /* [cap] chained hash of each of the first num_hashed blocks */
    int num_blocks;
    int num_hashed;    /* leading full blocks already offered to the prefix cache */
    int cap;
    uint64_t salt;     /* mixed into the first block's hash: the LoRA adapter whose KV the
                          blocks hold (0: the base model), so no other adapter reuses them */
} tram_block_table;

int tram_block_table_init(tram_block_table *t, int cap, tram_error *err);
void tram_block_table_free(tram_block_table *t);

/* salt: distinguishes models (and adapters) sharing one pool's hash space. */
int tram_bm_create(tram_block_manager **out, int num_blocks, int block_size, int enable_caching,
                   uint64_t salt, tram_error *err);
void tram_bm_destroy(tram_block_manager *bm);

int tram_bm_block_size(const tram_block_manager *bm);
int tram_bm_num_total(const tram_block_manager *bm);
int tram_bm_num_free(const tram_block_manager *bm);    /* owned by nobody, cached or not */
int tram_bm_num_cached(const tram_block_manager *bm);  /* registered in the hash map */
int tram_bm_caching(const tram_block_manager *bm);     /* prefix caching on */

/* For an empty table: takes the cached blocks matching the leading full blocks
 * of tokens[0, n) and returns how many tokens they cover.  At most n - 1
 * tokens are served from the cache, so the last one is always computed (its
 * logits are needed).  Returns 0 when caching is off. */
int tram_bm_match_prefix(tram_block_manager *bm, tram_block_table *t, const int32_t *tokens, int n);

/* Blocks that tram_bm_grow(bm, t, n) would have to allocate. */
int tram_bm_blocks_needed(const tram_block_manager *bm, const tram_block_table *t, int n);

/* Makes the table cover n tokens.  Returns -1, allocating nothing, when the
 * pool (counting evictable cached blocks) is short, or the table is full. */
int tram_bm_grow(tram_block_manager *bm, tram_block_table *t, int n);

/* Offers the prefix cache every full block among the first n_computed tokens
 * (whose KV is now written) that was not offered yet. */
void tram_bm_commit(tram_block_manager *bm, tram_block_table *t, const int32_t *tokens,
                    int n_computed);

/* child (empty) shares the first n_blocks blocks of parent, copy-free. */
void tram_bm_fork(tram_block_manager *bm, const tram_block_table *parent, tram_block_table *child,
                  int n_blocks);

/* Drops the table's references, last block first (so a sequence's tail is
 * evicted before its prefix); the table is left empty. */
void tram_bm_release(tram_block_manager *bm, tram_block_table *t);

/* Rollback of rejected drafts: drops the blocks past those the first n
 * tokens need, last first.  Those blocks hold only KV of tokens after the
 * committed ones, so none of them was offered to the prefix cache. */
void tram_bm_truncate(tram_block_manager *bm, tram_block_table *t, int n);

/* Checks the pool's internal invariants (reference counts against the free
 * list, the hash map against the blocks); for tests.  0 or -1 with why. */
int tram_bm_check(const tram_block_manager *bm, tram_error *err);
/* Reference count of one block; for tests. */
int tram_bm_ref_count(const tram_block_manager *bm, int block);

#endif
