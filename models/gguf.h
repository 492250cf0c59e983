/* gguf.h — reader for GGUF model files (versions 2 and 3).
 *
 * The file is mmapped read-only; every offset, count and length read from it
 * is bounds-checked before use, so a truncated or hostile file yields an error
 * naming the file and the problem, never an out-of-bounds read.  Strings and
 * arrays returned point into the mapping and live as long as the tram_gguf. */
#ifndef TRAM_GGUF_H
#define TRAM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "kernels/dequant.h"

typedef enum {
    TRAM_GGUF_UINT8 = 0, TRAM_GGUF_INT8 = 1, TRAM_GGUF_UINT16 = 2, TRAM_GGUF_INT16 = 3,
    TRAM_GGUF_UINT32 = 4, TRAM_GGUF_INT32 = 5, TRAM_GGUF_FLOAT32 = 6, TRAM_GGUF_BOOL = 7,
    TRAM_GGUF_STRING = 8, TRAM_GGUF_ARRAY = 9, TRAM_GGUF_UINT64 = 10, TRAM_GGUF_INT64 = 11,
    TRAM_GGUF_FLOAT64 = 12,
} tram_gguf_type;

typedef struct {
    const char *ptr;   /* not NUL-terminated */
    uint64_t len;
} tram_gguf_str;

typedef struct {
    tram_gguf_type type;
    union {
        uint64_t u64; int64_t i64; double f64; int b;  /* numbers widened */
        tram_gguf_str str;
        struct {
            tram_gguf_type elem_type;
            uint64_t count;
            const uint8_t *data;   /* raw encoded elements (strings: len-prefixed) */
            uint64_t data_len;     /* bytes spanned by the encoded elements */
            /* Top-level arrays of strings or arrays: offset of each element
             * within data, so element access is O(1); NULL otherwise. */
            const uint64_t *elem_off;
        } arr;
    } v;
} tram_gguf_value;

typedef struct {
    tram_gguf_str key;
    tram_gguf_value value;
} tram_gguf_kv;

typedef struct {
    char name[256];
    uint32_t n_dims;
    int64_t ne[4];          /* ne[0] is the contiguous (innermost) dimension */
    tram_ggml_type type;
    uint64_t offset;        /* relative to the data section */
    const uint8_t *data;    /* into the mapping, bounds-checked */
    uint64_t nbytes;
} tram_gguf_tensor;

typedef struct tram_gguf {
    char path[512];
    const uint8_t *map;
    size_t map_len;
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv, n_tensors;
    tram_gguf_kv *kv;
    tram_gguf_tensor *tensors;
} tram_gguf;

int tram_gguf_open(tram_gguf **out, const char *path, tram_error *err);
/* Same parser over a caller-owned buffer (tests, fuzzing); no mmap. */
int tram_gguf_open_memory(tram_gguf **out, const void *buf, size_t len, const char *label, tram_error *err);
void tram_gguf_close(tram_gguf *g);

const tram_gguf_kv *tram_gguf_find_kv(const tram_gguf *g, const char *key);
const tram_gguf_tensor *tram_gguf_find_tensor(const tram_gguf *g, const char *name);

/* Typed getters: 0 and the value, or -1 (with err) when missing or of a type
 * that cannot be converted without loss. */
int tram_gguf_get_u64(const tram_gguf *g, const char *key, uint64_t *out, tram_error *err);
int tram_gguf_get_f64(const tram_gguf *g, const char *key, double *out, tram_error *err);
int tram_gguf_get_bool(const tram_gguf *g, const char *key, int *out, tram_error *err);
/* Copies a string value, NUL-terminated, into a new malloc'd buffer. */
int tram_gguf_get_str(const tram_gguf *g, const char *key, char **out, tram_error *err);

/* Array element access, bounds-checked.  Strings: *out points into the map.
 * tram_gguf_arr_elem decodes element i of any type (nested arrays too). */
int tram_gguf_arr_elem(const tram_gguf_value *arr, uint64_t i, tram_gguf_value *out, tram_error *err);
int tram_gguf_arr_str(const tram_gguf_value *arr, uint64_t i, tram_gguf_str *out, tram_error *err);
int tram_gguf_arr_f64(const tram_gguf_value *arr, uint64_t i, double *out, tram_error *err);
int tram_gguf_arr_i64(const tram_gguf_value *arr, uint64_t i, int64_t *out, tram_error *err);

/* Number of elements, and bytes for n elements of a type (-1: unknown). */
int64_t tram_gguf_tensor_numel(const tram_gguf_tensor *t);
int64_t tram_ggml_type_size(tram_ggml_type type, int64_t n_elements);
const char *tram_ggml_type_name(tram_ggml_type type);
/* "uint8", ..., "float64"; "unknown type" outside the enum. */
const char *tram_gguf_type_name(tram_gguf_type type);

/* Dequantizes the whole tensor into out[numel] as f32. */
int tram_gguf_dequantize(const tram_gguf_tensor *t, float *out, tram_error *err);

#endif
