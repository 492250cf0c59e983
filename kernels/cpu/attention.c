/* attention.c — paged attention over the unified batch on the CPU, as
 * kernels/cuda/attention.cu is for CUDA.  The cache holds f32 slots or, with
 * --kv-cache-dtype int8|fp8, one-byte codes and a scale per KV head
 * (kernels/kv_format.h): each chunk of keys is then dequantized into a small
 * tile as it is read (kv_dequant.h: AVX2 where the CPU has it), never as a
 * copy of the cache.  The arithmetic on a chunk is attn_chunk.h's.
 *
 * A row's keys are cut into splits of ATT_SPLIT positions (flash-decoding):
 * each split gives a partial result (its own max, sum and Σ p·v), and the
 * partials are folded into the row's result in split order.  Where a split
 * is computed, by which thread and beside which other rows, changes nothing:
 * a row's bits depend only on its query, its keys and its context length.
 * So a decode step, where each sequence has one row per query head, spreads
 * the splits of every (sequence, KV head) over the pool as a stealable job
 * (a thread descheduled inside one does not hold the step, pool.h), while a
 * prefill tile folds its splits in one item. */
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
 * the whole tile and scored for all its rows. */
#define ATT_MAX_ROWS 48              /* query rows of one tile */
#define ATT_TILE_FLOATS (48 * 128)   /* a tile's rows x head_dim at most: fewer rows for wide heads */
#define ATT_SPLIT 128                /* keys (positions) per split */
/* Multiply-adds below which a prefill's attention runs on one thread: waking
 * a sleeping worker costs tens of microseconds, what one core needs for
 * about this much work. */
#define ATT_PAR_MIN_MACS (1L << 20)
/* The same for a decode step, whose workers are still spinning from the op
 * before (pool.c's SPIN_NS): a few microseconds of work. */
#define ATT_DECODE_PAR_MIN_MACS (1L << 16)
/* The most a decode step's partial results may take; beyond it (many long
 * sequences: items enough already) each item folds its own splits. */
#define ATT_PARTS_MAX_BYTES ((size_t)8 << 20)

static int tile_rows(int hd) { return TRAM_MAX(1, TRAM_MIN(ATT_MAX_ROWS, ATT_TILE_FLOATS / hd)); }

/* A chunk's keys and values as f32, stride floats apart: the cache's own rows
 * (kd apart), or the tiles they were dequantized into (hd apart). */
typedef struct {
    const float *k, *v;
    size_t stride;
    float k_tile[TRAM_ATTN_CHUNK_KEYS * TRAM_KV_MAX_HEAD_DIM], v_tile[TRAM_ATTN_CHUNK_KEYS * TRAM_KV_MAX_HEAD_DIM];
} att_chunk;

/* Where a tile's keys come from: one sequence's blocks of one KV head. */
typedef struct {
    const void *k_cache, *v_cache;
    const int32_t *block_table;
    int kv_head;
    const tram_attn_shape *s;
    const cpu_state *cs;
} att_src;

typedef struct {
    const float *q[ATT_MAX_ROWS];
    float *out[ATT_MAX_ROWS];
    int ctx[ATT_MAX_ROWS];   /* keys this row sees (causal) */
    int n, max_ctx;
} att_tile;

/* A row's partial result over one split, or its running fold. */
typedef struct {
    float max, sum;   /* sum 0: no key */
} att_part;

/* Points c at keys [slot, slot + nk) of the source's KV head, dequantizing
 * them with the backend's kernel (kv_dequant.h) if the cache is quantized. */
