/* test_gguf.c — the GGUF reader against files written by the `gguf` Python
 * package (tests/fixtures/make_gguf_fixtures.py; the metadata values below
 * are the ones that script writes), hand-built malformed files, and the
 * default model. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "kernels/dequant.h"
#include "models/gguf.h"

#define FIXTURES "tests/fixtures/gguf/"

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*len + 1);
    cr_assert(buf && fread(buf, 1, *len, f) == *len);
    fclose(f);
    return buf;
}

static tram_gguf *open_ok(const char *path)
{
    tram_gguf *g;
    tram_error err;
    cr_assert(tram_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    return g;
}

static const tram_gguf_value *value_of(const tram_gguf *g, const char *key)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, key);
    cr_assert(kv, "key %s missing", key);
    return &kv->value;
}

static uint64_t u64_of(const tram_gguf *g, const char *key)
{
    uint64_t v;
    tram_error err;
    cr_assert(tram_gguf_get_u64(g, key, &v, &err) == 0, "%s", err.msg);
    return v;
}

static int64_t arr_i64(const tram_gguf_value *arr, uint64_t i)
{
    int64_t v;
    tram_error err;
    cr_assert(tram_gguf_arr_i64(arr, i, &v, &err) == 0, "%s", err.msg);
    return v;
}

static tram_gguf_value arr_elem(const tram_gguf_value *arr, uint64_t i)
{
    tram_gguf_value v;
    tram_error err;
    cr_assert(tram_gguf_arr_elem(arr, i, &v, &err) == 0, "%s", err.msg);
    return v;
}

static void expect_str(tram_gguf_str s, const char *want)
{
    cr_assert(s.len == strlen(want) && !memcmp(s.ptr, want, s.len), "got '%.*s', want '%s'", (int)s.len, s.ptr,
              want);
}

/* ---------------------------------------------------------------- metadata */

static void check_scalars(const tram_gguf *g)
{
    const tram_gguf_value *v;
    cr_assert_eq(value_of(g, "test.u8")->type, TRAM_GGUF_UINT8);
    cr_assert_eq(value_of(g, "test.u8")->v.u64, 200);
    cr_assert_eq((v = value_of(g, "test.i8"))->type, TRAM_GGUF_INT8);
    cr_assert_eq(v->v.i64, -100);
    cr_assert_eq(value_of(g, "test.u16")->v.u64, 60000);
    cr_assert_eq(value_of(g, "test.i16")->v.i64, -30000);
    cr_assert_eq(value_of(g, "test.u32")->v.u64, 4000000000u);
    cr_assert_eq(value_of(g, "test.i32")->v.i64, -2000000000);
    cr_assert_eq((v = value_of(g, "test.f32"))->type, TRAM_GGUF_FLOAT32);
    cr_assert_eq(v->v.f64, 3.25);
    cr_assert_eq(u64_of(g, "test.u64"), (1ull << 63) + 5);
    cr_assert_eq(value_of(g, "test.i64")->v.i64, -(INT64_C(1) << 62) - 7);
    cr_assert_eq(value_of(g, "test.f64")->v.f64, 2.718281828459045);
    cr_assert_eq(u64_of(g, "test.after_arrays"), 77);

    int b;
    tram_error err;
    cr_assert(tram_gguf_get_bool(g, "test.true", &b, &err) == 0 && b == 1);
    cr_assert(tram_gguf_get_bool(g, "test.false", &b, &err) == 0 && b == 0);
    char *s;
    cr_assert(tram_gguf_get_str(g, "test.str", &s, &err) == 0, "%s", err.msg);
    cr_assert_str_eq(s, "h\xc3\xa9llo, w\xc3\xb6rld \xe2\x9c\x93");
    free(s);
    cr_assert(tram_gguf_get_str(g, "test.empty_str", &s, &err) == 0, "%s", err.msg);
    cr_assert_str_eq(s, "");
    free(s);
    cr_assert(tram_gguf_get_str(g, "general.architecture", &s, &err) == 0);
    cr_assert_str_eq(s, "testarch");
    free(s);
}

