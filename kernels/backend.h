/* backend.h — the op interface every device backend implements.
 *
 * models/llama.c writes the transformer once as calls on this table; kernels/cpu
 * (the reference, f32) and kernels/cuda (bf16) implement it.  All buffers
 * passed to ops live in the backend's memory: activations are opaque (f32 on
 * the CPU, bf16 on CUDA; act_bytes says which size), weights are tram_weight,
 * and the int32 arrays (ids, positions, slot mapping, and the arrays of the
 * tram_batch given to attention) are backend copies made with upload().
 *
 * Errors: ops return nothing; a backend records its first failure (a CUDA
 * error, a bad shape) and reports it from sync(), so the forward pass reads as
 * plain math and still never loses an error. */
#ifndef TRAM_BACKEND_H
#define TRAM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/batch.h"
#include "kernels/base.h"
#include "kernels/dummy_values.h"
#include "kernels/kv_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TRAM_W_F32 = 0,   /* CPU reference format */
    TRAM_W_BF16 = 1,  /* CUDA; on the CPU, LoRA's factors that are bf16 exactly */
    TRAM_W_F16 = 2,
    TRAM_W_INT8 = 3,  /* symmetric, per output row: w = q * scales[row] */
    /* GGUF blocks of 32 weights along a row, as the file stores them (CPU):
     * rows * cols/32 blocks, row-major; see kernels/cpu/gemm_blocks.h. */
    TRAM_W_Q8_0 = 4,  /* f16 d, int8 q[32]:            w = q * d           */
    TRAM_W_Q4_0 = 5,  /* f16 d, 16 bytes of nibbles:   w = (q - 8) * d     */
    TRAM_W_Q4_1 = 6,  /* f16 d, f16 m, nibbles:        w = q * d + m       */
    /* 2:4 sparse (`tram prune`): at most 2 nonzeros in every 4 consecutive
     * weights of a row.  CPU: f32, stored as the 2 values and their 2-bit
     * positions (kernels/cpu/sparse24.c); cols a multiple of 8.  CUDA: bf16
     * compressed by cuSPARSELt (kernels/cuda/sparse24.cu); rows and cols
     * multiples of 16.  Only after sparse24_prepare said yes. */
    TRAM_W_S24 = 7,
    /* OCP E4M3 codes, one f32 scale per output row: w = e4m3(q) * scales[row]
     * (kernels/fp8_format.h; CUDA through cuBLASLt's FP8 path,
     * kernels/cuda/int8.cu; the CPU emulates it, kernels/cpu/fp8.c). */
    TRAM_W_FP8 = 8,
    /* 2:4 sparse int8 (`tram quantize` over a pruned file): one scale per
     * output row as TRAM_W_INT8, fed the same per-token int8 activations.
     * CPU: TRAM_W_S24's layout with int8 values (kernels/cpu/sparse24_int8.c).
     * CUDA: int8 compressed by cuSPARSELt, int32 sums (kernels/cuda/
     * sparse24.cu); rows and cols multiples of 32.  Only after
     * sparse24_prepare said yes. */
    TRAM_W_S24_INT8 = 9,
} tram_wtype;

/* Whether a weight of type t multiplies int8 activations (a tram_qact). */
static inline int tram_wtype_takes_qact(tram_wtype t) { return t == TRAM_W_INT8 || t == TRAM_W_S24_INT8; }

/* A weight matrix: y[n, rows] = x[n, cols] · Wᵀ.  Vectors (norm weights,
 * biases) are weights with rows = 1 and are always stored as f32. */
typedef struct {
    tram_wtype type;
    int rows, cols;
    void *data;        /* backend memory, row-major [rows][cols]        */
    float *scales;     /* backend memory, [rows] for TRAM_W_INT8, TRAM_W_S24_INT8 and TRAM_W_FP8, else NULL */
    float act_max;     /* TRAM_W_FP8: a token's max|x| is clamped to this before its scale is
                          taken (FBGEMM's activation_scale_ub); 0: no clamp */
} tram_weight;

