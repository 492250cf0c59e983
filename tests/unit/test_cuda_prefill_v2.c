/* Prefill attention variant 2 (kernels/cuda/attention_prefill_v2.cu), host
 * side.  The tensor-core data flow is replayed on the CPU: ldmatrix and
 * mma.sync are simulated from their PTX definitions (the hardware layouts in
 * kernels/cuda/mma_layout.h), fed with the kernel's own row addresses, and
 * S = Q·Kᵀ and O = P·V must come out as the plain products.  Also the query
 * tiles of each chunk and the paged addressing of the key tiles. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/cuda/mma_layout.h"

#define BN 64
#define MAX_HD 128

typedef float regs4[32][4][2];  /* ldmatrix.x4 result: lane, register, half */

/* ldmatrix.x4 (.trans when trans) over a row-major tile: lane L addresses
 * row L % 8 of matrix L / 8 at (row0 + row_of(L), col0 + col_of(L)). */
static void ldsm_x4(regs4 out, const float *tile, int stride, int row0, int col0, int (*row_of)(int),
                    int (*col_of)(int), int trans)
{
    for (int lane = 0; lane < 32; lane++)
        for (int m = 0; m < 4; m++)
            for (int h = 0; h < 2; h++) {
                int src = trans ? 8 * m + (lane % 4) * 2 + h : 8 * m + lane / 4;  /* the lane giving that row */
                int col = trans ? lane / 4 : (lane % 4) * 2 + h;
                out[lane][m][h] = tile[(row0 + row_of(src)) * stride + col0 + col_of(src) + col];
            }
}

/* mma.sync.m16n8k16: c += a · b, with a = 4 registers and b = registers b0, b1 of each lane. */
static void mma(float c[32][4], float a[32][4][2], float b[32][4][2], int b0)
{
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++)
        for (int h = 0; h < 2; h++) {
            for (int r = 0; r < 4; r++)
                A[tram_mma_a_row(lane, r)][tram_mma_a_col(lane, r, h)] = a[lane][r][h];
            for (int r = 0; r < 2; r++)
                B[tram_mma_b_k(lane, r, h)][tram_mma_b_n(lane)] = b[lane][b0 + r][h];
        }
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 16; k++)
                c[lane][i] += A[tram_mma_c_row(lane, i)][k] * B[k][tram_mma_c_col(lane, i)];
}

static int q_row(int l) { return tram_ldsm_q_row(l); }
static int q_col(int l) { return tram_ldsm_q_col(l); }
static int k_row(int l) { return tram_ldsm_k_row(l); }
static int k_col(int l) { return tram_ldsm_k_col(l); }
static int v_row(int l) { return tram_ldsm_v_row(l); }
static int v_col(int l) { return tram_ldsm_v_col(l); }

static void check_warp_products(int hd)
{
    static float q[16 * MAX_HD], k[BN * MAX_HD], v[BN * MAX_HD];
    static regs4 qf[MAX_HD / 16], b;
    static float s[BN / 8][32][4], o[MAX_HD / 8][32][4];
    for (int i = 0; i < 16 * hd; i++)
        q[i] = (float)((i * 13) % 7) - 3.0f;
    for (int i = 0; i < BN * hd; i++) {
        k[i] = (float)((i * 5) % 11) - 5.0f;
        v[i] = (float)((i * 3) % 13) - 6.0f;
    }
    memset(s, 0, sizeof(s));
    memset(o, 0, sizeof(o));
    for (int kk = 0; kk < hd / 16; kk++)
        ldsm_x4(qf[kk], q, hd, 0, kk * 16, q_row, q_col, 0);
    for (int kk = 0; kk < hd / 16; kk++)  /* S = Q·Kᵀ as the kernel's loop runs it */
        for (int np = 0; np < BN / 16; np++) {
            ldsm_x4(b, k, hd, np * 16, kk * 16, k_row, k_col, 0);
            mma(s[2 * np], qf[kk], b, 0);
            mma(s[2 * np + 1], qf[kk], b, 2);
        }
    for (int n = 0; n < BN / 8; n++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++) {
                int row = tram_mma_c_row(lane, i), key = n * 8 + tram_mma_c_col(lane, i);
                float want = 0.0f;
                for (int d = 0; d < hd; d++)
                    want += q[row * hd + d] * k[key * hd + d];
                cr_assert_float_eq(s[n][lane][i], want, 1e-3, "hd %d: S[%d][%d] = %g, want %g", hd, row, key,
                                   s[n][lane][i], want);
            }
    for (int kk = 0; kk < BN / 16; kk++) {  /* O = P·V, P taken from S's accumulators as the kernel packs them */
        static regs4 a;
        for (int lane = 0; lane < 32; lane++)
            for (int h = 0; h < 2; h++) {
                a[lane][0][h] = s[2 * kk][lane][h];
                a[lane][1][h] = s[2 * kk][lane][2 + h];
                a[lane][2][h] = s[2 * kk + 1][lane][h];
                a[lane][3][h] = s[2 * kk + 1][lane][2 + h];
            }
        for (int dp = 0; dp < hd / 16; dp++) {
            ldsm_x4(b, v, hd, kk * 16, dp * 16, v_row, v_col, 1);
            mma(o[2 * dp], a, b, 0);
            mma(o[2 * dp + 1], a, b, 2);
        }
    }
    for (int d8 = 0; d8 < hd / 8; d8++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++) {
                int row = tram_mma_c_row(lane, i), dim = d8 * 8 + tram_mma_c_col(lane, i);
                double want = 0.0;
                for (int key = 0; key < BN; key++) {
                    float sv = 0.0f;
                    for (int d = 0; d < hd; d++)
                        sv += q[row * hd + d] * k[key * hd + d];
                    want += (double)sv * v[key * hd + dim];
                }
                cr_assert_float_eq(o[d8][lane][i], want, 1e-2 * (1.0 + fabs(want)) * 1e-3,
                                   "hd %d: O[%d][%d] = %g, want %g", hd, row, dim, o[d8][lane][i], want);
            }
}