static void load_chunk(att_chunk *c, const att_src *src, size_t slot, int nk)
{
    const tram_attn_shape *s = src->s;
    int hd = s->head_dim;
    size_t kd = (size_t)s->n_kv_heads * hd;
    if (s->kv_dtype == TRAM_KV_AUTO) {
        c->k = (const float *)src->k_cache + slot * kd + (size_t)src->kv_head * hd;
        c->v = (const float *)src->v_cache + slot * kd + (size_t)src->kv_head * hd;
        c->stride = kd;
        return;
    }
    size_t sb = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, hd, sizeof(float));
    tram_kv_chunk ck = {.dtype = s->kv_dtype, .slots = (const uint8_t *)src->k_cache + slot * sb, .slot_bytes = sb,
                        .nk = nk, .kv_head = src->kv_head, .n_kv_heads = s->n_kv_heads, .head_dim = hd};
    tram_kv_chunk cv = ck;
    cv.slots = (const uint8_t *)src->v_cache + slot * sb;
    tram_kv_dequantize(src->cs->kv_kernel, c->k_tile, &ck, src->cs->fp8_lut);
    tram_kv_dequantize(src->cs->kv_kernel, c->v_tile, &cv, src->cs->fp8_lut);
    c->k = c->k_tile, c->v = c->v_tile, c->stride = hd;
}

/* Split sp of the tile's rows: each row's Σ p·v over the keys of positions
 * [sp ATT_SPLIT, (sp + 1) ATT_SPLIT) it sees into out[r], its max and sum
 * into part[r].  Chunks end at block ends and split ends, so a row's chunks
 * are the same whatever else is in the tile. */
static void attend_split(const att_tile *t, int sp, float *const *out, att_part *part, const att_src *src)
{
    int hd = src->s->head_dim, bs = src->s->block_size, end = TRAM_MIN(t->max_ctx, (sp + 1) * ATT_SPLIT);
    tram_attn_row rows[ATT_MAX_ROWS];
    for (int r = 0; r < t->n; r++) {
        rows[r] = (tram_attn_row){.q = t->q[r], .out = out[r], .max = -INFINITY, .sum = 0.0f};
        memset(out[r], 0, hd * sizeof(float));
    }
    att_chunk c;
    for (int j0 = sp * ATT_SPLIT; j0 < end;) {
        int off = j0 % bs, nk = TRAM_MIN(TRAM_MIN(TRAM_ATTN_CHUNK_KEYS, bs - off), end - j0);
        load_chunk(&c, src, (size_t)src->block_table[j0 / bs] * bs + off, nk);
        for (int r = 0; r < t->n; r++)
            rows[r].nk = TRAM_MAX(0, TRAM_MIN(nk, t->ctx[r] - j0));
        tram_attn_keys keys = {.k = c.k, .v = c.v, .stride = c.stride, .nk = nk, .head_dim = hd,
                               .scale = src->s->scale};
        tram_attn_chunk(src->cs->attn_kernel, rows, t->n, &keys);
        j0 += nk;
    }
    for (int r = 0; r < t->n; r++)
        part[r] = (att_part){rows[r].max, rows[r].sum};
}

/* acc ⊕= part: the one fold every row's splits go through, in split order
 * (the first split with keys is copied). */
static void fold(float *acc_out, att_part *acc, const float *out, att_part part, int hd)
{
    if (part.sum == 0.0f)
        return;
    if (acc->sum == 0.0f) {
        if (acc_out != out)
            memcpy(acc_out, out, hd * sizeof(float));
        *acc = part;
        return;
    }
    float m = fmaxf(acc->max, part.max), a = expf(acc->max - m), c = expf(part.max - m);
    for (int d = 0; d < hd; d++)
        acc_out[d] = acc_out[d] * a + out[d] * c;
    *acc = (att_part){m, acc->sum * a + part.sum * c};
}

static void normalize(float *out, att_part acc, int hd)
{
    float inv = 1.0f / acc.sum;
    for (int d = 0; d < hd; d++)
        out[d] *= inv;
}

/* The whole tile: split 0 straight into the rows' outputs, each later split
 * into a scratch and folded in. */
