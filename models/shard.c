/* shard.c — a rank's part of the model (see shard.h). */
#include "models/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_WEIGHTS 32 /* weights per GGUF block (Q8_0, Q4_0, Q4_1) */

static int splits(const tram_model_config *c, int world)
{
    int kv_ok = c->n_kv_heads % world == 0 || world % c->n_kv_heads == 0;
    /* MoE: the experts are divided whole (at least one a rank), a shared
     * expert's FFN like a dense one (models/moe.h) */
    int ffn_ok = c->n_experts ? c->n_experts >= world && c->shared_ffn_dim % world == 0 : c->ffn_dim % world == 0;
    return world >= 1 && c->n_heads % world == 0 && kv_ok && ffn_ok;
}

int tram_shard_check(const tram_model_config *c, int world_size, tram_error *err)
{
    if (splits(c, world_size))
        return 0;
    char fits[256] = "";
    size_t len = 0;
    for (int w = 1; w <= c->n_heads && len < sizeof(fits) - 16; w++)
        if (splits(c, w))
            len += (size_t)snprintf(fits + len, sizeof(fits) - len, "%s%d", len ? ", " : "", w);
    if (c->n_experts)
        return tram_fail(err, "%d ranks do not split this model's %d attention heads, %d KV heads, %d experts and "
                              "shared expert of %d evenly (tensor parallel sizes that do: %s)",
                         world_size, c->n_heads, c->n_kv_heads, c->n_experts, c->shared_ffn_dim, fits);
    return tram_fail(err, "%d ranks do not split this model's %d attention heads, %d KV heads and FFN of %d "
                          "evenly (tensor parallel sizes that do: %s)",
                     world_size, c->n_heads, c->n_kv_heads, c->ffn_dim, fits);
}

int tram_shard_plan(tram_shard *s, const tram_model_config *c, int rank, int world_size, tram_error *err)
{
    if (tram_shard_check(c, world_size, err))
        return -1;
    if (rank < 0 || rank >= world_size)
        return tram_fail(err, "rank %d outside a tensor-parallel world of %d", rank, world_size);
    int heads = c->n_heads / world_size, kv = TRAM_MAX(1, c->n_kv_heads / world_size);
    *s = (tram_shard){
        .rank = rank,
        .world_size = world_size,
        .n_heads = heads,
        .n_kv_heads = kv,
        .ffn_dim = c->ffn_dim / world_size,
        .head0 = rank * heads,
        /* replicated (fewer KV heads than ranks): the KV head of the rank's query heads */
        .kv_head0 = c->n_kv_heads >= world_size ? rank * kv : rank * c->n_kv_heads / world_size,
        .ffn0 = rank * (c->ffn_dim / world_size),
    };
    return 0;
}

tram_shard_part tram_shard_part_of(const tram_shard *s, const tram_model_config *c, const char *name, int rows,
                                   int cols)
{
    int hd = c->head_dim, shared = c->shared_ffn_dim / s->world_size;
    switch (tram_arch_split(tram_arch_by_name(c->arch), name)) {
    case TRAM_SPLIT_Q_ROWS: return tram_shard_rows(name, rows, cols, s->head0 * hd, s->n_heads * hd);
    case TRAM_SPLIT_KV_ROWS: return tram_shard_rows(name, rows, cols, s->kv_head0 * hd, s->n_kv_heads * hd);
    case TRAM_SPLIT_FFN_ROWS: return tram_shard_rows(name, rows, cols, s->ffn0, s->ffn_dim);
    case TRAM_SPLIT_Q_COLS: return tram_shard_cols(name, rows, cols, s->head0 * hd, s->n_heads * hd);
    case TRAM_SPLIT_FFN_COLS: return tram_shard_cols(name, rows, cols, s->ffn0, s->ffn_dim);
    case TRAM_SPLIT_SHARED_ROWS: return tram_shard_rows(name, rows, cols, s->rank * shared, shared);
    case TRAM_SPLIT_SHARED_COLS: return tram_shard_cols(name, rows, cols, s->rank * shared, shared);
    default: return tram_shard_whole(name, rows, cols);
    }
}

int tram_shard_scratch_init(tram_shard_scratch *sc, size_t packed_floats, size_t whole_floats, tram_error *err)
{
    *sc = (tram_shard_scratch){.whole_floats = whole_floats};
    sc->packed = tram_calloc(packed_floats, sizeof(float), err);
    sc->whole = sc->packed && whole_floats ? tram_calloc(whole_floats, sizeof(float), err) : NULL;
    if (!sc->packed || (whole_floats && !sc->whole)) {
        tram_shard_scratch_free(sc);
        return -1;
    }
    return 0;
}

