/* lora_pool.h — the engine's LoRA adapters: the registry of names (any
 * thread) and the model's slots (the engine thread).
 *
 * Every registered adapter is held in host memory (at most max_cpu_loras of
 * them); at most max_loras are on the model's slots at once, which is also
 * the most distinct adapters the running sequences may use (the scheduler
 * admits no sequence that would need another).  A slot whose adapter a
 * running sequence uses is pinned; the others are reused least recently
 * used first.  One mutex guards the registry: the server registers and
 * unregisters from its own threads, the engine thread resolves names and
 * loads slots under it. */
#ifndef TRAM_LORA_POOL_H
#define TRAM_LORA_POOL_H

#include <pthread.h>
#include <stdint.h>

#include "engine/ranks.h"
#include "engine/tram.h"
#include "models/lora.h"

#define TRAM_MAX_LORAS 64          /* most slots (--max-loras) */

typedef struct {
    char name[TRAM_LORA_NAME_MAX];
    int id;                        /* > 0, never reused: a re-registered name is a new adapter */
    tram_lora_adapter *host;
    int requests;                  /* unfinished requests that use it */
} tram_lora_entry;

typedef struct {
    pthread_mutex_t lock;
    tram_lora_entry *entries;      /* [max_cpu_loras] */
    int num_entries;
    int max_loras, max_rank, max_cpu_loras;
    int next_id;
    int slot_owner[TRAM_MAX_LORAS];      /* id of the adapter in each slot, 0: empty */
    uint64_t slot_used[TRAM_MAX_LORAS];  /* step that last used it, for LRU */
} tram_lora_pool;

int tram_lora_pool_init(tram_lora_pool *p, int max_loras, int max_rank, int max_cpu_loras, tram_error *err);
void tram_lora_pool_free(tram_lora_pool *p);

/* Any thread: registers adapter a (taken, freed on failure too) as name. */
int tram_lora_pool_add(tram_lora_pool *p, const char *name, tram_lora_adapter *a, tram_error *err);
/* Any thread: unregisters name; refused while requests use it. */
int tram_lora_pool_remove(tram_lora_pool *p, const char *name, tram_error *err);
/* Any thread: up to cap names, in registration order, into names; returns how many. */
int tram_lora_pool_names(tram_lora_pool *p, char (*names)[TRAM_LORA_NAME_MAX], int cap);
/* Any thread: the adapter's rank, or 0 when name is not registered. */
int tram_lora_pool_rank(tram_lora_pool *p, const char *name);

/* Any thread: the name of adapter id into out (empty when unknown). */
void tram_lora_pool_name_of(tram_lora_pool *p, int id, char *out);

/* Engine thread: a new request uses name; returns its id (> 0), or -1. */
int tram_lora_pool_acquire(tram_lora_pool *p, const char *name, tram_error *err);
/* Engine thread: a request that used id has finished. */
void tram_lora_pool_release(tram_lora_pool *p, int id);

/* Engine thread: the slot of each adapter in ids[0, n) (0: the base, slot
 * -1), loading those not in a slot into slots no adapter of ids uses, on
 * every rank; n distinct adapters must not exceed max_loras. */
int tram_lora_pool_slots(tram_lora_pool *p, tram_ranks *ranks, const int *ids, int n, int32_t *slots, uint64_t step,
                         tram_error *err);

#endif
