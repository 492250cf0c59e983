/* check_sparse24.c — the CUDA backend's 2:4 products through cuSPARSELt
 * (kernels/cuda/sparse24.cu) against its dense products (cuBLASLt, gemm.cu
 * and int8.cu) on the same pruned matrix and the same device activations.
 *
 * The matrix: random values with 2 of every 4 of a row zeroed (positions
 * drawn per group), uploaded both as TRAM_W_S24 and as TRAM_W_BF16 (the same
 * bf16 values).  Shapes: SmolLM2-135M's fused q/k/v (576 → 960) and down
 * (1536 → 576), Llama-3.1-8B's down (14336 → 4096); token counts 1, 5, 16,
 * 100 and 256: decode's padded path (counts not a multiple of 16) and the
 * in-place one.  Outputs are poisoned (NaN) before each product.  Both sum
 * in f32 and round once to bf16, in different orders, so a case passes when
 * ‖sparse − dense‖ / ‖dense‖ < 1e-2 with no NaN (check_variants' bound).
 * Also: a product of 4 rows captured in a CUDA graph and replayed (decode
 * steps replay graphs) gives the eager result, and a matrix with 3 nonzeros
 * in a group is refused at upload.
 *
 * Sparse W8A8 (TRAM_W_S24_INT8 against TRAM_W_INT8, the same pruned matrix
 * quantized alike): both sum int8 × int8 in int32, exactly, so the two must
 * agree bit for bit: the int32 sums of the same random int8 activations
 * (tram_cuda_int8_products), and the bf16 products of the same bf16
 * activations (quantized per token by the one kernel, dequantized by the one
 * epilogue), at token counts 1, 5, 32, 100 and 256 (padded and in place,
 * the int8 kind's multiple being 32).  A saturated case (every kept weight
 * and activation 127, k = 14336: sums of 1.2e8, past f32's 2^24) proves the
 * library's f32 alpha of 1 leaves int32 sums exact.  A 2:4 int8 product
 * captured in a graph replays to the eager bits.  sparse24_fits refuses a
 * shape that is not a multiple of 32.
 *
 * Exit 0 when all pass, 1 on a failure, 2 when no GPU is usable, 77 (a SKIP
 * row of tests/gpu/run.sh) when cuSPARSELt does not load: it is not in the
 * GPU bundle (237 MB; docs/gpu.md says how to point TRAM_CUSPARSELT at a
 * copy).  Usage: check_sparse24 [seed]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cuda_int8.h"

#define TOL 1e-2
#define MAX_N 256

static tram_backend *gpu;
static int failures;
static uint64_t seed;

static void sync_or_die(const char *what)
{
    tram_error err = {{0}};
    if (gpu->sync(gpu, &err)) {
        fprintf(stderr, "check_sparse24: %s: %s\n", what, err.msg);
        exit(1);
    }
}

/* rows x cols values, 2 of every 4 of a row zeroed (positions drawn per
 * group): the kept ones random in [-1, 1], or all 1 when saturated. */
static float *pruned_values(int rows, int cols, int saturated)
{
    float *w = malloc((size_t)rows * cols * sizeof(float));
    for (size_t g = 0; g < (size_t)rows * cols; g += 4) {
        int keep_a = rand() % 4, keep_b = (keep_a + 1 + rand() % 3) % 4;
        for (int i = 0; i < 4; i++)
            w[g + i] = i != keep_a && i != keep_b ? 0.0f : saturated ? 1.0f : 2.0f * rand() / RAND_MAX - 1.0f;
    }
    return w;
}

static float *pruned_matrix(int rows, int cols) { return pruned_values(rows, cols, 0); }

static void poison(void *d, size_t n)
{
    void *ff = malloc(n * 2);
    memset(ff, 0xff, n * 2);
    gpu->upload(gpu, d, ff, n * 2);
    free(ff);
}