typedef enum {
    TRAM_ROPE_INTERLEAVED = 0,  /* pairs (2i, 2i+1): GGUF llama-arch files   */
    TRAM_ROPE_NEOX = 1,         /* pairs (i, i + d/2): HF checkpoints, qwen2 */
} tram_rope_style;

typedef struct {
    int n_heads, n_kv_heads, head_dim;
    int block_size;          /* tokens per KV block */
    float scale;             /* 1/sqrt(head_dim) */
    tram_kv_dtype kv_dtype;  /* how the cache stores K and V (kernels/kv_format.h) */
} tram_attn_shape;

/* Activations quantized for W8A8 matmuls (TRAM_W_INT8 weights): int8
 * symmetric per token row, x[i][j] ≈ q[i][j] * scales[i], with q in [-127,
 * 127] and scales[i] = max_j |x[i][j]| / 127.  Rows are kp = tram_qact_stride
 * (cols) bytes apart, zero after cols.  Both arrays are backend memory
 * (alloc) for as many rows as the ops are given.  The ops that produce an int8
 * matmul's input write it (rmsnorm_q, add_rmsnorm_q, silu_mul_q) while the row
 * is still in registers or cache, instead of the matmul reading it again. */
typedef struct {
    int8_t *q;        /* [rows][kp] */
    float *scales;    /* [rows] */
    int cols, kp;
} tram_qact;

static inline int tram_qact_stride(int cols) { return (cols + 3) & ~3; }

/* One mixture-of-experts layer's routed experts as one backend holds them:
 * experts [first, first + count) of n_experts (expert parallelism divides
 * them among ranks), each an FFN down(silu(gate(x)) * up(x)) of width ffn. */
typedef struct {
    int n_experts, top_k;     /* softmax over n_experts router logits, then the top_k largest */
    int norm_topk;            /* the top_k probabilities renormalized to sum 1 (Mixtral) */
    int first, count;
    int ffn;
    const tram_weight *gate_up;  /* [count]: (2*ffn, dim), gate rows then up rows */
    const tram_weight *down;     /* [count]: (dim, ffn) */
} tram_moe_layer;

/* Backend memory the moe op works in, for max_rows = max_tokens * top_k
 * routed rows, allocated once by the model.  After the op, expert[] and
 * weight[] hold each (token, choice)'s expert and routing weight. */
typedef struct {
    int max_rows, dim;
    int32_t *expert;          /* [max_rows] expert of row token * top_k + choice */
    float *weight;            /* [max_rows] its routing weight */
    int32_t *order;           /* [max_rows] the rows held here, grouped by expert, tokens ascending */
    int32_t *slot;            /* [max_rows] each row's place in order, -1 when held elsewhere */
    int32_t *offsets;         /* [n_experts + 1] each held expert's first place in order */
    void *x, *y;              /* [max_rows][dim] gathered inputs, expert outputs */
    void *gate_up, *hidden;   /* [max_rows][2*ffn], [max_rows][ffn] */
} tram_moe_scratch;

/* LoRA's grouped shrink and expand (Punica's SGMV): the rows of a step that
 * use one adapter form a group, and each row of a group gets
 * y[row] += scale · (x[row] · Aᵀ) · Bᵀ, with A (rank, in) and B (out, rank)
 * that adapter's factors of the projection, B held transposed: Bᵀ (rank,
 * out), so that the expand reads a contiguous row of it per rank step.
 * The scratch's order lists
 * every group's rows, group after group; a group is its run of order.
 *
 * A site is the projections that read one input and write adjacent
 * columns of one output: q|k|v, gate|up, or o and down alone.  One call
 * serves a whole site (its parts), so that the parts of a row share one
 * pass over the groups (on the CPU, one pool job instead of one a part). */
#define TRAM_LORA_MAX_PARTS 3

typedef struct {
    int n_parts;
    int in;                          /* x's width, every part's */
    int out[TRAM_LORA_MAX_PARTS];    /* each part's columns of y, part after part */
} tram_lora_site;