static void check_conversions(const tram_gguf *g)
{
    tram_error err;
    uint64_t u;
    double d;
    char *s;
    int b;
    cr_assert_eq(tram_gguf_get_u64(g, "test.i8", &u, &err), -1, "negative to unsigned");
    cr_assert(strstr(err.msg, "test.i8") && strstr(err.msg, "int8"), "%s", err.msg);
    cr_assert_eq(tram_gguf_get_u64(g, "test.f32", &u, &err), -1, "float to integer");
    cr_assert(tram_gguf_get_u64(g, "test.i16", &u, &err) == -1);
    cr_assert(tram_gguf_get_u64(g, "test.u16", &u, &err) == 0 && u == 60000);
    cr_assert(tram_gguf_get_f64(g, "test.i32", &d, &err) == 0 && d == -2e9);
    cr_assert(tram_gguf_get_f64(g, "test.f32", &d, &err) == 0 && d == 3.25);
    cr_assert_eq(tram_gguf_get_f64(g, "test.str", &d, &err), -1);
    cr_assert_eq(tram_gguf_get_bool(g, "test.u8", &b, &err), -1);
    cr_assert_eq(tram_gguf_get_str(g, "test.u8", &s, &err), -1);
    cr_assert(strstr(err.msg, "fixtures/gguf/metadata") && strstr(err.msg, "uint8"), "%s", err.msg);
    cr_assert_eq(tram_gguf_get_u64(g, "no.such.key", &u, &err), -1);
    cr_assert(strstr(err.msg, "no.such.key") && strstr(err.msg, "missing"), "%s", err.msg);
    cr_assert_null(tram_gguf_find_kv(g, "test"), "prefix of a key is not a key");
}

static void check_arrays(const tram_gguf *g)
{
    const tram_gguf_value *a = value_of(g, "test.arr_u8");
    tram_error err;
    double d;
    int64_t i;
    cr_assert(a->type == TRAM_GGUF_ARRAY && a->v.arr.elem_type == TRAM_GGUF_UINT8 && a->v.arr.count == 3);
    cr_assert_eq(arr_i64(a, 2), 255);
    a = value_of(g, "test.arr_i32");
    cr_assert_eq(arr_i64(a, 1), -2);
    cr_assert_eq(arr_i64(a, 3), INT32_MIN);
    cr_assert_eq(tram_gguf_arr_i64(a, 4, &i, &err), -1, "index out of range");
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    a = value_of(g, "test.arr_f32");
    cr_assert(tram_gguf_arr_f64(a, 1, &d, &err) == 0 && d == -1.25);
    cr_assert(tram_gguf_arr_f64(a, 2, &d, &err) == 0 && d == (double)1e-3f);
    cr_assert_eq(tram_gguf_arr_i64(a, 0, &i, &err), -1, "float is not an integer");
    a = value_of(g, "test.arr_u64");
    cr_assert_eq(tram_gguf_arr_i64(a, 1, &i, &err), -1, "2^64-1 does not fit in int64");
    cr_assert(tram_gguf_arr_f64(a, 1, &d, &err) == 0 && d == 18446744073709551615.0);
    a = value_of(g, "test.arr_f64");
    cr_assert(tram_gguf_arr_f64(a, 0, &d, &err) == 0 && d == 1e300);
    a = value_of(g, "test.arr_bool");
    cr_assert(a->v.arr.count == 3 && arr_elem(a, 1).v.b == 0 && arr_elem(a, 2).v.b == 1);

    a = value_of(g, "test.arr_str");
    const char *want[] = {"a", "", "ccc", "d\xc3\xa9j\xc3\xa0"};
    cr_assert_eq(a->v.arr.count, 4);
    for (uint64_t k = 4; k-- > 0;) {  /* backwards: access must not depend on order */
        tram_gguf_str s;
        cr_assert(tram_gguf_arr_str(a, k, &s, &err) == 0, "%s", err.msg);
        expect_str(s, want[k]);
    }
    cr_assert_eq(tram_gguf_arr_f64(a, 0, &d, &err), -1, "string is not a number");
}

