/* CUDA backend, host side: the launch arithmetic of kernels/cuda/launch_plan.h
 * (shared with the kernels) checked on the CPU against brute-force
 * references — split-KV partitions, the split count's bound on the scratch
 * the backend allocates once, token → sequence lookup, graph buckets. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "kernels/cuda/launch_plan.h"

Test(cuda_host, split_ranges_tile_the_context)
{
    for (int n = 0; n <= 300; n++)
        for (int splits = 1; splits <= TRAM_CUDA_ATTN_MAX_SPLITS + 1; splits++) {
            int next = 0, widest = 0;
            for (int s = 0; s < splits; s++) {
                int lo, hi;
                tram_cuda_split_range(n, splits, s, &lo, &hi);
                cr_assert(lo <= hi, "n %d splits %d split %d: [%d, %d)", n, splits, s, lo, hi);
                if (lo < hi) {
                    cr_assert_eq(lo, next, "n %d splits %d split %d starts at %d, want %d", n, splits, s, lo, next);
                    next = hi;
                }
                widest = hi - lo > widest ? hi - lo : widest;
            }
            cr_assert_eq(next, n, "n %d splits %d covers [0, %d)", n, splits, next);
            cr_assert(widest * splits < n + splits, "n %d splits %d: a split of %d keys", n, splits, widest);
        }
}

Test(cuda_host, split_count_fits_the_scratch_and_the_context)
{
    static const int ctxs[] = {16, 255, 256, 4096, 131072};
    static const int sms[] = {1, 78, 132};
    for (int t = 1; t <= 600; t += t < 40 ? 1 : 37)
        for (int kv = 1; kv <= 16; kv++)
            for (size_t c = 0; c < sizeof(ctxs) / sizeof(ctxs[0]); c++)
                for (size_t m = 0; m < sizeof(sms) / sizeof(sms[0]); m++) {
                    int s = tram_cuda_attn_splits(t, kv, ctxs[c], sms[m]);
                    cr_assert(s >= 1 && s <= TRAM_CUDA_ATTN_MAX_SPLITS);
                    if (s == 1)
                        continue;
                    int64_t blocks = (int64_t)t * kv;
                    cr_assert_lt(blocks, (int64_t)TRAM_CUDA_ATTN_WAVES * sms[m], "split a full grid");
                    cr_assert_leq(blocks * s * TRAM_CUDA_ATTN_MAX_GROUP, tram_cuda_attn_partial_rows(sms[m]),
                                  "t %d kv %d ctx %d sms %d: %d splits overflow the scratch", t, kv, ctxs[c],
                                  sms[m], s);
                    cr_assert_leq((int64_t)(s - 1) * TRAM_CUDA_ATTN_MIN_KEYS, ctxs[c], "splits of too few keys");
                }
}

Test(cuda_host, long_decode_splits_and_prefill_does_not)
{
    /* one sequence decoding over 32k keys on a 132-SM chip leaves the chip
     * idle unless split; a 512-token prefill fills it without */
    cr_assert_gt(tram_cuda_attn_splits(1, 8, 32768, 132), 1);
    cr_assert_eq(tram_cuda_attn_splits(512, 8, 32768, 132), 1);
}

Test(cuda_host, seq_of_token_matches_a_linear_scan)
{
    srand(7);
    for (int trial = 0; trial < 200; trial++) {
        int num_seqs = 1 + rand() % 20, qs[21];
        qs[0] = 0;
        for (int i = 0; i < num_seqs; i++)
            qs[i + 1] = qs[i] + (i == num_seqs - 1 ? 1 : 0) + rand() % 5;  /* some empty, last not */
        for (int t = 0; t < qs[num_seqs]; t++) {
            int want = -1;
            for (int i = 0; i < num_seqs; i++)
                if (qs[i] <= t && t < qs[i + 1])
                    want = i;
            cr_assert_eq(tram_cuda_seq_of_token(qs, num_seqs, t), want, "trial %d token %d", trial, t);
        }
    }
}

Test(cuda_host, context_is_causal_and_bounded)
{
    cr_assert_eq(tram_cuda_context_len(0, 5), 1);
    cr_assert_eq(tram_cuda_context_len(4, 5), 5);
    cr_assert_eq(tram_cuda_context_len(9, 5), 5);
}

Test(cuda_host, graph_buckets_are_the_next_power_of_two)
{
    int max = 1 << (TRAM_CUDA_GRAPH_BUCKETS - 1), seen[TRAM_CUDA_GRAPH_BUCKETS] = {0};
    for (int n = 1; n <= max; n++) {
        int b = tram_cuda_graph_bucket(n);
        cr_assert(b >= n && b / 2 < n && (b & (b - 1)) == 0, "n %d -> bucket %d", n, b);
        int slot = tram_cuda_graph_slot(b);
        cr_assert(slot >= 0 && slot < TRAM_CUDA_GRAPH_BUCKETS && (1 << slot) == b);
        seen[slot] = 1;
    }
    for (int i = 0; i < TRAM_CUDA_GRAPH_BUCKETS; i++)
        cr_assert(seen[i], "slot %d unused", i);
    cr_assert_eq(tram_cuda_graph_bucket(0), -1);
    cr_assert_eq(tram_cuda_graph_bucket(max + 1), -1);
}

Test(cuda_host, grid_covers_every_element_once)
{
    for (int64_t n = 0; n < 5000; n += 7) {
        int b = tram_cuda_grid_1d(n, 256);
        cr_assert(b >= 1 && (int64_t)b * 256 >= n && (n == 0 || (int64_t)(b - 1) * 256 < n), "n %ld", (long)n);
    }
}