static void attend_tile(const att_tile *t, const att_src *src)
{
    int hd = src->s->head_dim;
    float scratch[ATT_TILE_FLOATS], *part_out[ATT_MAX_ROWS];
    att_part acc[ATT_MAX_ROWS], part[ATT_MAX_ROWS];
    attend_split(t, 0, t->out, acc, src);
    for (int r = 0; r < t->n; r++)
        part_out[r] = scratch + (size_t)r * hd;
    for (int sp = 1; sp * ATT_SPLIT < t->max_ctx; sp++) {
        attend_split(t, sp, part_out, part, src);
        for (int r = 0; r < t->n; r++)
            fold(t->out[r], &acc[r], part_out[r], part[r], hd);
    }
    for (int r = 0; r < t->n; r++)
        normalize(t->out[r], acc[r], hd);
}

/* How a call's query heads are cut: hq heads of one KV head per tile (and
 * tt tokens of one sequence), hchunks tiles per KV head. */
typedef struct {
    int group, hq, hchunks, tt, per_tile;
} att_grid;

static att_grid grid_of(const tram_attn_shape *s)
{
    att_grid g = {.group = s->n_heads / s->n_kv_heads};
    g.hq = TRAM_MIN(g.group, tile_rows(s->head_dim));
    g.hchunks = (g.group + g.hq - 1) / g.hq;
    g.tt = tile_rows(s->head_dim) / g.hq;
    g.per_tile = s->n_kv_heads * g.hchunks;
    return g;
}

/* The query heads [*h0, *h1) of tile slot w % per_tile, and its KV head. */
static int heads_of(const att_grid *g, int w, int *h0, int *h1)
{
    int kvh = w % g->per_tile / g->hchunks;
    *h0 = kvh * g->group + w % g->hchunks * g->hq;
    *h1 = TRAM_MIN(*h0 + g->hq, (kvh + 1) * g->group);
    return kvh;
}

/* ---------------------------------------------------------------- any batch */

typedef struct {
    float *out;
    const float *q;
    const void *k_cache, *v_cache;
    const tram_batch *b;
    const tram_attn_shape *s;
    const cpu_state *cs;
    att_grid g;
} att_job;

/* Work items [w0, w1): item = (tile of consecutive tokens, KV head, chunk of
 * that head's query heads).  A token tile that spans sequences is attended
 * one sequence's run at a time. */
static void attend_items(void *arg, int w0, int w1)
{
    const att_job *j = arg;
    const tram_batch *b = j->b;
    int hd = j->s->head_dim, qd = j->s->n_heads * hd;
    for (int w = w0; w < w1; w++) {
        int h0, h1, kvh = heads_of(&j->g, w, &h0, &h1);
        int i = w / j->g.per_tile * j->g.tt, end = TRAM_MIN(i + j->g.tt, b->num_tokens);
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
            att_src src = {j->k_cache, j->v_cache, b->block_tables + (size_t)seq * b->max_blocks_per_seq, kvh,
                           j->s, j->cs};
            attend_tile(&t, &src);
        }
    }
}

/* ---------------------------------------------------------------- decode */

/* A decode step (one token per sequence): item = (sequence, tile of query
 * heads, split), split fastest.  Each item writes its rows' partials, slots
 * of head_dim floats then max and sum, into the backend's buffer at
 * ((seq n_heads + head) splits + split); the caller folds them.  The job is
 * stealable, so it holds what it reads by value: the shape, and the batch's
 * arrays (backend memory that outlives the call) but not the batch. */
typedef struct {
    float *parts;
    const float *q;
    const void *k_cache, *v_cache;
    const int32_t *positions, *seq_lens, *block_tables;
    const cpu_state *cs;
    tram_attn_shape s;
    att_grid g;
    int max_blocks_per_seq, splits;
} att_decode_job;
_Static_assert(sizeof(att_decode_job) <= TRAM_POOL_JOB_BYTES, "a stealable job's bytes");

static size_t slot_floats(const tram_attn_shape *s) { return (size_t)s->head_dim + 2; }