static void check_nested_arrays(const tram_gguf *g)
{
    const tram_gguf_value *a = value_of(g, "test.arr_nested");
    cr_assert(a->v.arr.elem_type == TRAM_GGUF_ARRAY && a->v.arr.count == 3);
    tram_gguf_value inner = arr_elem(a, 2);
    cr_assert(inner.type == TRAM_GGUF_ARRAY && inner.v.arr.elem_type == TRAM_GGUF_INT32 && inner.v.arr.count == 3);
    cr_assert_eq(arr_i64(&inner, 2), 6);
    inner = arr_elem(a, 1);
    cr_assert(inner.v.arr.count == 1 && arr_i64(&inner, 0) == 3);

    a = value_of(g, "test.arr_nested_str");
    inner = arr_elem(a, 0);
    tram_gguf_str s;
    tram_error err;
    cr_assert(tram_gguf_arr_str(&inner, 1, &s, &err) == 0, "%s", err.msg);
    expect_str(s, "yy");
    inner = arr_elem(a, 1);
    cr_assert(tram_gguf_arr_str(&inner, 0, &s, &err) == 0, "%s", err.msg);
    expect_str(s, "zzz");

    a = value_of(g, "test.arr_deep");  /* [[[1], [2, 3]], [[4]]] */
    tram_gguf_value mid = arr_elem(a, 0);
    inner = arr_elem(&mid, 1);
    cr_assert(inner.v.arr.count == 2 && arr_i64(&inner, 1) == 3);
    mid = arr_elem(a, 1);
    inner = arr_elem(&mid, 0);
    cr_assert(inner.v.arr.count == 1 && arr_i64(&inner, 0) == 4);
}

static void check_tensors(const tram_gguf *g)
{
    cr_assert_eq(g->n_tensors, 2);
    const tram_gguf_tensor *a = tram_gguf_find_tensor(g, "t.a"), *b = tram_gguf_find_tensor(g, "t.b");
    cr_assert(a && b);
    cr_assert(a->n_dims == 2 && a->ne[0] == 3 && a->ne[1] == 2 && a->ne[2] == 1 && a->type == TRAM_GGML_F32);
    cr_assert(b->n_dims == 1 && b->ne[0] == 16 && tram_gguf_tensor_numel(b) == 16);
    cr_assert_eq((a->data - g->map) % 64, 0, "data aligned to general.alignment");
    cr_assert_eq((b->data - g->map) % 64, 0);
    float v[16];
    tram_error err;
    cr_assert(tram_gguf_dequantize(a, v, &err) == 0, "%s", err.msg);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(v[i], (float)i);
    cr_assert(tram_gguf_dequantize(b, v, &err) == 0);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(v[i], (i - 8) / 4.0f);
    cr_assert_null(tram_gguf_find_tensor(g, "t.c"));
    cr_assert_null(tram_gguf_find_tensor(g, "t."));
}

static void check_metadata_file(const char *path, uint32_t version)
{
    tram_gguf *g = open_ok(path);
    cr_assert_eq(g->version, version);
    cr_assert_eq(g->alignment, 64);
    cr_assert_eq(g->n_kv, 28);
    check_scalars(g);
    check_conversions(g);
    check_arrays(g);
    check_nested_arrays(g);
    check_tensors(g);
    tram_gguf_close(g);
}

Test(gguf, metadata_v3) { check_metadata_file(FIXTURES "metadata.gguf", 3); }
Test(gguf, metadata_v2) { check_metadata_file(FIXTURES "metadata_v2.gguf", 2); }

Test(gguf, open_memory_matches_file)
{
    size_t len;
    uint8_t *buf = read_file(FIXTURES "types.gguf", &len);
    tram_gguf *g, *f = open_ok(FIXTURES "types.gguf");
    tram_error err;
    cr_assert(tram_gguf_open_memory(&g, buf, len, "types", &err) == 0, "%s", err.msg);
    cr_assert_eq(g->n_tensors, f->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        cr_assert_str_eq(g->tensors[i].name, f->tensors[i].name);
        cr_assert_eq(g->tensors[i].nbytes, f->tensors[i].nbytes);
        cr_assert(!memcmp(g->tensors[i].data, f->tensors[i].data, g->tensors[i].nbytes));
    }
    tram_gguf_close(g);
    tram_gguf_close(f);
    free(buf);
}