typedef struct {
    /* each part's A and Bᵀ, f32 or bf16 on the CPU, the activation type on
     * CUDA; both NULL where the adapter leaves the part alone */
    const tram_weight *a[TRAM_LORA_MAX_PARTS], *bt[TRAM_LORA_MAX_PARTS];
    float scale;
    int first, count;          /* its rows: order[first, first + count) */
} tram_lora_group;

/* Backend memory the op works in, allocated once by the model for max_rows
 * rows of inputs up to max_in wide: order (uploaded each step), the shrunk
 * rows t [max_rows][TRAM_LORA_MAX_PARTS * max_rank], the expanded ys
 * [max_rows][max_out], max_out the widest site's columns. */
typedef struct {
    int max_rows, max_in, max_rank, max_out;
    int32_t *order;
    void *t, *ys;
} tram_lora_scratch;

typedef struct tram_backend tram_backend;

struct tram_backend {
    const char *name;        /* "cpu", "cuda" */
    int act_bytes;           /* bytes per activation element */
    int rank, world_size;    /* tensor-parallel position; 0, 1 when not sharded */
    void *impl;

    /* memory */
    void *(*alloc)(tram_backend *be, size_t bytes);          /* NULL + error on failure */
    void (*free)(tram_backend *be, void *ptr);
    void (*upload)(tram_backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(tram_backend *be, void *dst, const void *src, size_t bytes);
    /* rows of row_bytes each, src_pitch apart in host memory, dst_pitch apart
     * in backend memory: one stream-ordered copy (a step's block table rows) */
    void (*upload_rows)(tram_backend *be, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                        size_t row_bytes, int rows);
    /* Host memory that uploads read asynchronously, without staging (pinned
     * on CUDA): the caller must not rewrite it before the next sync. */
    void *(*alloc_host)(tram_backend *be, size_t bytes);  /* NULL + error on failure */
    void (*free_host)(tram_backend *be, void *ptr);
    /* Creates w from host f32 rows*cols values in the requested format (the
     * backend may refuse formats it does not run, through sync()). */
    void (*upload_weight)(tram_backend *be, tram_weight *w, const float *host, int rows, int cols,
                          tram_wtype type);
    void (*free_weight)(tram_backend *be, tram_weight *w);
    /* Creates w from host blocks of a GGUF block type (TRAM_W_Q8_0 ...),
     * rows * cols/32 of them; NULL for backends that only take f32. */
    void (*upload_weight_blocks)(tram_backend *be, tram_weight *w, const void *blocks, int rows,
                                 int cols, tram_wtype type);
    /* Creates a TRAM_W_FP8 w from host E4M3 codes [rows][cols] and row
     * scales [rows] as a file stores them, kept as they are (upload_weight
     * would quantize the dequantized values again, to each row's own
     * maximum); a NaN code is refused. */
    void (*upload_weight_fp8)(tram_backend *be, tram_weight *w, const uint8_t *codes, const float *scales, int rows,
                              int cols);
    /* Creates w (bf16 or f32, as upload_weight) from --load-format dummy
     * generators drawn where the weight lives: parts[i] gives counts[i]
     * values, one part after the other (kernels/dummy_values.h, the values
     * the host would read); NULL for backends that take the host's values. */
    void (*upload_weight_dummy)(tram_backend *be, tram_weight *w, const tram_dummy_stream *parts,
                                const int64_t *counts, int n_parts, int rows, int cols, tram_wtype type);
    /* 2:4 sparse matrices (models/sparsity.h), asked at load before any is
     * uploaded: 1 when this backend runs weights of type t (TRAM_W_S24 or
     * TRAM_W_S24_INT8) sparse, for products of at most max_rows rows (what
     * it sizes its buffers for, then and there); 0 with one sentence in why
     * when it runs them dense (the caller uploads the dense type instead). */
    int (*sparse24_prepare)(tram_backend *be, tram_wtype t, int max_rows, tram_error *why);
    /* After sparse24_prepare said yes: 1 when a matrix of rows x cols (this
     * rank's part) can run sparse as type t here; 0 with one sentence in why
     * naming the shape it needs (the caller then runs the kind dense).  NULL:
     * every shape the upload takes. */
    int (*sparse24_fits)(tram_backend *be, tram_wtype t, int rows, int cols, tram_error *why);

    /* ops; n is the number of token rows */
    void (*embed)(tram_backend *be, void *x, const tram_weight *table, const int32_t *ids, int n);
    void (*rmsnorm)(tram_backend *be, void *out, const void *x, const tram_weight *w, int n, float eps);
    /* residual += delta; out = rmsnorm(residual) * w */
    void (*add_rmsnorm)(tram_backend *be, void *residual, void *out, const void *delta,
                        const tram_weight *w, int n, float eps);
    void (*matmul)(tram_backend *be, void *y, const void *x, const tram_weight *w, int n);
    void (*add_bias)(tram_backend *be, void *y, const tram_weight *bias, int n);
    /* Rotates q [n, n_heads*head_dim] and k [n, n_kv_heads*head_dim] in place,
     * using the precomputed inverse frequencies inv_freq[head_dim/2]. */
    void (*rope)(tram_backend *be, void *q, void *k, const int32_t *positions, int n,
                 const tram_attn_shape *s, const float *inv_freq, tram_rope_style style);
    /* k_cache/v_cache: [num_blocks * block_size] slots of tram_kv_slot_bytes
     * each: n_kv_heads * head_dim activations, or codes and scales
     * (s->kv_dtype); a backend refuses the dtypes it does not run. */
    void (*kv_store)(tram_backend *be, void *k_cache, void *v_cache, const void *k, const void *v,
                     const int32_t *slot_mapping, int n, const tram_attn_shape *s);
    /* Causal attention of every token in the batch over its sequence's cached
     * context (positions < its own + 1), read through the block tables. */
    void (*attention)(tram_backend *be, void *out, const void *q, const void *k_cache,
                      const void *v_cache, const tram_batch *b, const tram_attn_shape *s);
    /* out[n, ffn] = silu(gate_up[:, :ffn]) * gate_up[:, ffn:] */
    void (*silu_mul)(tram_backend *be, void *out, const void *gate_up, int n, int ffn);
    /* The three ops above that also write their output quantized into qa
     * (qa->cols = the output's width); out is written as well. */
    void (*rmsnorm_q)(tram_backend *be, void *out, const tram_qact *qa, const void *x, const tram_weight *w,
                      int n, float eps);
    void (*add_rmsnorm_q)(tram_backend *be, void *residual, void *out, const tram_qact *qa, const void *delta,
                          const tram_weight *w, int n, float eps);
    void (*silu_mul_q)(tram_backend *be, void *out, const tram_qact *qa, const void *gate_up, int n, int ffn);
    /* matmul of an int8 w whose input rows are already quantized in qa
     * (qa->cols = w->cols); matmul itself quantizes an int8 w's input first. */
    void (*matmul_q)(tram_backend *be, void *y, const tram_qact *qa, const tram_weight *w, int n);
    /* What attention needs from the fused q/k/v product qkv[n, qd + 2*kd]:
     * q[n, qd] rotated, and k rotated and v written into k_cache/v_cache at
     * slot_mapping (split_qkv, rope and kv_store in one op, so a backend may
     * fuse them).  k and v ([n, kd]) are scratch a backend may pass the rows
     * through; after the op their contents are unspecified. */
    void (*rope_store)(tram_backend *be, void *q, void *k, void *v, void *k_cache, void *v_cache, const void *qkv,
                       const int32_t *positions, const int32_t *slot_mapping, int n, const tram_attn_shape *s,
                       const float *inv_freq, tram_rope_style style);
    /* Qwen3's q/k norms, before rope_store: in the fused q/k/v product
     * qkv[n, qd + 2*kd], each query head's head_dim values are RMS-normalized
     * and scaled by q_norm ([head_dim]), each KV head's k by k_norm; in place. */
    void (*head_rmsnorm)(tram_backend *be, void *qkv, const tram_weight *q_norm, const tram_weight *k_norm, int n,
                         const tram_attn_shape *s, float eps);
    /* Splits the rows of a fused q/k/v product qkv[n, qd + 2*kd] into q[n, qd],
     * k[n, kd] and v[n, kd]. */
    void (*split_qkv)(tram_backend *be, void *q, void *k, void *v, const void *qkv, int n, int qd, int kd);
    /* out[i] = x[rows[i]] for i < n_rows */
    void (*gather_rows)(tram_backend *be, void *out, const void *x, const int32_t *rows, int n_rows,
                        int dim);
    /* Host f32 copy of activations (logits). */
    void (*to_host_f32)(tram_backend *be, float *dst, const void *src, size_t n);
    /* Mixture of experts: out[n, dim] = the sum, over each token's top_k
     * experts that L holds, of its routing weight times the expert's FFN of
     * x (grouped: each expert's rows are gathered and multiplied at once, then
     * added back in ascending expert order, as transformers does); logits are
     * the router's [n, n_experts] (activations).  Experts held elsewhere add
     * nothing: the all_reduce that follows sums the ranks. */
    void (*moe)(tram_backend *be, void *out, const void *x, const void *logits, const tram_moe_layer *L,
                const tram_moe_scratch *s, int n);
    /* y[i] += sigmoid(gate[i]) * x[i] for rows of dim values; gate is [n]
     * (activations, one logit per row): Qwen2-MoE's shared expert. */
    void (*add_gated)(tram_backend *be, void *y, const void *x, const void *gate, int n, int dim);
    /* LoRA on a site's outputs: x [n][site->in] contiguous, y's rows y_stride
     * elements apart with y at the site's first column (of a fused q/k/v or
     * gate/up product); site and groups (host) as tram_lora_site and
     * tram_lora_group. */
    void (*lora)(tram_backend *be, void *y, int y_stride, const void *x, const tram_lora_site *site,
                 const tram_lora_group *groups, int n_groups, const tram_lora_scratch *s);
    /* Sum of x across tensor-parallel ranks, in place. */
    void (*all_reduce)(tram_backend *be, void *x, size_t n);

    /* fn over items [0, items) in chunks of `chunk` on the backend's host
     * threads, the caller among them, returning when every chunk is done
     * (pool.h's tram_cpu_pool_run), and how many threads that is; host work
     * of the engine's that grows with the batch (a step's draws) runs on it.
     * NULL: the backend lends no host threads (CUDA draws on the device). */
    void (*host_run)(tram_backend *be, int items, int chunk, void (*fn)(void *ctx, int begin, int end), void *ctx);
    int (*host_threads)(tram_backend *be);

    /* Makes the calling thread's work go to this backend's device: a rank
     * thread calls it before anything else (CUDA: cudaSetDevice).  NULL: the
     * backend needs nothing (the CPU). */
    void (*bind_thread)(tram_backend *be);

    /* Waits for queued work; returns the first recorded error, then clears it. */
    int (*sync)(tram_backend *be, tram_error *err);
    void (*destroy)(tram_backend *be);
};

int tram_backend_cpu_create(tram_backend **out, int num_threads, tram_error *err);
/* CPU tensor parallelism: the ranks of one process, one thread each, share a
 * group, through which all_reduce adds in a fixed order (kernels/cpu/
 * allreduce.c): the sum is the same bits whatever the threads' timing. */
typedef struct tram_cpu_group tram_cpu_group;
int tram_cpu_group_create(tram_cpu_group **out, int world_size, tram_error *err);
void tram_cpu_group_destroy(tram_cpu_group *g);
/* Rank `rank` of g, with num_threads OpenMP threads of its own. */
int tram_backend_cpu_create_rank(tram_backend **out, int num_threads, tram_cpu_group *g, int rank,
                                 tram_error *err);
#ifdef TRAM_CUDA
/* Fails with one clear sentence when no usable GPU is present. */
int tram_backend_cuda_create(tram_backend **out, int device_index, tram_error *err);
/* Tensor parallelism: world_size backends on devices 0 .. world_size-1, out[r]
 * rank r, their NCCL communicators made by one ncclCommInitAll; fails with one
 * sentence when fewer GPUs are present. */
int tram_backend_cuda_create_ranks(tram_backend **out, int world_size, tram_error *err);
#endif

#ifdef __cplusplus
}
#endif

#endif
