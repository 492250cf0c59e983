/* kv_attention.c — decode attention alone over a 4k-token KV cache, per
 * --kv-cache-dtype (f32, int8, fp8 codes dequantized inside the loop:
 * kernels/cpu/kv_dequant.h), at the default model's attention shape and at
 * Llama-3.1-8B's, for bench/compress.sh.  One decode token of one sequence
 * per call, as one layer of a decode step runs it; the calls rotate over
 * enough layers' caches (at least 128 MiB of f32) that each reads its K/V
 * from memory, as a model's 30 or 32 layers do.  Best of REPS passes over
 * the layers; prints markdown table rows.
 *   build/bench/kv_attention [--ctx N] [-t THREADS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"

enum { REPS = 7, BLOCK = 16 };
#define ROTATE_BYTES ((size_t)128 << 20)

typedef struct {
    const char *name;
    int n_heads, n_kv_heads, head_dim;
} att_shape;

typedef struct {
    int ctx, layers;
    uint8_t **k, **v;      /* [layers] caches of ctx slots */
    int32_t *table;        /* the sequence's blocks, in order */
    float *q, *out;
} att_setup;

static float *random_floats(size_t n, unsigned s)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f * 2.0f - 1.0f;
    return x;
}

/* Every layer's cache filled through kv_store with the same random K/V. */
static void setup(tram_backend *be, att_setup *a, const tram_attn_shape *s, int ctx)
{
    size_t kd = (size_t)s->n_kv_heads * s->head_dim, f32_layer = 2 * ctx * kd * sizeof(float);
    size_t sb = tram_kv_slot_bytes(s->kv_dtype, s->n_kv_heads, s->head_dim, sizeof(float));
    a->ctx = ctx;
    a->layers = (int)((ROTATE_BYTES + f32_layer - 1) / f32_layer);
    a->layers = a->layers < 2 ? 2 : a->layers;
    a->k = malloc(a->layers * sizeof(*a->k));
    a->v = malloc(a->layers * sizeof(*a->v));
    a->table = malloc((size_t)ctx / BLOCK * sizeof(int32_t));
    int32_t *slots = malloc((size_t)ctx * sizeof(int32_t));
    float *k = random_floats((size_t)ctx * kd, 1), *v = random_floats((size_t)ctx * kd, 2);
    for (int i = 0; i < ctx / BLOCK; i++)
        a->table[i] = i;
    for (int i = 0; i < ctx; i++)
        slots[i] = i;
    for (int l = 0; l < a->layers; l++) {
        a->k[l] = be->alloc(be, (size_t)ctx * sb);
        a->v[l] = be->alloc(be, (size_t)ctx * sb);
        be->kv_store(be, a->k[l], a->v[l], k, v, slots, ctx, s);
    }
    a->q = random_floats((size_t)s->n_heads * s->head_dim, 3);
    a->out = malloc((size_t)s->n_heads * s->head_dim * sizeof(float));
    free(slots), free(k), free(v);
}

static void teardown(tram_backend *be, att_setup *a)
{
    for (int l = 0; l < a->layers; l++)
        be->free(be, a->k[l]), be->free(be, a->v[l]);
    free(a->k), free(a->v), free(a->table), free(a->q), free(a->out);
}

/* Microseconds of one layer's attention, the best pass of REPS. */
static double best_us(tram_backend *be, const att_setup *a, const tram_attn_shape *s)
{
    int32_t pos = a->ctx - 1, qstart[2] = {0, 1}, len = a->ctx;
    tram_batch b = {.num_tokens = 1, .num_seqs = 1, .positions = &pos, .query_start = qstart, .seq_lens = &len,
                    .block_tables = a->table, .max_blocks_per_seq = a->ctx / BLOCK};
    double best = 1e30;
    tram_error err;
    for (int r = 0; r <= REPS; r++) { /* pass 0 warms up */
        double t0 = tram_now();
        for (int l = 0; l < a->layers; l++)
            be->attention(be, a->out, a->q, a->k[l], a->v[l], &b, s);
        if (be->sync(be, &err)) {
            fprintf(stderr, "kv_attention: %s\n", err.msg);
            exit(1);
        }
        double us = (tram_now() - t0) * 1e6 / a->layers;
        if (r && us < best)
            best = us;
    }
    return best;
}

static void shape_rows(tram_backend *be, const att_shape *sh, int ctx)
{
    static const char *const names[] = {"f32", "int8", "fp8"};
    double f32_us = 0;
    for (int t = TRAM_KV_AUTO; t <= TRAM_KV_FP8; t++) {
        tram_attn_shape s = {.n_heads = sh->n_heads, .n_kv_heads = sh->n_kv_heads, .head_dim = sh->head_dim,
                             .block_size = BLOCK, .scale = 1.0f / sqrtf((float)sh->head_dim),
                             .kv_dtype = (tram_kv_dtype)t};
        att_setup a;
        setup(be, &a, &s, ctx);
        double us = best_us(be, &a, &s);
        f32_us = t == TRAM_KV_AUTO ? us : f32_us;
        size_t bytes = 2 * (size_t)ctx * tram_kv_slot_bytes(s.kv_dtype, s.n_kv_heads, s.head_dim, sizeof(float));
        printf("| %-32s | %-4s | %8.2f | %9.1f | %5.2fx |\n", sh->name, names[t], bytes / 1048576.0, us,
               f32_us / us);
        fflush(stdout);
        teardown(be, &a);
    }
}

int main(int argc, char **argv)
{
    int ctx = 4096, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ctx"))
            ctx = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t"))
            threads = atoi(argv[i + 1]);
        else
            ctx = 0;
    }
    if (argc % 2 == 0 || ctx < BLOCK || ctx % BLOCK || threads < 0) {
        fprintf(stderr, "usage: kv_attention [--ctx N (a multiple of %d)] [-t THREADS]\n", BLOCK);
        return 2;
    }
    tram_backend *be;
    tram_error err;
    if (tram_backend_cpu_create(&be, threads, &err)) {
        fprintf(stderr, "kv_attention: %s\n", err.msg);
        return 1;
    }
    static const att_shape shapes[] = {
        {"SmolLM2-135M (9 q / 3 KV x 64)", 9, 3, 64},
        {"Llama-3.1-8B (32 q / 8 KV x 128)", 32, 8, 128},
    };
    printf("| attention shape, %5d keys      | KV   | MiB/layer | us/layer | vs f32 |\n", ctx);
    printf("|----------------------------------|------|---------:|----------:|-------:|\n");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        shape_rows(be, &shapes[i], ctx);
    be->destroy(be);
    return 0;
}
