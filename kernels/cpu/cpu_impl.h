/* cpu_impl.h — the CPU backend's private state, shared by its .c files
 * (backend.c: the op table, memory and life cycle; ops.c: element-wise ops;
 * attention.c; gemm.c: f32 matmul; int8.c; fp8.c; gemm_blocks.c; moe.c; lora.c), as
 * kernels/cuda/cuda_impl.cuh is CUDA's.  The helpers every file uses are
 * inline here, so that no file calls back into backend.c. */
#ifndef TRAM_CPU_IMPL_H
#define TRAM_CPU_IMPL_H

#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/cpu/features.h"
#include "kernels/cpu/gemm_blocks.h"
#include "kernels/cpu/pool.h"
#include "kernels/int8_format.h"

/* The cosines and sines RoPE took for its last call's positions: every
 * layer of a step rotates the same positions by the same frequencies, so
 * the first layer's serve the others (ops.c). */
typedef struct {
    float *table;          /* [n][half] cosines, then [n][half] sines */
    int32_t *positions;    /* [n] the positions they are of */
    float *inv_freq;       /* [half] the frequencies they are of */
    size_t table_cap, positions_cap, inv_freq_cap; /* bytes */
    int n, half;           /* 0: none yet */
} cpu_rope_angles;

typedef struct {
    int threads;
    tram_error err;
    int failed;
    tram_cpu_kernel i8_kernel; /* the best this CPU runs */
    int8_t *xq;                /* activations quantized for int8 matmuls, grown to the largest */
    float *xs;                 /* their per-row scales */
    size_t xq_cap, xs_cap;     /* bytes */
    tram_cpu_kernel q_kernel;  /* the best this CPU runs, for GGUF block weights */
    tram_q8_block *xb;         /* activations quantized for block matmuls, grown to the largest */
    size_t xb_cap;             /* bytes */
    tram_cpu_group *group;     /* tensor-parallel ranks (allreduce.c); NULL alone */
    const float *fp8_lut;      /* E4M3 code -> value, for an fp8 KV cache (tram_fp8_decode_table) */
    tram_cpu_kernel kv_kernel; /* the best this CPU runs, for a quantized KV cache (kv_dequant.h) */
    tram_cpu_kernel attn_kernel; /* the best this CPU runs, for attention's arithmetic (attn_chunk.h) */
    tram_cpu_kernel vexp_kernel; /* the best this CPU runs, for SiLU·mul's exponentials (vexp.h) */
    cpu_rope_angles rope;      /* RoPE's angles of the last call's positions */
    float *att_parts;          /* a decode step's partial attention results (attention.c), grown to the largest */
    size_t att_parts_cap;      /* bytes */
    tram_cpu_kernel s24_kernel; /* the best this CPU runs, for 2:4 sparse weights (sparse24.h) */
    float *s24_xt;             /* a 2:4 product's tokens transposed, grown to the largest */
    size_t s24_xt_cap;         /* bytes */
    tram_cpu_kernel fp8_kernel; /* the best this CPU runs, for FP8 weights (cpu_fp8.h) */
    float *fp8_x, *fp8_xs;     /* an FP8 product's activations as E4M3 values, and their scales */
    size_t fp8_x_cap, fp8_xs_cap; /* bytes */
    tram_cpu_kernel s24i8_kernel; /* the best this CPU runs, for 2:4 sparse int8 weights (sparse24_int8.h) */
    tram_cpu_pool *pool;       /* `threads` threads, the caller among them (pool.h) */
} cpu_state;

static inline cpu_state *cpu_of(tram_backend *be) { return be->impl; }

/* Row-parallel element-wise ops use the pool only from this many token
 * rows: below it waking a worker (a futex round trip, more when the cores
 * are shared) costs more than the op itself. */
#define PAR_MIN_ROWS 8

/* fn over token rows [0, n): chunks of rows on the pool (about 8 per
 * thread, so a late thread's share is taken over) from PAR_MIN_ROWS rows,
 * else on the caller. */
static inline void cpu_rows(tram_backend *be, int n, tram_pool_fn fn, void *ctx)
{
    cpu_state *s = be->impl;
    tram_cpu_pool_run(n >= PAR_MIN_ROWS ? s->pool : NULL, n, TRAM_MAX(1, n / (8 * s->threads)), fn, ctx);
}

/* Records the first failure; sync() reports it. */
static inline void cpu_fail(tram_backend *be, const char *msg)
{
    cpu_state *s = cpu_of(be);
    if (!s->failed)
        tram_fail(&s->err, "cpu backend: %s", msg);
    s->failed = 1;
}

/* 64-byte alignment keeps AVX-512 loads on one cache line; large buffers
 * (weights, the KV cache) on huge pages (tram_alloc_stream). */
static inline void *cpu_alloc(tram_backend *be, size_t bytes)
{
    void *p = tram_alloc_stream(bytes, NULL);
    if (!p)
        cpu_fail(be, "out of memory");
    return p;
}

/* Grows a scratch buffer to at least `bytes` (contents are not kept). */
static inline int cpu_reserve(tram_backend *be, void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return 0;
    tram_cpu_pool_quiesce(cpu_of(be)->pool); /* no late worker still reads it (pool.h) */
    free(*buf);
    *buf = cpu_alloc(be, bytes);
    *cap = *buf ? bytes : 0;
    return *buf ? 0 : -1;
}

