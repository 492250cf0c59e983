/* gguf_writer.c — GGUF v3 writer (see gguf_writer.h).  The layout mirrors
 * models/gguf.c: magic, version, counts, key/values, tensor infos, padding to
 * the alignment, then each tensor's data padded to the alignment. */
#include "models/gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ALIGNMENT 32

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int failed;     /* out of memory once: every later append is dropped */
} byte_buf;

typedef struct {
    uint64_t bytes;
} tensor_slot;

struct tram_gguf_writer {
    char path[512];
    FILE *fp;
    byte_buf kv, infos;
    uint64_t n_kv, n_tensors, next_offset;
    uint64_t alignment;
    tensor_slot *tensors;
    uint64_t cap_tensors, written;
    int header_done;
};

/* ---------------------------------------------------------------- buffer */

static void put(byte_buf *b, const void *data, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_u32(byte_buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(byte_buf *b, uint64_t v) { put(b, &v, 8); }

static void put_str(byte_buf *b, const char *s, uint64_t len)
{
    put_u64(b, len);
    put(b, s, len);
}

/* ---------------------------------------------------------------- create */

int tram_gguf_writer_create(tram_gguf_writer **out, const char *path, tram_error *err)
{
    tram_gguf_writer *w = tram_calloc(1, sizeof(*w), err);
    if (!w)
        return -1;
    snprintf(w->path, sizeof(w->path), "%s", path);
    w->alignment = DEFAULT_ALIGNMENT;
    w->fp = fopen(path, "wb");
    if (!w->fp) {
        free(w);
        return tram_fail(err, "%s: cannot create the file", path);
    }
    *out = w;
    return 0;
}

/* ---------------------------------------------------------------- key/values */

/* The little-endian encoding of a scalar, narrowed back to its type. */
static int put_scalar(byte_buf *b, tram_gguf_type type, const tram_gguf_value *v)
{
    uint64_t raw = type == TRAM_GGUF_BOOL ? (uint64_t)(v->v.b != 0) : v->v.u64;
    float f32 = (float)v->v.f64;
    switch (type) {
    case TRAM_GGUF_UINT8: case TRAM_GGUF_INT8: case TRAM_GGUF_BOOL: put(b, &raw, 1); return 0;
    case TRAM_GGUF_UINT16: case TRAM_GGUF_INT16: put(b, &raw, 2); return 0;
    case TRAM_GGUF_UINT32: case TRAM_GGUF_INT32: put(b, &raw, 4); return 0;
    case TRAM_GGUF_UINT64: case TRAM_GGUF_INT64: put(b, &raw, 8); return 0;
    case TRAM_GGUF_FLOAT32: put(b, &f32, 4); return 0;
    case TRAM_GGUF_FLOAT64: put(b, &v->v.f64, 8); return 0;
    default: return -1;
    }
}

static int set_alignment(tram_gguf_writer *w, const tram_gguf_value *v, tram_error *err)
{
    uint64_t a = v->v.u64;
    if (v->type != TRAM_GGUF_UINT32 && v->type != TRAM_GGUF_UINT64)
        return tram_fail(err, "%s: general.alignment must be an unsigned integer", w->path);
    if (!a || (a & (a - 1)) || a > 4096)
        return tram_fail(err, "%s: general.alignment %llu is not a power of two up to 4096", w->path,
                         (unsigned long long)a);
    if (w->n_tensors)
        return tram_fail(err, "%s: general.alignment must come before the tensors", w->path);
    w->alignment = a;
    return 0;
}

int tram_gguf_writer_add_kv(tram_gguf_writer *w, const char *key, const tram_gguf_value *v, tram_error *err)
{
    if (w->header_done)
        return tram_fail(err, "%s: key %s added after tensor data", w->path, key);
    if (!strcmp(key, "general.alignment") && set_alignment(w, v, err))
        return -1;
    byte_buf *b = &w->kv;
    put_str(b, key, strlen(key));
    put_u32(b, v->type);
    if (v->type == TRAM_GGUF_STRING) {
        put_str(b, v->v.str.ptr, v->v.str.len);
    } else if (v->type == TRAM_GGUF_ARRAY) {
        put_u32(b, v->v.arr.elem_type);
        put_u64(b, v->v.arr.count);
        put(b, v->v.arr.data, v->v.arr.data_len);
    } else if (put_scalar(b, v->type, v)) {
        return tram_fail(err, "%s: key %s has unknown value type %d", w->path, key, (int)v->type);
    }
    w->n_kv++;
    return 0;
}

int tram_gguf_writer_copy_kvs(tram_gguf_writer *w, const tram_gguf *g, tram_error *err)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const tram_gguf_kv *kv = &g->kv[i];
        char key[256];
        snprintf(key, sizeof(key), "%.*s", (int)TRAM_MIN(kv->key.len, 255), kv->key.ptr);
        if (strncmp(key, "tram.", 5) && tram_gguf_writer_add_kv(w, key, &kv->value, err))
            return -1;
    }
    return 0;
}

