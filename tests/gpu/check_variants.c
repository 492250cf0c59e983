/* check_variants.c — every numbered variant above 1 of the CUDA backend's
 * attention, RoPE/KV-store and GEMM kernels against variant 1, the reference
 * (kernels/variants.h; a variant declared there is compared here without
 * further changes), on the same device inputs, with the time of each.
 *
 * Families and shapes: decode attention (batch 1 over 4k keys, batch 64 over
 * 512, a mixed batch; Llama-3.1-8B's head dim 128 / GQA 4, SmolLM2's 64 / 3,
 * Qwen2.5's group of 7, and head dim 256 where variant 2 falls back), prefill
 * attention (a 512-token chunk, a chunk after a cached 1k prefix, chunks
 * beside decode rows), RoPE + KV store (both styles, padding rows), and the
 * bf16 GEMM at decode and prefill row counts on Llama-3.1-8B's matrices.
 * Inputs are random bf16 drawn on the device; outputs are poisoned (NaN)
 * before each run, so a value one variant writes and the other forgets
 * fails (variant 1 itself is checked against the CPU by check_kernels).  A
 * case passes when ‖v2 − v1‖ / ‖v1‖ < 1e-2 (bf16 keeps 8 bits; prefill's
 * variant 2 also rounds P to bf16) with no such NaN.
 * Each variant must also run inside a CUDA graph (decode steps replay
 * graphs); its time is µs per call inside one.
 * Prints a PASS/FAIL line per case (family, shape, error), then a markdown
 * table of v1 and v2 µs per call (tests/gpu/run.sh puts it in the summary);
 * exit 0 when all pass, 1 on a mismatch, 2 when no GPU is usable.
 * Usage: check_variants [--quick] [seed]: --quick runs reduced shapes and
 * fewer timed calls (the sanitizer pass uses it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda.h"
#include "kernels/variants.h"

#define TOL 1e-2

static tram_backend *gpu;
static int quick, reps, failures, cases;
static uint64_t seed;
static char timings[64 << 10];  /* the table printed at the end, one row per case */

static void die_if(int bad, const char *what)
{
    if (bad) {
        fprintf(stderr, "check_variants: %s\n", what);
        exit(1);
    }
}

static void sync_or_die(const char *what)
{
    tram_error err = {{0}};
    if (gpu->sync(gpu, &err)) {
        fprintf(stderr, "check_variants: %s: %s\n", what, err.msg);
        exit(1);
    }
}

static void use_variant(tram_kernel_family f, int v)
{
    tram_kernel_variants kv = {{0}};
    kv.v[f] = v;
    tram_error err = {{0}};
    die_if(tram_cuda_set_kernel_variants(gpu, &kv, &err), err.msg);
}

/* ---------------------------------------------------------------- device buffers */

/* n random bf16 in [-scale, scale], drawn on the device. */
static tram_weight random_bf16(size_t n, float scale)
{
    tram_weight w;
    tram_cuda_random_weight(gpu, &w, (int)n, 1, TRAM_W_BF16, ++seed, scale);
    sync_or_die("random buffer");
    return w;
}

static int32_t *device_ints(const int32_t *host, size_t n)
{
    int32_t *d = gpu->alloc(gpu, n * 4 + 4);
    die_if(!d, "out of device memory");
    gpu->upload(gpu, d, host, n * 4);
    return d;
}

static void poison(void *d, size_t bf16s)
{
    void *ff = malloc(bf16s * 2);
    memset(ff, 0xff, bf16s * 2);
    gpu->upload(gpu, d, ff, bf16s * 2);
    sync_or_die("poison");
    free(ff);
}

/* ---------------------------------------------------------------- one case */

/* A case: outputs (bf16 buffers) and what runs the op once. */
typedef struct {
    void *out[3];
    size_t n[3];
    int num_out;
    void (*run)(void *ctx);
    void *ctx;
} op_case;

static float *outputs_of(const op_case *c)
{
    size_t total = 0;
    for (int i = 0; i < c->num_out; i++)
        total += c->n[i];
    float *h = malloc(total * sizeof(float));
    for (int i = 0, at = 0; i < c->num_out; at += (int)c->n[i], i++)
        gpu->to_host_f32(gpu, h + at, c->out[i], c->n[i]);
    sync_or_die("download");
    return h;
}

/* One call first (it builds plans: gemm variant 2 times candidates, which
 * write the output), then the poisoned call whose output is compared. */
