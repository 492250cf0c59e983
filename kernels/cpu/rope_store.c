/* rope_store.c — the fused q/k/v product made ready for attention, as the
 * composition of the three ops it stands for (split_qkv, rope, kv_store):
 * the reference kernels/cuda/rope_store.cu's variants are checked against. */
#include "kernels/cpu/cpu_impl.h"

void cpu_rope_store(tram_backend *be, void *q, void *k, void *v, void *k_cache, void *v_cache, const void *qkv,
                    const int32_t *positions, const int32_t *slot_mapping, int n, const tram_attn_shape *s,
                    const float *inv_freq, tram_rope_style style)
{
    int qd = s->n_heads * s->head_dim, kd = s->n_kv_heads * s->head_dim;
    cpu_split_qkv(be, q, k, v, qkv, n, qd, kd);
    cpu_rope(be, q, k, positions, n, s, inv_freq, style);
    cpu_kv_store(be, k_cache, v_cache, k, v, slot_mapping, n, s);
}
