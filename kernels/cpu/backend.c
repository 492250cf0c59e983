/* backend.c — the CPU backend: f32 activations, OpenBLAS GEMMs, tram's own
 * thread pool (pool.h) over tokens, heads and output rows.  It is the reference every other backend is
 * tested against, so each op is the plain math first and fast second.  This
 * file holds its op table, memory, weights and life cycle, as
 * kernels/cuda/backend.cu does for CUDA; the ops live in the files named
 * like CUDA's (ops.c, attention.c, gemm.c, int8.c) and gemm_blocks.c. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/attn_chunk.h"
#include "kernels/cpu/cpu_fp8.h"
#include "kernels/cpu/cpu_impl.h"
#include "kernels/cpu/cpu_int8.h"
#include "kernels/cpu/kv_dequant.h"
#include "kernels/cpu/quota.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cpu/vexp.h"
#include "kernels/cpu/sparse24_int8.h"

/* ---------------------------------------------------------------- memory */

/* Frees wait for late workers of a stealable job, which may still read
 * weights and activations (pool.h). */
static void cpu_free(tram_backend *be, void *ptr)
{
    tram_cpu_pool_quiesce(cpu_of(be)->pool);
    free(ptr);
}

static void cpu_copy(tram_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    memcpy(dst, src, bytes);
}

static void cpu_copy_rows(tram_backend *be, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                          size_t row_bytes, int rows)
{
    (void)be;
    for (int r = 0; r < rows; r++)
        memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, row_bytes);
}

/* ---------------------------------------------------------------- weights */

/* bf16 weights hold each value's nearest bf16 (ties to even); only LoRA's
 * factors use them, and only where that is every value exactly
 * (models/lora_slots.c), to stream half the bytes. */
static void cpu_bf16_upload(tram_backend *be, tram_weight *w, const float *host, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    uint16_t *h = cpu_alloc(be, n * sizeof(uint16_t));
    if (!h)
        return;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &host[i], sizeof(u));
        h[i] = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)(u >> 16 | 0x40) /* NaN stays NaN */
                                                : (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
    }
    *w = (tram_weight){.data = h, .type = TRAM_W_BF16, .rows = rows, .cols = cols};
}

static void cpu_upload_weight(tram_backend *be, tram_weight *w, const float *host, int rows, int cols,
                              tram_wtype type)
{
    memset(w, 0, sizeof(*w));
    if (type == TRAM_W_BF16) {
        cpu_bf16_upload(be, w, host, rows, cols);
        return;
    }
    if (type == TRAM_W_INT8 && rows > 1) {
        cpu_int8_upload(be, w, host, rows, cols);
        return;
    }
    if (type == TRAM_W_S24 && rows > 1) {
        cpu_s24_upload(be, w, host, rows, cols);
        return;
    }
    if (type == TRAM_W_FP8 && rows > 1) {
        cpu_fp8_upload(be, w, host, rows, cols);
        return;
    }
    if (type == TRAM_W_S24_INT8 && rows > 1) {
        cpu_s24i8_upload(be, w, host, rows, cols);
        return;
    }
    if (type != TRAM_W_F32 && type != TRAM_W_INT8 && type != TRAM_W_S24 && type != TRAM_W_FP8 &&
        type != TRAM_W_S24_INT8) {
        cpu_fail(be, "only f32, bf16, int8, FP8 and 2:4 sparse (f32 or int8) weights are supported");
        return;
    }
    size_t bytes = (size_t)rows * cols * sizeof(float);
    w->data = cpu_alloc(be, bytes);
    if (!w->data)
        return;
    memcpy(w->data, host, bytes);
    w->type = TRAM_W_F32;
    w->rows = rows;
    w->cols = cols;
}

static void cpu_free_weight(tram_backend *be, tram_weight *w)
{
    tram_cpu_pool_quiesce(cpu_of(be)->pool);
    free(w->data);
    free(w->scales);
    memset(w, 0, sizeof(*w));
}

/* Both 2:4 kinds run sparse here (sparse24.c, sparse24_int8.c), with
 * scratch that grows with the product, so there is nothing to size. */
static int cpu_sparse24_prepare(tram_backend *be, tram_wtype t, int max_rows, tram_error *why)
{
    (void)be, (void)max_rows;
    if (t == TRAM_W_S24 || t == TRAM_W_S24_INT8)
        return 1;
    tram_fail(why, "type %d is not a 2:4 kind", t);
    return 0;
}

/* ---------------------------------------------------------------- tensor parallel */

