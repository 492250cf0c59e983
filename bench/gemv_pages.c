/* gemv_pages.c — what the page size does to a batch-1 decode GEMV whose
 * weights do not fit in the cache: tram's Q4_1 block GEMV (tram_q_gemm,
 * one token row) over MIB MiB of weights in 8192 x 2048 matrices, on
 * 4 KiB pages and on the huge pages tram_alloc_stream asks for, the two
 * interleaved round by round so that a shared machine's load falls on both
 * alike.  Each round also times a plain read of the same buffer (one load
 * per cache line on every thread): the GEMV's share of it is what the
 * kernel leaves of the memory's bandwidth.  Prints one line per round and
 * the medians.
 *   build/bench/gemv_pages [MIB (1024) [ROUNDS (6) [THREADS (2)]]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_blocks.h"
#include "kernels/cpu/pool.h"

enum { ROWS = 8192, COLS = 2048, HUGE_PAGES = 1, SMALL_PAGES = 0 };

typedef struct {
    char *buf;
    tram_weight *w;
    int mats;
    size_t bytes;
} weights;

static int make_weights(weights *ws, size_t total, int huge)
{
    size_t one = tram_q_packed_bytes(TRAM_W_Q4_1, ROWS, COLS);
    ws->mats = (int)(total / one);
    ws->bytes = one * (size_t)ws->mats;
    ws->buf = NULL;
    if (huge)
        ws->buf = tram_alloc_stream(ws->bytes, NULL);
    else if (posix_memalign((void **)&ws->buf, 64, ws->bytes))
        ws->buf = NULL;
    ws->w = ws->buf ? calloc((size_t)ws->mats, sizeof(*ws->w)) : NULL;
    if (!ws->w)
        return -1;
    memset(ws->buf, 0x11, ws->bytes); /* every f16 scale 0x1111: a normal number */
    for (int i = 0; i < ws->mats; i++)
        ws->w[i] = (tram_weight){.type = TRAM_W_Q4_1, .rows = ROWS, .cols = COLS, .data = ws->buf + i * one};
    return 0;
}

/* Bytes per second of one read of every cache line of the buffer. */
static double read_rate(const weights *ws, int threads)
{
    const long *p = (const long *)ws->buf;
    long sum = 0;
    double t0 = tram_now();
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
    for (size_t i = 0; i < ws->bytes / sizeof(long); i += 64 / sizeof(long))
        sum += p[i];
    double t = tram_now() - t0;
    return sum == 42 ? 0 : (double)ws->bytes / t; /* sum used, so the loop stays */
}

/* Bytes per second of one GEMV over every matrix. */
static double gemv_rate(const weights *ws, const tram_q8_block *x, float *y, tram_cpu_pool *pool)
{
    double t0 = tram_now();
    for (int i = 0; i < ws->mats; i++)
        tram_q_gemm(tram_q_kernel_best(), y, x, 1, &ws->w[i], pool);
    return (double)ws->bytes / (tram_now() - t0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Positional: MiB of weights, rounds, threads, each an integer in [1, 65536]. */
static int parse(int argc, char **argv, long *out, int n)
{
    for (int i = 1; i < argc; i++) {
        char *end;
        long v = i <= n ? strtol(argv[i], &end, 10) : 0;
        if (i > n || *end || v < 1 || v > 1 << 16) {
            fprintf(stderr, "usage: gemv_pages [MIB (1024) [ROUNDS (6) [THREADS (2)]]]\n");
            return -1;
        }
        out[i - 1] = v;
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum { MAX_ROUNDS = 64 };
    long args[3] = {1024, 6, 2};
    if (parse(argc, argv, args, 3))
        return 2;
    long mib = args[0], rounds = args[1], threads = args[2];
    rounds = TRAM_MIN(rounds, MAX_ROUNDS);
    weights ws[2];
    tram_cpu_pool *pool = NULL;
    tram_error err = {{0}};
    static float xf[COLS], y[ROWS];
    static tram_q8_block x[COLS / TRAM_QK];
    for (int i = 0; i < COLS; i++)
        xf[i] = (float)(i % 7) * 0.1f;
    tram_q8_quantize_row(xf, COLS, x);
    if (make_weights(&ws[SMALL_PAGES], (size_t)mib << 20, 0) || make_weights(&ws[HUGE_PAGES], (size_t)mib << 20, 1) ||
        tram_cpu_pool_create(&pool, (int)threads, &err)) {
        fprintf(stderr, "gemv_pages: out of memory%s%s\n", err.msg[0] ? ": " : "", err.msg);
        return 1;
    }
    double gemv[2][MAX_ROUNDS], share[2][MAX_ROUNDS];
    printf("%.0f MB of Q4_1 in %d matrices of %d x %d, %ld threads\n", ws[0].bytes * 1e-6, ws[0].mats, ROWS, COLS,
           threads);
    for (int r = 0; r < rounds; r++)
        for (int h = 0; h < 2; h++) {
            gemv_rate(&ws[h], x, y, pool); /* a pass to settle the pages and the pool */
            double g = gemv_rate(&ws[h], x, y, pool), rd = read_rate(&ws[h], (int)threads);
            gemv[h][r] = g;
            share[h][r] = g / rd;
            printf("round %d, %s pages: GEMV %.2f GB/s, read %.2f GB/s, GEMV/read %.2f\n", r + 1,
                   h ? "huge" : "4 KiB", g * 1e-9, rd * 1e-9, g / rd);
        }
    for (int h = 0; h < 2; h++)
        printf("median, %s pages: GEMV %.2f GB/s, GEMV/read %.2f\n", h ? "huge" : "4 KiB",
               median(gemv[h], (int)rounds) * 1e-9, median(share[h], (int)rounds));
    tram_cpu_pool_destroy(pool);
    for (int h = 0; h < 2; h++) {
        free(ws[h].buf);
        free(ws[h].w);
    }
    return 0;
}
