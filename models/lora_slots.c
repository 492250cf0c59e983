/* lora_slots.c — adapters in a model's slots, and a pass's rows grouped by
 * slot (see lora_slots.h). */
#include "models/lora_slots.h"

#include <stdlib.h>
#include <string.h>

/* This rank's widths of projection t (its heads, its FFN slice). */
static tram_shard_part target_part(const tram_lora_slots *s, tram_lora_target t)
{
    int in, out;
    char name[64];
    tram_lora_target_dims(&s->cfg, t, &in, &out);
    tram_lora_base_name(t, 0, name, sizeof(name));
    /* the base's (out, in): rows split for q/k/v/gate/up, columns for o/down */
    return tram_shard_part_of(&s->shard, &s->cfg, name, out, in);
}

/* The sites of a layer, as models/llama.c applies them: the projections
 * that read one input, their outputs adjacent. */
static const struct {
    tram_lora_target first;
    int n_parts;
} layer_sites[] = {{TRAM_LORA_Q, 3}, {TRAM_LORA_O, 1}, {TRAM_LORA_GATE, 2}, {TRAM_LORA_DOWN, 1}};

static int alloc_scratch(tram_lora_slots *s, int max_rows, tram_error *err)
{
    tram_backend *be = s->be;
    tram_lora_scratch *sc = &s->scratch;
    *sc = (tram_lora_scratch){.max_rows = max_rows, .max_rank = s->max_rank};
    for (int t = 0; t < TRAM_LORA_N_TARGETS; t++) {
        tram_shard_part p = target_part(s, t);
        s->in[t] = p.ncols;
        s->out[t] = p.nrows;
        sc->max_in = TRAM_MAX(sc->max_in, p.ncols);
    }
    for (size_t i = 0; i < TRAM_ARRAY_LEN(layer_sites); i++) {
        int width = 0;
        for (int p = 0; p < layer_sites[i].n_parts; p++)
            width += s->out[layer_sites[i].first + p];
        sc->max_out = TRAM_MAX(sc->max_out, width);
    }
    size_t rows = (size_t)max_rows, act = (size_t)be->act_bytes;
    if (!(sc->order = be->alloc(be, rows * sizeof(int32_t))) ||
        !(sc->t = be->alloc(be, rows * TRAM_LORA_MAX_PARTS * sc->max_rank * act)) ||
        !(sc->ys = be->alloc(be, rows * sc->max_out * act)) ||
        !(s->host_order = be->alloc_host(be, rows * sizeof(int32_t))))
        return be->sync(be, err) ? -1 : tram_fail(err, "out of memory for LoRA activations");
    return 0;
}

int tram_lora_slots_init(tram_lora_slots *s, tram_backend *be, const tram_model_config *c, const tram_shard *shard,
                         int n_slots, int max_rank, int max_rows, tram_error *err)
{
    *s = (tram_lora_slots){.be = be, .cfg = *c, .shard = *shard, .n_slots = n_slots, .max_rank = max_rank};
    if (!n_slots)
        return 0;
    if (!be->lora)
        return tram_fail(err, "LoRA adapters are not supported on the %s backend yet", be->name);
    if (max_rank < 1)
        return tram_fail(err, "--max-lora-rank must be at least 1, got %d", max_rank);
    size_t per_slot = (size_t)c->n_layers * TRAM_LORA_N_TARGETS;
    s->slots = tram_calloc((size_t)n_slots, sizeof(*s->slots), err);
    s->group_slot = s->slots ? tram_calloc((size_t)n_slots, sizeof(int), err) : NULL;
    s->group_first = s->group_slot ? tram_calloc((size_t)n_slots, sizeof(int), err) : NULL;
    s->group_count = s->group_first ? tram_calloc((size_t)n_slots, sizeof(int), err) : NULL;
    s->groups = s->group_count ? tram_calloc((size_t)n_slots, sizeof(*s->groups), err) : NULL;
    for (int i = 0; s->groups && i < n_slots; i++) {
        s->slots[i].a = tram_calloc(per_slot, sizeof(tram_weight), err);
        s->slots[i].bt = s->slots[i].a ? tram_calloc(per_slot, sizeof(tram_weight), err) : NULL;
        if (!s->slots[i].bt)
            return -1;
    }
    return s->groups ? alloc_scratch(s, max_rows, err) : -1;
}