int tram_gguf_writer_add_str(tram_gguf_writer *w, const char *key, const char *s, tram_error *err)
{
    tram_gguf_value v = {.type = TRAM_GGUF_STRING, .v.str = {.ptr = s, .len = strlen(s)}};
    return tram_gguf_writer_add_kv(w, key, &v, err);
}

int tram_gguf_writer_add_u32(tram_gguf_writer *w, const char *key, uint32_t x, tram_error *err)
{
    tram_gguf_value v = {.type = TRAM_GGUF_UINT32, .v.u64 = x};
    return tram_gguf_writer_add_kv(w, key, &v, err);
}

int tram_gguf_writer_add_f32(tram_gguf_writer *w, const char *key, float x, tram_error *err)
{
    tram_gguf_value v = {.type = TRAM_GGUF_FLOAT32, .v.f64 = x};
    return tram_gguf_writer_add_kv(w, key, &v, err);
}

/* ---------------------------------------------------------------- tensors */

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

int tram_gguf_writer_add_tensor(tram_gguf_writer *w, const char *name, tram_ggml_type type, int n_dims,
                                const int64_t *ne, tram_error *err)
{
    int64_t numel = 1;
    if (w->header_done || n_dims < 1 || n_dims > 4 || strlen(name) >= sizeof(((tram_gguf_tensor *)0)->name))
        return tram_fail(err, "%s: tensor %s: bad name, shape, or declared after data", w->path, name);
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 1 || __builtin_mul_overflow(numel, ne[d], &numel))
            return tram_fail(err, "%s: tensor %s: bad dimension %d", w->path, name, d);
    int64_t bytes = tram_ggml_type_size(type, numel);
    if (bytes < 0)
        return tram_fail(err, "%s: tensor %s: type %d or its shape is not writable", w->path, name, (int)type);
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        tensor_slot *t = realloc(w->tensors, cap * sizeof(*t));
        if (!t)
            return tram_fail(err, "out of memory");
        w->tensors = t, w->cap_tensors = cap;
    }
    put_str(&w->infos, name, strlen(name));
    put_u32(&w->infos, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++)
        put_u64(&w->infos, (uint64_t)ne[d]);
    put_u32(&w->infos, type);
    put_u64(&w->infos, w->next_offset);
    w->tensors[w->n_tensors++].bytes = (uint64_t)bytes;
    w->next_offset = pad_to(w->next_offset + bytes, w->alignment);
    return 0;
}

static int write_all(tram_gguf_writer *w, const void *data, size_t n, tram_error *err)
{
    if (n && fwrite(data, 1, n, w->fp) != n)
        return tram_fail(err, "%s: write failed (disk full?)", w->path);
    return 0;
}

static int write_padding(tram_gguf_writer *w, uint64_t pos, tram_error *err)
{
    static const uint8_t zeros[4096];
    return write_all(w, zeros, pad_to(pos, w->alignment) - pos, err);
}

static int write_header(tram_gguf_writer *w, tram_error *err)
{
    byte_buf h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, w->n_tensors);
    put_u64(&h, w->n_kv);
    int rc = h.failed || w->kv.failed || w->infos.failed ? tram_fail(err, "out of memory") : 0;
    rc = rc || write_all(w, h.p, h.len, err) || write_all(w, w->kv.p, w->kv.len, err) ||
         write_all(w, w->infos.p, w->infos.len, err) ||
         write_padding(w, h.len + w->kv.len + w->infos.len, err);
    free(h.p);
    w->header_done = 1;
    return rc ? -1 : 0;
}

int tram_gguf_writer_write(tram_gguf_writer *w, const void *data, size_t bytes, tram_error *err)
{
    if (!w->header_done && write_header(w, err))
        return -1;
    if (w->written == w->n_tensors)
        return tram_fail(err, "%s: more tensor data than declared tensors", w->path);
    if (bytes != w->tensors[w->written].bytes)
        return tram_fail(err, "%s: tensor %llu: %zu bytes written, %llu declared", w->path,
                         (unsigned long long)w->written, bytes, (unsigned long long)w->tensors[w->written].bytes);
    w->written++;
    return write_all(w, data, bytes, err) || write_padding(w, bytes, err) ? -1 : 0;
}

/* ---------------------------------------------------------------- finish */

static void release(tram_gguf_writer *w)
{
    TRAM_FREE_ALL(w->kv.p, w->infos.p, w->tensors, w);
}

void tram_gguf_writer_abort(tram_gguf_writer *w)
{
    if (!w)
        return;
    if (w->fp)
        fclose(w->fp);
    remove(w->path);
    release(w);
}

int tram_gguf_writer_finish(tram_gguf_writer *w, tram_error *err)
{
    int rc = !w->header_done && write_header(w, err) ? -1 : 0;
    if (!rc && w->written != w->n_tensors)
        rc = tram_fail(err, "%s: %llu of %llu tensors written", w->path, (unsigned long long)w->written,
                       (unsigned long long)w->n_tensors);
    FILE *fp = w->fp;
    w->fp = NULL;
    if (fclose(fp) && !rc)
        rc = tram_fail(err, "%s: write failed when closing (disk full?)", w->path);
    if (rc) {
        tram_gguf_writer_abort(w);
        return -1;
    }
    release(w);
    return 0;
}
