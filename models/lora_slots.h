/* lora_slots.h — a model's LoRA adapter slots on its backend (--max-loras),
 * and the rows of each pass grouped by the slot they use.
 *
 * A slot holds one adapter's factors, this rank's part of them cut as their
 * base matrices are (models/shard.h): B by rows under a column-parallel q,
 * k, v, gate or up (each rank adds to its own output rows), A by columns
 * under a row-parallel o or down (each rank adds its partial product, which
 * the all-reduce after the projection sums with the others'); B is held
 * transposed (tram_lora_group), and on the CPU a factor whose values are
 * all bf16 is held as bf16.  A pass's
 * sequences name their slot in tram_batch.seq_lora; prepare groups their
 * rows by slot, and apply runs the backend's grouped LoRA op on one site
 * (the projections that share an input). */
#ifndef TRAM_LORA_SLOTS_H
#define TRAM_LORA_SLOTS_H

#include "kernels/backend.h"
#include "models/lora.h"
#include "models/shard.h"

typedef struct {
    int loaded;
    float scale;
    int rank;
    tram_weight *a, *bt;       /* A, Bᵀ [n_layers * TRAM_LORA_N_TARGETS]; data NULL where not targeted */
} tram_lora_slot;

typedef struct {
    tram_backend *be;
    tram_model_config cfg;
    tram_shard shard;
    int n_slots, max_rank;
    tram_lora_slot *slots;     /* [n_slots] */
    int in[TRAM_LORA_N_TARGETS], out[TRAM_LORA_N_TARGETS];  /* this rank's widths of each projection */
    tram_lora_scratch scratch;
    int32_t *host_order;       /* [max_rows] staging of scratch.order (backend host memory) */
    /* the prepared pass: its groups' slots and runs of order */
    int n_groups;
    int *group_slot, *group_first, *group_count;  /* [n_slots] */
    tram_lora_group *groups;   /* [n_slots], filled per site */
} tram_lora_slots;

/* n_slots slots of at most max_rank, for passes of max_rows token rows.
 * n_slots = 0: no adapters, nothing allocated. */
int tram_lora_slots_init(tram_lora_slots *s, tram_backend *be, const tram_model_config *c, const tram_shard *shard,
                         int n_slots, int max_rank, int max_rows, tram_error *err);
void tram_lora_slots_free(tram_lora_slots *s);

/* Uploads this rank's part of adapter a into slot (replacing what it held). */
int tram_lora_slots_load(tram_lora_slots *s, int slot, const tram_lora_adapter *a, tram_error *err);
void tram_lora_slots_unload(tram_lora_slots *s, int slot);

/* Groups the rows of b by b->seq_lora (NULL: no row uses an adapter) and
 * uploads the order; a sequence naming a slot out of range or empty fails. */
int tram_lora_slots_prepare(tram_lora_slots *s, const tram_batch *b, tram_error *err);
/* y += each prepared row's adapter's updates of layer l's projections
 * first .. first + n_parts - 1, which read the one input x and write
 * adjacent columns of y (q|k|v, gate|up: a site of tram_backend.lora);
 * nothing when no row has an adapter. */
void tram_lora_slots_apply(tram_lora_slots *s, int layer, tram_lora_target first, int n_parts, void *y,
                           int y_stride, const void *x);

#endif
