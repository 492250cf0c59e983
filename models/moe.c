/* moe.c — the mixture-of-experts FFN on a backend (see moe.h). */
#include "models/moe.h"

#include <stdlib.h>

void tram_moe_share(int n_experts, int rank, int world, int *first, int *count)
{
    int base = n_experts / world, extra = n_experts % world;
    *first = rank * base + TRAM_MIN(rank, extra);
    *count = base + (rank < extra);
}

int tram_moe_weights_init(tram_moe_weights *w, const tram_model_config *c, const tram_backend *be,
                          tram_error *err)
{
    *w = (tram_moe_weights){0};
    int first, count;
    tram_moe_share(c->n_experts, be->rank, be->world_size, &first, &count);
    w->gate_up = tram_calloc(TRAM_MAX(count, 1), sizeof(tram_weight), err);
    w->down = w->gate_up ? tram_calloc(TRAM_MAX(count, 1), sizeof(tram_weight), err) : NULL;
    if (!w->down)
        return -1;
    w->layer = (tram_moe_layer){.n_experts = c->n_experts, .top_k = c->n_experts_used,
                                .norm_topk = c->norm_topk_prob, .first = first, .count = count,
                                .ffn = c->ffn_dim, .gate_up = w->gate_up, .down = w->down};
    return 0;
}

static void free_weight(tram_backend *be, tram_weight *w)
{
    if (w->data)
        be->free_weight(be, w);
}

void tram_moe_weights_free(tram_backend *be, tram_moe_weights *w)
{
    for (int i = 0; w->gate_up && i < w->layer.count; i++) {
        free_weight(be, &w->gate_up[i]);
        free_weight(be, &w->down[i]);
    }
    free(w->gate_up);
    free(w->down);
    tram_weight *single[] = {&w->router, &w->shared_gate_up, &w->shared_down, &w->shared_gate};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(single); i++)
        free_weight(be, single[i]);
    *w = (tram_moe_weights){0};
}

int tram_moe_acts_alloc(tram_backend *be, const tram_model_config *c, int max_tokens, tram_moe_acts *a,
                        tram_error *err)
{
    size_t t = (size_t)max_tokens, rows = t * c->n_experts_used, ab = be->act_bytes;
    size_t ffn = (size_t)c->ffn_dim, sh = (size_t)c->shared_ffn_dim, dim = (size_t)c->dim;
    *a = (tram_moe_acts){.s = {.max_rows = (int)rows, .dim = c->dim}};
    struct { void **p; size_t bytes; } bufs[] = {
        {(void **)&a->s.expert, rows * 4}, {(void **)&a->s.weight, rows * 4},
        {(void **)&a->s.order, rows * 4}, {(void **)&a->s.slot, rows * 4},
        {(void **)&a->s.offsets, ((size_t)c->n_experts + 1) * 4},
        {&a->s.x, rows * dim * ab}, {&a->s.y, rows * dim * ab},
        {&a->s.gate_up, rows * 2 * ffn * ab}, {&a->s.hidden, rows * ffn * ab},
        {&a->logits, t * c->n_experts * ab},
        {&a->shared_gate_up, t * 2 * sh * ab}, {&a->shared_hidden, t * sh * ab},
        {&a->shared_out, t * dim * ab}, {&a->gate_logit, t * ab},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
        if (!(*bufs[i].p = be->alloc(be, bufs[i].bytes)))
            return be->sync(be, err) ? -1 : tram_fail(err, "out of memory for the experts' activations");
    return 0;
}

void tram_moe_acts_free(tram_backend *be, tram_moe_acts *a)
{
    void *bufs[] = {a->s.expert, a->s.weight, a->s.order, a->s.slot, a->s.offsets, a->s.x, a->s.y,
                    a->s.gate_up, a->s.hidden, a->logits, a->shared_gate_up, a->shared_hidden,
                    a->shared_out, a->gate_logit};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
        be->free(be, bufs[i]);
    *a = (tram_moe_acts){0};
}

/* Qwen2-MoE: out += sigmoid(shared_gate · x) * shared_expert(x).  Each rank
 * holds a slice of the shared FFN and the whole gate: the gate scales every
 * rank's partial sum alike, so the all-reduce adds up the gated whole. */
static void shared_expert(tram_backend *be, const tram_moe_weights *w, const tram_moe_acts *a, void *out,
                          const void *x, int n)
{
    if (!w->shared_gate_up.data)
        return;
    be->matmul(be, a->shared_gate_up, x, &w->shared_gate_up, n);
    be->silu_mul(be, a->shared_hidden, a->shared_gate_up, n, w->shared_down.cols);
    be->matmul(be, a->shared_out, a->shared_hidden, &w->shared_down, n);
    be->matmul(be, a->gate_logit, x, &w->shared_gate, n);
    be->add_gated(be, out, a->shared_out, a->gate_logit, n, w->shared_down.rows);
}

void tram_moe_forward(tram_backend *be, const tram_moe_weights *w, const tram_moe_acts *a, void *out,
                      const void *x, int n)
{
    be->matmul(be, a->logits, x, &w->router, n);
    be->moe(be, out, x, a->logits, &w->layer, &a->s, n);
    shared_expert(be, w, a, out, x, n);
}
