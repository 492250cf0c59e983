/* gguf.c — GGUF v2/v3 reader.
 *
 * Layout: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, the key/value
 * pairs, the tensor infos, padding to the alignment, then the tensor data.
 * All integers are little-endian.  The parser walks the mapping with a
 * cursor that checks every read against the bytes left, so nothing read
 * from the file is trusted before it is checked. */
#include "models/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/dequant.h"

typedef unsigned long long ull;

#define DEFAULT_ALIGNMENT 32
#define MAX_ARRAY_DEPTH 8       /* arrays of arrays of ...; bounds the recursion */
#define MAX_ENTRIES (1u << 30)  /* keys or tensors; index slots are 32-bit */
/* Smallest possible encodings, used to reject counts the file cannot hold
 * before allocating for them: a key/value is a key length, a value type and
 * a one-byte value; a tensor info a name length, n_dims, type and offset. */
#define MIN_KV_BYTES 13
#define MIN_TENSOR_INFO_BYTES 24
#define MIN_STRING_BYTES 8
#define MIN_ARRAY_BYTES 12

/* Open-addressing hash index from names to entry numbers.  A slot holds the
 * entry number + 1 (0 = empty); at most half the slots are used. */
typedef struct {
    uint32_t *slots;
    uint64_t mask;
} name_index;

typedef struct {
    tram_gguf pub;  /* first member: a tram_gguf * points to its gguf_impl */
    int mapped;     /* pub.map came from mmap */
    name_index kv_ix, tensor_ix;
} gguf_impl;

typedef struct {
    const uint8_t *p;
    uint64_t len, pos;
    const char *label;  /* file path or caller's label, for messages */
    tram_error *err;
} cursor;

const char *tram_gguf_type_name(tram_gguf_type t)
{
    static const char *names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                  "bool",  "string", "array",  "uint64", "int64", "float64"};
    return t < TRAM_ARRAY_LEN(names) ? names[t] : "unknown type";
}

/* Bytes of a fixed-size value type; 0 for strings, arrays and unknown types. */
static uint64_t value_size(uint32_t t)
{
    static const uint8_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < TRAM_ARRAY_LEN(sizes) ? sizes[t] : 0;
}

/* ---------------------------------------------------------------- cursor */

static int need(cursor *c, uint64_t n, const char *what)
{
    if (n > c->len - c->pos)
        return tram_fail(c->err, "%s: truncated file: %s needs %llu bytes at offset %llu, only %llu remain",
                         c->label, what, (ull)n, (ull)c->pos, (ull)(c->len - c->pos));
    return 0;
}

