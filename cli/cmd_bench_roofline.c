/* cmd_bench_roofline.c — `tram bench roofline`: where a CPU step's time goes
 * against what the machine allows.  For a prefill and for decode steps of 1,
 * 8 and 32 sequences it runs the model through a timed copy of the CPU
 * backend's op table (cli/op_profile.h), then samples and detokenizes each
 * row as a request would, and prints per class of op the bytes and FLOPs it
 * must move, the GB/s and GFLOP/s it reached and their share of the floors
 * measured in the same run: STREAM-triad bandwidth, OpenBLAS's sgemm peak
 * and the block-GEMM peak of tram's own kernel on weights in cache.  Prints
 * markdown (bench/roofline.sh writes bench/results/roofline.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench_floors.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "cli/op_profile.h"
#include "kernels/cpu/cpu_sampling.h"
#include "kernels/cpu/gemm_blocks.h"
#include "kernels/cpu/quota.h"
#include "tokenizer/tokenizer.h"

#define BLOCK 16    /* tokens per KV block */
#define MAX_SEQS 32 /* the largest decode batch */

typedef struct {
    const char *model, *preset; /* a GGUF, or dummy weights of a preset's shape */
    int threads, context, steps, f32;
    int blocks; /* the dummy weights' block format: an index in block_names */
} roof_opts;

typedef struct {
    double bandwidth, sgemm, qgemm; /* bytes/s, FLOP/s, FLOP/s */
} roof_floors;

/* A step's batch: the arrays a tram_batch points into. */
typedef struct {
    int32_t ids[2048], pos[2048], slots[2048], qs[MAX_SEQS + 1], lens[MAX_SEQS], rows[MAX_SEQS];
    int32_t *tables; /* MAX_SEQS x blocks_per_seq */
    tram_batch b;
} roof_batch;

/* Everything a scenario runs on. */
typedef struct {
    const roof_opts *o;
    roof_floors fl;
    tram_model_file *file;
    tram_backend *be;
    tram_op_profile prof;
    tram_model *m;
    tram_tokenizer *tok;
    tram_sampler *sampler;
    tram_detok *detok[MAX_SEQS];
    float *logits;
    int blocks_per_seq;
    double sample_s, detok_s, forward_s;
} roof_run;

static void usage(FILE *out)
{
    fprintf(out, "usage: tram bench roofline [-m MODEL | --preset NAME [--blocks B]] [-t N] [--context N]\n"
                 "       [--steps N] [--weight-format native|f32]\n\n"
                 "  -m, --model MODEL       a GGUF file (the default model)\n"
                 "  --preset NAME           random weights of a preset's shape instead (models/presets:\n"
                 "                          llama-3.2-1b, ...): weights larger than the cache; no tokenizer,\n"
                 "                          so detokenization is not timed\n"
                 "  --blocks B              the preset's matrices in q4_1 (the default), q8_0 or q4_0\n"
                 "                          blocks, as the GGUF of that format would hold them\n"
                 "  -t, --threads N         CPU threads (the usable CPUs)\n"
                 "  --context N             prefill tokens, and the context the decode steps see (256)\n"
                 "  --steps N               timed decode steps per batch size (16)\n"
                 "  --weight-format F       native: the GGUF's blocks as stored; f32: dequantized (native)\n");
}

static const char *const formats[] = {"native", "f32", NULL};
static const char *const block_names[] = {"q4_1", "q8_0", "q4_0", NULL};
static const tram_ggml_type block_types[] = {TRAM_GGML_Q4_1, TRAM_GGML_Q8_0, TRAM_GGML_Q4_0};

#define FIELD(name) offsetof(roof_opts, name)
static const tram_flag roof_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--preset", .kind = TRAM_FLAG_STRING, .field = FIELD(preset)},
    {.name = "--blocks", .kind = TRAM_FLAG_CHOICE, .field = FIELD(blocks), .choices = block_names},
    {.name = "--threads", .alias = "-t", .kind = TRAM_FLAG_INT, .field = FIELD(threads), .lo = 1, .hi = 4096},
    {.name = "--context", .kind = TRAM_FLAG_INT, .field = FIELD(context), .lo = BLOCK, .hi = 2048},
    {.name = "--steps", .kind = TRAM_FLAG_INT, .field = FIELD(steps), .lo = 1, .hi = 10000},
    {.name = "--weight-format", .kind = TRAM_FLAG_CHOICE, .field = FIELD(f32), .choices = formats},
};

/* ---------------------------------------------------------------- floors */

/* FLOP/s of tram's block kernel on weights that stay in cache (64 tokens x
 * 256 rows x 1024 columns of Q4_1): what a GEMM on the file's blocks can
 * reach when memory is not the limit. */
