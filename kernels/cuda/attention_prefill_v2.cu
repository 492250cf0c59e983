/* attention_prefill_v2.cu — variant 2 of prefill attention
 * (kernels/variants.h): FlashAttention-2-style tiles on the tensor cores, for
 * the rows of sequences with a query range longer than one token.
 *
 * Variant 1 reads the whole context once per query token, in f32 on the
 * CUDA cores; a prefill chunk of T tokens reads it T times.  Here block
 * (tile, head) takes BM = 64 query rows of one sequence (the batch's
 * prefill tiles are numbered in sequence order and decode rows have none,
 * so a step of many decodes and one chunk launches about the chunk's tiles)
 * and one query head, and walks the keys the tile may see in tiles of BN = 64: K and V
 * rows are gathered through the block table into shared memory once per
 * tile, and each of the 4 warps multiplies its 16 query rows with them on
 * the tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate): S = Q·Kᵀ,
 * masked causally by each row's position (and the sequence length), an
 * online softmax in base 2 kept per row in registers, then O += P·V with P
 * rounded to bf16 as FlashAttention does.  Rows of 16 bf16 pad each shared
 * row so ldmatrix reads without bank conflicts.  Head dims 64 and 128 are
 * instantiated; others go to variant 1. */
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/mma_layout.h"

#define BM 64
#define BN 64
#define PF_WARPS 4
#define PAD 8  /* bf16 per shared row beyond the head dim: 16 bytes */

/* ---------------------------------------------------------------- tensor-core primitives */

static __device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const bf16 *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const bf16 *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c[16x8] += a[16x16] · b[16x8], bf16 operands, f32 accumulators. */
static __device__ __forceinline__ void mma_bf16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* ---------------------------------------------------------------- the kernel */

/* The tile's rows: token, and how many keys each may see (0: past the chunk). */
typedef struct {
    int first_token, rows, kv_end;
} q_tile;

static __device__ q_tile tile_rows(const attn_params &p, int seq, int index, int *s_ctx)
{
    q_tile tile = {0, 0, 0};
    tram_cuda_prefill_tile(p.query_start, seq, index, BM, &tile.first_token, &tile.rows);
    for (int r = threadIdx.x; r < BM; r += blockDim.x)
        s_ctx[r] = r < tile.rows ? tram_cuda_context_len(p.positions[tile.first_token + r], p.seq_lens[seq]) : 0;
    __syncthreads();
    for (int r = 0; r < BM; r++)
        tile.kv_end = max(tile.kv_end, s_ctx[r]);
    return tile;
}

/* Rows [0, count) of a [BM or BN][HD] tile into shared memory, 16 bytes a
 * thread at a time; row r comes from src_of(r), rows past count are zero. */
template <int HD, typename F>
static __device__ void load_tile(bf16 (*dst)[HD + PAD], int count, F src_of)
{
    constexpr int VECS = HD / 8;
    for (int i = threadIdx.x; i < BM * VECS; i += blockDim.x) {
        int r = i / VECS, c = (i % VECS) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < count)
            v = *reinterpret_cast<const uint4 *>(src_of(r) + c);
        *reinterpret_cast<uint4 *>(&dst[r][c]) = v;
    }
}