void tram_shard_scratch_free(tram_shard_scratch *sc)
{
    free(sc->whole);
    free(sc->packed);
    *sc = (tram_shard_scratch){0};
}

static int is_whole(const tram_shard_part *p)
{
    return p->row0 == 0 && p->nrows == p->rows && p->col0 == 0 && p->ncols == p->cols;
}

/* A part is cut from the whole tensor, read into sc->whole first. */
static int whole_fits(const tram_shard_part *p, const tram_shard_scratch *sc, tram_error *err)
{
    if ((size_t)p->rows * (size_t)p->cols <= sc->whole_floats)
        return 0;
    return tram_fail(err, "%s: its %d x %d values exceed the loader's buffer for cut tensors", p->name, p->rows,
                     p->cols);
}

/* Rows [row0, +nrows), and in each the bytes [col_off, +col_bytes), of a
 * tensor whose rows are row_bytes apart. */
static size_t copy_part(char *out, const char *whole, const tram_shard_part *p, size_t row_bytes, size_t col_off,
                        size_t col_bytes)
{
    for (int r = 0; r < p->nrows; r++)
        memcpy(out + (size_t)r * col_bytes, whole + (size_t)(p->row0 + r) * row_bytes + col_off, col_bytes);
    return (size_t)p->nrows * col_bytes;
}

/* The part's f32 values into out; returns how many, or -1. */
static int64_t read_part_f32(tram_model_file *f, const tram_shard_part *p, float *out, tram_shard_scratch *sc,
                             tram_error *err)
{
    int64_t numel = (int64_t)p->rows * p->cols;
    if (is_whole(p))
        return tram_model_file_read_f32(f, p->name, out, numel, err) ? -1 : numel;
    if (whole_fits(p, sc, err) || tram_model_file_read_f32(f, p->name, sc->whole, numel, err))
        return -1;
    size_t row = (size_t)p->cols * sizeof(float);
    return (int64_t)(copy_part((char *)out, (const char *)sc->whole, p, row, (size_t)p->col0 * sizeof(float),
                               (size_t)p->ncols * sizeof(float)) / sizeof(float));
}

/* The part's GGUF blocks into out; returns their bytes, or -1. */
static int64_t read_part_blocks(tram_model_file *f, const tram_shard_part *p, char *out, tram_shard_scratch *sc,
                                tram_error *err)
{
    int64_t numel = (int64_t)p->rows * p->cols;
    size_t bytes;
    if (is_whole(p))
        return tram_model_file_read_blocks(f, p->name, out, numel, &bytes, err) ? -1 : (int64_t)bytes;
    if (p->col0 % BLOCK_WEIGHTS || p->ncols % BLOCK_WEIGHTS)
        return tram_fail(err, "%s: a tensor-parallel rank's columns [%d, %d) of its %d split the file's blocks "
                              "of %d weights, so --weight-format native cannot shard it at this size; use "
                              "--weight-format f32",
                         p->name, p->col0, p->col0 + p->ncols, p->cols, BLOCK_WEIGHTS);
    if (whole_fits(p, sc, err) || tram_model_file_read_blocks(f, p->name, sc->whole, numel, &bytes, err))
        return -1;
    size_t row = bytes / (size_t)p->rows, block = row / (size_t)(p->cols / BLOCK_WEIGHTS);
    return (int64_t)copy_part(out, (const char *)sc->whole, p, row, (size_t)p->col0 / BLOCK_WEIGHTS * block,
                              (size_t)p->ncols / BLOCK_WEIGHTS * block);
}

/* Where a weight's row scales follow its rows x cols codes in a buffer of
 * at least rows x cols floats (room for both from two columns on). */
static float *scales_after(void *codes, int64_t rows, int64_t cols)
{
    return (float *)((uint8_t *)codes + (((size_t)rows * cols + 3) & ~(size_t)3));
}

/* The part's FP8 codes (its rows, its columns of each) and its rows' scales. */
static int read_part_fp8(tram_model_file *f, const tram_shard_part *p, uint8_t *codes, float *scales,
                         tram_shard_scratch *sc, tram_error *err)
{
    if (is_whole(p))
        return tram_model_file_read_fp8(f, p->name, codes, scales, p->rows, p->cols, err);
    float *whole_scales = scales_after(sc->whole, p->rows, p->cols);
    if (whole_fits(p, sc, err) ||
        tram_model_file_read_fp8(f, p->name, (uint8_t *)sc->whole, whole_scales, p->rows, p->cols, err))
        return -1;
    copy_part((char *)codes, (const char *)sc->whole, p, (size_t)p->cols, (size_t)p->col0, (size_t)p->ncols);
    memcpy(scales, whole_scales + p->row0, (size_t)p->nrows * sizeof(float));
    return 0;
}

