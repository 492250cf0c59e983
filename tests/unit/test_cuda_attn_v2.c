/* Variant-2 attention, host side: the index arithmetic of
 * kernels/cuda/attention_decode_v2.cu checked on the CPU.  Split-KV counts
 * come from each token's real context (not from max_model_len), splits are
 * whole KV blocks with none empty, and the kernel's walk (warps over blocks,
 * sub-warp key streams, two steps unrolled) visits every key of the context
 * exactly once and reads each block's table entry once. */
#include <criterion/criterion.h>
#include <string.h>

#include "kernels/cuda/launch_plan.h"

Test(cuda_attn_v2, token_splits_are_whole_nonempty_blocks)
{
    static const int block_sizes[] = {1, 8, 16, 32};
    for (size_t b = 0; b < sizeof(block_sizes) / sizeof(block_sizes[0]); b++)
        for (int grid = 1; grid <= TRAM_CUDA_ATTN_MAX_SPLITS; grid += grid < 4 ? 1 : 7)
            for (int ctx = 1; ctx <= 5000; ctx += ctx < 300 ? 1 : 97) {
                int bs = block_sizes[b], s = tram_cuda_token_splits(ctx, bs, grid);
                cr_assert(s >= 1 && s <= grid, "ctx %d bs %d grid %d: %d splits", ctx, bs, grid, s);
                cr_assert_leq((s - 1) * TRAM_CUDA_ATTN_MIN_KEYS, ctx, "ctx %d: %d splits of too few keys", ctx, s);
                int next = 0;
                for (int i = 0; i < s; i++) {
                    int lo, hi;
                    tram_cuda_split_blocks(ctx, bs, s, i, &lo, &hi);
                    cr_assert_eq(lo, next, "ctx %d bs %d split %d/%d starts at %d, want %d", ctx, bs, i, s, lo, next);
                    cr_assert_lt(lo, hi, "ctx %d bs %d: split %d of %d is empty", ctx, bs, i, s);
                    cr_assert_eq(lo % bs, 0, "ctx %d bs %d: split %d starts inside a block", ctx, bs, i);
                    next = hi;
                }
                cr_assert_eq(next, ctx, "ctx %d bs %d: the splits cover [0, %d)", ctx, bs, next);
            }
}

Test(cuda_attn_v2, short_contexts_do_not_split_whatever_the_bound)
{
    /* batch 1 of Llama-3.1-8B (8 KV heads) on 132 SMs with max_model_len
     * 131072: variant 1 splits every context 32 ways; variant 2 splits a
     * 100-key context not at all and a 32k one up to the bound */
    int grid = tram_cuda_attn_splits(1, 8, 131072, 132);
    cr_assert_eq(grid, TRAM_CUDA_ATTN_MAX_SPLITS);
    cr_assert_eq(tram_cuda_token_splits(100, 16, grid), 1);
    cr_assert_eq(tram_cuda_token_splits(512, 16, grid), 2);
    cr_assert_eq(tram_cuda_token_splits(32768, 16, grid), grid);
}

/* The walk of kernel_decode_v2 over split [lo, hi): warp w takes blocks
 * lo/bs + w, + WARPS, ...; inside a block, key streams of `keys` lanes-groups
 * step by keys × unroll with a trip count shared by the whole warp. */
static void walk(const int32_t *table, int bs, int lo, int hi, int keys, int unroll, int *seen, int *reads)
{
    const int warps = 4;
    for (int w = 0; w < warps; w++)
        for (int blk = lo / bs + w; blk * bs < hi; blk += warps) {
            int64_t base = (int64_t)table[blk] * bs;
            reads[blk]++;
            int first = blk * bs, n = hi - first < bs ? hi - first : bs;
            for (int o = 0; o < n; o += keys * unroll)
                for (int u = 0; u < unroll; u++)
                    for (int sub = 0; sub < keys; sub++) {
                        int key = o + u * keys + sub;
                        if (key < n)
                            seen[base + key]++;
                    }
        }
}

Test(cuda_attn_v2, the_walk_reads_every_key_once_and_each_table_entry_once)
{
    enum { BLOCKS = 400 };
    int32_t table[BLOCKS];
    for (int i = 0; i < BLOCKS; i++)
        table[i] = (i * 7919 + 13) % BLOCKS;  /* a permutation: 7919 is prime to 400 */
    static int seen[BLOCKS * 32], reads[BLOCKS];
    static const int shapes[][2] = {{4, 2}, {2, 2}, {4, 1}};  /* keys per warp step (HD 64, 128), unroll */
    for (int bs = 1; bs <= 32; bs *= 2)
        for (size_t sh = 0; sh < 3; sh++)
            for (int ctx = 1; ctx <= (BLOCKS - 1) * bs; ctx += ctx < 200 ? 1 : 131) {
                memset(seen, 0, sizeof(seen));
                memset(reads, 0, sizeof(reads));
                int s = tram_cuda_token_splits(ctx, bs, 16);
                for (int i = 0; i < s; i++) {
                    int lo, hi;
                    tram_cuda_split_blocks(ctx, bs, s, i, &lo, &hi);
                    walk(table, bs, lo, hi, shapes[sh][0], shapes[sh][1], seen, reads);
                }
                for (int j = 0; j < ctx; j++)
                    cr_assert_eq(seen[(int64_t)table[j / bs] * bs + j % bs], 1, "ctx %d bs %d: key %d read %d times",
                                 ctx, bs, j, seen[(int64_t)table[j / bs] * bs + j % bs]);
                int blocks = (ctx + bs - 1) / bs, total = 0;
                for (int b = 0; b < BLOCKS; b++) {
                    cr_assert_eq(reads[b], b < blocks, "ctx %d bs %d: table entry %d read %d times", ctx, bs, b,
                                 reads[b]);
                    total += reads[b];
                }
                for (int k = 0; k < BLOCKS * bs && k < BLOCKS * 32; k++)
                    total -= seen[k];
                cr_assert_eq(total, blocks - ctx, "ctx %d bs %d: keys outside the context were read", ctx, bs);
            }
}
