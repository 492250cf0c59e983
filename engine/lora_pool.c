/* lora_pool.c — the registry of adapters and the model's slots (see
 * lora_pool.h). */
#include "engine/lora_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tram_lora_pool_init(tram_lora_pool *p, int max_loras, int max_rank, int max_cpu_loras, tram_error *err)
{
    *p = (tram_lora_pool){.max_loras = max_loras, .max_rank = max_rank, .max_cpu_loras = max_cpu_loras, .next_id = 1};
    if (max_loras < 0 || max_loras > TRAM_MAX_LORAS)
        return tram_fail(err, "--max-loras must be in [0, %d], got %d", TRAM_MAX_LORAS, max_loras);
    if (max_loras && max_cpu_loras < max_loras)
        return tram_fail(err, "--max-cpu-loras (%d) must be at least --max-loras (%d)", max_cpu_loras, max_loras);
    pthread_mutex_init(&p->lock, NULL);
    p->entries = max_cpu_loras ? tram_calloc((size_t)max_cpu_loras, sizeof(*p->entries), err) : NULL;
    return max_cpu_loras && !p->entries ? -1 : 0;
}

void tram_lora_pool_free(tram_lora_pool *p)
{
    for (int i = 0; i < p->num_entries; i++)
        tram_lora_free(p->entries[i].host);
    free(p->entries);
    pthread_mutex_destroy(&p->lock);
}

static tram_lora_entry *find_name(tram_lora_pool *p, const char *name)
{
    for (int i = 0; i < p->num_entries; i++)
        if (!strcmp(p->entries[i].name, name))
            return &p->entries[i];
    return NULL;
}

static tram_lora_entry *find_id(tram_lora_pool *p, int id)
{
    for (int i = 0; i < p->num_entries; i++)
        if (p->entries[i].id == id)
            return &p->entries[i];
    return NULL;
}

static int add_locked(tram_lora_pool *p, const char *name, tram_lora_adapter *a, tram_error *err)
{
    if (!p->max_loras)
        return tram_fail(err, "LoRA adapters need --max-loras of at least 1");
    if (!*name || strlen(name) >= TRAM_LORA_NAME_MAX)
        return tram_fail(err, "a LoRA adapter's name must have 1 to %d bytes", TRAM_LORA_NAME_MAX - 1);
    if (find_name(p, name))
        return tram_fail(err, "a LoRA adapter named '%s' is already loaded", name);
    if (p->num_entries == p->max_cpu_loras)
        return tram_fail(err, "%d LoRA adapters are loaded, as many as --max-cpu-loras allows: unload one first",
                         p->num_entries);
    if (a->rank > p->max_rank)
        return tram_fail(err, "%s: rank %d exceeds --max-lora-rank %d", a->path, a->rank, p->max_rank);
    tram_lora_entry *e = &p->entries[p->num_entries++];
    *e = (tram_lora_entry){.id = p->next_id++, .host = a};
    snprintf(e->name, sizeof(e->name), "%s", name);
    return 0;
}

int tram_lora_pool_add(tram_lora_pool *p, const char *name, tram_lora_adapter *a, tram_error *err)
{
    pthread_mutex_lock(&p->lock);
    int rc = add_locked(p, name, a, err);
    pthread_mutex_unlock(&p->lock);
    if (rc)
        tram_lora_free(a);
    return rc;
}

/* Refused while in use (rather than waiting): the caller learns at once,
 * and a request already queued never loses its adapter. */