template <int HD>
static __global__ void __launch_bounds__(PF_WARPS * 32) kernel_prefill_v2(attn_params p)
{
    static_assert(BM == BN && BM == PF_WARPS * 16, "one 16-row slice of the tile per warp");
    __shared__ __align__(16) bf16 s_k[BN][HD + PAD];  /* first Q, then each K tile */
    __shared__ __align__(16) bf16 s_v[BN][HD + PAD];
    __shared__ int s_ctx[BM];
    int seq, index, h = blockIdx.y, kvh = h / p.group;
    tram_cuda_prefill_tile_at(p.query_start, p.num_seqs, blockIdx.x, BM, &seq, &index);
    if (seq < 0)
        return;  /* past the batch's last tile */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    q_tile tile = tile_rows(p, seq, index, s_ctx);
    const int32_t *table = p.block_tables + (size_t)seq * p.max_blocks;
    size_t kd = (size_t)p.n_kv_heads * HD;
    float scale = p.scale * 1.4426950408889634f;  /* scores in base 2 */

    load_tile<HD>(s_k, tile.rows, [&](int r) { return p.q + ((size_t)(tile.first_token + r) * p.n_heads + h) * HD; });
    __syncthreads();
    uint32_t qf[HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
        ldmatrix_x4(qf[kk], &s_k[warp * 16 + tram_ldsm_q_row(lane)][kk * 16 + tram_ldsm_q_col(lane)]);

    float o[HD / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int d = 0; d < HD / 8; d++)
        o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    int ctx[2] = {s_ctx[warp * 16 + tram_mma_c_row(lane, 0)], s_ctx[warp * 16 + tram_mma_c_row(lane, 2)]};

    for (int n0 = 0; n0 < tile.kv_end; n0 += BN) {
        __syncthreads();  /* every warp is done with the previous tile (and with Q) */
        auto slot_row = [&](const bf16 *cache) {
            return [=](int r) {
                return cache + tram_cuda_key_slot(table, p.block_size, n0 + r) * kd + (size_t)kvh * HD;
            };
        };
        int keys = min(BN, tile.kv_end - n0);
        load_tile<HD>(s_k, keys, slot_row(p.k_cache));
        load_tile<HD>(s_v, keys, slot_row(p.v_cache));
        __syncthreads();

        float s[BN / 8][4];
#pragma unroll
        for (int n = 0; n < BN / 8; n++)
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
            for (int np = 0; np < BN / 16; np++) {
                uint32_t b[4];
                ldmatrix_x4(b, &s_k[np * 16 + tram_ldsm_k_row(lane)][kk * 16 + tram_ldsm_k_col(lane)]);
                mma_bf16(s[2 * np], qf[kk], b[0], b[1]);
                mma_bf16(s[2 * np + 1], qf[kk], b[2], b[3]);
            }

        /* causal mask and the online softmax, rows quad and quad + 8 */
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            float tile_max = -INFINITY;
#pragma unroll
            for (int n = 0; n < BN / 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int key = n0 + n * 8 + tram_mma_c_col(lane, 2 * rr + e);
                    float v = key < ctx[rr] ? s[n][2 * rr + e] * scale : -INFINITY;
                    s[n][2 * rr + e] = v;
                    tile_max = fmaxf(tile_max, v);
                }
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
            float m_new = fmaxf(m[rr], tile_max), ref = m_new == -INFINITY ? 0.0f : m_new;
            float corr = exp2f(m[rr] - ref), sum = 0.0f;
#pragma unroll
            for (int n = 0; n < BN / 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float pr = exp2f(s[n][2 * rr + e] - ref);
                    s[n][2 * rr + e] = pr;
                    sum += pr;
                }
            l[rr] = l[rr] * corr + sum;  /* this thread's share; the quad's shares add up at the end */
            m[rr] = m_new;
#pragma unroll
            for (int d = 0; d < HD / 8; d++) {
                o[d][2 * rr] *= corr;
                o[d][2 * rr + 1] *= corr;
            }
        }

        /* O += P · V: S's accumulator layout is the A operand's, two n-tiles per k-step */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < HD / 16; dp++) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, &s_v[kk * 16 + tram_ldsm_v_row(lane)][dp * 16 + tram_ldsm_v_col(lane)]);
                mma_bf16(o[2 * dp], a, b[0], b[1]);
                mma_bf16(o[2 * dp + 1], a, b[2], b[3]);
            }
        }
    }

#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        float total = l[rr];
        total += __shfl_xor_sync(0xffffffffu, total, 1);
        total += __shfl_xor_sync(0xffffffffu, total, 2);
        int r = warp * 16 + tram_mma_c_row(lane, 2 * rr);
        if (r >= tile.rows)
            continue;
        float inv = total > 0.0f ? 1.0f / total : 0.0f;
        bf16 *out = p.out + ((size_t)(tile.first_token + r) * p.n_heads + h) * HD;
#pragma unroll
        for (int d = 0; d < HD / 8; d++)
            *reinterpret_cast<__nv_bfloat162 *>(out + d * 8 + tram_mma_c_col(lane, 2 * rr)) =
                __floats2bfloat162_rn(o[d][2 * rr] * inv, o[d][2 * rr + 1] * inv);
    }
}

int cuda_attention_prefill_v2(cuda_state *c, const attn_params &p, int head_dim, int max_query_len)
{
    void (*k)(attn_params) = head_dim == 64 ? kernel_prefill_v2<64> : head_dim == 128 ? kernel_prefill_v2<128> : NULL;
    if (!k)
        return -1;
    dim3 grid(tram_cuda_prefill_tile_bound(p.num_tokens, p.num_seqs, max_query_len, BM), p.n_heads);
    k<<<grid, PF_WARPS * 32, 0, c->stream>>>(p);
    LAUNCH_CHECK(&c->st, "kernel_prefill_v2");
    return 0;
}