static float *product(void *y, const void *x, const tram_weight *w, int n)
{
    float *h = malloc((size_t)n * w->rows * sizeof(float));
    poison(y, (size_t)n * w->rows);
    gpu->matmul(gpu, y, x, w, n);
    gpu->to_host_f32(gpu, h, y, (size_t)n * w->rows);
    sync_or_die("product");
    return h;
}

/* ‖a − b‖ / ‖b‖, or INFINITY when a holds a NaN. */
static double relative_error(const float *a, const float *b, size_t n)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]))
            return INFINITY;
        diff += (double)(a[i] - b[i]) * (a[i] - b[i]);
        norm += (double)b[i] * b[i];
    }
    return sqrt(diff / (norm > 0 ? norm : 1));
}

static void report(int ok, const char *what, int rows, int cols, int n, double e)
{
    failures += !ok;
    printf("%s sparse24 %s %dx%d n %d: error %.2e\n", ok ? "PASS" : "FAIL", what, rows, cols, n, e);
}

static void check_shape(int rows, int cols, const void *x, void *y)
{
    static const int counts[] = {1, 5, 16, 100, MAX_N};
    float *host = pruned_matrix(rows, cols);
    tram_weight sparse, dense;
    gpu->upload_weight(gpu, &sparse, host, rows, cols, TRAM_W_S24);
    gpu->upload_weight(gpu, &dense, host, rows, cols, TRAM_W_BF16);
    sync_or_die("upload");
    if (sparse.type != TRAM_W_S24) {
        report(0, "kept sparse", rows, cols, 0, INFINITY);
        return;
    }
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        int n = counts[i];
        float *s = product(y, x, &sparse, n), *d = product(y, x, &dense, n);
        double e = relative_error(s, d, (size_t)n * rows);
        report(e < TOL, "eager", rows, cols, n, e);
        free(s), free(d);
    }
    gpu->free_weight(gpu, &sparse);
    gpu->free_weight(gpu, &dense);
    free(host);
}

/* w's product of n rows captured in a graph and replayed into y, copied to
 * out; 0 when the capture and the replay ran. */
static int replayed_product(float *out, const void *x, void *y, const tram_weight *w, int n)
{
    tram_error err = {{0}};
    poison(y, (size_t)n * w->rows);
    sync_or_die("poison");
    int rc = tram_cuda_graph_begin(gpu, &err);
    if (!rc) {
        gpu->matmul(gpu, y, x, w, n);
        rc = tram_cuda_graph_end(gpu, n, &err) || tram_cuda_graph_replay(gpu, n, &err);
    }
    if (rc)
        fprintf(stderr, "check_sparse24: graph: %s\n", err.msg);
    gpu->to_host_f32(gpu, out, y, (size_t)n * w->rows);
    sync_or_die("graph");
    return rc;
}

/* A 4-row product captured, replayed, and compared with the eager one. */
static void check_graph(const void *x, void *y)
{
    enum { ROWS = 576, COLS = 1536, N = 4 };
    float *host = pruned_matrix(ROWS, COLS);
    tram_weight w;
    gpu->upload_weight(gpu, &w, host, ROWS, COLS, TRAM_W_S24);
    float *eager = product(y, x, &w, N), *replayed = malloc(N * ROWS * sizeof(float));
    double e = replayed_product(replayed, x, y, &w, N) ? INFINITY : relative_error(replayed, eager, N * ROWS);
    report(e == 0, "graph replay vs eager", ROWS, COLS, N, e);
    gpu->free_weight(gpu, &w);
    free(host), free(eager), free(replayed);
}

/* ---------------------------------------------------------------- sparse W8A8 */

/* The bf16 products' positions that differ in bits, or that are NaN. */
static size_t bits_differ(const float *a, const float *b, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += isnan(a[i]) || memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return bad;
}