static float *run_variant(const op_case *c, tram_kernel_family f, int v)
{
    use_variant(f, v);
    c->run(c->ctx);
    sync_or_die(tram_kernel_family_name(f));
    for (int i = 0; i < c->num_out; i++)
        poison(c->out[i], c->n[i]);
    c->run(c->ctx);
    sync_or_die(tram_kernel_family_name(f));
    return outputs_of(c);
}

/* Microseconds per call as a decode step sees them: `reps` calls captured in
 * one CUDA graph (after an eager call, so plans exist), the graph replayed
 * ROUNDS times.  -1, and the reason on stderr, when the op cannot be
 * captured: a variant a decode graph cannot hold fails its case. */
#define ROUNDS 5
static double time_variant(const op_case *c, tram_kernel_family f, int v)
{
    use_variant(f, v);  /* drops the graph of the call before */
    c->run(c->ctx);
    sync_or_die("warm-up");
    tram_error err = {{0}};
    if (tram_cuda_graph_begin(gpu, &err)) {
        fprintf(stderr, "check_variants: %s v%d: %s\n", tram_kernel_family_name(f), v, err.msg);
        return -1.0;
    }
    for (int i = 0; i < reps; i++)
        c->run(c->ctx);
    if (tram_cuda_graph_end(gpu, 1, &err) || tram_cuda_graph_replay(gpu, 1, &err) || gpu->sync(gpu, &err)) {
        fprintf(stderr, "check_variants: %s v%d in a CUDA graph: %s\n", tram_kernel_family_name(f), v, err.msg);
        return -1.0;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < ROUNDS; r++)
        if (tram_cuda_graph_replay(gpu, 1, &err))
            return -1.0;
    sync_or_die("timing");
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3) / (ROUNDS * reps);
}

/* Variant v of family f against variant 1 on case c: one line, one timing row. */
static void compare_one(const op_case *c, tram_kernel_family f, int v, const char *shape)
{
    float *ref = run_variant(c, f, 1), *got = run_variant(c, f, v);
    size_t total = 0, nan = 0;
    for (int i = 0; i < c->num_out; i++)
        total += c->n[i];
    double diff = 0, norm = 0, worst = 0;
    for (size_t i = 0; i < total; i++) {
        if (isnan(ref[i]) || isnan(got[i])) {  /* unwritten by one variant (both: a cache row no token owns) */
            nan += isnan(ref[i]) != isnan(got[i]);
            continue;
        }
        double d = (double)got[i] - ref[i];
        diff += d * d;
        norm += (double)ref[i] * ref[i];
        worst = fabs(d) > worst ? fabs(d) : worst;
    }
    double rel = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    double us1 = time_variant(c, f, 1), us = time_variant(c, f, v);
    int ok = !nan && rel < TOL && us1 >= 0 && us >= 0;
    printf("%-6s %-8s v%d %-46s rel %.2e  max %.2e  nan %zu%s\n", ok ? "PASS" : "FAIL", tram_kernel_family_name(f), v,
           shape, rel, worst, nan, us1 < 0 || us < 0 ? "  (not capturable in a CUDA graph)" : "");
    fflush(stdout);
    size_t used = strlen(timings);
    snprintf(timings + used, sizeof(timings) - used, "| %-8s | %d | %-46s | %9.1f | %9.1f | %5.2fx |\n",
             tram_kernel_family_name(f), v, shape, us1, us, us > 0 ? us1 / us : 0.0);
    failures += !ok;
    cases++;
    free(ref);
    free(got);
    use_variant(f, 1);
}

/* Every variant above 1 the family has (kernels/variants.c), each against 1. */
static void compare(const op_case *c, tram_kernel_family f, const char *shape)
{
    for (int v = 2; v <= tram_kernel_family_max(f); v++)
        compare_one(c, f, v, shape);
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    int q_len, ctx;  /* tokens this step, context after it */
} seq_spec;

typedef struct {
    tram_attn_shape s;
    tram_batch b;
    tram_weight q, kc, vc;
    void *out;
} attn_case;

static void run_attention(void *ctx)
{
    attn_case *a = ctx;
    gpu->attention(gpu, a->out, a->q.data, a->kc.data, a->vc.data, &a->b, &a->s);
}