static int read_bytes(cursor *c, void *out, uint64_t n, const char *what)
{
    if (need(c, n, what))
        return -1;
    memcpy(out, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

static int read_u32(cursor *c, uint32_t *out, const char *what) { return read_bytes(c, out, 4, what); }
static int read_u64(cursor *c, uint64_t *out, const char *what) { return read_bytes(c, out, 8, what); }

static int read_str(cursor *c, tram_gguf_str *s, const char *what)
{
    uint64_t len;
    if (read_u64(c, &len, what))
        return -1;
    if (len > c->len - c->pos)
        return tram_fail(c->err, "%s: %s is a string of %llu bytes at offset %llu, but only %llu bytes remain",
                         c->label, what, (ull)len, (ull)c->pos, (ull)(c->len - c->pos));
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

/* ---------------------------------------------------------------- values */

/* Numbers are stored widened; the host is little-endian like the file, so
 * copying n bytes into a zeroed u64 yields the value's low bytes. */
static void widen(uint32_t type, const uint8_t *p, tram_gguf_value *v)
{
    uint64_t raw = 0;
    uint32_t raw32;
    float f32;
    memcpy(&raw, p, value_size(type));
    switch (type) {
    case TRAM_GGUF_INT8: v->v.i64 = (int8_t)raw; break;
    case TRAM_GGUF_INT16: v->v.i64 = (int16_t)raw; break;
    case TRAM_GGUF_INT32: v->v.i64 = (int32_t)raw; break;
    case TRAM_GGUF_INT64: v->v.i64 = (int64_t)raw; break;
    case TRAM_GGUF_FLOAT32:
        raw32 = (uint32_t)raw;
        memcpy(&f32, &raw32, sizeof(f32));
        v->v.f64 = f32;
        break;
    case TRAM_GGUF_FLOAT64: memcpy(&v->v.f64, &raw, sizeof(raw)); break;
    case TRAM_GGUF_BOOL: v->v.b = raw != 0; break;
    default: v->v.u64 = raw; break;  /* the unsigned types */
    }
}

static int parse_value(cursor *c, uint32_t type, tram_gguf_value *v, int depth, const char *what);

/* Validates every element once.  A top-level (depth 0) array of strings or
 * arrays also records where each element starts; the table is freed with
 * the tram_gguf. */
static int parse_array(cursor *c, tram_gguf_value *v, int depth, const char *what)
{
    uint32_t et;
    uint64_t count;
    if (depth >= MAX_ARRAY_DEPTH)
        return tram_fail(c->err, "%s: %s nests arrays deeper than %d levels", c->label, what, MAX_ARRAY_DEPTH);
    if (read_u32(c, &et, what) || read_u64(c, &count, what))
        return -1;
    if (et > TRAM_GGUF_FLOAT64)
        return tram_fail(c->err, "%s: %s is an array of unknown value type %u", c->label, what, et);
    uint64_t elem_min = et == TRAM_GGUF_STRING ? MIN_STRING_BYTES
                        : et == TRAM_GGUF_ARRAY ? MIN_ARRAY_BYTES : value_size(et);
    if (count > (c->len - c->pos) / elem_min)
        return tram_fail(c->err, "%s: %s is an array of %llu %s values, more than the %llu bytes left can hold",
                         c->label, what, (ull)count, tram_gguf_type_name(et), (ull)(c->len - c->pos));
    uint64_t start = c->pos;
    v->v.arr.elem_type = (tram_gguf_type)et;
    v->v.arr.count = count;
    v->v.arr.data = c->p + start;
    if (value_size(et)) {
        c->pos += count * elem_min;
    } else {
        uint64_t *off = NULL;
        if (depth == 0 && !(off = tram_calloc(count, sizeof(*off), c->err)))
            return -1;
        v->v.arr.elem_off = off;
        for (uint64_t i = 0; i < count; i++) {
            tram_gguf_value elem;
            if (off)
                off[i] = c->pos - start;
            if (parse_value(c, et, &elem, depth + 1, what))
                return -1;
        }
    }
    v->v.arr.data_len = c->pos - start;
    return 0;
}

static int parse_value(cursor *c, uint32_t type, tram_gguf_value *v, int depth, const char *what)
{
    memset(v, 0, sizeof(*v));
    if (type > TRAM_GGUF_FLOAT64)
        return tram_fail(c->err, "%s: %s has unknown value type %u", c->label, what, type);
    v->type = (tram_gguf_type)type;
    if (type == TRAM_GGUF_STRING)
        return read_str(c, &v->v.str, what);
    if (type == TRAM_GGUF_ARRAY)
        return parse_array(c, v, depth, what);
    if (need(c, value_size(type), what))
        return -1;
    widen(type, c->p + c->pos, v);
    c->pos += value_size(type);
    return 0;
}

static int is_unsigned(tram_gguf_type t)
{
    return t == TRAM_GGUF_UINT8 || t == TRAM_GGUF_UINT16 || t == TRAM_GGUF_UINT32 || t == TRAM_GGUF_UINT64;
}

static int is_signed(tram_gguf_type t)
{
    return t == TRAM_GGUF_INT8 || t == TRAM_GGUF_INT16 || t == TRAM_GGUF_INT32 || t == TRAM_GGUF_INT64;
}

/* Lossless conversions; -1 when the value is of another kind or out of range. */
static int to_u64(const tram_gguf_value *v, uint64_t *out)
{
    if (is_unsigned(v->type))
        *out = v->v.u64;
    else if (is_signed(v->type) && v->v.i64 >= 0)
        *out = (uint64_t)v->v.i64;
    else
        return -1;
    return 0;
}

static int to_i64(const tram_gguf_value *v, int64_t *out)
{
    if (is_signed(v->type))
        *out = v->v.i64;
    else if (is_unsigned(v->type) && v->v.u64 <= INT64_MAX)
        *out = (int64_t)v->v.u64;
    else
        return -1;
    return 0;
}

static int to_f64(const tram_gguf_value *v, double *out)
{
    if (v->type == TRAM_GGUF_FLOAT32 || v->type == TRAM_GGUF_FLOAT64)
        *out = v->v.f64;
    else if (is_signed(v->type))
        *out = (double)v->v.i64;
    else if (is_unsigned(v->type))
        *out = (double)v->v.u64;
    else
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- name index */

typedef tram_gguf_str (*name_of_fn)(const tram_gguf *g, uint32_t i);

static tram_gguf_str kv_name(const tram_gguf *g, uint32_t i) { return g->kv[i].key; }

static tram_gguf_str tensor_name(const tram_gguf *g, uint32_t i)
{
    return (tram_gguf_str){.ptr = g->tensors[i].name, .len = strlen(g->tensors[i].name)};
}

static int index_init(name_index *ix, uint64_t n, tram_error *err)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ix->mask = cap - 1;
    ix->slots = tram_calloc(cap, sizeof(*ix->slots), err);
    return ix->slots ? 0 : -1;
}

/* The slot holding `s`, or the empty slot where it would go. */
static uint64_t index_probe(const name_index *ix, const tram_gguf *g, name_of_fn name_of, const char *s,
                            uint64_t n)
{
    for (uint64_t h = tram_fnv1a(s, n) & ix->mask;; h = (h + 1) & ix->mask) {
        uint32_t e = ix->slots[h];
        tram_gguf_str other;
        if (!e || ((other = name_of(g, e - 1)).len == n && !memcmp(other.ptr, s, n)))
            return h;
    }
}

/* Adds entry i; -1 if its name is already present. */
static int index_add(name_index *ix, const tram_gguf *g, name_of_fn name_of, uint32_t i)
{
    tram_gguf_str name = name_of(g, i);
    uint64_t h = index_probe(ix, g, name_of, name.ptr, name.len);
    if (ix->slots[h])
        return -1;
    ix->slots[h] = i + 1;
    return 0;
}

static int64_t index_find(const name_index *ix, const tram_gguf *g, name_of_fn name_of, const char *s)
{
    uint64_t h = index_probe(ix, g, name_of, s, strlen(s));
    return (int64_t)ix->slots[h] - 1;
}

/* ---------------------------------------------------------------- sections */

static int parse_header(cursor *c, tram_gguf *g)
{
    uint8_t magic[4];
    if (read_bytes(c, magic, 4, "the magic number"))
        return -1;
    if (memcmp(magic, "GGUF", 4))
        return tram_fail(c->err, "%s: not a GGUF file (starts with bytes %02x %02x %02x %02x, expected \"GGUF\")",
                         c->label, magic[0], magic[1], magic[2], magic[3]);
    if (read_u32(c, &g->version, "the version"))
        return -1;
    if (g->version == 1)
        return tram_fail(c->err, "%s: GGUF version 1 is not supported (obsolete; convert the model again)", c->label);
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return tram_fail(c->err, "%s: big-endian GGUF files are not supported", c->label);
    if (g->version != 2 && g->version != 3)
        return tram_fail(c->err, "%s: unsupported GGUF version %u (versions 2 and 3 are supported)", c->label,
                         g->version);
    if (read_u64(c, &g->n_tensors, "the tensor count") || read_u64(c, &g->n_kv, "the metadata key count"))
        return -1;
    uint64_t left = c->len - c->pos;
    if (g->n_kv > left / MIN_KV_BYTES || g->n_kv > MAX_ENTRIES)
        return tram_fail(c->err, "%s: header claims %llu metadata keys, more than the %llu bytes left can hold",
                         c->label, (ull)g->n_kv, (ull)left);
    if (g->n_tensors > left / MIN_TENSOR_INFO_BYTES || g->n_tensors > MAX_ENTRIES)
        return tram_fail(c->err, "%s: header claims %llu tensors, more than the %llu bytes left can hold", c->label,
                         (ull)g->n_tensors, (ull)left);
    return 0;
}

static int parse_kvs(gguf_impl *im, cursor *c)
{
    tram_gguf *g = &im->pub;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        tram_gguf_kv *kv = &g->kv[i];
        char what[160];
        uint32_t type;
        snprintf(what, sizeof(what), "metadata key #%llu", (ull)i);
        if (read_str(c, &kv->key, what))
            return -1;
        snprintf(what, sizeof(what), "metadata key '%.*s'", (int)TRAM_MIN(kv->key.len, 100), kv->key.ptr);
        if (read_u32(c, &type, what) || parse_value(c, type, &kv->value, 0, what))
            return -1;
        if (index_add(&im->kv_ix, g, kv_name, (uint32_t)i))
            return tram_fail(c->err, "%s: duplicate %s", c->label, what);
    }
    return 0;
}

static int read_alignment(tram_gguf *g, tram_error *err)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, "general.alignment");
    uint64_t a = DEFAULT_ALIGNMENT;
    if (kv && to_u64(&kv->value, &a))
        return tram_fail(err, "%s: general.alignment has type %s, expected an unsigned integer", g->path,
                         tram_gguf_type_name(kv->value.type));
    if (a == 0 || (a & (a - 1)))
        return tram_fail(err, "%s: general.alignment = %llu is not a power of two", g->path, (ull)a);
    g->alignment = a;
    return 0;
}