Test(cuda_prefill_v2, tensor_core_fragments_give_the_products)
{
    check_warp_products(64);
    check_warp_products(128);
}

Test(cuda_prefill_v2, tiles_cover_each_chunk_once)
{
    const int32_t qs[] = {0, 1, 65, 66, 200, 328};  /* a decode row, 64, 1, 134 and 128 tokens */
    for (int seq = 0; seq < 5; seq++) {
        int covered = 0, len = qs[seq + 1] - qs[seq];
        for (int tile = 0; tile < 8; tile++) {
            int first, rows;
            tram_cuda_prefill_tile(qs, seq, tile, 64, &first, &rows);
            if (rows <= 0)
                continue;
            cr_assert_eq(first, qs[seq] + covered, "seq %d tile %d starts at %d", seq, tile, first);
            cr_assert_leq(rows, 64);
            covered += rows;
        }
        cr_assert_eq(covered, len, "seq %d: %d of %d rows", seq, covered, len);
    }
}

Test(cuda_prefill_v2, key_slots_follow_the_block_table)
{
    const int32_t table[] = {7, 2, 9, 0, 4};
    for (int bs = 1; bs <= 16; bs *= 2)
        for (int j = 0; j < 5 * bs; j++)
            cr_assert_eq(tram_cuda_key_slot(table, bs, j), (int64_t)table[j / bs] * bs + j % bs);
    cr_assert_eq(tram_cuda_key_slot(table, 16, 35), 9 * 16 + 3);
}

/* A mixed batch: decode rows (query range 1) and chunks of several lengths. */
Test(cuda_prefill_v2, the_tile_list_numbers_every_chunk_tile_once)
{
    static const int lens[][12] = {
        {1, 1, 1, 700, 1, 1, 64, 65, 1, 2, 1, 0},
        {2048, 0},
        {1, 1, 1, 1, 0},
        {63, 64, 129, 1, 3, 0},
    };
    for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
        int32_t qs[13] = {0};
        int n = 0, longest = 0;
        while (lens[b][n]) {
            qs[n + 1] = qs[n] + lens[b][n];
            longest = lens[b][n] > longest ? lens[b][n] : longest;
            n++;
        }
        int want = 0, seen[12][40] = {{0}};
        for (int s = 0; s < n; s++)
            want += lens[b][s] > 1 ? (lens[b][s] + 63) / 64 : 0;
        int bound = tram_cuda_prefill_tile_bound(qs[n], n, longest, 64), got = 0;
        cr_assert_geq(bound, want, "batch %zu: %d tiles, launch of %d", b, want, bound);
        cr_assert_leq(bound, (qs[n] + 63) / 64 + n, "batch %zu: a launch of %d blocks", b, bound);
        for (int idx = 0; idx < bound; idx++) {
            int seq, tile;
            tram_cuda_prefill_tile_at(qs, n, idx, 64, &seq, &tile);
            if (seq < 0)
                continue;
            cr_assert_gt(lens[b][seq], 1, "batch %zu: tile %d given to decode row %d", b, idx, seq);
            int first, rows;
            tram_cuda_prefill_tile(qs, seq, tile, 64, &first, &rows);
            cr_assert_gt(rows, 0, "batch %zu: tile %d of seq %d is empty", b, tile, seq);
            seen[seq][tile]++;
            got++;
        }
        cr_assert_eq(got, want, "batch %zu: %d tiles launched with work, want %d", b, got, want);
        for (int s = 0; s < n; s++)
            for (int t = 0; t < 40; t++)
                cr_assert_leq(seen[s][t], 1, "batch %zu: seq %d tile %d twice", b, s, t);
    }
}
