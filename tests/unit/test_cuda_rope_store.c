/* rope_store's variant 2 (kernels/cuda/rope_store.cu), host side: the pair
 * arithmetic the kernel uses (tram_cuda_rope_pair_of), applied on the CPU
 * to a fused q/k/v row, must give what the reference composition gives
 * (kernels/cpu/rope_store.c: split, rotate, store) — q and the K and V
 * caches equal, every destination written once, nothing else touched. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/launch_plan.h"

/* The kernel's work for token t, on host arrays (f32 instead of bf16). */
static void fused_token(const tram_attn_shape *s, int neox, const float *row, float pos, const float *inv_freq,
                        int64_t slot, float *q_row, float *k_cache, float *v_cache, int *writes_q, int *writes_k)
{
    int half = s->head_dim / 2, kd = s->n_kv_heads * s->head_dim, qd = s->n_heads * s->head_dim;
    int pairs = (s->n_heads + (slot >= 0 ? s->n_kv_heads : 0)) * half;
    for (int idx = 0; idx < pairs; idx++) {
        tram_cuda_rope_pair r = tram_cuda_rope_pair_of(idx, s->n_heads, s->n_kv_heads, s->head_dim, neox, slot);
        float *dst = r.to_cache ? k_cache : q_row;
        int *w = r.to_cache ? writes_k : writes_q;
        float sn = sinf(pos * inv_freq[r.freq]), cs = cosf(pos * inv_freq[r.freq]);
        float x0 = row[r.src_a], x1 = row[r.src_b];
        dst[r.dst_a] = x0 * cs - x1 * sn;
        dst[r.dst_b] = x0 * sn + x1 * cs;
        w[r.dst_a]++, w[r.dst_b]++;
    }
    if (slot >= 0)
        memcpy(v_cache + slot * kd, row + qd + kd, kd * sizeof(float));
}

static void check_shape(tram_attn_shape s, tram_rope_style style)
{
    enum { N = 5, SLOTS = 12 };
    tram_backend *be;
    tram_error err = {{0}};
    cr_assert_eq(tram_backend_cpu_create(&be, 1, &err), 0, "%s", err.msg);
    int qd = s.n_heads * s.head_dim, kd = s.n_kv_heads * s.head_dim, w = qd + 2 * kd;
    float *qkv = malloc(sizeof(float) * N * w), *inv = malloc(sizeof(float) * s.head_dim / 2);
    float *q = calloc((size_t)N * qd, 4), *k = calloc((size_t)N * kd, 4), *v = calloc((size_t)N * kd, 4);
    float *kc = calloc((size_t)SLOTS * kd, 4), *vc = calloc((size_t)SLOTS * kd, 4);
    float *q2 = calloc((size_t)N * qd, 4), *kc2 = calloc((size_t)SLOTS * kd, 4), *vc2 = calloc((size_t)SLOTS * kd, 4);
    int *wq = calloc((size_t)N * qd, sizeof(int)), *wk = calloc((size_t)SLOTS * kd, sizeof(int));
    int32_t pos[N] = {0, 7, 100, 3, 4095}, slots[N] = {3, 0, 11, 6, 9};
    for (int i = 0; i < N * w; i++)
        qkv[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < s.head_dim / 2; i++)
        inv[i] = powf(10000.0f, -2.0f * i / s.head_dim);
    be->rope_store(be, q, k, v, kc, vc, qkv, pos, slots, N, &s, inv, style);
    cr_assert_eq(be->sync(be, &err), 0, "%s", err.msg);
    for (int t = 0; t < N; t++)
        fused_token(&s, style == TRAM_ROPE_NEOX, qkv + (size_t)t * w, (float)pos[t], inv, slots[t], q2 + (size_t)t * qd,
                    kc2, vc2, wq + (size_t)t * qd, wk);
    for (int i = 0; i < N * qd; i++) {
        cr_assert_float_eq(q[i], q2[i], 1e-5, "q[%d]: %g, fused %g", i, q[i], q2[i]);
        cr_assert_eq(wq[i], 1, "q[%d] written %d times", i, wq[i]);
    }
    for (int i = 0; i < SLOTS * kd; i++) {
        int used = 0;
        for (int t = 0; t < N; t++)
            used |= slots[t] == i / kd;
        cr_assert_float_eq(kc[i], kc2[i], 1e-5, "k cache[%d]: %g, fused %g", i, kc[i], kc2[i]);
        cr_assert_float_eq(vc[i], vc2[i], 0, "v cache[%d]", i);
        cr_assert_eq(wk[i], used, "k cache[%d] written %d times", i, wk[i]);
    }
    free(qkv), free(inv), free(q), free(k), free(v), free(kc), free(vc), free(q2), free(kc2), free(vc2);
    free(wq), free(wk);
    be->destroy(be);
}

Test(cuda_rope_store, the_fused_pairs_match_split_rope_store)
{
    static const tram_attn_shape shapes[] = {{9, 3, 64, 16, 0, TRAM_KV_AUTO}, {32, 8, 128, 16, 0, TRAM_KV_AUTO}, {4, 4, 6, 16, 0, TRAM_KV_AUTO}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        for (int style = 0; style < 2; style++)
            check_shape(shapes[i], (tram_rope_style)style);
}

Test(cuda_rope_store, a_padding_row_writes_only_q)
{
    int seen[2 * 3 * 8] = {0};
    for (int idx = 0; idx < 2 * 4; idx++) {  /* the q pairs only: 2 heads of head dim 8 */
        tram_cuda_rope_pair r = tram_cuda_rope_pair_of(idx, 2, 1, 8, 1, -1);
        cr_assert_not(r.to_cache);
        seen[r.dst_a]++, seen[r.dst_b]++;
    }
    for (int i = 0; i < 16; i++)
        cr_assert_eq(seen[i], 1, "q element %d", i);
}