/* The batch as the model uploads it: query ranges at the end of each
 * context, min/max query lengths set, and block tables scattered over the
 * pool by a multiplicative permutation (1000003 is a prime above any pool
 * here), so a kernel that reads a wrong block reads other random values. */
static void attention_case(const char *what, const seq_spec *seqs, int num_seqs, tram_attn_shape s,
                           tram_kernel_family f)
{
    int bs = s.block_size, max_blocks = 1, T = 0, qmin = 1 << 30, qmax = 0;
    for (int i = 0; i < num_seqs; i++) {
        max_blocks = TRAM_MAX(max_blocks, seqs[i].ctx / bs + 1);
        T += seqs[i].q_len;
        qmin = TRAM_MIN(qmin, seqs[i].q_len);
        qmax = TRAM_MAX(qmax, seqs[i].q_len);
    }
    int num_blocks = max_blocks * num_seqs + 1, offset = rand() % num_blocks;
    int32_t *tables = malloc((size_t)num_seqs * max_blocks * 4), *qs = malloc((num_seqs + 1) * 4);
    int32_t *lens = malloc(num_seqs * 4), *pos = malloc(T * 4);
    for (int i = 0; i < num_seqs * max_blocks; i++)
        tables[i] = (int32_t)(((int64_t)i * 1000003 + offset) % num_blocks);
    qs[0] = 0;
    for (int i = 0; i < num_seqs; i++) {
        lens[i] = seqs[i].ctx;
        qs[i + 1] = qs[i] + seqs[i].q_len;
        for (int j = qs[i]; j < qs[i + 1]; j++)
            pos[j] = seqs[i].ctx - qs[i + 1] + j;
    }
    s.scale = 1.0f / sqrtf((float)s.head_dim);
    size_t kd = (size_t)s.n_kv_heads * s.head_dim, qd = (size_t)s.n_heads * s.head_dim;
    attn_case a = {
        .s = s,
        .b = {.num_tokens = T, .num_seqs = num_seqs, .positions = device_ints(pos, T),
              .query_start = device_ints(qs, num_seqs + 1), .seq_lens = device_ints(lens, num_seqs),
              .block_tables = device_ints(tables, (size_t)num_seqs * max_blocks), .max_blocks_per_seq = max_blocks,
              .min_query_len = qmin, .max_query_len = qmax},
        .q = random_bf16(T * qd, 1.0f), .kc = random_bf16((size_t)num_blocks * bs * kd, 1.0f),
        .vc = random_bf16((size_t)num_blocks * bs * kd, 1.0f), .out = gpu->alloc(gpu, T * qd * 2),
    };
    die_if(!a.out, "out of device memory");
    op_case c = {.out = {a.out}, .n = {T * qd}, .num_out = 1, .run = run_attention, .ctx = &a};
    char shape[96];
    snprintf(shape, sizeof(shape), "%s T %d h %d/%d hd %d", what, T, s.n_heads, s.n_kv_heads, s.head_dim);
    compare(&c, f, shape);
    gpu->free_weight(gpu, &a.q), gpu->free_weight(gpu, &a.kc), gpu->free_weight(gpu, &a.vc);
    gpu->free(gpu, a.out);
    gpu->free(gpu, (void *)a.b.positions), gpu->free(gpu, (void *)a.b.query_start);
    gpu->free(gpu, (void *)a.b.seq_lens), gpu->free(gpu, (void *)a.b.block_tables);
    free(tables), free(qs), free(lens), free(pos);
}

static const tram_attn_shape attn_shapes[] = {
    {32, 8, 128, 16, 0, TRAM_KV_AUTO},  /* Llama-3.1-8B: GQA 4 */
    {9, 3, 64, 16, 0, TRAM_KV_AUTO},    /* SmolLM2-135M: GQA 3 */
    {28, 4, 128, 16, 0, TRAM_KV_AUTO},  /* Qwen2.5-7B: GQA 7 */
    {8, 8, 256, 16, 0, TRAM_KV_AUTO},   /* head dim 256: variant 2 falls back to 1 */
};