Test(gguf, missing_file_and_directory)
{
    tram_gguf *g;
    tram_error err;
    cr_assert_eq(tram_gguf_open(&g, FIXTURES "does-not-exist.gguf", &err), -1);
    cr_assert(strstr(err.msg, "does-not-exist.gguf"), "%s", err.msg);
    cr_assert_eq(tram_gguf_open(&g, FIXTURES, &err), -1);
    cr_assert(strstr(err.msg, "not a regular file"), "%s", err.msg);
}

/* ---------------------------------------------------------------- malformed */

/* Builds GGUF bytes by hand, independently of the reader. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} builder;

static void put(builder *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u32(builder *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(builder *b, uint64_t v) { put(b, &v, 8); }
static void put_str(builder *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void put_header(builder *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

static void put_kv_u32(builder *b, const char *key, uint32_t v)
{
    put_str(b, key);
    put_u32(b, TRAM_GGUF_UINT32);
    put_u32(b, v);
}

/* A file whose one metadata key holds a value of `type`; the caller writes
 * the value. */
static void put_one_key(builder *b, const char *key, uint32_t type)
{
    put_header(b, 3, 0, 1);
    put_str(b, key);
    put_u32(b, type);
}

static void put_tensor_info(builder *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                            uint64_t offset)
{
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        put_u64(b, ne[d]);
    put_u32(b, type);
    put_u64(b, offset);
}

static void put_data(builder *b, size_t align, size_t n)
{
    static const uint8_t zeros[64];
    put(b, zeros, (align - b->len % align) % align);
    for (size_t k = 0; k < n; k += TRAM_MIN(n - k, sizeof(zeros)))
        put(b, zeros, TRAM_MIN(n - k, sizeof(zeros)));
}

static void expect_error(builder *b, const char *needle)
{
    tram_gguf *g = NULL;
    tram_error err = {{0}};
    int rc = tram_gguf_open_memory(&g, b->p, b->len, "crafted.gguf", &err);
    cr_assert_eq(rc, -1, "expected an error mentioning '%s'", needle);
    cr_assert(strstr(err.msg, "crafted.gguf") && strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg,
              needle);
    free(b->p);
}

static tram_gguf *expect_ok(builder *b)
{
    tram_gguf *g = NULL;
    tram_error err;
    cr_assert(tram_gguf_open_memory(&g, b->p, b->len, "crafted.gguf", &err) == 0, "%s", err.msg);
    return g;
}

/* One f32 tensor [4] after an alignment key: the base the cases vary. */
static void put_valid(builder *b, uint32_t align)
{
    uint64_t ne[] = {4};
    put_header(b, 3, 1, 1);
    put_kv_u32(b, "general.alignment", align);
    put_tensor_info(b, "w", 1, ne, TRAM_GGML_F32, 0);
    put_data(b, align, 16);
}

Test(gguf, crafted_valid_file)
{
    builder b = {0};
    put_valid(&b, 16);
    tram_gguf *g = expect_ok(&b);
    cr_assert(g->alignment == 16 && g->n_tensors == 1 && tram_gguf_find_tensor(g, "w")->nbytes == 16);
    tram_gguf_close(g);
    free(b.p);
}

Test(gguf, rejects_bad_magic_and_versions)
{
    builder b = {0};
    put_valid(&b, 32);
    b.p[3] = 'X';
    expect_error(&b, "not a GGUF file");
    uint32_t versions[] = {1, 4, 0, 0x03000000};
    const char *needles[] = {"version 1 is not supported", "unsupported GGUF version 4", "version 0", "big-endian"};
    for (int i = 0; i < 4; i++) {
        builder v = {0};
        put_valid(&v, 32);
        memcpy(v.p + 4, &versions[i], 4);
        expect_error(&v, needles[i]);
    }
}

Test(gguf, rejects_every_truncation)
{
    size_t len;
    uint8_t *full = read_file(FIXTURES "metadata.gguf", &len);
    tram_error err;
    tram_gguf *g;
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n + 1);  /* exact size, so ASan sees any over-read */
        memcpy(cut, full, n);
        err.msg[0] = 0;
        cr_assert_eq(tram_gguf_open_memory(&g, cut, n, "cut.gguf", &err), -1, "truncated to %zu bytes", n);
        cr_assert(strstr(err.msg, "cut.gguf"), "%zu bytes: %s", n, err.msg);
        cr_assert(strstr(err.msg, "truncated") || strstr(err.msg, "remain") || strstr(err.msg, "left") ||
                      strstr(err.msg, "past the end"),
                  "%zu bytes: %s", n, err.msg);
        free(cut);
    }
    free(full);
}

