/* moe.h — the mixture-of-experts FFN of Mixtral and Qwen2-MoE on a backend:
 * a router, routed experts (divided among tensor-parallel ranks: expert
 * parallelism), and Qwen2-MoE's shared expert with its sigmoid gate.
 * models/llama.c loads the weights and calls tram_moe_forward in place of
 * the dense FFN; the backend's moe op does the routing and grouped GEMMs. */
#ifndef TRAM_MOE_H
#define TRAM_MOE_H

#include "kernels/backend.h"
#include "kernels/base.h"
#include "models/model.h"

typedef struct {
    tram_weight router;             /* ffn_gate_inp: (n_experts, dim) */
    tram_weight *gate_up, *down;    /* [layer.count] the experts this rank holds */
    tram_moe_layer layer;           /* routing parameters; points into gate_up and down */
    /* Qwen2-MoE's shared expert (data NULL when the model has none): every
     * token's FFN of width shared_ffn_dim (this rank's slice of it), times
     * sigmoid(shared_gate · x). */
    tram_weight shared_gate_up, shared_down, shared_gate;
} tram_moe_weights;

/* Activations for up to max_tokens tokens, allocated once. */
typedef struct {
    tram_moe_scratch s;
    void *logits;                     /* [max_tokens][n_experts] router logits */
    void *shared_gate_up, *shared_hidden, *shared_out, *gate_logit;  /* the shared expert's */
} tram_moe_acts;

/* Rank `rank` of `world` holds experts [first, first + count): contiguous
 * shares that differ by at most one expert. */
void tram_moe_share(int n_experts, int rank, int world, int *first, int *count);

/* Sets the routing of c and the share of be's rank, and allocates the (empty)
 * expert weight arrays for the loader to fill. */
int tram_moe_weights_init(tram_moe_weights *w, const tram_model_config *c, const tram_backend *be,
                          tram_error *err);
void tram_moe_weights_free(tram_backend *be, tram_moe_weights *w);

int tram_moe_acts_alloc(tram_backend *be, const tram_model_config *c, int max_tokens, tram_moe_acts *a,
                        tram_error *err);
void tram_moe_acts_free(tram_backend *be, tram_moe_acts *a);

/* out[n, dim] = this rank's part of the layer's MoE FFN of x[n, dim] (its
 * routed experts, its slice of the shared expert); the caller all-reduces. */
void tram_moe_forward(tram_backend *be, const tram_moe_weights *w, const tram_moe_acts *a, void *out,
                      const void *x, int n);

#endif
