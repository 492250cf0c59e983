/* kv_cache.c — what --kv-cache-dtype buys on the CPU, for bench/compress.sh:
 * how many concurrent sequences of CTX tokens 1 GiB of KV cache holds, and
 * the decode speed of SEQS such sequences at that context, per dtype.
 * Prints markdown table rows.
 *   build/bench/kv_cache [-m MODEL] [--ctx N] [--seqs N] [--steps N] [-t N] DTYPE...
 *
 * The decode steps are timed only once every sequence has its first token
 * (its prompt prefilled), so they read CTX tokens of K/V each; the prompts
 * are distinct random tokens, so no two sequences share cached blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "engine/tram.h"

typedef struct {
    const char *model;
    int ctx, seqs, steps, threads;
} kv_bench;

static tram_engine *open_engine(const kv_bench *b, const char *dtype, tram_error *err)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.kv_cache_memory = (size_t)1 << 30;
    c.max_model_len = b->ctx + b->steps + 2;
    c.max_num_seqs = b->seqs;
    c.num_threads = b->threads;
    c.enable_prefix_caching = 0;
    snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "%s", dtype);
    tram_engine *e = NULL;
    return tram_engine_create(&e, &c, b->model, err) ? NULL : e;
}

static int add_prompts(tram_engine *e, const kv_bench *b, tram_error *err)
{
    int32_t *ids = malloc((size_t)b->ctx * sizeof(int32_t));
    if (!ids)
        return tram_fail(err, "out of memory");
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.temperature = 0;
    p.ignore_eos = 1;
    p.max_tokens = b->steps + 1;
    unsigned s = 1;
    int rc = 0;
    for (int r = 0; r < b->seqs && !rc; r++) {
        for (int i = 0; i < b->ctx; i++) {
            s = s * 1664525u + 1013904223u;
            ids[i] = 100 + (int)(s >> 8) % 20000; /* ordinary tokens of the vocabulary */
        }
        tram_prompt pr = {.token_ids = ids, .num_tokens = b->ctx};
        rc = tram_engine_add_request(e, (uint64_t)r, &pr, &p, 0, err);
    }
    free(ids);
    return rc;
}

/* Steps until every sequence has a token, then times the decode steps. */
static int decode_tok_s(tram_engine *e, const kv_bench *b, double *tok_s, tram_error *err)
{
    int started = 0, *seen = calloc((size_t)b->seqs, sizeof(int));
    long tokens = 0;
    double t0 = 0;
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n;
        if (tram_engine_step(e, &outs, &n, err)) {
            free(seen);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (started == b->seqs)
                tokens += outs[i].num_tokens;
            else if (!seen[outs[i].request_id]++ && ++started == b->seqs)
                t0 = tram_now();
        }
    }
    *tok_s = tokens / (tram_now() - t0);
    free(seen);
    return 0;
}

static int run(const kv_bench *b, const char *dtype)
{
    tram_error err = {{0}};
    tram_engine *e = open_engine(b, dtype, &err);
    double tok_s = 0;
    if (!e || add_prompts(e, b, &err) || decode_tok_s(e, b, &tok_s, &err)) {
        fprintf(stderr, "kv_cache %s: %s\n", dtype, err.msg);
        tram_engine_destroy(e);
        return -1;
    }
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    int per_seq = (b->ctx + 15) / 16; /* blocks of the default --block-size 16 */
    printf("| %-8s | %15d | %28d | %27.1f |\n", dtype, s.num_blocks_total, s.num_blocks_total / per_seq, tok_s);
    fflush(stdout);
    tram_engine_destroy(e);
    return 0;
}

/* The flags' values into b; returns the index of the first DTYPE, -1 on a
 * flag it does not know. */
static int parse(kv_bench *b, int argc, char **argv)
{
    struct { const char *flag; int *field; } ints[] = {
        {"--ctx", &b->ctx}, {"--seqs", &b->seqs}, {"--steps", &b->steps}, {"-t", &b->threads}};
    int i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        size_t k = 0;
        while (k < 4 && strcmp(argv[i], ints[k].flag))
            k++;
        if (!strcmp(argv[i], "-m"))
            b->model = argv[i + 1];
        else if (k < 4)
            *ints[k].field = atoi(argv[i + 1]);
        else
            return -1;
    }
    return i;
}

int main(int argc, char **argv)
{
    kv_bench b = {.model = TRAM_DEFAULT_MODEL, .ctx = 4096, .seqs = 4, .steps = 32, .threads = 0};
    int i = parse(&b, argc, argv);
    if (i < 0 || i >= argc || b.ctx < 1 || b.seqs < 1 || b.steps < 1 || b.threads < 0) {
        fprintf(stderr, "usage: kv_cache [-m MODEL] [--ctx N] [--seqs N] [--steps N] [-t N] DTYPE...\n");
        return 2;
    }
    printf("| KV dtype | blocks in 1 GiB | %d-token sequences in 1 GiB | decode tok/s, %d seqs at %d |\n", b.ctx,
           b.seqs, b.ctx);
    printf("|----------|----------------:|-----------------------------:|----------------------------:|\n");
    for (; i < argc; i++)
        if (run(&b, argv[i]))
            return 1;
    return 0;
}
