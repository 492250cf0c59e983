/* sampling.c — the host sampler's time per row of logits, per truncation
 * setting, on two synthetic kinds of row of a 49152-token vocabulary (the
 * default model's): "spread", logits spread over 20 nats like a model's, and
 * "flat", logits within 0.4 nats of each other, whose nucleus holds most of
 * the vocabulary.  Prints a markdown table: the best of REPS passes over ROWS
 * rows, and how many tokens each setting keeps on average.
 *   make build/bench/sampling && build/bench/sampling [--vocab N] [--rows N] [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_sampling.h"

typedef struct {
    const char *name;
    tram_sampler_row p;
} setting;

#define ROW(t, k, tp, mp) {.temperature = t, .top_k = k, .top_p = tp, .min_p = mp, .repetition_penalty = 1.0f, .seed = 1}

static const setting settings[] = {
    {"T 0.8, top-p 0.95", ROW(0.8f, 0, 0.95f, 0)},
    {"T 1, top-p 0.99", ROW(1.0f, 0, 0.99f, 0)},
    {"T 0.8, top-k 40", ROW(0.8f, 40, 1.0f, 0)},
    {"T 0.8, top-k 50, top-p 0.9", ROW(0.8f, 50, 0.9f, 0)},
    {"T 1, top-k 1000", ROW(1.0f, 1000, 1.0f, 0)},
    {"T 1, min-p 0.05", ROW(1.0f, 0, 1.0f, 0.05f)},
    {"T 1, no truncation", ROW(1.0f, 0, 1.0f, 0)},
};

static uint32_t lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

static void fill(float *x, size_t n, float width, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lcg(&seed) % 100000) * 1e-5f * width;
}

/* Microseconds per row, the best of reps passes; *kept: the mean kept. */
static double time_rows(tram_sampler *s, const float *x, int vocab, int rows, int reps, const setting *st,
                        int32_t *ids, double *kept)
{
    double best = 1e30;
    *kept = 0;
    for (int r = 0; r < rows; r++) {
        tram_sample_input in = {.p = st->p, .output_len = r};
        *kept += (double)tram_sample_kept(s, x + (size_t)r * vocab, &in, ids) / rows;
    }
    for (int rep = 0; rep < reps; rep++) {
        double t0 = tram_now();
        for (int r = 0; r < rows; r++) {
            tram_sample_input in = {.p = st->p, .output_len = r};
            tram_sample(s, x + (size_t)r * vocab, &in);
        }
        double us = (tram_now() - t0) * 1e6 / rows;
        best = us < best ? us : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int vocab = 49152, rows = 32, reps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        int *v = !strcmp(argv[i], "--vocab") ? &vocab : !strcmp(argv[i], "--rows") ? &rows
                                                      : !strcmp(argv[i], "--reps")  ? &reps
                                                                                    : NULL;
        if (!v) {
            fprintf(stderr, "usage: %s [--vocab N] [--rows N] [--reps N]\n", argv[0]);
            return 2;
        }
        *v = atoi(argv[i + 1]);
    }
    size_t n = (size_t)vocab * rows;
    float *spread = malloc(n * sizeof(float)), *flat = malloc(n * sizeof(float));
    int32_t *ids = malloc((size_t)vocab * sizeof(int32_t));
    tram_sampler *s = NULL;
    tram_error err;
    if (!spread || !flat || !ids || tram_sampler_create(&s, vocab, &err)) {
        fprintf(stderr, "sampling: out of memory\n");
        return 1;
    }
    fill(spread, n, 20.0f, 1);
    fill(flat, n, 0.4f, 2);
    printf("| setting | spread: µs/row | kept | flat: µs/row | kept |\n|---|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        double ks, kf;
        double ts = time_rows(s, spread, vocab, rows, reps, &settings[i], ids, &ks);
        double tf = time_rows(s, flat, vocab, rows, reps, &settings[i], ids, &kf);
        printf("| %s | %.1f | %.0f | %.1f | %.0f |\n", settings[i].name, ts, ks, tf, kf);
    }
    tram_sampler_destroy(s);
    free(spread);
    free(flat);
    free(ids);
    return 0;
}
