/* Variant-2 attention, host side: the index arithmetic of
 * kernels/cuda/attention_decode_v2.cu checked on the CPU.  Split-KV counts
 * come from each token's real context (not from max_model_len), splits are
 * whole KV blocks with none empty, and the kernel's walk (warps over blocks,
 * sub-warp key streams, two steps unrolled) visits every key of the context
 * exactly once and reads each block's table entry once; and the kernel's
 * numerics replayed lane by lane (key streams, the butterfly merge, the
 * warps' merge, the splits' combine, all in base 2) equal softmax attention. */
#include <criterion/criterion.h>
#include <math.h>
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

/* ---------------------------------------------------------------- the numerics, lane by lane */

enum { HD = 64, G = 2, LANES = HD / 8, KEYS = 32 / LANES, UNROLL = 2, WARPS = 4 };

typedef struct {
    float m[G], l[G], acc[G][8];
} lane_state;

/* fold_key of kernel_decode_v2: one key's base-2 scores into a lane's state. */
static void fold(lane_state *st, const float *s, const float *v)
{
    for (int g = 0; g < G; g++) {
        if (s[g] == -INFINITY)
            continue;
        float m_new = fmaxf(st->m[g], s[g]), corr = exp2f(st->m[g] - m_new), pr = exp2f(s[g] - m_new);
        st->l[g] = st->l[g] * corr + pr;
        for (int e = 0; e < 8; e++)
            st->acc[g][e] = st->acc[g][e] * corr + pr * v[e];
        st->m[g] = m_new;
    }
}

/* merge_lane: every lane merges with lane ^ off at once (a butterfly). */
static void butterfly(lane_state *lanes, int off)
{
    lane_state before[32];
    memcpy(before, lanes, sizeof(before));
    for (int lane = 0; lane < 32; lane++)
        for (int g = 0; g < G; g++) {
            const lane_state *o = &before[lane ^ off];
            float M = fmaxf(lanes[lane].m[g], o->m[g]);
            float f = M == -INFINITY ? 0 : exp2f(lanes[lane].m[g] - M), fo = M == -INFINITY ? 0 : exp2f(o->m[g] - M);
            lanes[lane].l[g] = lanes[lane].l[g] * f + o->l[g] * fo;
            for (int e = 0; e < 8; e++)
                lanes[lane].acc[g][e] = lanes[lane].acc[g][e] * f + o->acc[g][e] * fo;
            lanes[lane].m[g] = M;
        }
}

/* One block of kernel_decode_v2 over keys [lo, hi) of K, V ([keys][HD]) with
 * q ([G][HD], already scaled to base 2): its (m, l, acc) per head, merged
 * over lanes and warps as attn_merge_warps does. */
static void block_state(const float *q, const float *k, const float *v, int bs, int lo, int hi, float *m_out,
                        float *l_out, float (*acc_out)[HD])
{
    static lane_state warps[WARPS][32];
    for (int w = 0; w < WARPS; w++)
        for (int lane = 0; lane < 32; lane++)
            for (int g = 0; g < G; g++) {
                warps[w][lane].m[g] = -INFINITY, warps[w][lane].l[g] = 0;
                memset(warps[w][lane].acc[g], 0, sizeof(warps[w][lane].acc[g]));
            }
    for (int w = 0; w < WARPS; w++) {
        for (int blk = lo / bs + w; blk * bs < hi; blk += WARPS) {
            int first = blk * bs, n = hi - first < bs ? hi - first : bs;
            for (int o = 0; o < n; o += KEYS * UNROLL)
                for (int u = 0; u < UNROLL; u++)
                    for (int lane = 0; lane < 32; lane++) {
                        int sub = lane / LANES, part = lane % LANES, key = o + u * KEYS + sub;
                        float s[G];
                        for (int g = 0; g < G; g++) {  /* the dot product the sub-warp's lanes sum */
                            float d = 0;
                            for (int j = 0; j < HD; j++)
                                d += q[g * HD + j] * k[(size_t)(first + (key < n ? key : 0)) * HD + j];
                            s[g] = key < n ? d : -INFINITY;
                        }
                        fold(&warps[w][lane], s, v + (size_t)(first + (key < n ? key : 0)) * HD + part * 8);
                    }
        }
        for (int off = LANES; off < 32; off *= 2)
            butterfly(warps[w], off);
    }
    for (int g = 0; g < G; g++) {
        float M = -INFINITY;
        for (int w = 0; w < WARPS; w++)
            M = fmaxf(M, warps[w][0].m[g]);
        l_out[g] = 0;
        for (int d = 0; d < HD; d++)
            acc_out[g][d] = 0;
        for (int w = 0; M != -INFINITY && w < WARPS; w++) {
            float f = exp2f(warps[w][0].m[g] - M);
            l_out[g] += warps[w][0].l[g] * f;
            for (int d = 0; d < HD; d++)  /* sub 0's lane `part` holds dims part*8 .. +7 */
                acc_out[g][d] += warps[w][d / 8].acc[g][d % 8] * f;
        }
        m_out[g] = M;
    }
}

Test(cuda_attn_v2, the_lanes_warps_and_splits_give_softmax_attention)
{
    enum { CTX = 1000, BS = 16 };
    static float q[G * HD], k[CTX * HD], v[CTX * HD], acc[TRAM_CUDA_ATTN_MAX_SPLITS][G][HD];
    float m[TRAM_CUDA_ATTN_MAX_SPLITS][G], l[TRAM_CUDA_ATTN_MAX_SPLITS][G];
    for (int i = 0; i < G * HD; i++)
        q[i] = sinf(i * 0.37f) * 0.125f * 1.4426950408889634f;
    for (int i = 0; i < CTX * HD; i++)
        k[i] = cosf(i * 0.11f), v[i] = sinf(i * 0.07f + 1.0f);
    for (int ctx = 1; ctx <= CTX; ctx += ctx < 40 ? 3 : 191) {
        int splits = tram_cuda_token_splits(ctx, BS, 8);
        for (int s = 0; s < splits; s++) {
            int lo, hi;
            tram_cuda_split_blocks(ctx, BS, splits, s, &lo, &hi);
            block_state(q, k, v, BS, lo, hi, m[s], l[s], acc[s]);
        }
        for (int g = 0; g < G; g++)
            for (int d = 0; d < HD; d++) {
                double M = -INFINITY, L = 0, A = 0, want = 0, sum = 0, top = -INFINITY;
                for (int s = 0; s < splits; s++)  /* attn_combine_splits */
                    M = fmax(M, m[s][g]);
                for (int s = 0; s < splits; s++) {
                    L += l[s][g] * exp2(m[s][g] - M);
                    A += acc[s][g][d] * exp2(m[s][g] - M);
                }
                for (int j = 0; j < ctx; j++) {  /* softmax(q·k) · v in base 2, in double */
                    double dot = 0;
                    for (int e = 0; e < HD; e++)
                        dot += (double)q[g * HD + e] * k[j * HD + e];
                    top = fmax(top, dot);
                }
                for (int j = 0; j < ctx; j++) {
                    double dot = 0;
                    for (int e = 0; e < HD; e++)
                        dot += (double)q[g * HD + e] * k[j * HD + e];
                    sum += exp2(dot - top);
                    want += exp2(dot - top) * v[j * HD + d];
                }
                want /= sum;
                cr_assert_float_eq(A / L, want, 1e-4, "ctx %d (%d splits) head %d dim %d: %g, want %g", ctx, splits, g,
                                   d, A / L, want);
            }
    }
}