void tram_lora_slots_unload(tram_lora_slots *s, int slot)
{
    tram_lora_slot *S = &s->slots[slot];
    for (int k = 0; S->a && S->bt && k < s->cfg.n_layers * TRAM_LORA_N_TARGETS; k++) {
        if (S->a[k].data)
            s->be->free_weight(s->be, &S->a[k]);
        if (S->bt[k].data)
            s->be->free_weight(s->be, &S->bt[k]);
        S->a[k] = S->bt[k] = (tram_weight){0};
    }
    S->loaded = 0;
}

void tram_lora_slots_free(tram_lora_slots *s)
{
    tram_backend *be = s->be;
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        tram_lora_slots_unload(s, i);
        free(s->slots[i].a);
        free(s->slots[i].bt);
    }
    if (be) {
        void *bufs[] = {s->scratch.order, s->scratch.t, s->scratch.ys};
        for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
            be->free(be, bufs[i]);
        be->free_host(be, s->host_order);
    }
    TRAM_FREE_ALL(s->slots, s->group_slot, s->group_first, s->group_count, s->groups);
    *s = (tram_lora_slots){0};
}

/* This rank's part p of the whole rows x cols matrix m, into out. */
static void cut(float *out, const float *m, int cols, int row0, int nrows, int col0, int ncols)
{
    for (int r = 0; r < nrows; r++)
        memcpy(out + (size_t)r * ncols, m + (size_t)(row0 + r) * cols + col0, (size_t)ncols * sizeof(float));
}

/* The type a factor is held in: the activations' on CUDA (bf16); on the
 * CPU bf16 when every value is one exactly (PEFT's files are usually bf16),
 * which halves the bytes a step streams at many adapters and changes no
 * value, else f32. */
static tram_wtype factor_type(const tram_backend *be, const float *v, size_t n)
{
    if (be->act_bytes != 4)
        return TRAM_W_BF16;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof(u));
        if (u & 0xffffu)
            return TRAM_W_F32;
    }
    return TRAM_W_BF16;
}

/* This rank's rows [row0, row0 + nrows) of the whole (rows, r) matrix m,
 * transposed into out (r, nrows). */
static void cut_transposed(float *out, const float *m, int r, int row0, int nrows)
{
    for (int j = 0; j < r; j++)
        for (int i = 0; i < nrows; i++)
            out[(size_t)j * nrows + i] = m[(size_t)(row0 + i) * r + j];
}

/* Layer l's factors of projection t: A (rank, in) by the base's columns, Bᵀ
 * (rank, out) by the base's rows. */
static int load_pair(tram_lora_slots *s, tram_lora_slot *S, const tram_lora_adapter *a, int l, tram_lora_target t,
                     float *buf, tram_error *err)
{
    int k = l * TRAM_LORA_N_TARGETS + t, r = a->rank;
    tram_shard_part p = target_part(s, t);
    tram_backend *be = s->be;
    cut(buf, a->a[k], p.cols, 0, r, p.col0, p.ncols);
    be->upload_weight(be, &S->a[k], buf, r, p.ncols, factor_type(be, buf, (size_t)r * p.ncols));
    cut_transposed(buf, a->b[k], r, p.row0, p.nrows);
    be->upload_weight(be, &S->bt[k], buf, r, p.nrows, factor_type(be, buf, (size_t)r * p.nrows));
    return be->sync(be, err);
}

