/* mma_layout.h — where the tensor-core fragments of
 * kernels/cuda/attention_prefill_v2.cu put each element.  Plain C shared by
 * the kernel and tests/unit/test_cuda_prefill_v2.c, which replays the
 * kernel's ldmatrix addressing and mma.sync data flow on the CPU.
 *
 * mma.sync.m16n8k16 with bf16 operands (PTX ISA, "matrix fragments for
 * mma.m16n8k16"): in each lane, A (16×16) is 4 registers of 2 elements, B
 * (16×8) 2 registers of 2, C/D (16×8, f32) 4 values.  ldmatrix.x4 loads
 * four 8×8 matrices whose row addresses come from lanes 0-7, 8-15, 16-23,
 * 24-31; register i of lane L receives row L/4, elements 2(L%4) and
 * 2(L%4)+1 of matrix i (with .trans: column L/4, rows 2(L%4) and +1). */
#ifndef TRAM_CUDA_MMA_LAYOUT_H
#define TRAM_CUDA_MMA_LAYOUT_H

#include "kernels/cuda/launch_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The hardware's layouts: element `half` (0, 1) of register `reg`. */
static inline TRAM_HD int tram_mma_a_row(int lane, int reg) { return lane / 4 + (reg % 2) * 8; }
static inline TRAM_HD int tram_mma_a_col(int lane, int reg, int half) { return (lane % 4) * 2 + half + (reg / 2) * 8; }
static inline TRAM_HD int tram_mma_b_k(int lane, int reg, int half) { return (lane % 4) * 2 + half + reg * 8; }
static inline TRAM_HD int tram_mma_b_n(int lane) { return lane / 4; }
/* accumulator i (0..3) of a lane */
static inline TRAM_HD int tram_mma_c_row(int lane, int i) { return lane / 4 + (i / 2) * 8; }
static inline TRAM_HD int tram_mma_c_col(int lane, int i) { return (lane % 4) * 2 + i % 2; }

/* The kernel's ldmatrix.x4 row addresses, relative to the 16×16 block read:
 * Q as the A operand (rows = query rows, columns = head dims); K as the B
 * operand of S = Q·Kᵀ for two 8-key n-tiles (rows = keys); V, transposed,
 * as the B operand of O = P·V for two 8-dim n-tiles (rows = keys). */
static inline TRAM_HD int tram_ldsm_q_row(int lane) { return lane % 16; }
static inline TRAM_HD int tram_ldsm_q_col(int lane) { return (lane / 16) * 8; }
static inline TRAM_HD int tram_ldsm_k_row(int lane) { return lane % 8 + (lane / 16) * 8; }
static inline TRAM_HD int tram_ldsm_k_col(int lane) { return ((lane / 8) % 2) * 8; }
static inline TRAM_HD int tram_ldsm_v_row(int lane) { return lane % 8 + ((lane / 8) % 2) * 8; }
static inline TRAM_HD int tram_ldsm_v_col(int lane) { return (lane / 16) * 8; }

/* Prefill tiles (bm query rows each) of a query range of qlen tokens; a
 * decode row (qlen 1) has none, its token goes to the decode kernel. */
static inline TRAM_HD int tram_cuda_prefill_tiles(int qlen, int bm) { return qlen > 1 ? tram_ceil_div(qlen, bm) : 0; }

/* The most prefill tiles a batch of num_tokens tokens in num_seqs
 * sequences, none longer than max_query_len, can have: the launch's extent,
 * so a batch of many decode rows and one chunk launches about as many blocks
 * as the chunk needs. */
static inline int tram_cuda_prefill_tile_bound(int num_tokens, int num_seqs, int max_query_len, int bm)
{
    int64_t by_tokens = tram_ceil_div(num_tokens, bm) + (int64_t)num_seqs;
    int64_t by_longest = (int64_t)tram_ceil_div(max_query_len, bm) * num_seqs;
    return (int)(by_tokens < by_longest ? by_tokens : by_longest);
}

/* The idx-th prefill tile of the batch, sequences in order: its sequence
 * and tile index within it, or *seq = -1 past the last tile. */
static inline TRAM_HD void tram_cuda_prefill_tile_at(const int32_t *query_start, int num_seqs, int idx, int bm,
                                                     int *seq, int *tile)
{
    *seq = -1;
    *tile = 0;
    for (int s = 0, before = 0; s < num_seqs; s++) {
        int n = tram_cuda_prefill_tiles(query_start[s + 1] - query_start[s], bm);
        if (idx < before + n) {
            *seq = s;
            *tile = idx - before;
            return;
        }
        before += n;
    }
}

/* Query rows [*first, *first + *rows) of tile `tile` (BM rows each) of
 * sequence seq's chunk; *rows <= 0 when the chunk has no such tile. */
static inline TRAM_HD void tram_cuda_prefill_tile(const int32_t *query_start, int seq, int tile, int bm,
                                                  int *first, int *rows)
{
    int q0 = query_start[seq], qlen = query_start[seq + 1] - q0;
    *first = q0 + tile * bm;
    *rows = qlen - tile * bm < bm ? qlen - tile * bm : bm;
}

/* Cache slot of key j of a sequence through its block table. */
static inline TRAM_HD int64_t tram_cuda_key_slot(const int32_t *table, int block_size, int j)
{
    return (int64_t)table[j / block_size] * block_size + j % block_size;
}

#ifdef __cplusplus
}
#endif

#endif
