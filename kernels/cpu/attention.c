/* attention.c — paged attention over the unified batch on the CPU, as
 * kernels/cuda/attention.cu is for CUDA.  The cache holds f32 slots or, with
 * --kv-cache-dtype int8|fp8, one-byte codes and a scale per KV head
 * (kernels/kv_format.h): each chunk of keys is then dequantized into a small
 * tile as it is read (kv_dequant.h: AVX2 where the CPU has it), never as a
 * copy of the cache.  The arithmetic on a chunk is attn_chunk.h's. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/attn_chunk.h"
#include "kernels/cpu/cpu_impl.h"
#include "kernels/cpu/kv_dequant.h"

static int seq_of_token(const tram_batch *b, int token)
{
    int lo = 0, hi = b->num_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (b->query_start[mid] <= token)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Attention works on a tile of query rows (token x head) that share one KV
 * head and one sequence: the query heads of a GQA group and up to a few
 * consecutive prefill tokens.  Each chunk of keys is read from memory once for
 * the whole tile and folded into each row's softmax (the online softmax, by
 * chunk: attn_chunk.h). */
#define ATT_ROWS 48   /* query rows of one tile */
/* Multiply-adds below which attention runs on one thread: waking a sleeping
 * worker costs tens of microseconds, what one core needs for about this much
 * work (a decode token over a few hundred positions). */
#define ATT_PAR_MIN_MACS (1L << 20)

/* A chunk's keys and values as f32, stride floats apart: the cache's own rows
 * (kd apart), or the tiles they were dequantized into (hd apart). */
typedef struct {
    const float *k, *v;
    size_t stride;
    float k_tile[TRAM_ATTN_CHUNK_KEYS * TRAM_KV_MAX_HEAD_DIM], v_tile[TRAM_ATTN_CHUNK_KEYS * TRAM_KV_MAX_HEAD_DIM];
} att_chunk;

typedef struct {
    const float *q[ATT_ROWS];
    float *out[ATT_ROWS];    /* accumulates Σ p·v, then divided by Σ p */
    int ctx[ATT_ROWS];       /* keys this row sees (causal) */
    int n, max_ctx;
} att_tile;

/* Points c at keys [slot, slot + nk) of kv_head, dequantizing them with the
 * backend's kernel (kv_dequant.h) if the cache is quantized. */
static void load_chunk(att_chunk *c, const void *k_cache, const void *v_cache, size_t slot, int nk, int kv_head,
                       const tram_attn_shape *s, const cpu_state *cs)
{
    int hd = s->head_dim;
    size_t kd = (size_t)s->n_kv_heads * hd;
    if (s->kv_dtype == TRAM_KV_AUTO) {
        c->k = (const float *)k_cache + slot * kd + (size_t)kv_head * hd;
        c->v = (const float *)v_cache + slot * kd + (size_t)kv_head * hd;
        c->stride = kd;
        return;
    }
    size_t sb = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, hd, sizeof(float));
    tram_kv_chunk ck = {.dtype = s->kv_dtype, .slots = (const uint8_t *)k_cache + slot * sb, .slot_bytes = sb,
                        .nk = nk, .kv_head = kv_head, .n_kv_heads = s->n_kv_heads, .head_dim = hd};
    tram_kv_chunk cv = ck;
    cv.slots = (const uint8_t *)v_cache + slot * sb;
    tram_kv_dequantize(cs->kv_kernel, c->k_tile, &ck, cs->fp8_lut);
    tram_kv_dequantize(cs->kv_kernel, c->v_tile, &cv, cs->fp8_lut);
    c->k = c->k_tile, c->v = c->v_tile, c->stride = hd;
}