/* what: "tensor 'name'", for messages. */
static int read_dims(cursor *c, tram_gguf_tensor *t, const char *what)
{
    int64_t numel = 1;
    if (read_u32(c, &t->n_dims, what))
        return -1;
    if (t->n_dims > 4)
        return tram_fail(c->err, "%s: %s has %u dimensions (at most 4 are supported)", c->label, what, t->n_dims);
    for (uint32_t d = 0; d < 4; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && read_u64(c, &ne, what))
            return -1;
        if (ne > INT64_MAX)
            return tram_fail(c->err, "%s: %s dimension %u is negative", c->label, what, d);
        t->ne[d] = (int64_t)ne;
        if (__builtin_mul_overflow(numel, t->ne[d], &numel))
            return tram_fail(c->err, "%s: %s has more elements than fit in 64 bits", c->label, what);
    }
    return 0;
}

static int parse_tensor_info(cursor *c, tram_gguf_tensor *t, uint64_t i)
{
    char what[sizeof(t->name) + 16];
    tram_gguf_str name;
    uint32_t type;
    snprintf(what, sizeof(what), "the name of tensor #%llu", (ull)i);
    if (read_str(c, &name, what))
        return -1;
    if (name.len >= sizeof(t->name) || memchr(name.ptr, 0, name.len))
        return tram_fail(c->err, "%s: %s is not a NUL-free string of at most %zu bytes", c->label, what,
                         sizeof(t->name) - 1);
    memcpy(t->name, name.ptr, name.len);
    snprintf(what, sizeof(what), "tensor '%s'", t->name);
    if (read_dims(c, t, what) || read_u32(c, &type, what))
        return -1;
    t->type = (tram_ggml_type)type;
    int64_t block = tram_ggml_block_size(t->type);
    if (!block)
        return tram_fail(c->err, "%s: %s has unknown type %u", c->label, what, type);
    if (t->ne[0] % block)
        return tram_fail(c->err, "%s: %s rows of %lld elements are not whole %s blocks of %lld", c->label, what,
                         (long long)t->ne[0], tram_ggml_type_name(t->type), (long long)block);
    int64_t nbytes = tram_ggml_type_size(t->type, tram_gguf_tensor_numel(t));
    if (nbytes < 0)
        return tram_fail(c->err, "%s: %s is too large", c->label, what);
    t->nbytes = (uint64_t)nbytes;
    return read_u64(c, &t->offset, what);
}