Test(gguf, rejects_absurd_counts)
{
    builder b = {0};
    put_header(&b, 3, 0, 1ull << 40);
    put_kv_u32(&b, "a", 1);
    expect_error(&b, "metadata keys");
    b = (builder){0};
    put_header(&b, 3, UINT64_MAX, 0);
    put_data(&b, 1, 100);
    expect_error(&b, "tensors");
    b = (builder){0};
    put_header(&b, 3, 0, 1);
    put_u64(&b, 1ull << 40);  /* key length */
    put(&b, "abcdefgh", 8);
    expect_error(&b, "string of 1099511627776 bytes");
    b = (builder){0};
    put_one_key(&b, "s", TRAM_GGUF_STRING);
    put_u64(&b, UINT64_MAX);
    expect_error(&b, "metadata key 's'");
    b = (builder){0};
    put_one_key(&b, "arr", TRAM_GGUF_ARRAY);
    put_u32(&b, TRAM_GGUF_UINT64);
    put_u64(&b, (1ull << 61) + 1);  /* times 8 bytes wraps around 2^64 */
    put_u64(&b, 0);
    expect_error(&b, "array of 2305843009213693953 uint64");
}

Test(gguf, rejects_unknown_and_malformed_values)
{
    builder b = {0};
    put_one_key(&b, "k", 13);
    put_u64(&b, 0);
    expect_error(&b, "unknown value type 13");
    b = (builder){0};
    put_one_key(&b, "k", TRAM_GGUF_ARRAY);
    put_u32(&b, 99);
    put_u64(&b, 0);
    expect_error(&b, "unknown value type 99");
    b = (builder){0};
    put_one_key(&b, "deep", TRAM_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        put_u32(&b, TRAM_GGUF_ARRAY);
        put_u64(&b, 1);
    }
    expect_error(&b, "deeper");
    b = (builder){0};
    put_header(&b, 3, 0, 2);
    put_kv_u32(&b, "twice", 1);
    put_kv_u32(&b, "twice", 2);
    expect_error(&b, "duplicate metadata key 'twice'");
}

Test(gguf, empty_arrays_and_no_tensors)
{
    builder b = {0};
    put_header(&b, 3, 0, 2);
    put_str(&b, "empty");
    put_u32(&b, TRAM_GGUF_ARRAY);
    put_u32(&b, TRAM_GGUF_STRING);
    put_u64(&b, 0);
    put_str(&b, "empty_nested");
    put_u32(&b, TRAM_GGUF_ARRAY);
    put_u32(&b, TRAM_GGUF_ARRAY);
    put_u64(&b, 1);
    put_u32(&b, TRAM_GGUF_INT32);
    put_u64(&b, 0);
    tram_gguf *g = expect_ok(&b);
    tram_gguf_str s;
    tram_error err;
    const tram_gguf_value *v = value_of(g, "empty");
    cr_assert_eq(v->v.arr.count, 0);
    cr_assert_eq(tram_gguf_arr_str(v, 0, &s, &err), -1);
    tram_gguf_value inner = arr_elem(value_of(g, "empty_nested"), 0);
    cr_assert(inner.type == TRAM_GGUF_ARRAY && inner.v.arr.count == 0);
    tram_gguf_close(g);
    free(b.p);
}

Test(gguf, rejects_bad_alignment)
{
    uint32_t bad[] = {0, 3, 48};
    for (int i = 0; i < 3; i++) {
        builder b = {0};
        put_valid(&b, 64);
        memcpy(b.p + 24 + 8 + strlen("general.alignment") + 4, &bad[i], 4);
        expect_error(&b, "power of two");
    }
    builder b = {0};
    put_one_key(&b, "general.alignment", TRAM_GGUF_FLOAT32);
    put(&b, &(float){32.0f}, 4);
    expect_error(&b, "general.alignment has type float32");
}

