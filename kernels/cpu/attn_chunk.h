/* attn_chunk.h — the arithmetic of CPU attention (kernels/cpu/attention.c)
 * on one chunk of keys: the rows of a tile (query heads of one KV head, one
 * or a few tokens) score the chunk's keys and fold them into their running
 * softmax, Σ exp(score - max)·v, the online softmax one chunk at a time.
 *
 * The generic kernel is the reference: for each row the dot products, one
 * expf per score, and the values added in key order.  The AVX2 + FMA one
 * scores 8 keys at once (8 running sums over the head, reduced into one
 * vector), takes 8 exponentials at once (a degree-6 polynomial after a
 * reduction by ln 2, within 2 ulp of expf), and accumulates the values
 * 32 lanes of the head at a time; it runs where head_dim is a multiple of 8
 * (the generic one elsewhere).  Its sums are taken in another order, so the
 * two agree to rounding (tests/unit/test_attn_chunk.c states how close),
 * not bit for bit. */
#ifndef TRAM_CPU_ATTN_CHUNK_H
#define TRAM_CPU_ATTN_CHUNK_H

#include <stddef.h>

#include "kernels/cpu/features.h"

/* The most keys one chunk holds. */
#define TRAM_ATTN_CHUNK_KEYS 32

/* One query row's softmax so far: out holds Σ exp(score - max)·v over the
 * keys folded in, sum holds Σ exp(score - max).  Before the first chunk:
 * max -INFINITY, sum 0, out zeros. */
typedef struct {
    const float *q;
    float *out;
    float max, sum;
    int nk; /* the chunk's first nk keys are the ones this row sees (0: none) */
} tram_attn_row;

/* A chunk: nk keys and their values as f32 rows, stride floats apart. */
typedef struct {
    const float *k, *v;
    size_t stride;
    int nk, head_dim;
    float scale; /* applied to each dot product */
} tram_attn_keys;

/* Whether kernel k runs here (AVX2: avx2 and fma), and the fastest that does. */
int tram_attn_kernel_available(tram_cpu_kernel k);
tram_cpu_kernel tram_attn_kernel_best(void);

/* Folds the chunk into each of the n rows (a row with nk 0 is left as it is). */
void tram_attn_chunk(tram_cpu_kernel k, tram_attn_row *rows, int n, const tram_attn_keys *c);

#endif