static int parse_tensor_infos(gguf_impl *im, cursor *c)
{
    tram_gguf *g = &im->pub;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if (parse_tensor_info(c, &g->tensors[i], i))
            return -1;
        if (index_add(&im->tensor_ix, g, tensor_name, (uint32_t)i))
            return tram_fail(c->err, "%s: duplicate tensor name '%s'", c->label, g->tensors[i].name);
    }
    return 0;
}

/* The data section starts at the first aligned offset after the infos. */
static int place_tensors(tram_gguf *g, uint64_t infos_end, tram_error *err)
{
    uint64_t start = infos_end + (g->alignment - infos_end % g->alignment) % g->alignment;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        tram_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return tram_fail(err, "%s: tensor '%s' offset %llu is not a multiple of the alignment %llu", g->path,
                             t->name, (ull)t->offset, (ull)g->alignment);
        if (start > g->map_len || t->offset > g->map_len - start || t->nbytes > g->map_len - start - t->offset)
            return tram_fail(err, "%s: tensor '%s' data (%llu bytes at file offset %llu) extends past the end of "
                             "the file (%zu bytes)", g->path, t->name, (ull)t->nbytes, (ull)(start + t->offset),
                             g->map_len);
        t->data = g->map + start + t->offset;
    }
    return 0;
}