/* A file with one tensor info as given and `data` bytes of data. */
static void put_one_tensor(builder *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                           uint64_t offset, size_t data)
{
    put_header(b, 3, 1, 0);
    put_tensor_info(b, name, n_dims, ne, type, offset);
    put_data(b, 32, data);
}

/* A tensor info the reader must refuse, and what its message names. */
typedef struct {
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t type;
    uint64_t offset;
    size_t data;
    const char *error;
} bad_tensor;

Test(gguf, rejects_bad_tensor_infos)
{
    static const bad_tensor cases[] = {
        {.n_dims = 5, .ne = {1, 1, 1, 1, 1}, .type = TRAM_GGML_F32, .data = 4, .error = "5 dimensions"},
        {.n_dims = 2, .ne = {4, UINT64_MAX}, .type = TRAM_GGML_F32, .data = 16, .error = "dimension 1 is negative"},
        {.n_dims = 2, .ne = {1ull << 31, 1ull << 31}, .type = TRAM_GGML_F32, .data = 16, .error = "too large"},
        {.n_dims = 3, .ne = {1ull << 32, 1ull << 31, 4}, .type = TRAM_GGML_F32, .data = 16, .error = "64 bits"},
        {.n_dims = 1, .ne = {4}, .type = 99, .data = 16, .error = "unknown type 99"},
        {.n_dims = 1, .ne = {33}, .type = TRAM_GGML_Q8_0, .data = 68, .error = "not whole Q8_0 blocks"},
        {.n_dims = 1, .ne = {4}, .type = TRAM_GGML_F32, .offset = 32, .data = 16, .error = "past the end"},
        {.n_dims = 1, .ne = {32}, .type = TRAM_GGML_Q8_0, .data = 33, .error = "past the end"},
        {.n_dims = 1, .ne = {4}, .type = TRAM_GGML_F32, .offset = 8, .data = 64,
         .error = "not a multiple of the alignment 32"},
        {.n_dims = 1, .ne = {4}, .type = TRAM_GGML_F32, .offset = UINT64_MAX - 31, .data = 16, .error = "past the end"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        const bad_tensor *c = &cases[i];
        builder b = {0};
        put_one_tensor(&b, "w", c->n_dims, c->ne, c->type, c->offset, c->data);
        expect_error(&b, c->error);
    }
    uint64_t ne4[] = {4};
    char long_name[300];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = 0;
    builder b = {0};
    put_one_tensor(&b, long_name, 1, ne4, TRAM_GGML_F32, 0, 16);
    expect_error(&b, "name of tensor #0");
    b = (builder){0};
    put_header(&b, 3, 2, 0);
    put_tensor_info(&b, "same", 1, ne4, TRAM_GGML_F32, 0);
    put_tensor_info(&b, "same", 1, ne4, TRAM_GGML_F32, 32);
    put_data(&b, 32, 64);
    expect_error(&b, "duplicate tensor name 'same'");
}

Test(gguf, many_tensors_lookup)
{
    enum { N = 20000 };
    builder b = {0};
    uint64_t ne[] = {1};
    char name[32];
    put_header(&b, 3, N, 0);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "blk.%d.weight", i);
        put_tensor_info(&b, name, 1, ne, TRAM_GGML_F32, 32 * (uint64_t)i);
    }
    put_data(&b, 32, 32 * N);
    tram_gguf *g = expect_ok(&b);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "blk.%d.weight", i);
        const tram_gguf_tensor *t = tram_gguf_find_tensor(g, name);
        cr_assert(t == &g->tensors[i], "%s", name);
    }
    cr_assert_null(tram_gguf_find_tensor(g, "blk.20000.weight"));
    tram_gguf_close(g);
    free(b.p);
}

/* Random byte corruptions of a valid file: each either opens or fails with
 * a message; under `make test-asan` any out-of-bounds read fails the test. */