static void attend_tile(att_tile *t, const void *k_cache, const void *v_cache, const int32_t *block_table,
                        int kv_head, const tram_attn_shape *s, const cpu_state *cs)
{
    int hd = s->head_dim, bs = s->block_size;
    tram_attn_row rows[ATT_ROWS];
    att_chunk c;
    for (int r = 0; r < t->n; r++) {
        rows[r] = (tram_attn_row){.q = t->q[r], .out = t->out[r], .max = -INFINITY, .sum = 0.0f};
        memset(t->out[r], 0, hd * sizeof(float));
    }
    for (int j0 = 0; j0 < t->max_ctx;) {
        int off = j0 % bs, nk = TRAM_MIN(TRAM_MIN(TRAM_ATTN_CHUNK_KEYS, bs - off), t->max_ctx - j0);
        load_chunk(&c, k_cache, v_cache, (size_t)block_table[j0 / bs] * bs + off, nk, kv_head, s, cs);
        for (int r = 0; r < t->n; r++)
            rows[r].nk = TRAM_MAX(0, TRAM_MIN(nk, t->ctx[r] - j0));
        tram_attn_keys keys = {.k = c.k, .v = c.v, .stride = c.stride, .nk = nk, .head_dim = hd, .scale = s->scale};
        tram_attn_chunk(cs->attn_kernel, rows, t->n, &keys);
        j0 += nk;
    }
    for (int r = 0; r < t->n; r++) {
        float inv = 1.0f / rows[r].sum;
        for (int d = 0; d < hd; d++)
            t->out[r][d] *= inv;
    }
}

typedef struct {
    float *out;
    const float *q;
    const void *k_cache, *v_cache;
    const tram_batch *b;
    const tram_attn_shape *s;
    const cpu_state *cs;
    int hq, hchunks, tt, per_tile;
} att_job;

/* Work items [w0, w1): item = (tile of consecutive tokens, KV head, chunk of
 * that head's query heads).  A token tile that spans sequences is attended
 * one sequence's run at a time. */
static void attend_items(void *arg, int w0, int w1)
{
    const att_job *j = arg;
    const tram_batch *b = j->b;
    int hd = j->s->head_dim, qd = j->s->n_heads * hd, group = j->s->n_heads / j->s->n_kv_heads;
    for (int w = w0; w < w1; w++) {
        int kvh = w % j->per_tile / j->hchunks, h0 = kvh * group + w % j->hchunks * j->hq;
        int h1 = TRAM_MIN(h0 + j->hq, (kvh + 1) * group);
        int i = w / j->per_tile * j->tt, end = TRAM_MIN(i + j->tt, b->num_tokens);
        while (i < end) {
            int seq = seq_of_token(b, i), run_end = TRAM_MIN(end, b->query_start[seq + 1]);
            att_tile t = {.n = 0, .max_ctx = 0};
            for (; i < run_end; i++)
                for (int h = h0; h < h1; h++, t.n++) {
                    t.q[t.n] = j->q + (size_t)i * qd + h * hd;
                    t.out[t.n] = j->out + (size_t)i * qd + h * hd;
                    t.ctx[t.n] = TRAM_MIN(b->positions[i] + 1, b->seq_lens[seq]);
                    t.max_ctx = TRAM_MAX(t.max_ctx, t.ctx[t.n]);
                }
            attend_tile(&t, j->k_cache, j->v_cache, b->block_tables + (size_t)seq * b->max_blocks_per_seq, kvh,
                        j->s, j->cs);
        }
    }
}

/* The items one at a time on the backend's pool (pool.h), or on the caller
 * alone below ATT_PAR_MIN_MACS. */
void cpu_attention(tram_backend *be, void *out, const void *q, const void *k_cache,
                          const void *v_cache, const tram_batch *b, const tram_attn_shape *s)
{
    if (s->kv_dtype != TRAM_KV_AUTO && s->head_dim > TRAM_KV_MAX_HEAD_DIM) {
        cpu_fail(be, "head_dim too large for a quantized KV cache");
        return;
    }
    int hd = s->head_dim, qd = s->n_heads * hd, group = s->n_heads / s->n_kv_heads;
    int hq = TRAM_MIN(group, ATT_ROWS), hchunks = (group + hq - 1) / hq, tt = ATT_ROWS / hq;
    int per_tile = s->n_kv_heads * hchunks, work = (b->num_tokens + tt - 1) / tt * per_tile;
    long keys = 0; /* an upper bound: a token sees at most position + 1 keys */
    for (int i = 0; i < b->num_tokens; i++)
        keys += b->positions[i] + 1;
    att_job j = {.out = out, .q = q, .k_cache = k_cache, .v_cache = v_cache, .b = b, .s = s, .cs = cpu_of(be),
                 .hq = hq, .hchunks = hchunks, .tt = tt, .per_tile = per_tile};
    tram_cpu_pool_run(keys * 2 * qd >= ATT_PAR_MIN_MACS ? cpu_of(be)->pool : NULL, work, 1, attend_items, &j);
}