static void report_int8(size_t bad, const char *what, int rows, int cols, int n)
{
    failures += bad != 0;
    printf("%s sparse24 int8 %s %dx%d n %d: %zu of %zu differ from the dense int8 path\n", bad ? "FAIL" : "PASS",
           what, rows, cols, n, bad, (size_t)n * rows);
}

/* The int32 sums of xq[n][cols] with the sparse and the dense weight. */
static void check_int8_sums(const tram_weight *sparse, const tram_weight *dense, const int8_t *xq, int n,
                            const char *what)
{
    size_t count = (size_t)n * dense->rows, bad = 0;
    int32_t *as = malloc(count * sizeof(int32_t)), *ad = malloc(count * sizeof(int32_t));
    tram_error err = {{0}};
    if (tram_cuda_int8_products(gpu, as, xq, n, sparse, &err) || tram_cuda_int8_products(gpu, ad, xq, n, dense, &err)) {
        fprintf(stderr, "check_sparse24: int8 sums: %s\n", err.msg);
        exit(1);
    }
    for (size_t i = 0; i < count; i++)
        bad += as[i] != ad[i];
    report_int8(bad, what, dense->rows, dense->cols, n);
    free(as), free(ad);
}

/* Random int8 activations in [-127, 127] (saturated: all 127). */
static int8_t *int8_activations(int n, int cols, int saturated)
{
    int8_t *xq = malloc((size_t)n * cols);
    for (size_t i = 0; i < (size_t)n * cols; i++)
        xq[i] = saturated ? 127 : (int8_t)(rand() % 255 - 127);
    return xq;
}

/* The pruned matrix as TRAM_W_S24_INT8 and as TRAM_W_INT8; 0 when the
 * sparse one was kept sparse. */
static int upload_int8_pair(tram_weight *sparse, tram_weight *dense, const float *host, int rows, int cols)
{
    gpu->upload_weight(gpu, sparse, host, rows, cols, TRAM_W_S24_INT8);
    gpu->upload_weight(gpu, dense, host, rows, cols, TRAM_W_INT8);
    sync_or_die("int8 upload");
    if (sparse->type == TRAM_W_S24_INT8 && dense->type == TRAM_W_INT8)
        return 0;
    report_int8(1, "kept sparse", rows, cols, 0);
    return -1;
}

static void check_int8_shape(int rows, int cols, const void *x, void *y)
{
    static const int counts[] = {1, 5, 32, 100, MAX_N};
    float *host = pruned_matrix(rows, cols);
    tram_weight sparse, dense;
    if (!upload_int8_pair(&sparse, &dense, host, rows, cols))
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            int n = counts[i];
            int8_t *xq = int8_activations(n, cols, 0);
            check_int8_sums(&sparse, &dense, xq, n, "int32 sums");
            float *s = product(y, x, &sparse, n), *d = product(y, x, &dense, n);
            report_int8(bits_differ(s, d, (size_t)n * rows), "bf16 products", rows, cols, n);
            free(xq), free(s), free(d);
        }
    gpu->free_weight(gpu, &sparse);
    gpu->free_weight(gpu, &dense);
    free(host);
}

/* Every kept weight 127 and every activation 127: the largest sums. */
static void check_int8_saturated(void)
{
    enum { ROWS = 64, COLS = 14336, N = 3 };
    float *host = pruned_values(ROWS, COLS, 1);
    tram_weight sparse, dense;
    if (!upload_int8_pair(&sparse, &dense, host, ROWS, COLS)) {
        int8_t *xq = int8_activations(N, COLS, 1);
        check_int8_sums(&sparse, &dense, xq, N, "saturated int32 sums");
        free(xq);
    }
    gpu->free_weight(gpu, &sparse);
    gpu->free_weight(gpu, &dense);
    free(host);
}