Test(gguf, survives_random_corruption)
{
    size_t len;
    uint8_t *full = read_file(FIXTURES "metadata.gguf", &len);
    uint8_t *buf = malloc(len);
    uint32_t seed = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, full, len);
        for (int k = 0; k < 1 + iter % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            buf[(seed >> 8) % len] ^= (uint8_t)(1u << ((seed >> 4) & 7));
        }
        tram_gguf *g;
        tram_error err = {{0}};
        if (tram_gguf_open_memory(&g, buf, len, "mutant", &err) == 0) {
            for (uint64_t i = 0; i < g->n_kv; i++) {
                tram_gguf_value v;
                if (g->kv[i].value.type == TRAM_GGUF_ARRAY)
                    for (uint64_t j = 0; j < g->kv[i].value.v.arr.count && j < 8; j++)
                        cr_assert(tram_gguf_arr_elem(&g->kv[i].value, j, &v, &err) == 0, "%s", err.msg);
            }
            tram_gguf_close(g);
        } else {
            cr_assert(strncmp(err.msg, "mutant: ", 8) == 0, "%s", err.msg);
        }
    }
    free(buf);
    free(full);
}

/* ---------------------------------------------------------------- default model */

static void check_row0(const tram_gguf_tensor *t, const char *fixture)
{
    size_t len;
    float *want = (float *)read_file(fixture, &len);
    cr_assert_eq(len / 4, (size_t)t->ne[0]);
    float *got = malloc(len);
    tram_error err;
    cr_assert(tram_dequantize(t->type, t->data, got, t->ne[0], &err) == 0, "%s", err.msg);
    for (int64_t i = 0; i < t->ne[0]; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-6f * fmaxf(1.0f, fabsf(want[i])), "%s[%lld]: got %g want %g",
                  t->name, (long long)i, got[i], want[i]);
    free(got);
    free(want);
}

static void expect_tensor(const tram_gguf *g, const char *name, tram_ggml_type type, int64_t ne0, int64_t ne1)
{
    const tram_gguf_tensor *t = tram_gguf_find_tensor(g, name);
    cr_assert(t, "%s missing", name);
    cr_assert(t->type == type && t->ne[0] == ne0 && t->ne[1] == ne1, "%s: %s [%lld, %lld]", name,
              tram_ggml_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1]);
}

Test(gguf, default_model)
{
    tram_gguf *g = open_ok(TRAM_DEFAULT_MODEL);
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->n_tensors, 272);
    char *arch;
    tram_error err;
    cr_assert(tram_gguf_get_str(g, "general.architecture", &arch, &err) == 0, "%s", err.msg);
    cr_assert_str_eq(arch, "llama");
    free(arch);
    cr_assert_eq(u64_of(g, "llama.block_count"), 30);
    cr_assert_eq(u64_of(g, "llama.embedding_length"), 576);
    cr_assert_eq(u64_of(g, "llama.attention.head_count"), 9);
    cr_assert_eq(u64_of(g, "llama.attention.head_count_kv"), 3);
    cr_assert_eq(u64_of(g, "llama.feed_forward_length"), 1536);
    const tram_gguf_value *tokens = value_of(g, "tokenizer.ggml.tokens");
    cr_assert_eq(tokens->v.arr.count, 49152);
    tram_gguf_str s;
    cr_assert(tram_gguf_arr_str(tokens, 0, &s, &err) == 0, "%s", err.msg);
    expect_str(s, "<|endoftext|>");
    cr_assert(tram_gguf_arr_str(tokens, 1, &s, &err) == 0);
    expect_str(s, "<|im_start|>");
    expect_tensor(g, "token_embd.weight", TRAM_GGML_Q8_0, 576, 49152);
    expect_tensor(g, "blk.0.attn_q.weight", TRAM_GGML_Q4_1, 576, 576);
    expect_tensor(g, "blk.29.ffn_down.weight", TRAM_GGML_Q4_1, 1536, 576);
    expect_tensor(g, "output_norm.weight", TRAM_GGML_F32, 576, 1);
    cr_assert_null(tram_gguf_find_tensor(g, "output.weight"), "embeddings are tied");
    check_row0(tram_gguf_find_tensor(g, "token_embd.weight"), FIXTURES "model_rows/token_embd.weight.row0.f32");
    check_row0(tram_gguf_find_tensor(g, "blk.0.attn_q.weight"), FIXTURES "model_rows/blk.0.attn_q.weight.row0.f32");
    tram_gguf_close(g);
}
