/* check_nccl.c — tensor parallelism's NCCL path on one GPU: a one-rank
 * communicator (tram_backend_cuda_create_ranks, ncclCommInitAll over device
 * 0), so that every NCCL call tram makes really runs on a single lent GPU.
 *
 *   create   the one-rank backend: rank 0 of a world of 1, with a communicator
 *   reduce   all_reduce of bf16 values, eager: a one-rank sum is the input,
 *            bit for bit
 *   graph    the same all_reduce captured in a CUDA graph (NCCL must allow
 *            it in a capture) and replayed on new values without an error
 *   model    dummy weights of a preset, one prefill on the plain backend and
 *            one on the NCCL backend (whose every layer all-reduces through
 *            NCCL): the logits equal bit for bit; then a decode step captured
 *            as a graph on the NCCL backend (its all-reduces inside) and
 *            replayed equals the eager step, bit for bit
 *
 * One line per case (PASS/FAIL); exit 0 when all pass, 1 on a failure, 2 when
 * no GPU is usable.  Usage: check_nccl [preset] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda.h"
#include "models/model.h"

#define N 4096
#define TOKENS 16
#define BLOCK 16

static int failures;

static void report(int ok, const char *what, const char *detail)
{
    printf("%-6s %-8s %s\n", ok ? "PASS" : "FAIL", what, detail);
    failures += !ok;
}

static void die(const char *what, const tram_error *err)
{
    fprintf(stderr, "check_nccl: %s: %s\n", what, err->msg);
    exit(1);
}

/* bf16 bits of small multiples of 1/8 (exact in bf16), and their f32 values. */
static void make_values(uint16_t *bits, float *values, int salt)
{
    for (int i = 0; i < N; i++) {
        values[i] = (float)((i * 7 + salt) % 257 - 128) / 8.0f;
        uint32_t u;
        memcpy(&u, &values[i], 4);
        bits[i] = (uint16_t)(u >> 16);
    }
}

static int reduced_equals(tram_backend *be, const void *dev, const float *want)
{
    static float got[N];
    be->to_host_f32(be, got, dev, N);
    tram_error err = {{0}};
    if (be->sync(be, &err))
        die("download", &err);
    return !memcmp(got, want, sizeof(got));
}

static void check_reduce(tram_backend *be)
{
    static uint16_t bits[N];
    static float values[N];
    tram_error err = {{0}};
    void *x = be->alloc(be, N * sizeof(uint16_t));
    make_values(bits, values, 0);
    be->upload(be, x, bits, sizeof(bits));
    be->all_reduce(be, x, N);
    report(!be->sync(be, &err) && reduced_equals(be, x, values), "reduce", "eager ncclAllReduce of 4096 bf16");
    int captured = !tram_cuda_graph_begin(be, &err);
    if (captured) {
        be->all_reduce(be, x, N);
        captured = !tram_cuda_graph_end(be, 1, &err);
    }
    make_values(bits, values, 3);
    be->upload(be, x, bits, sizeof(bits));
    int ok = captured && !tram_cuda_graph_replay(be, 1, &err) && !be->sync(be, &err) && reduced_equals(be, x, values);
    report(ok, "graph", ok ? "ncclAllReduce captured in a graph and replayed" : err.msg);
    be->free(be, x);
}

/* ---------------------------------------------------------------- model */

typedef struct {
    int32_t ids[TOKENS], pos[TOKENS], slots[TOKENS], qs[2], lens[1], table[1], rows[1];
} one_seq;

/* Tokens [from, to) of one sequence in block 0; the logits of the last. */
static tram_batch seq_batch(one_seq *s, int from, int to, int vocab)
{
    for (int i = from; i < to; i++) {
        s->ids[i - from] = (i * 131 + 7) % vocab;
        s->pos[i - from] = s->slots[i - from] = i;
    }
    s->qs[0] = 0;
    s->qs[1] = to - from;
    s->lens[0] = to;
    s->table[0] = 0;
    s->rows[0] = to - from - 1;
    return (tram_batch){to - from, 1, s->ids, s->pos, s->slots, s->qs, s->lens, s->table, 1, s->rows, 1};
}

static tram_model *make_model(tram_model_file *f, tram_backend *be)
{
    tram_model_limits lim = {.max_tokens = TOKENS, .max_seqs = 1, .max_blocks_per_seq = 1, .num_blocks = 1,
                             .block_size = BLOCK, .weight_type = TRAM_W_BF16};
    tram_error err = {{0}};
    tram_model *m;
    if (tram_model_create(&m, f, be, &lim, &err))
        die("model", &err);
    return m;
}

/* A decode step (token TOKENS-1 after a prefill of the rest), its device
 * logits downloaded; captured and replayed when `graph`. */
static void decode_step(tram_model *m, tram_backend *be, int vocab, int graph, float *out)
{
    one_seq s;
    tram_error err = {{0}};
    tram_batch b = seq_batch(&s, 0, TOKENS - 1, vocab);
    float *prefill = malloc((size_t)vocab * sizeof(float));
    if (tram_model_forward(m, &b, prefill, &err))
        die("prefill", &err);
    free(prefill);
    b = seq_batch(&s, TOKENS - 1, TOKENS, vocab);
    if (tram_model_prepare(m, &b, &err))
        die("prepare", &err);
    const void *logits = tram_model_run(m);
    if (graph && (be->sync(be, &err) || tram_cuda_graph_begin(be, &err) || !tram_model_run(m) ||
                  tram_cuda_graph_end(be, 2, &err) || tram_cuda_graph_replay(be, 2, &err)))
        die("graph", &err);
    be->to_host_f32(be, out, logits, (size_t)vocab);
    if (be->sync(be, &err))
        die("decode", &err);
}

static void check_model(tram_backend *nccl, const char *preset)
{
    tram_error err = {{0}};
    tram_model_file *f;
    tram_backend *plain;
    if (tram_model_file_open_dummy(&f, preset, &err) || tram_backend_cuda_create(&plain, 0, &err))
        die(preset, &err);
    int vocab = tram_model_file_config(f)->vocab_size;
    float *a = malloc((size_t)vocab * sizeof(float)), *b = malloc((size_t)vocab * sizeof(float));
    float *c = malloc((size_t)vocab * sizeof(float));
    tram_model *mp = make_model(f, plain), *mn = make_model(f, nccl);
    decode_step(mp, plain, vocab, 0, a);
    decode_step(mn, nccl, vocab, 0, b);
    report(!memcmp(a, b, (size_t)vocab * sizeof(float)), "model", "NCCL backend's logits = the plain backend's");
    decode_step(mn, nccl, vocab, 1, c);
    report(!memcmp(b, c, (size_t)vocab * sizeof(float)), "model", "decode graph with NCCL all-reduces = eager");
    tram_model_destroy(mp);
    tram_model_destroy(mn);
    plain->destroy(plain);
    tram_model_file_close(f);
    free(a), free(b), free(c);
}

int main(int argc, char **argv)
{
    tram_error err = {{0}};
    if (tram_cuda_probe(0, &err)) {
        printf("FAIL   create   %s\n", err.msg);
        return 2;
    }
    tram_backend *be;
    if (tram_backend_cuda_create_ranks(&be, 1, &err)) {
        report(0, "create", err.msg);
        return 1;
    }
    report(be->rank == 0 && be->world_size == 1, "create", "ncclCommInitAll over device 0: rank 0 of 1");
    check_reduce(be);
    check_model(be, argc > 1 ? argv[1] : "smollm2-135m");
    be->destroy(be);
    return failures ? 1 : 0;
}