/* Item w's partials into dst, its rows row_stride floats apart. */
static void decode_item(const att_decode_job *j, int w, float *dst, size_t row_stride)
{
    int sp = w % j->splits, seq = w / j->splits / j->g.per_tile, h0, h1, hd = j->s.head_dim;
    int kvh = heads_of(&j->g, w / j->splits, &h0, &h1);
    att_tile t = {.n = h1 - h0, .max_ctx = TRAM_MIN(j->positions[seq] + 1, j->seq_lens[seq])};
    float *out[ATT_MAX_ROWS];
    att_part part[ATT_MAX_ROWS];
    for (int r = 0; r < t.n; r++) {
        t.q[r] = j->q + ((size_t)seq * j->s.n_heads + h0 + r) * hd;
        t.ctx[r] = t.max_ctx;
        out[r] = dst + r * row_stride;
        part[r] = (att_part){-INFINITY, 0.0f};
    }
    if (sp * ATT_SPLIT < t.max_ctx) {
        att_src src = {j->k_cache, j->v_cache, j->block_tables + (size_t)seq * j->max_blocks_per_seq, kvh, &j->s,
                       j->cs};
        attend_split(&t, sp, out, part, &src);
    }
    for (int r = 0; r < t.n; r++)
        memcpy(out[r] + hd, &part[r], sizeof(att_part));
}

/* Where item w's first row goes in the buffer, and how far apart its rows are. */
static float *item_slot(const att_decode_job *j, int w, size_t *row_stride)
{
    int seq = w / j->splits / j->g.per_tile, h0, h1;
    heads_of(&j->g, w / j->splits, &h0, &h1);
    *row_stride = (size_t)j->splits * slot_floats(&j->s);
    return j->parts + (((size_t)seq * j->s.n_heads + h0) * j->splits + w % j->splits) * slot_floats(&j->s);
}

static void decode_in_place(void *arg, int w0, int w1)
{
    for (int w = w0; w < w1; w++) {
        size_t stride;
        float *dst = item_slot(arg, w, &stride);
        decode_item(arg, w, dst, stride);
    }
}

/* The stealable form: an item's rows one slot apart in the scratch. */
static void decode_compute(const void *arg, int w0, int w1, void *scratch)
{
    const att_decode_job *j = arg;
    for (int w = w0; w < w1; w++)
        decode_item(j, w, (float *)scratch + (size_t)(w - w0) * j->g.hq * slot_floats(&j->s), slot_floats(&j->s));
}

static void decode_commit(const void *arg, int w0, int w1, const void *scratch)
{
    const att_decode_job *j = arg;
    size_t sf = slot_floats(&j->s);
    for (int w = w0; w < w1; w++) {
        int h0, h1;
        heads_of(&j->g, w / j->splits, &h0, &h1);
        size_t stride;
        float *dst = item_slot(j, w, &stride);
        const float *src = (const float *)scratch + (size_t)(w - w0) * j->g.hq * sf;
        for (int r = 0; r < h1 - h0; r++)
            memcpy(dst + r * stride, src + r * sf, sf * sizeof(float));
    }
}

/* Each row's splits folded in order into its output. */
static void decode_merge(const att_decode_job *j, float *out, int num_seqs)
{
    int hd = j->s.head_dim;
    size_t sf = slot_floats(&j->s);
    for (int row = 0; row < num_seqs * j->s.n_heads; row++) {
        float *o = out + (size_t)row * hd;
        const float *slot = j->parts + (size_t)row * j->splits * sf;
        att_part acc = {-INFINITY, 0.0f};
        for (int sp = 0; sp < j->splits; sp++, slot += sf) {
            att_part part;
            memcpy(&part, slot + hd, sizeof(part));
            fold(o, &acc, slot, part, hd);
        }
        normalize(o, acc, hd);
    }
}

/* The splits of the longest context, or 0 when the batch is not a decode
 * step (a sequence with other than one query token). */
