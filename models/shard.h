/* shard.h — tensor-parallel sharding: which part of each weight a rank holds,
 * and loading that part from the file in any format tram loads.
 *
 * Megatron's split, as vLLM does it.  Column-parallel (each rank computes some
 * of the output rows, no communication): q, k and v each by heads, gate and
 * up each by a slice of the FFN, Qwen2's q/k/v biases like their matrices.
 * Row-parallel (each rank holds a slice of the input columns and produces a
 * partial sum that all_reduce adds up): o_proj and down_proj.  KV heads are
 * divided among the ranks, or, when there are fewer KV heads than ranks, each
 * rank holds the one KV head its query heads read (replicated).  Norms and
 * the embedding are replicated; the lm_head lives on rank 0 only (see
 * models/llama.c). */
#ifndef TRAM_SHARD_H
#define TRAM_SHARD_H

#include "kernels/backend.h"
#include "models/arch.h"
#include "models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank, world_size;
    int n_heads, n_kv_heads, ffn_dim;   /* this rank's */
    int head0, kv_head0, ffn0;          /* its first query head, KV head and FFN row */
} tram_shard;

/* 0 when world_size ranks can split c: the query heads, the KV heads (or the
 * ranks the KV heads) and the FFN divide evenly; else one sentence naming the
 * sizes that would work. */
int tram_shard_check(const tram_model_config *c, int world_size, tram_error *err);
/* Checks, then fills s with rank's part of c. */
int tram_shard_plan(tram_shard *s, const tram_model_config *c, int rank, int world_size, tram_error *err);

/* Rows [row0, row0 + nrows) and columns [col0, col0 + ncols) of a rows x cols
 * tensor of the file.  A vector (bias) is a tensor of n rows and 1 column. */
typedef struct {
    const char *name;
    int rows, cols;
    int row0, nrows, col0, ncols;
} tram_shard_part;

static inline tram_shard_part tram_shard_whole(const char *name, int rows, int cols)
{
    return (tram_shard_part){name, rows, cols, 0, rows, 0, cols};
}
static inline tram_shard_part tram_shard_rows(const char *name, int rows, int cols, int row0, int nrows)
{
    return (tram_shard_part){name, rows, cols, row0, nrows, 0, cols};
}
static inline tram_shard_part tram_shard_cols(const char *name, int rows, int cols, int col0, int ncols)
{
    return (tram_shard_part){name, rows, cols, 0, rows, col0, ncols};
}

/* This rank's part of tensor `name` (rows x cols in the file; a vector is n
 * rows of 1 column) under the split models/arch.c gives it. */
tram_shard_part tram_shard_part_of(const tram_shard *s, const tram_model_config *c, const char *name, int rows,
                                   int cols);

/* Host buffers for loading: the parts packed, and one whole tensor that a
 * part is cut from (a whole part is read straight into packed). */
typedef struct {
    float *packed, *whole;
    size_t whole_floats;
} tram_shard_scratch;

/* packed_floats: the largest weight loaded; whole_floats: the largest tensor
 * only part of which is loaded (0 when nothing is cut: world size 1). */
int tram_shard_scratch_init(tram_shard_scratch *sc, size_t packed_floats, size_t whole_floats, tram_error *err);
void tram_shard_scratch_free(tram_shard_scratch *sc);

/* Loads the parts, stacked by rows, into one rows x cols weight of `type`
 * (a vector: rows = 1, the parts end to end).  type is f32/bf16/int8 (the
 * file's values dequantized, then uploaded) or a GGUF block type (the file's
 * blocks copied as stored: a column slice must fall on block boundaries, or
 * the load fails naming the matrix); TRAM_W_FP8 takes the codes and row
 * scales of parts the file stores as FP8 as they are (upload_weight_fp8). */
int tram_shard_load(tram_backend *be, tram_model_file *f, tram_weight *w, const tram_shard_part *parts, int n,
                    int rows, int cols, tram_wtype type, tram_shard_scratch *sc, tram_error *err);

#ifdef __cplusplus
}
#endif

#endif