/* FP8 parts stacked by rows, codes and scales as the file stores them. */
static int load_fp8(tram_backend *be, tram_model_file *f, tram_weight *w, const tram_shard_part *parts, int n,
                    int rows, int cols, tram_shard_scratch *sc, tram_error *err)
{
    uint8_t *codes = (uint8_t *)sc->packed;
    float *scales = scales_after(codes, rows, cols);
    int row = 0;
    for (int i = 0; i < n; i++) {
        if (read_part_fp8(f, &parts[i], codes + (size_t)row * cols, scales + row, sc, err))
            return -1;
        row += parts[i].nrows;
    }
    be->upload_weight_fp8(be, w, codes, scales, rows, cols);
    w->act_max = tram_model_file_fp8_act_max(f);
    return be->sync(be, err);
}

/* Whether every part is stored as FP8 codes (else FP8 is quantized from f32). */
static int all_fp8(tram_model_file *f, const tram_shard_part *parts, int n)
{
    for (int i = 0; i < n; i++)
        if (!tram_model_file_is_fp8(f, parts[i].name))
            return 0;
    return n > 0;
}

static int parts_check(const tram_shard_part *parts, int n, int rows, int cols, tram_error *err)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const tram_shard_part *p = &parts[i];
        if (p->row0 < 0 || p->nrows < 1 || p->row0 + p->nrows > p->rows || p->col0 < 0 || p->ncols < 1 ||
            p->col0 + p->ncols > p->cols)
            return tram_fail(err, "%s: shard [%d, +%d) x [%d, +%d) outside its %d x %d", p->name, p->row0,
                             p->nrows, p->col0, p->ncols, p->rows, p->cols);
        total += (int64_t)p->nrows * p->ncols;
    }
    if (total != (int64_t)rows * cols)
        return tram_fail(err, "%s: shards of %lld values do not fill a %d x %d weight", parts[0].name,
                         (long long)total, rows, cols);
    return 0;
}

static int part_is_whole(const tram_shard_part *p)
{
    return p->row0 == 0 && p->nrows == p->rows && p->col0 == 0 && p->ncols == p->cols;
}

/* Dummy weights a backend draws itself: 1 when done (or failed, *rc set), 0
 * when the values must come through the host (a file of values, int8, or a
 * rank's cut of a tensor, which is cut on the host). */
static int load_dummy(tram_backend *be, tram_model_file *f, tram_weight *w, const tram_shard_part *parts, int n,
                      int rows, int cols, tram_wtype type, int *rc, tram_error *err)
{
    tram_dummy_stream streams[4];
    int64_t counts[4];
    if (!be->upload_weight_dummy || type == TRAM_W_INT8 || n > (int)TRAM_ARRAY_LEN(streams))
        return 0;
    for (int i = 0; i < n; i++) {
        counts[i] = (int64_t)parts[i].rows * parts[i].cols;
        int is = part_is_whole(&parts[i]) ? tram_model_file_dummy_stream(f, parts[i].name, counts[i], &streams[i], err)
                                          : 0;
        if (is <= 0) {
            *rc = is;
            return is < 0;
        }
    }
    be->upload_weight_dummy(be, w, streams, counts, n, rows, cols, type);
    *rc = be->sync(be, err);
    return 1;
}

int tram_shard_load(tram_backend *be, tram_model_file *f, tram_weight *w, const tram_shard_part *parts, int n,
                    int rows, int cols, tram_wtype type, tram_shard_scratch *sc, tram_error *err)
{
    if (parts_check(parts, n, rows, cols, err))
        return -1;
    int rc;
    if (type == TRAM_W_FP8 && be->upload_weight_fp8 && all_fp8(f, parts, n))
        return load_fp8(be, f, w, parts, n, rows, cols, sc, err);
    if (type < TRAM_W_Q8_0 && load_dummy(be, f, w, parts, n, rows, cols, type, &rc, err))
        return rc;
    int blocks = type >= TRAM_W_Q8_0 && type <= TRAM_W_Q4_1; /* GGUF blocks, read as stored */
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t got = blocks ? read_part_blocks(f, &parts[i], (char *)sc->packed + off, sc, err)
                             : read_part_f32(f, &parts[i], sc->packed + off, sc, err);
        if (got < 0)
            return -1;
        off += got;
    }
    if (blocks)
        be->upload_weight_blocks(be, w, sc->packed, rows, cols, type);
    else
        be->upload_weight(be, w, sc->packed, rows, cols, type);
    return be->sync(be, err);
}