static void check_decode(void)
{
    int long_ctx = quick ? 700 : 4096, batch = quick ? 8 : 64, ctx = quick ? 100 : 512;
    for (size_t i = 0; i < TRAM_ARRAY_LEN(attn_shapes); i++) {
        tram_attn_shape s = attn_shapes[i];
        seq_spec one[] = {{1, long_ctx}};
        seq_spec *many = malloc(batch * sizeof(seq_spec));
        for (int j = 0; j < batch; j++)
            many[j] = (seq_spec){1, ctx - j % 17};
        seq_spec mixed[] = {{1, 513}, {37, 37}, {1, 1}, {20, 90}, {1, long_ctx}};
        attention_case("decode batch 1", one, 1, s, TRAM_KERNEL_DECODE);
        attention_case("decode batch", many, batch, s, TRAM_KERNEL_DECODE);
        attention_case("mixed (decode rows v2)", mixed, 5, s, TRAM_KERNEL_DECODE);
        free(many);
        if (quick)
            break;
    }
    if (!quick) {  /* Llama at batch 8 over 4k: the most keys the issue asks for */
        seq_spec eight[8];
        for (int j = 0; j < 8; j++)
            eight[j] = (seq_spec){1, 4096 - 31 * j};
        attention_case("decode batch 8 @4k", eight, 8, attn_shapes[0], TRAM_KERNEL_DECODE);
    }
}

static void check_prefill(void)
{
    int chunk = quick ? 100 : 512;
    for (size_t i = 0; i < TRAM_ARRAY_LEN(attn_shapes); i++) {
        tram_attn_shape s = attn_shapes[i];
        seq_spec fresh[] = {{chunk, chunk}};
        seq_spec cached[] = {{chunk / 2, (quick ? 200 : 1024) + chunk / 2}};
        seq_spec mixed[] = {{1, 513}, {37, 37}, {1, 5}, {70, 90}, {64, 64 + 300}};
        attention_case("prefill chunk", fresh, 1, s, TRAM_KERNEL_PREFILL);
        attention_case("prefill after cached prefix", cached, 1, s, TRAM_KERNEL_PREFILL);
        attention_case("mixed (prefill rows v2)", mixed, 5, s, TRAM_KERNEL_PREFILL);
        if (quick)
            break;
    }
}

/* ---------------------------------------------------------------- RoPE + KV store */

typedef struct {
    tram_attn_shape s;
    tram_rope_style style;
    int n;
    tram_weight qkv, kc, vc;
    void *q, *k, *v;
    int32_t *pos, *slots;
    float *inv_freq;
} rope_case;

static void run_rope_store(void *ctx)
{
    rope_case *r = ctx;
    gpu->rope_store(gpu, r->q, r->k, r->v, r->kc.data, r->vc.data, r->qkv.data, r->pos, r->slots, r->n, &r->s,
                    r->inv_freq, r->style);
}

static void check_rope_store(int n, tram_attn_shape s, tram_rope_style style)
{
    int slots_total = n + 64, kd = s.n_kv_heads * s.head_dim, qd = s.n_heads * s.head_dim;
    int32_t *pos = malloc(n * 4), *slots = malloc(n * 4);
    float *inv = malloc(s.head_dim / 2 * sizeof(float));
    for (int i = 0; i < n; i++) {
        pos[i] = rand() % 8192;
        slots[i] = i % 13 == 5 ? -1 : (i * 7 + 3) % slots_total;  /* some padding rows; distinct slots */
    }
    for (int i = 0; i < s.head_dim / 2; i++)
        inv[i] = powf(500000.0f, -2.0f * i / s.head_dim);
    rope_case r = {
        .s = s, .style = style, .n = n, .qkv = random_bf16((size_t)n * (qd + 2 * kd), 1.0f),
        .kc = random_bf16((size_t)slots_total * kd, 1.0f), .vc = random_bf16((size_t)slots_total * kd, 1.0f),
        .q = gpu->alloc(gpu, (size_t)n * qd * 2), .k = gpu->alloc(gpu, (size_t)n * kd * 2),
        .v = gpu->alloc(gpu, (size_t)n * kd * 2), .pos = device_ints(pos, n), .slots = device_ints(slots, n),
        .inv_freq = gpu->alloc(gpu, s.head_dim / 2 * sizeof(float)),
    };
    die_if(!r.q || !r.k || !r.v || !r.inv_freq, "out of device memory");
    gpu->upload(gpu, r.inv_freq, inv, s.head_dim / 2 * sizeof(float));
    /* the caches are outputs too: poisoned, so only the rows written compare, and a
       wrong row shows as NaN on one side */
    op_case c = {.out = {r.q, r.kc.data, r.vc.data}, .n = {(size_t)n * qd, (size_t)slots_total * kd,
                 (size_t)slots_total * kd}, .num_out = 3, .run = run_rope_store, .ctx = &r};
    char shape[96];
    snprintf(shape, sizeof(shape), "n %d h %d/%d hd %d %s", n, s.n_heads, s.n_kv_heads, s.head_dim,
             style == TRAM_ROPE_NEOX ? "neox" : "interleaved");
    compare(&c, TRAM_KERNEL_ROPE_KV, shape);
    gpu->free_weight(gpu, &r.qkv), gpu->free_weight(gpu, &r.kc), gpu->free_weight(gpu, &r.vc);
    gpu->free(gpu, r.q), gpu->free(gpu, r.k), gpu->free(gpu, r.v), gpu->free(gpu, r.pos);
    gpu->free(gpu, r.slots), gpu->free(gpu, r.inv_freq);
    free(pos), free(slots), free(inv);
}