static int parse(gguf_impl *im, tram_error *err)
{
    tram_gguf *g = &im->pub;
    cursor c = {.p = g->map, .len = g->map_len, .label = g->path, .err = err};
    if (parse_header(&c, g))
        return -1;
    if (!(g->kv = tram_calloc(g->n_kv, sizeof(*g->kv), err)) ||
        !(g->tensors = tram_calloc(g->n_tensors, sizeof(*g->tensors), err)) ||
        index_init(&im->kv_ix, g->n_kv, err) || index_init(&im->tensor_ix, g->n_tensors, err))
        return -1;
    if (parse_kvs(im, &c) || read_alignment(g, err) || parse_tensor_infos(im, &c))
        return -1;
    return place_tensors(g, c.pos, err);
}

/* ---------------------------------------------------------------- open / close */

static gguf_impl *impl_new(const char *label, tram_error *err)
{
    gguf_impl *im = tram_calloc(1, sizeof(*im), err);
    if (im)
        snprintf(im->pub.path, sizeof(im->pub.path), "%s", label);
    return im;
}

static int finish_open(gguf_impl *im, tram_gguf **out, tram_error *err)
{
    if (parse(im, err)) {
        tram_gguf_close(&im->pub);
        return -1;
    }
    *out = &im->pub;
    return 0;
}

int tram_gguf_open_memory(tram_gguf **out, const void *buf, size_t len, const char *label, tram_error *err)
{
    gguf_impl *im = impl_new(label ? label : "<memory>", err);
    if (!im)
        return -1;
    im->pub.map = buf;
    im->pub.map_len = buf ? len : 0;
    return finish_open(im, out, err);
}