int tram_lora_pool_remove(tram_lora_pool *p, const char *name, tram_error *err)
{
    pthread_mutex_lock(&p->lock);
    tram_lora_entry *e = find_name(p, name);
    int rc = 0;
    if (!e)
        rc = tram_fail(err, "no LoRA adapter named '%s' is loaded", name);
    else if (e->requests)
        rc = tram_fail(err, "the LoRA adapter '%s' is in use by %d unfinished request%s: unload it when they are "
                            "done", name, e->requests, e->requests == 1 ? "" : "s");
    if (!rc) {
        tram_lora_free(e->host);
        *e = p->entries[--p->num_entries];   /* its slot, if any, is reused like any unpinned one */
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int tram_lora_pool_names(tram_lora_pool *p, char (*names)[TRAM_LORA_NAME_MAX], int cap)
{
    pthread_mutex_lock(&p->lock);
    int n = TRAM_MIN(cap, p->num_entries);
    for (int i = 0; i < n; i++)
        memcpy(names[i], p->entries[i].name, TRAM_LORA_NAME_MAX);
    pthread_mutex_unlock(&p->lock);
    return n;
}

int tram_lora_pool_rank(tram_lora_pool *p, const char *name)
{
    pthread_mutex_lock(&p->lock);
    tram_lora_entry *e = find_name(p, name);
    int rank = e ? e->host->rank : 0;
    pthread_mutex_unlock(&p->lock);
    return rank;
}

void tram_lora_pool_name_of(tram_lora_pool *p, int id, char *out)
{
    pthread_mutex_lock(&p->lock);
    tram_lora_entry *e = find_id(p, id);
    snprintf(out, TRAM_LORA_NAME_MAX, "%s", e ? e->name : "");
    pthread_mutex_unlock(&p->lock);
}

int tram_lora_pool_acquire(tram_lora_pool *p, const char *name, tram_error *err)
{
    pthread_mutex_lock(&p->lock);
    tram_lora_entry *e = find_name(p, name);
    int id = e ? e->id : -1;
    if (e)
        e->requests++;
    pthread_mutex_unlock(&p->lock);
    return e ? id : tram_fail(err, "The model '%s' does not exist: no base model or LoRA adapter has that name", name);
}

void tram_lora_pool_release(tram_lora_pool *p, int id)
{
    pthread_mutex_lock(&p->lock);
    tram_lora_entry *e = find_id(p, id);
    if (e)
        e->requests--;
    pthread_mutex_unlock(&p->lock);
}

static int slot_of(const tram_lora_pool *p, int id)
{
    for (int s = 0; s < p->max_loras; s++)
        if (p->slot_owner[s] == id)
            return s;
    return -1;
}

static int is_wanted(int id, const int *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* An empty slot, else the least recently used one that no adapter of ids
 * holds (pinned); -1 when every slot is pinned. */
static int victim_slot(const tram_lora_pool *p, const int *ids, int n)
{
    int best = -1;
    for (int s = 0; s < p->max_loras; s++) {
        if (!p->slot_owner[s])
            return s;
        if (!is_wanted(p->slot_owner[s], ids, n) && (best < 0 || p->slot_used[s] < p->slot_used[best]))
            best = s;
    }
    return best;
}

typedef struct {
    int slot;
    const tram_lora_adapter *a;
} slot_load;

static int load_on_rank(tram_ranks *r, int rank, void *ctx, tram_error *err)
{
    const slot_load *job = ctx;
    return tram_model_lora_load(tram_ranks_model(r, rank), job->slot, job->a, err);
}

static int place(tram_lora_pool *p, tram_ranks *ranks, int id, const int *ids, int n, tram_error *err)
{
    tram_lora_entry *e = find_id(p, id);
    int slot = victim_slot(p, ids, n);
    if (!e)
        return tram_fail(err, "LoRA adapter %d was unloaded while a request used it", id);
    if (slot < 0)
        return tram_fail(err, "one step needs more than --max-loras %d adapters", p->max_loras);
    slot_load job = {slot, e->host};
    p->slot_owner[slot] = 0;
    if (tram_ranks_run(ranks, load_on_rank, &job, err))
        return -1;
    p->slot_owner[slot] = id;
    return slot;
}

int tram_lora_pool_slots(tram_lora_pool *p, tram_ranks *ranks, const int *ids, int n, int32_t *slots, uint64_t step,
                         tram_error *err)
{
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    for (int i = 0; !rc && i < n; i++) {
        int slot = ids[i] ? slot_of(p, ids[i]) : -1;
        if (ids[i] && slot < 0 && (slot = place(p, ranks, ids[i], ids, n, err)) < 0)
            rc = -1;
        if (slot >= 0)
            p->slot_used[slot] = step;
        slots[i] = slot;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}
