/* fuzz_gguf.c — libFuzzer target for the GGUF reader (`make fuzz-gguf`).
 *
 * Parses the input, then reads everything the rest of tram would: every
 * key through the typed getters and lookup, the first elements of every
 * array (nested ones too), every tensor by name, and the data of small
 * tensors through the dequantizers.  Seeds: tests/fuzz/seeds-gguf/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dequant.h"
#include "models/gguf.h"

enum { MAX_ELEMS = 16, MAX_DEQUANT = 1 << 16 };

static volatile uint8_t sink;  /* makes the string reads observable */

static void touch_array(const tram_gguf_value *arr, int depth)
{
    tram_error err;
    for (uint64_t i = 0; i < arr->v.arr.count && i < MAX_ELEMS; i++) {
        tram_gguf_value v;
        tram_gguf_str s;
        double d;
        int64_t n;
        if (tram_gguf_arr_elem(arr, i, &v, &err))
            abort();  /* elements were validated at open */
        tram_gguf_arr_str(arr, i, &s, &err);
        tram_gguf_arr_f64(arr, i, &d, &err);
        tram_gguf_arr_i64(arr, i, &n, &err);
        if (v.type == TRAM_GGUF_STRING && s.len)
            sink ^= (uint8_t)(s.ptr[0] ^ s.ptr[s.len - 1]);
        if (v.type == TRAM_GGUF_ARRAY && depth < 8)
            touch_array(&v, depth + 1);
    }
}

static void touch_kv(const tram_gguf *g, const tram_gguf_kv *kv)
{
    char key[128];
    tram_error err;
    uint64_t u;
    double d;
    int b;
    char *s = NULL;
    if (kv->key.len >= sizeof(key) || memchr(kv->key.ptr, 0, kv->key.len))
        return;
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = 0;
    if (tram_gguf_find_kv(g, key) != kv)
        abort();  /* keys are unique, so lookup finds this one */
    tram_gguf_get_u64(g, key, &u, &err);
    tram_gguf_get_f64(g, key, &d, &err);
    tram_gguf_get_bool(g, key, &b, &err);
    if (tram_gguf_get_str(g, key, &s, &err) == 0)
        free(s);
    if (kv->value.type == TRAM_GGUF_ARRAY)
        touch_array(&kv->value, 0);
}

static void touch_tensor(const tram_gguf *g, const tram_gguf_tensor *t, float *buf)
{
    tram_error err;
    if (tram_gguf_find_tensor(g, t->name) != t)
        abort();
    int64_t n = tram_gguf_tensor_numel(t);
    if (tram_ggml_type_size(t->type, n) != (int64_t)t->nbytes)
        abort();
    if (n <= MAX_DEQUANT && tram_gguf_dequantize(t, buf, &err))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float buf[MAX_DEQUANT];
    tram_gguf *g;
    tram_error err;
    if (tram_gguf_open_memory(&g, data, size, "fuzz", &err))
        return 0;
    for (uint64_t i = 0; i < g->n_kv; i++)
        touch_kv(g, &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        touch_tensor(g, &g->tensors[i], buf);
    tram_gguf_close(g);
    return 0;
}