int tram_lora_slots_load(tram_lora_slots *s, int slot, const tram_lora_adapter *a, tram_error *err)
{
    if (slot < 0 || slot >= s->n_slots)
        return tram_fail(err, "LoRA slot %d outside the %d of --max-loras", slot, s->n_slots);
    if (a->rank > s->max_rank)
        return tram_fail(err, "%s: rank %d exceeds --max-lora-rank %d", a->path, a->rank, s->max_rank);
    if (a->n_layers != s->cfg.n_layers)
        return tram_fail(err, "%s: made for a base of %d layers, this one has %d", a->path, a->n_layers,
                         s->cfg.n_layers);
    tram_lora_slots_unload(s, slot);
    tram_lora_slot *S = &s->slots[slot];
    float *buf = tram_calloc((size_t)a->rank * TRAM_MAX(s->scratch.max_in, s->scratch.max_out), sizeof(float), err);
    int rc = buf ? 0 : -1;
    for (int l = 0; !rc && l < a->n_layers; l++)
        for (int t = 0; !rc && t < TRAM_LORA_N_TARGETS; t++)
            if (a->targets & (1u << t))
                rc = load_pair(s, S, a, l, t, buf, err);
    free(buf);
    if (rc) {
        tram_lora_slots_unload(s, slot);
        return -1;
    }
    *S = (tram_lora_slot){.loaded = 1, .scale = a->scale, .rank = a->rank, .a = S->a, .bt = S->bt};
    return 0;
}

static int check_slots(const tram_lora_slots *s, const tram_batch *b, tram_error *err)
{
    for (int q = 0; q < b->num_seqs; q++) {
        int slot = b->seq_lora[q];
        if (slot < -1 || slot >= s->n_slots || (slot >= 0 && !s->slots[slot].loaded))
            return tram_fail(err, "batch sequence %d: LoRA slot %d is not loaded (%d slots)", q, slot, s->n_slots);
    }
    return 0;
}

/* A counting sort of the rows by slot, sequences (and so rows) ascending
 * within a slot. */
int tram_lora_slots_prepare(tram_lora_slots *s, const tram_batch *b, tram_error *err)
{
    s->n_groups = 0;
    if (!b->seq_lora)
        return 0;
    if (check_slots(s, b, err))
        return -1;
    int rows = 0;
    for (int slot = 0; slot < s->n_slots; slot++) {
        int first = rows;
        for (int q = 0; q < b->num_seqs; q++)
            if (b->seq_lora[q] == slot)
                for (int i = b->query_start[q]; i < b->query_start[q + 1]; i++)
                    s->host_order[rows++] = i;
        if (rows > first) {
            s->group_slot[s->n_groups] = slot;
            s->group_first[s->n_groups] = first;
            s->group_count[s->n_groups++] = rows - first;
        }
    }
    if (rows)
        s->be->upload(s->be, s->scratch.order, s->host_order, (size_t)rows * sizeof(int32_t));
    return 0;
}

void tram_lora_slots_apply(tram_lora_slots *s, int layer, tram_lora_target first, int n_parts, void *y,
                           int y_stride, const void *x)
{
    tram_lora_site site = {.n_parts = n_parts, .in = s->in[first]};
    int n = 0, k = layer * TRAM_LORA_N_TARGETS + first;
    for (int p = 0; p < n_parts; p++)
        site.out[p] = s->out[first + p];
    for (int g = 0; g < s->n_groups; g++) {
        const tram_lora_slot *S = &s->slots[s->group_slot[g]];
        tram_lora_group G = {.scale = S->scale, .first = s->group_first[g], .count = s->group_count[g]};
        int adapted = 0;
        for (int p = 0; p < n_parts; p++)
            if (S->a[k + p].data) {
                G.a[p] = &S->a[k + p];
                G.bt[p] = &S->bt[k + p];
                adapted = 1;
            }
        if (adapted)
            s->groups[n++] = G;
    }
    if (n)
        s->be->lora(s->be, y, y_stride, x, &site, s->groups, n, &s->scratch);
}