static double qgemm_peak(int threads, tram_error *err)
{
    enum { ROWS = 256, COLS = 1024, N = 64, REPS = 5 };
    tram_cpu_pool *pool = NULL;
    void *w = tram_calloc(tram_q_packed_bytes(TRAM_W_Q4_1, ROWS, COLS), 1, err);
    tram_q8_block *x = w ? tram_calloc((size_t)N * COLS / TRAM_QK, sizeof(*x), err) : NULL;
    float *y = x ? tram_calloc((size_t)N * ROWS, sizeof(float), err) : NULL;
    double best = 1e30;
    /* at function scope: a late pool worker may still read it until the
     * pool is destroyed (pool.h's stealable jobs) */
    tram_weight tw = {.type = TRAM_W_Q4_1, .rows = ROWS, .cols = COLS, .data = w};
    if (y && !tram_cpu_pool_create(&pool, threads, err)) {
        for (int r = 0; r < REPS; r++) {
            double t0 = tram_now();
            tram_q_gemm(tram_q_kernel_best(), y, x, N, &tw, pool);
            if (r && tram_now() - t0 < best) /* the first warms up */
                best = tram_now() - t0;
        }
    }
    tram_cpu_pool_destroy(pool);
    TRAM_FREE_ALL(w, x, y);
    return pool ? 2.0 * ROWS * COLS * N / best : 0;
}

