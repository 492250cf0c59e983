/* launch_plan.h — the host-side arithmetic of the CUDA backend: grid sizes,
 * the split-KV partition of attention, the token → sequence lookup and the
 * CUDA-graph bucket choice.  Header-only and plain C so that the kernels (nvcc)
 * and the unit tests (gcc, tests/unit/test_cuda_host.c) share one copy. */
#ifndef TRAM_CUDA_LAUNCH_PLAN_H
#define TRAM_CUDA_LAUNCH_PLAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define TRAM_HD __host__ __device__
#else
#define TRAM_HD
#endif

/* Attention kernel limits: one warp lane holds head_dim/32 elements, a block
 * serves one KV head and its whole GQA group of query heads. */
#define TRAM_CUDA_ATTN_WARPS 4
#define TRAM_CUDA_ATTN_MAX_GROUP 8
#define TRAM_CUDA_ATTN_MAX_HEAD_DIM 256
/* Split-KV: split only while the grid is smaller than this many waves of
 * blocks per multiprocessor, never below this many keys per split, and never
 * more splits than this. */
#define TRAM_CUDA_ATTN_WAVES 2
#define TRAM_CUDA_ATTN_MIN_KEYS 256
#define TRAM_CUDA_ATTN_MAX_SPLITS 32

/* CUDA graphs are kept for batch sizes 1, 2, 4, ... 2^(this - 1). */
#define TRAM_CUDA_GRAPH_BUCKETS 12

static inline TRAM_HD int tram_ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Blocks for a 1-D launch over n elements, at least one. */
static inline int tram_cuda_grid_1d(int64_t n, int threads)
{
    int64_t blocks = (n + threads - 1) / threads;
    return blocks < 1 ? 1 : blocks > 0x7fffffff ? 0x7fffffff : (int)blocks;
}

/* Number of KV splits for one attention launch.  The grid is tokens × KV heads
 * × splits; splitting pays only when tokens × KV heads leaves multiprocessors
 * idle (decode of few sequences over long contexts), and each split must keep
 * enough keys to amortize its share of the combine pass. */
static inline int tram_cuda_attn_splits(int num_tokens, int n_kv_heads, int max_context, int num_sms)
{
    int64_t blocks = (int64_t)num_tokens * n_kv_heads;
    int64_t target = (int64_t)TRAM_CUDA_ATTN_WAVES * num_sms;
    if (blocks <= 0 || blocks >= target)
        return 1;
    int s = (int)((target + blocks - 1) / blocks);
    int by_len = tram_ceil_div(max_context, TRAM_CUDA_ATTN_MIN_KEYS);
    if (s > by_len)
        s = by_len;
    if (s > TRAM_CUDA_ATTN_MAX_SPLITS)
        s = TRAM_CUDA_ATTN_MAX_SPLITS;
    return s < 1 ? 1 : s;
}

/* Rows (token, query head) of split-KV partial results that any launch can
 * need: splits > 1 only when blocks < target, and then splits × blocks <
 * 2 × target, each block holding at most MAX_GROUP query heads.  The backend
 * allocates this once, so no launch allocates (CUDA graphs forbid it). */
static inline int64_t tram_cuda_attn_partial_rows(int num_sms)
{
    return (int64_t)2 * TRAM_CUDA_ATTN_WAVES * num_sms * TRAM_CUDA_ATTN_MAX_GROUP;
}

/* Keys [*start, *end) of split `s` out of `splits` over a context of n keys:
 * equal contiguous shares of each token's own context, so every split of a
 * short sequence still has work. */
static inline TRAM_HD void tram_cuda_split_range(int n, int splits, int s, int *start, int *end)
{
    int chunk = (n + splits - 1) / splits;
    int lo = s * chunk;
    *start = lo < n ? lo : n;
    *end = lo + chunk < n ? lo + chunk : n;
}

/* Variant 2's split-KV count for one token, from its own context of ctx
 * keys (not the longest a sequence may have): at most grid_splits (the
 * launch's z extent, tram_cuda_attn_splits over the bound), at least
 * TRAM_CUDA_ATTN_MIN_KEYS keys per split, whole KV blocks in each split, and
 * no empty split.  The kernel and its combine pass both compute it, so a
 * CUDA graph captured at one length stays right at every other. */
static inline TRAM_HD int tram_cuda_token_splits(int ctx, int block_size, int grid_splits)
{
    int blocks = tram_ceil_div(ctx, block_size), s = tram_ceil_div(ctx, TRAM_CUDA_ATTN_MIN_KEYS);
    if (s > grid_splits)
        s = grid_splits;
    if (s > blocks)
        s = blocks;
    if (s <= 1)
        return 1;
    return tram_ceil_div(blocks, tram_ceil_div(blocks, s));  /* drops splits that would be empty */
}

/* Keys [*start, *end) of split s out of `splits` (tram_cuda_token_splits) over
 * ctx keys: equal shares of whole KV blocks, so a warp reads each block's
 * table entry once. */