/* ---------------------------------------------------------------- GEMM */

typedef struct {
    tram_weight w, x;
    void *y;
    int n;
} gemm_case;

static void run_gemm(void *ctx)
{
    gemm_case *g = ctx;
    gpu->matmul(gpu, g->y, g->x.data, &g->w, g->n);
}

static void check_gemm(int n, int rows, int cols, const char *what)
{
    gemm_case g = {.n = n, .y = gpu->alloc(gpu, (size_t)n * rows * 2)};
    die_if(!g.y, "out of device memory");
    tram_cuda_random_weight(gpu, &g.w, rows, cols, TRAM_W_BF16, ++seed, 0.05f);
    g.x = random_bf16((size_t)n * cols, 1.0f);
    op_case c = {.out = {g.y}, .n = {(size_t)n * rows}, .num_out = 1, .run = run_gemm, .ctx = &g};
    char shape[96];
    snprintf(shape, sizeof(shape), "%s n %d: %d x %d", what, n, rows, cols);
    compare(&c, TRAM_KERNEL_GEMM, shape);
    gpu->free_weight(gpu, &g.w), gpu->free_weight(gpu, &g.x), gpu->free(gpu, g.y);
}

static void check_gemms(void)
{
    static const struct {
        const char *name;
        int rows, cols;
    } llama[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096},
                 {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
    static const int ns[] = {1, 2, 4, 8, 64, 256, 512};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(llama); i++)
        for (size_t j = 0; j < TRAM_ARRAY_LEN(ns); j++) {
            if (quick && (i > 1 || ns[j] > 8 || ns[j] == 2))
                continue;
            check_gemm(ns[j], quick ? llama[i].rows / 8 : llama[i].rows, quick ? 1024 : llama[i].cols,
                       llama[i].name);
        }
    check_gemm(3, 576, 576, "smollm2 q");  /* an odd row count */
}

int main(int argc, char **argv)
{
    unsigned s = (unsigned)time(NULL);
    for (int a = 1; a < argc; a++) {
        char *end;
        if (!strcmp(argv[a], "--quick"))
            quick = 1;
        else if ((s = (unsigned)strtoul(argv[a], &end, 10), *end || end == argv[a])) {
            fprintf(stderr, "check_variants: '%s' is neither --quick nor a seed\n", argv[a]);
            return 1;  /* 2 means no GPU to tests/gpu/run.sh */
        }
    }
    tram_error err = {{0}};
    if (tram_backend_cuda_create(&gpu, 0, &err)) {
        fprintf(stderr, "check_variants: %s\n", err.msg);
        return 2;
    }
    srand(s);
    seed = s;
    reps = quick ? 3 : 20;
    printf("check_variants: seed %u, tolerance %.0e%s, %d timed calls per variant\n", s, TOL,
           quick ? ", quick shapes" : "", reps);
    check_decode();
    check_prefill();
    tram_attn_shape llama = attn_shapes[0], smol = attn_shapes[1];
    for (int style = 0; style < 2; style++) {
        check_rope_store(1, llama, (tram_rope_style)style);
        check_rope_store(quick ? 40 : 512, llama, (tram_rope_style)style);
        check_rope_store(quick ? 9 : 64, smol, (tram_rope_style)style);
    }
    check_gemms();
    printf("\n| family   | v | shape (us per call)                            | variant 1 | variant v | v1/vv  |\n"
           "|---|---:|---|---:|---:|---:|\n%s\ncheck_variants: %d of %d cases passed\n", timings, cases - failures,
           cases);
    gpu->destroy(gpu);
    return failures ? 1 : 0;
}