static int measure_floors(roof_run *r, tram_error *err)
{
    r->fl.bandwidth = tram_bench_triad_bandwidth(r->o->threads, err);
    r->fl.sgemm = r->fl.bandwidth > 0 ? tram_bench_sgemm_peak(r->o->threads, err) : 0;
    r->fl.qgemm = r->fl.sgemm > 0 ? qgemm_peak(r->o->threads, err) : 0;
    return r->fl.qgemm > 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- set-up */

static int open_run(roof_run *r, tram_error *err)
{
    const roof_opts *o = r->o;
    r->blocks_per_seq = o->context / BLOCK + 1;
    tram_model_limits lim = {.max_tokens = TRAM_MAX(o->context, MAX_SEQS), .max_seqs = MAX_SEQS,
                             .max_blocks_per_seq = r->blocks_per_seq, .block_size = BLOCK,
                             .num_blocks = o->context / BLOCK + MAX_SEQS, .weight_type = TRAM_W_F32,
                             .keep_blocks = !o->f32};
    tram_ggml_type blocks = o->f32 ? TRAM_GGML_F32 : block_types[o->blocks];
    if ((o->preset ? tram_model_file_open_dummy_blocks(&r->file, o->preset, blocks, err)
                   : tram_model_file_open(&r->file, o->model, err)) ||
        tram_backend_cpu_create(&r->be, o->threads, err))
        return -1;
    const tram_model_config *c = tram_model_file_config(r->file);
    tram_op_profile_wrap(&r->prof, r->be, c);
    if (tram_model_create(&r->m, r->file, &r->prof.be, &lim, err) ||
        (!o->preset && tram_tokenizer_from_gguf(&r->tok, tram_model_file_gguf(r->file), err)) ||
        tram_sampler_create(&r->sampler, c->vocab_size, err))
        return -1;
    for (int s = 0; r->tok && s < MAX_SEQS; s++)
        if (tram_detok_create(&r->detok[s], r->tok, 1, NULL, 0, err))
            return -1;
    r->logits = tram_calloc((size_t)MAX_SEQS * c->vocab_size, sizeof(float), err);
    return r->logits ? 0 : -1;
}

static void close_run(roof_run *r)
{
    for (int s = 0; s < MAX_SEQS; s++)
        tram_detok_free(r->detok[s]);
    free(r->logits);
    tram_sampler_destroy(r->sampler);
    tram_tokenizer_free(r->tok);
    tram_model_destroy(r->m);
    if (r->be)
        r->be->destroy(r->be);
    tram_model_file_close(r->file);
}

/* The prefill: one sequence of `context` tokens in blocks 0.. */
static void prefill_batch(roof_batch *rb, const roof_run *r, int vocab)
{
    int n = r->o->context;
    for (int i = 0; i < n; i++) {
        rb->ids[i] = (int32_t)((i * 7919 + 13) % vocab);
        rb->pos[i] = rb->slots[i] = i;
    }
    for (int j = 0; j < r->blocks_per_seq; j++)
        rb->tables[j] = j;
    rb->qs[0] = 0;
    rb->qs[1] = n;
    rb->lens[0] = n;
    rb->rows[0] = n - 1;
    rb->b = (tram_batch){.num_tokens = n, .num_seqs = 1, .token_ids = rb->ids, .positions = rb->pos,
                         .slot_mapping = rb->slots, .query_start = rb->qs, .seq_lens = rb->lens,
                         .block_tables = rb->tables, .max_blocks_per_seq = r->blocks_per_seq,
                         .logits_rows = rb->rows, .num_logits = 1};
}

/* `seqs` sequences, each a token after the prefill's context: they share
 * its blocks (the same KV read by each, as distinct prompts of that length
 * would be) and write their new token into blocks of their own. */
static void decode_batch(roof_batch *rb, const roof_run *r, int seqs)
{
    int ctx = r->o->context / BLOCK * BLOCK, own = r->o->context / BLOCK;
    for (int s = 0; s < seqs; s++) {
        rb->ids[s] = (int32_t)(s * 31 + 7);
        rb->pos[s] = ctx;
        rb->slots[s] = (own + s) * BLOCK;
        rb->qs[s] = s;
        rb->lens[s] = ctx + 1;
        rb->rows[s] = s;
        for (int j = 0; j < own; j++)
            rb->tables[s * r->blocks_per_seq + j] = j;
        rb->tables[s * r->blocks_per_seq + own] = own + s;
    }
    rb->qs[seqs] = seqs;
    rb->b = (tram_batch){.num_tokens = seqs, .num_seqs = seqs, .token_ids = rb->ids, .positions = rb->pos,
                         .slot_mapping = rb->slots, .query_start = rb->qs, .seq_lens = rb->lens,
                         .block_tables = rb->tables, .max_blocks_per_seq = r->blocks_per_seq,
                         .logits_rows = rb->rows, .num_logits = seqs};
}

/* ---------------------------------------------------------------- steps */

/* One step: the forward pass, then each row sampled (temperature 0.8, top-p
 * 0.95: a typical request) and its token detokenized. */
static int step(roof_run *r, const tram_batch *b, tram_error *err)
{
    int vocab = tram_model_file_config(r->file)->vocab_size;
    double t0 = tram_now();
    if (tram_model_forward(r->m, b, r->logits, err))
        return -1;
    double t1 = tram_now();
    r->forward_s += t1 - t0;
    for (int i = 0; i < b->num_logits; i++) {
        tram_sample_input in = {.p = {.temperature = 0.8f, .top_p = 0.95f, .repetition_penalty = 1.0f, .seed = 1},
                                .output_len = i};
        int32_t id = tram_sample(r->sampler, r->logits + (size_t)i * vocab, &in);
        double t2 = tram_now();
        const char *text;
        size_t len;
        if (r->tok && tram_detok_push(r->detok[i], id, &text, &len, NULL, err) < 0)
            return -1;
        r->sample_s += t2 - t1;
        r->detok_s += (t1 = tram_now()) - t2;
    }
    return 0;
}

/* `steps` timed steps of b after one untimed (warm caches, grown scratch). */
static int run_steps(roof_run *r, const tram_batch *b, int steps, tram_error *err)
{
    if (step(r, b, err))
        return -1;
    tram_op_profile_reset(&r->prof);
    r->sample_s = r->detok_s = r->forward_s = 0;
    for (int i = 0; i < steps; i++)
        if (step(r, b, err))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- report */

static void print_floors(const roof_run *r)
{
    char cpu[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(cpu, sizeof(cpu), "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("- CPU: %s, %d threads; %s\n", cpu, r->o->threads, date);
    const roof_opts *o = r->o;
    if (o->preset)
        printf("- Model: `%s`, random weights (no tokenizer: detokenization not timed), %s; "
               "context %d tokens, %d timed decode steps per batch size\n",
               tram_model_file_path(r->file), o->f32 ? "f32" : block_names[o->blocks], o->context, o->steps);
    else
        printf("- Model: `%s`, weights %s; context %d tokens, %d timed decode steps per batch size\n", o->model,
               o->f32 ? "f32 (dequantized at load)" : "native (the GGUF's blocks)", o->context, o->steps);
    printf("- Last-level cache %.0f MB: weights that fit stay in it between steps (their MB/step at batch 1 "
           "is the GEMM rows' sum)\n", (double)tram_bench_llc_bytes() * 1e-6);
    printf("- Floors measured in this run: STREAM triad %.1f GB/s; OpenBLAS sgemm peak %.1f GFLOP/s; "
           "tram's Q4_1 block GEMM in cache %.1f GFLOP/s\n\n",
           r->fl.bandwidth * 1e-9, r->fl.sgemm * 1e-9, r->fl.qgemm * 1e-9);
}

static void print_row(const char *name, double s, double bytes, double flops, double total_s, double peak,
                      double bw)
{
    printf("| %s | %.3f | %.1f%% | ", name, s * 1e3, 100 * s / total_s);
    if (bytes > 0)
        printf("%.2f | %.1f | %.0f%% | ", bytes * 1e-6, bytes / s * 1e-9, 100 * bytes / s / bw);
    else
        printf("— | — | — | ");
    if (flops > 0)
        printf("%.3f | %.1f | %.0f%% |\n", flops * 1e-9, flops / s * 1e-9, 100 * flops / s / peak);
    else
        printf("— | — | — |\n");
}

/* One scenario's table: per op class, then sampling and detokenization,
 * per step. */
static void print_scenario(const roof_run *r, const char *title, int tokens, int steps)
{
    double ops = 0, gemm_s = 0, bytes = 0, peak = r->o->f32 ? r->fl.sgemm : r->fl.qgemm;
    for (int c = 0; c < OP_CLASSES; c++) {
        ops += r->prof.cost[c].seconds;
        bytes += r->prof.cost[c].bytes;
        gemm_s += c < OP_GEMMS ? r->prof.cost[c].seconds : 0;
    }
    double total = (r->forward_s + r->sample_s + r->detok_s) / steps, floor_s = bytes / steps / r->fl.bandwidth;
    printf("### %s\n\n", title);
    printf("Step %.2f ms (%.1f tok/s); the bytes it must move take %.2f ms at the triad bandwidth: "
           "**%.0f%% of the bandwidth floor**; **%.1f%% of the step outside the GEMMs**.\n\n",
           total * 1e3, tokens / total, floor_s * 1e3, 100 * floor_s / total, 100 * (1 - gemm_s / steps / total));
    printf("| op class | ms/step | share | MB/step | GB/s | of triad | GFLOP/step | GFLOP/s | of GEMM peak |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int c = 0; c < OP_CLASSES; c++) {
        const tram_op_cost *k = &r->prof.cost[c];
        if (k->seconds > 0)
            print_row(tram_op_class_name((tram_op_class)c), k->seconds / steps, k->bytes / steps,
                      k->flops / steps, total, peak, r->fl.bandwidth);
    }
    print_row("forward, between ops (batch checks and upload)", (r->forward_s - ops) / steps, 0, 0, total, peak,
              r->fl.bandwidth);
    print_row("sampling (T 0.8, top-p 0.95)", r->sample_s / steps, 0, 0, total, peak, r->fl.bandwidth);
    if (r->tok)
        print_row("detokenization", r->detok_s / steps, 0, 0, total, peak, r->fl.bandwidth);
    printf("\n");
}

static int roofline(roof_run *r, tram_error *err)
{
    roof_batch rb;
    int vocab = tram_model_file_config(r->file)->vocab_size;
    rb.tables = tram_calloc((size_t)MAX_SEQS * r->blocks_per_seq, sizeof(int32_t), err);
    if (!rb.tables)
        return -1;
    print_floors(r);
    char title[128];
    prefill_batch(&rb, r, vocab);
    int rc = run_steps(r, &rb.b, 1, err);
    if (!rc) {
        snprintf(title, sizeof(title), "Prefill, %d tokens", r->o->context);
        print_scenario(r, title, r->o->context, 1);
    }
    static const int sizes[] = {1, 8, 32};
    for (size_t i = 0; !rc && i < TRAM_ARRAY_LEN(sizes); i++) {
        decode_batch(&rb, r, sizes[i]);
        if (!(rc = run_steps(r, &rb.b, r->o->steps, err))) {
            snprintf(title, sizeof(title), "Decode, batch %d (context %d)", sizes[i], r->o->context);
            print_scenario(r, title, sizes[i], r->o->steps);
        }
    }
    free(rb.tables);
    return rc;
}

static int bench_roofline(int argc, char **argv)
{
    roof_opts o = {.threads = tram_cpu_usable(), .context = 256, .steps = 16, .blocks = -1};
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(roof_flags, &o)};
    if (tram_flags_parse(tables, 1, argc, argv, NULL, 0) < 0)
        return TRAM_EXIT_USAGE;
    if ((o.model && o.preset) || (o.blocks >= 0 && !o.preset)) {
        fprintf(stderr, "tram bench roofline: %s\n", o.preset ? "give -m MODEL or --preset NAME, not both"
                                                              : "--blocks is the format of --preset's weights");
        return TRAM_EXIT_USAGE;
    }
    o.model = o.model ? o.model : TRAM_DEFAULT_MODEL;
    o.blocks = TRAM_MAX(o.blocks, 0);
    tram_error err = {{0}};
    roof_run r = {.o = &o};
    int rc = measure_floors(&r, &err) || open_run(&r, &err) || roofline(&r, &err);
    close_run(&r);
    return tram_exit_status("tram", rc, &err);
}

const tram_command tram_cmd_bench_roofline = {
    .name = "roofline", .run = bench_roofline, .usage = usage,
    .summary = "where a CPU step's time goes, against the bandwidth and GEMM floors"};