static inline TRAM_HD void tram_cuda_split_blocks(int ctx, int block_size, int splits, int s, int *start,
                                                  int *end)
{
    int chunk = tram_ceil_div(tram_ceil_div(ctx, block_size), splits) * block_size;
    int lo = s * chunk, hi = lo + chunk;
    *start = lo < ctx ? lo : ctx;
    *end = hi < ctx ? hi : ctx;
}

/* One rotated pair of rope_store's variant 2 (kernels/cuda/rope_store.cu):
 * pair idx of a token runs over the q heads' pairs, then the k heads'.  It
 * reads elements src_a, src_b of the token's fused q/k/v row and writes dst_a,
 * dst_b: elements of q counted from the token's q row, or (to_cache) of the
 * K cache counted from its start, in the token's slot. */
typedef struct {
    int src_a, src_b, freq, to_cache;
    int64_t dst_a, dst_b;
} tram_cuda_rope_pair;

static inline TRAM_HD tram_cuda_rope_pair tram_cuda_rope_pair_of(int idx, int n_heads, int n_kv_heads,
                                                                  int head_dim, int neox, int64_t slot)
{
    int half = head_dim / 2, head = idx / half, i = idx % half;
    int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    int64_t base = head < n_heads ? (int64_t)head * head_dim
                                  : slot * n_kv_heads * head_dim + (int64_t)(head - n_heads) * head_dim;
    tram_cuda_rope_pair p = {
        .src_a = head * head_dim + a, .src_b = head * head_dim + b, .freq = i, .to_cache = head >= n_heads,
        .dst_a = base + a, .dst_b = base + b,
    };
    return p;
}

/* GEMV (gemm variant 2, kernels/cuda/gemm_v2.cu) for n <= TRAM_CUDA_GEMV_MAX_N
 * token rows: each warp of TRAM_CUDA_GEMV_WARPS computes
 * TRAM_CUDA_GEMV_ROWS output rows over one split of the columns (a K range
 * of whole 16-byte vectors, 8 bf16); with several splits the partial sums
 * go to f32 scratch [splits][n][rows] and a second pass adds them. */
#define TRAM_CUDA_GEMV_MAX_N 8
#define TRAM_CUDA_GEMV_WARPS 8
#define TRAM_CUDA_GEMV_ROWS 2
#define TRAM_CUDA_GEMV_MIN_COLS 1024  /* fewest columns a split keeps */
#define TRAM_CUDA_GEMV_MAX_SPLITS 16

/* Column splits so the grid holds about 48 warps per multiprocessor (the
 * loads in flight an HBM3 chip needs) without splits under MIN_COLS. */
static inline int tram_cuda_gemv_splits(int rows, int cols, int num_sms)
{
    int warps = tram_ceil_div(rows, TRAM_CUDA_GEMV_ROWS);
    int want = tram_ceil_div(48 * num_sms, warps > 0 ? warps : 1);
    int most = cols / TRAM_CUDA_GEMV_MIN_COLS;
    if (want > most)
        want = most;
    if (want > TRAM_CUDA_GEMV_MAX_SPLITS)
        want = TRAM_CUDA_GEMV_MAX_SPLITS;
    return want < 1 ? 1 : want;
}

/* Columns [*lo, *hi) of split s out of `splits` over cols (a multiple of 8):
 * equal shares of 8-column vectors; a split past the end is empty. */
static inline TRAM_HD void tram_cuda_gemv_cols(int cols, int splits, int s, int *lo, int *hi)
{
    int chunk = tram_ceil_div(cols / 8, splits) * 8;
    int a = s * chunk, b = a + chunk;
    *lo = a < cols ? a : cols;
    *hi = b < cols ? b : cols;
}

/* Sequence holding token t: the last i with query_start[i] <= t. */
static inline TRAM_HD int tram_cuda_seq_of_token(const int32_t *query_start, int num_seqs, int t)
{
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (query_start[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Keys token t attends to: its position + 1, bounded by the sequence length. */
static inline TRAM_HD int tram_cuda_context_len(int position, int seq_len)
{
    return position + 1 < seq_len ? position + 1 : seq_len;
}

/* Padded batch size whose graph serves a decode step of n sequences: the
 * smallest power of two >= n, or -1 when n is out of the graphs' range. */
static inline int tram_cuda_graph_bucket(int n)
{
    if (n < 1 || n > (1 << (TRAM_CUDA_GRAPH_BUCKETS - 1)))
        return -1;
    int b = 1;
    while (b < n)
        b *= 2;
    return b;
}

/* Slot of a bucket in the graph table: log2(bucket). */
static inline int tram_cuda_graph_slot(int bucket)
{
    int slot = 0;
    while ((1 << slot) < bucket)
        slot++;
    return slot;
}

#ifdef __cplusplus
}
#endif

#endif