static int map_file(gguf_impl *im, const char *path, tram_error *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tram_fail(err, "%s: cannot open: %s", path, strerror(errno));
    int rc = -1;
    if (fstat(fd, &st))
        tram_fail(err, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        tram_fail(err, "%s: not a regular file (a GGUF model file is expected)", path);
    else if (st.st_size == 0)
        tram_fail(err, "%s: truncated file: it is empty", path);
    else if ((im->pub.map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        tram_fail(err, "%s: cannot mmap %lld bytes: %s", path, (long long)st.st_size, strerror(errno));
    else
        rc = 0;
    if (rc == 0) {
        im->pub.map_len = (size_t)st.st_size;
        im->mapped = 1;
    } else {
        im->pub.map = NULL;
    }
    close(fd);
    return rc;
}

int tram_gguf_open(tram_gguf **out, const char *path, tram_error *err)
{
    gguf_impl *im = impl_new(path, err);
    if (!im)
        return -1;
    if (map_file(im, path, err)) {
        free(im);
        return -1;
    }
    return finish_open(im, out, err);
}

void tram_gguf_close(tram_gguf *g)
{
    if (!g)
        return;
    gguf_impl *im = (gguf_impl *)g;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
        if (g->kv[i].value.type == TRAM_GGUF_ARRAY)
            free((void *)g->kv[i].value.v.arr.elem_off);
    TRAM_FREE_ALL(g->kv, g->tensors, im->kv_ix.slots, im->tensor_ix.slots);
    if (im->mapped)
        munmap((void *)g->map, g->map_len);
    free(im);
}

/* ---------------------------------------------------------------- lookups */

const tram_gguf_kv *tram_gguf_find_kv(const tram_gguf *g, const char *key)
{
    int64_t i = index_find(&((const gguf_impl *)g)->kv_ix, g, kv_name, key);
    return i < 0 ? NULL : &g->kv[i];
}

const tram_gguf_tensor *tram_gguf_find_tensor(const tram_gguf *g, const char *name)
{
    int64_t i = index_find(&((const gguf_impl *)g)->tensor_ix, g, tensor_name, name);
    return i < 0 ? NULL : &g->tensors[i];
}

static const tram_gguf_value *find_value(const tram_gguf *g, const char *key, tram_error *err)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, key);
    if (!kv)
        tram_fail(err, "%s: metadata key '%s' is missing", g->path, key);
    return kv ? &kv->value : NULL;
}

static int wrong_type(const tram_gguf *g, const char *key, const tram_gguf_value *v, const char *expected,
                      tram_error *err)
{
    return tram_fail(err, "%s: metadata key '%s' has type %s, expected %s", g->path, key,
                     tram_gguf_type_name(v->type), expected);
}

int tram_gguf_get_u64(const tram_gguf *g, const char *key, uint64_t *out, tram_error *err)
{
    const tram_gguf_value *v = find_value(g, key, err);
    if (!v)
        return -1;
    return to_u64(v, out) ? wrong_type(g, key, v, "a non-negative integer", err) : 0;
}

int tram_gguf_get_f64(const tram_gguf *g, const char *key, double *out, tram_error *err)
{
    const tram_gguf_value *v = find_value(g, key, err);
    if (!v)
        return -1;
    return to_f64(v, out) ? wrong_type(g, key, v, "a number", err) : 0;
}

int tram_gguf_get_bool(const tram_gguf *g, const char *key, int *out, tram_error *err)
{
    const tram_gguf_value *v = find_value(g, key, err);
    if (!v)
        return -1;
    if (v->type != TRAM_GGUF_BOOL)
        return wrong_type(g, key, v, "bool", err);
    *out = v->v.b;
    return 0;
}

int tram_gguf_get_str(const tram_gguf *g, const char *key, char **out, tram_error *err)
{
    const tram_gguf_value *v = find_value(g, key, err);
    if (!v)
        return -1;
    if (v->type != TRAM_GGUF_STRING)
        return wrong_type(g, key, v, "string", err);
    char *s = tram_calloc(v->v.str.len + 1, 1, err);
    if (!s)
        return -1;
    memcpy(s, v->v.str.ptr, v->v.str.len);
    *out = s;
    return 0;
}

/* ---------------------------------------------------------------- arrays */

/* Re-decodes element i with the parser that validated it at open, so the
 * reads stay inside the array's bytes even for nested arrays. */
int tram_gguf_arr_elem(const tram_gguf_value *arr, uint64_t i, tram_gguf_value *out, tram_error *err)
{
    if (arr->type != TRAM_GGUF_ARRAY)
        return tram_fail(err, "value has type %s, not array", tram_gguf_type_name(arr->type));
    if (i >= arr->v.arr.count)
        return tram_fail(err, "array index %llu is out of range (%llu elements)", (ull)i, (ull)arr->v.arr.count);
    cursor c = {.p = arr->v.arr.data, .len = arr->v.arr.data_len, .label = "array", .err = err};
    uint32_t et = arr->v.arr.elem_type;
    if (value_size(et))
        c.pos = i * value_size(et);
    else if (arr->v.arr.elem_off)
        c.pos = arr->v.arr.elem_off[i];
    else
        for (uint64_t k = 0; k < i; k++)  /* nested arrays keep no offset table */
            if (parse_value(&c, et, out, 1, "array element"))
                return -1;
    return parse_value(&c, et, out, 1, "array element");
}

static int wrong_elem_type(uint64_t i, const tram_gguf_value *v, const char *expected, tram_error *err)
{
    return tram_fail(err, "array element %llu has type %s, expected %s", (ull)i, tram_gguf_type_name(v->type),
                     expected);
}

int tram_gguf_arr_str(const tram_gguf_value *arr, uint64_t i, tram_gguf_str *out, tram_error *err)
{
    tram_gguf_value v;
    if (tram_gguf_arr_elem(arr, i, &v, err))
        return -1;
    if (v.type != TRAM_GGUF_STRING)
        return wrong_elem_type(i, &v, "string", err);
    *out = v.v.str;
    return 0;
}

int tram_gguf_arr_f64(const tram_gguf_value *arr, uint64_t i, double *out, tram_error *err)
{
    tram_gguf_value v;
    if (tram_gguf_arr_elem(arr, i, &v, err))
        return -1;
    return to_f64(&v, out) ? wrong_elem_type(i, &v, "a number", err) : 0;
}

int tram_gguf_arr_i64(const tram_gguf_value *arr, uint64_t i, int64_t *out, tram_error *err)
{
    tram_gguf_value v;
    if (tram_gguf_arr_elem(arr, i, &v, err))
        return -1;
    return to_i64(&v, out) ? wrong_elem_type(i, &v, "an integer that fits in int64", err) : 0;
}

/* ---------------------------------------------------------------- tensors */

int64_t tram_gguf_tensor_numel(const tram_gguf_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];  /* checked against overflow at open */
}

int tram_gguf_dequantize(const tram_gguf_tensor *t, float *out, tram_error *err)
{
    tram_error why;
    if (tram_dequantize(t->type, t->data, out, tram_gguf_tensor_numel(t), &why))
        return tram_fail(err, "tensor '%s': %s", t->name, why.msg);
    return 0;
}
