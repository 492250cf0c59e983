/* lora_targets.c — the projections an adapter may target, by their PEFT
 * and GGUF names, and their widths in a base model (see lora.h). */
#include <stdio.h>

#include "models/lora.h"

static const char *const target_names[TRAM_LORA_N_TARGETS] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                              "gate_proj", "up_proj", "down_proj"};
static const char *const base_names[TRAM_LORA_N_TARGETS] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                            "ffn_gate", "ffn_up", "ffn_down"};

const char *tram_lora_target_name(tram_lora_target t) { return target_names[t]; }

void tram_lora_base_name(tram_lora_target t, int layer, char *out, size_t cap)
{
    snprintf(out, cap, "blk.%d.%s.weight", layer, base_names[t]);
}

void tram_lora_target_dims(const tram_model_config *c, tram_lora_target t, int *in, int *out)
{
    int qd = c->n_heads * c->head_dim, kd = c->n_kv_heads * c->head_dim;
    switch (t) {
    case TRAM_LORA_O: *in = qd, *out = c->dim; break;
    case TRAM_LORA_GATE: case TRAM_LORA_UP: *in = c->dim, *out = c->ffn_dim; break;
    case TRAM_LORA_DOWN: *in = c->ffn_dim, *out = c->dim; break;
    default: *in = c->dim, *out = t == TRAM_LORA_Q ? qd : kd; break;
    }
}