/* A W8A8 op's quantized copy of its output: checked against the row width the
 * op produces, so a mis-sized buffer is an error, not an overrun. */
static inline int qact_check(tram_backend *be, const tram_qact *qa, int cols)
{
    if (qa->cols == cols && qa->kp == tram_qact_stride(cols))
        return 0;
    cpu_fail(be, "quantized activations of the wrong width for this op");
    return -1;
}

/* Row i quantized for an int8 matmul right after it was computed, while it is
 * still in cache; nothing without qa. */
static inline void qact_row(const tram_qact *qa, int i, const float *row)
{
    if (qa)
        qa->scales[i] = tram_i8_quantize(row, qa->cols, qa->kp, qa->q + (size_t)i * qa->kp);
}

/* By file: the ops that tram_backend_cpu_create installs in the table, and
 * what gemm.c and backend.c hand int8 and block weights to. */

/* ops.c */
void cpu_embed(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n);
void cpu_rmsnorm(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps);
void cpu_rmsnorm_q(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w, int n,
                   float eps);
void cpu_add_rmsnorm(tram_backend *be, void *residual, void *out, const void *delta, const tram_weight *w,
                     int n, float eps);
void cpu_add_rmsnorm_q(tram_backend *be, void *residual, void *out, const tram_qact *qa, const void *delta,
                       const tram_weight *w, int n, float eps);
void cpu_add_bias(tram_backend *be, void *y, const tram_weight *bias, int n);
void cpu_rope(tram_backend *be, void *q, void *k, const int32_t *positions, int n, const tram_attn_shape *s,
              const float *inv_freq, tram_rope_style style);
void cpu_kv_store(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                  const int32_t *slot_mapping, int n, const tram_attn_shape *s);
void cpu_silu_mul(tram_backend *be, void *out, const void *gate_up, int n, int ffn);
void cpu_silu_mul_q(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn);
void cpu_head_rmsnorm(tram_backend *be, void *qkv, const tram_weight *q_norm, const tram_weight *k_norm, int n,
                      const tram_attn_shape *s, float eps);
void cpu_split_qkv(tram_backend *be, void *q, void *k, void *v, const void *qkv, int n, int qd, int kd);
void cpu_gather_rows(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows, int dim);
void cpu_to_host_f32(tram_backend *be, float *dst, const void *src, size_t n);

/* rope_store.c */
void cpu_rope_store(tram_backend *be, void *q, void *k, void *v, void *k_cache, void *v_cache, const void *qkv,
                    const int32_t *positions, const int32_t *slot_mapping, int n, const tram_attn_shape *s,
                    const float *inv_freq, tram_rope_style style);

/* attention.c */
void cpu_attention(tram_backend *be, void *out, const void *q, const void *k_cache, const void *v_cache,
                   const tram_batch *b, const tram_attn_shape *s);

/* gemm.c: every matmul, f32 weights itself, int8, FP8 and block weights by
 * cpu_int8_matmul, cpu_fp8_matmul and cpu_blocks_matmul */
void cpu_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n);
/* the experts' grouped products (moe.c): group e is rows [off[e], off[e+1]) of x and y */
void cpu_matmul_grouped(tram_backend *be, float *y, const float *x, const tram_weight *w, const int32_t *off,
                        int count);

/* int8.c: int8 weights (cpu_upload_weight makes them) and their products */
void cpu_int8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols);
/* sparse24.c: TRAM_W_S24 from f32 rows (fails on a group of 4 with more than 2 nonzeros), and its product */
void cpu_s24_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols);
void cpu_s24_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n);
/* one group of 4's kept positions as sparse24.c packs them, i0 | i1 << 2; -1 past 2 nonzeros */
int cpu_s24_group_nibble(const float *g);
/* sparse24_int8.c: TRAM_W_S24_INT8 from f32 rows (the product: int8.c's W8A8 path hands it on) */
void cpu_s24i8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols);
void cpu_int8_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n);
/* fp8.c: TRAM_W_FP8 from f32 rows (quantized per row) or from E4M3 codes and
 * row scales as a file stores them, and its product */
void cpu_fp8_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols);
void cpu_fp8_upload_codes(tram_backend *be, tram_weight *w, const uint8_t *codes, const float *scales, int rows,
                          int cols);
void cpu_fp8_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n);
void cpu_matmul_q(tram_backend *be, void *y, const tram_qact *qa, const tram_weight *w, int n);

/* moe.c: the mixture-of-experts FFN and the shared expert's gated add */
void cpu_moe_ffn(tram_backend *be, void *out, const void *x, const void *logits, const tram_moe_layer *L,
                 const tram_moe_scratch *s, int n);
void cpu_add_gated(tram_backend *be, void *y, const void *x, const void *gate, int n, int dim);

/* lora.c: LoRA's grouped shrink and expand */
void cpu_lora(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_site *site,
              const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s);

/* allreduce.c: the sum across a group's ranks, in rank order; -1 when the
 * ranks disagree on n */
#define TRAM_CPU_MAX_RANKS 64
int cpu_group_size(const tram_cpu_group *g);
int cpu_group_all_reduce(tram_cpu_group *g, int rank, float *x, size_t n);

/* gemm_blocks.c: GGUF block weights and their products */
void cpu_upload_weight_blocks(tram_backend *be, tram_weight *w, const void *blocks, int rows, int cols,
                              tram_wtype type);
void cpu_blocks_matmul(tram_backend *be, float *y, const float *x, const tram_weight *w, int n);

#endif