/* A 2:4 int8 product of 4 rows captured in a graph: the eager bits. */
static void check_int8_graph(const void *x, void *y)
{
    enum { ROWS = 576, COLS = 1536, N = 4 };
    float *host = pruned_matrix(ROWS, COLS);
    tram_weight sparse, dense;
    if (!upload_int8_pair(&sparse, &dense, host, ROWS, COLS)) {
        float *eager = product(y, x, &sparse, N), *replayed = malloc(N * ROWS * sizeof(float));
        int rc = replayed_product(replayed, x, y, &sparse, N);
        report_int8(rc ? 1 : bits_differ(replayed, eager, N * ROWS), "graph replay vs eager", ROWS, COLS, N);
        free(eager), free(replayed);
    }
    gpu->free_weight(gpu, &sparse);
    gpu->free_weight(gpu, &dense);
    free(host);
}

/* A shape cuSPARSELt's int8 path does not take is refused by name. */
static void check_int8_fits(void)
{
    tram_error err = {{0}};
    int fits = gpu->sparse24_fits(gpu, TRAM_W_S24_INT8, 960, 576, &err);
    int refused = !gpu->sparse24_fits(gpu, TRAM_W_S24_INT8, 960, 592, &err) && strstr(err.msg, "multiples of 32");
    failures += !(fits && refused);
    printf("%s sparse24 int8 fits 960x576, refuses 960x592: %s\n", fits && refused ? "PASS" : "FAIL", err.msg);
}

/* A group with 3 nonzeros: the upload must fail, naming it. */
static void check_refusal(void)
{
    float *host = pruned_matrix(16, 64);
    host[5 * 64 + 8] = host[5 * 64 + 9] = host[5 * 64 + 10] = 1.0f;
    tram_weight w;
    gpu->upload_weight(gpu, &w, host, 16, 64, TRAM_W_S24);
    tram_error err = {{0}};
    int refused = gpu->sync(gpu, &err) != 0 && strstr(err.msg, "more than 2 nonzeros");
    failures += !refused;
    printf("%s sparse24 a group of 3 nonzeros refused at upload%s%s\n", refused ? "PASS" : "FAIL",
           refused ? ": " : "", refused ? err.msg : "");
    gpu->free_weight(gpu, &w);  /* left dense bf16 when refused */
    free(host);
}

int main(int argc, char **argv)
{
    unsigned s = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : (unsigned)time(NULL);
    tram_error err = {{0}};
    if (tram_backend_cuda_create(&gpu, 0, &err)) {
        fprintf(stderr, "check_sparse24: %s\n", err.msg);
        return 2;
    }
    if (!gpu->sparse24_prepare(gpu, TRAM_W_S24, MAX_N, &err) ||
        !gpu->sparse24_prepare(gpu, TRAM_W_S24_INT8, MAX_N, &err)) {
        printf("SKIP sparse24: %s\n", err.msg);
        gpu->destroy(gpu);
        return 77;
    }
    srand(s);
    seed = s;
    printf("check_sparse24: seed %u, tolerance %.0e\n", s, TOL);
    enum { WIDEST = 14336 };
    tram_weight x, y;
    tram_cuda_random_weight(gpu, &x, MAX_N * WIDEST, 1, TRAM_W_BF16, seed, 1.0f);
    tram_cuda_random_weight(gpu, &y, MAX_N * WIDEST, 1, TRAM_W_BF16, seed + 1, 1.0f);
    sync_or_die("activations");
    check_shape(960, 576, x.data, y.data);
    check_shape(576, 1536, x.data, y.data);
    check_shape(4096, WIDEST, x.data, y.data);
    check_graph(x.data, y.data);
    check_int8_shape(960, 576, x.data, y.data);
    check_int8_shape(576, 1536, x.data, y.data);
    check_int8_shape(4096, WIDEST, x.data, y.data);
    check_int8_saturated();
    check_int8_graph(x.data, y.data);
    check_int8_fits();
    check_refusal();
    printf("check_sparse24: %d failure%s\n", failures, failures == 1 ? "" : "s");
    gpu->destroy(gpu);
    return failures ? 1 : 0;
}