static void cpu_all_reduce(tram_backend *be, void *x, size_t n)
{
    cpu_state *s = cpu_of(be);
    if (s->group && cpu_group_all_reduce(s->group, be->rank, x, n))
        cpu_fail(be, "all_reduce: the ranks gave buffers of different sizes");
}

/* ---------------------------------------------------------------- life cycle */

static int cpu_sync(tram_backend *be, tram_error *err)
{
    cpu_state *s = cpu_of(be);
    if (!s->failed)
        return 0;
    s->failed = 0;
    return tram_fail(err, "%s", s->err.msg);
}

static void cpu_host_run(tram_backend *be, int items, int chunk, tram_pool_fn fn, void *ctx)
{
    tram_cpu_pool_run(cpu_of(be)->pool, items, chunk, fn, ctx);
}

static int cpu_host_threads(tram_backend *be) { return tram_cpu_pool_threads(cpu_of(be)->pool); }

static void cpu_destroy(tram_backend *be)
{
    if (!be)
        return;
    cpu_state *s = cpu_of(be);
    tram_cpu_pool_destroy(s->pool); /* first: a late worker may still read the scratch */
    TRAM_FREE_ALL(s->xq, s->xs, s->xb, s->s24_xt, s->fp8_x, s->fp8_xs, s->att_parts, s->rope.table, s->rope.positions,
                  s->rope.inv_freq, s, be);
}

int tram_backend_cpu_create(tram_backend **out, int num_threads, tram_error *err)
{
    return tram_backend_cpu_create_rank(out, num_threads, NULL, 0, err);
}

int tram_backend_cpu_create_rank(tram_backend **out, int num_threads, tram_cpu_group *g, int rank,
                                 tram_error *err)
{
    int world = g ? cpu_group_size(g) : 1;
    if (rank < 0 || rank >= world)
        return tram_fail(err, "rank %d outside a CPU group of %d", rank, world);
    tram_backend *be = tram_calloc(1, sizeof(*be), err);
    cpu_state *s = be ? tram_calloc(1, sizeof(*s), err) : NULL;
    if (!s) {
        free(be);
        return -1;
    }
    s->threads = num_threads > 0 ? num_threads : tram_cpu_usable();
    if (tram_cpu_pool_create(&s->pool, s->threads, err)) {
        free(s);
        free(be);
        return -1;
    }
    s->i8_kernel = tram_i8_kernel_best();
    s->q_kernel = tram_q_kernel_best();
    s->kv_kernel = tram_kv_kernel_best();
    s->attn_kernel = tram_attn_kernel_best();
    s->vexp_kernel = tram_vexp_kernel_best();
    s->s24_kernel = tram_s24_kernel_best();
    s->fp8_kernel = tram_fp8_kernel_best();
    s->s24i8_kernel = tram_s24i8_kernel_best();
    s->group = g;
    s->fp8_lut = tram_fp8_decode_table();
    openblas_set_num_threads(1); /* we thread around it: see cpu_matmul */
    *be = (tram_backend){
        .name = "cpu", .act_bytes = sizeof(float), .rank = rank, .world_size = world, .impl = s,
        .alloc = cpu_alloc, .free = cpu_free, .upload = cpu_copy, .download = cpu_copy,
        .upload_rows = cpu_copy_rows, .alloc_host = cpu_alloc, .free_host = cpu_free,
        .upload_weight = cpu_upload_weight, .free_weight = cpu_free_weight,
        .upload_weight_blocks = cpu_upload_weight_blocks, .upload_weight_fp8 = cpu_fp8_upload_codes,
        .sparse24_prepare = cpu_sparse24_prepare,
        .embed = cpu_embed, .rmsnorm = cpu_rmsnorm, .add_rmsnorm = cpu_add_rmsnorm,
        .matmul = cpu_matmul, .add_bias = cpu_add_bias, .rope = cpu_rope, .kv_store = cpu_kv_store,
        .attention = cpu_attention, .silu_mul = cpu_silu_mul, .rmsnorm_q = cpu_rmsnorm_q,
        .add_rmsnorm_q = cpu_add_rmsnorm_q, .silu_mul_q = cpu_silu_mul_q, .matmul_q = cpu_matmul_q,
        .rope_store = cpu_rope_store, .head_rmsnorm = cpu_head_rmsnorm, .split_qkv = cpu_split_qkv, .gather_rows = cpu_gather_rows,
        .moe = cpu_moe_ffn, .add_gated = cpu_add_gated, .lora = cpu_lora,
        .to_host_f32 = cpu_to_host_f32, .all_reduce = cpu_all_reduce, .host_run = cpu_host_run,
        .host_threads = cpu_host_threads, .sync = cpu_sync, .destroy = cpu_destroy,
    };
    *out = be;
    return 0;
}