static int decode_splits(const tram_batch *b)
{
    int longest = 0;
    for (int i = 0; i < b->num_seqs; i++) {
        if (b->query_start[i + 1] - b->query_start[i] != 1)
            return 0;
        longest = TRAM_MAX(longest, TRAM_MIN(b->positions[i] + 1, b->seq_lens[i]));
    }
    return (longest + ATT_SPLIT - 1) / ATT_SPLIT;
}

/* A decode step through the partials; 0 when it was not one, or its
 * partials would not fit (then each item folds its own). */
static int attend_decode(tram_backend *be, float *out, const float *q, const void *k_cache, const void *v_cache,
                         const tram_batch *b, const tram_attn_shape *s, const att_grid *g)
{
    cpu_state *cs = cpu_of(be);
    int splits = decode_splits(b), items = b->num_seqs * g->per_tile * splits;
    size_t bytes = (size_t)b->num_seqs * s->n_heads * splits * slot_floats(s) * sizeof(float);
    if (!splits || bytes > ATT_PARTS_MAX_BYTES)
        return 0;
    if (cpu_reserve(be, (void **)&cs->att_parts, &cs->att_parts_cap, bytes))
        return 1;
    att_decode_job j = {.parts = cs->att_parts, .q = q, .k_cache = k_cache, .v_cache = v_cache,
                        .positions = b->positions, .seq_lens = b->seq_lens, .block_tables = b->block_tables,
                        .cs = cs, .s = *s, .g = *g, .max_blocks_per_seq = b->max_blocks_per_seq, .splits = splits};
    long macs = 0;
    for (int i = 0; i < b->num_seqs; i++)
        macs += 2L * (b->positions[i] + 1) * s->n_heads * s->head_dim;
    tram_cpu_pool *pool = macs >= ATT_DECODE_PAR_MIN_MACS ? cs->pool : NULL;
    int max_chunk = (items + TRAM_POOL_MAX_CHUNKS - 1) / TRAM_POOL_MAX_CHUNKS;
    if ((size_t)max_chunk * g->hq * slot_floats(s) * sizeof(float) <= TRAM_POOL_SCRATCH_BYTES) {
        tram_pool_stealable st = {.compute = decode_compute, .commit = decode_commit, .job = &j,
                                  .job_bytes = sizeof(j)};
        tram_cpu_pool_run_stealable(pool, items, 1, &st);
    } else {
        tram_cpu_pool_run(pool, items, 1, decode_in_place, &j);
    }
    decode_merge(&j, out, b->num_seqs);
    return 1;
}

/* A decode step's splits spread over the pool (attend_decode); any other
 * batch, items one at a time on the pool, or on the caller alone below
 * ATT_PAR_MIN_MACS. */
void cpu_attention(tram_backend *be, void *out, const void *q, const void *k_cache,
                          const void *v_cache, const tram_batch *b, const tram_attn_shape *s)
{
    if (s->kv_dtype != TRAM_KV_AUTO && s->head_dim > TRAM_KV_MAX_HEAD_DIM) {
        cpu_fail(be, "head_dim too large for a quantized KV cache");
        return;
    }
    att_grid g = grid_of(s);
    if (attend_decode(be, out, q, k_cache, v_cache, b, s, &g))
        return;
    int work = (b->num_tokens + g.tt - 1) / g.tt * g.per_tile, qd = s->n_heads * s->head_dim;
    long keys = 0; /* an upper bound: a token sees at most position + 1 keys */
    for (int i = 0; i < b->num_tokens; i++)
        keys += b->positions[i] + 1;
    att_job j = {.out = out, .q = q, .k_cache = k_cache, .v_cache = v_cache, .b = b, .s = s, .cs = cpu_of(be),
                 .g = g};
    tram_cpu_pool_run(keys * 2 * qd >= ATT_PAR_MIN_MACS ? cpu_of(be)->pool : NULL, work, 1, attend_items, &j);
}
