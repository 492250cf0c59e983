/* cmd_bench_throughput.c — `tram bench throughput`: offline throughput, like
 * vLLM's benchmark_throughput.  Fixed-length random-token prompts (or a JSONL
 * dataset) all go through continuous batching at once; with
 * --compare-sequential the same requests then run one at a time on a fresh
 * engine (a cold prefix cache, as the batched run had).  The same run
 * measures this machine's OpenBLAS sgemm peak and memory copy bandwidth, to
 * read the engine's FLOP/s against. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/bench_floors.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/engine_flags.h"
#include "kernels/cpu/cpu_sampling.h"
#include "kernels/cpu/quota.h"
#include "engine/tram.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model, *dataset;
    int num_prompts, input_len, output_len, compare_sequential;
    int no_peak;   /* skip the sgemm / memcpy measurement (harnesses that call us often) */
    uint64_t seed; /* of the prompts and of sampling */
    float temperature;
    tram_engine_config ec;
} bench_opts;

typedef struct {
    int32_t *ids;
    int num_ids, output_len;
    float temperature;
} bench_req;

typedef struct {
    double seconds;
    /* the steps that began with every request added so far past its first
     * token (no prefill in them): their time and the tokens they made */
    double decode_seconds;
    uint64_t decode_tokens;
    tram_engine_stats s;       /* the engine's counters at the end of the run */
} bench_run;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram bench throughput [-m MODEL] [--num-prompts N] [--input-len N]\n"
            "       [--output-len N] [--dataset FILE.jsonl] [--seed S] [--compare-sequential]\n"
            "       [engine flags]\n"
            "       tram bench serve ...   (see tram bench serve --help)\n\n"
            "  --num-prompts N         requests (64; with --dataset, its first N lines)\n"
            "  --input-len N           prompt tokens of each random prompt (128)\n"
            "  --output-len N          tokens generated per request, EOS ignored (128)\n"
            "  --dataset FILE          JSONL lines {\"prompt\": \"...\", \"output_len\": N}\n"
            "                          instead of random prompts (output_len optional)\n"
            "  --seed S                seed of the random prompts and of sampling (0)\n"
            "  --temperature T         sampling temperature, 0 = greedy (1)\n"
            "  --compare-sequential    also run the requests one at a time; print the ratio\n"
            "  --no-peak               skip measuring the sgemm peak and memcpy bandwidth\n\n");
    tram_engine_print_flags(out);
}

#define FIELD(name) offsetof(bench_opts, name)

/* --seed here seeds the prompts and sampling, not the engine (this table is
 * searched before the engine's). */
static const tram_flag bench_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--dataset", .kind = TRAM_FLAG_STRING, .field = FIELD(dataset)},
    {.name = "--num-prompts", .kind = TRAM_FLAG_INT, .field = FIELD(num_prompts), .lo = 1, .hi = 1 << 20},
    {.name = "--input-len", .kind = TRAM_FLAG_INT, .field = FIELD(input_len), .lo = 1, .hi = 1 << 20},
    {.name = "--output-len", .kind = TRAM_FLAG_INT, .field = FIELD(output_len), .lo = 1, .hi = 1 << 20},
    {.name = "--seed", .kind = TRAM_FLAG_SEED, .field = FIELD(seed)},
    {.name = "--temperature", .kind = TRAM_FLAG_FLOAT, .field = FIELD(temperature), .lo = 0, .hi = 100},
    {.name = "--compare-sequential", .kind = TRAM_FLAG_SET, .field = FIELD(compare_sequential)},
    {.name = "--no-peak", .kind = TRAM_FLAG_SET, .field = FIELD(no_peak)},
};

/* ---------------------------------------------------------------- requests */

/* Uniform over the ordinary (non-special) tokens, from a counter-based
 * stream: the same seed gives the same prompts on any machine. */
static int random_prompts(const tram_tokenizer *tok, const bench_opts *o, bench_req *reqs,
                          tram_error *err)
{
    int vocab = tram_tokenizer_vocab_size(tok);
    for (int i = 0; i < o->num_prompts; i++) {
        bench_req *r = &reqs[i];
        r->ids = tram_calloc((size_t)o->input_len, sizeof(int32_t), err);
        if (!r->ids)
            return -1;
        r->num_ids = o->input_len;
        r->output_len = o->output_len;
        for (int k = 0, draw = 0; k < o->input_len; draw++) {
            int32_t id = (int32_t)(tram_sample_uniform(o->seed, i, draw) * vocab);
            if (!tram_tokenizer_is_special(tok, id))
                r->ids[k++] = id;
        }
    }
    return 0;
}

static int dataset_line(const tram_tokenizer *tok, const char *line, int output_len, bench_req *r,
                        tram_error *err)
{
    json_error_t jerr;
    json_t *obj = json_loads(line, 0, &jerr);
    json_t *prompt = json_object_get(obj, "prompt"), *len = json_object_get(obj, "output_len");
    int rc = -1;
    if (!json_is_string(prompt))
        tram_fail(err, "needs \"prompt\": a string");
    else if (len && (!json_is_integer(len) || json_integer_value(len) < 1 ||
                     json_integer_value(len) > 1 << 20))
        tram_fail(err, "\"output_len\" must be an integer in [1, %d]", 1 << 20);
    else {
        r->output_len = len ? (int)json_integer_value(len) : output_len;
        rc = tram_tokenizer_encode(tok, json_string_value(prompt), json_string_length(prompt), 1, 1,
                                   &r->ids, &r->num_ids, err);
    }
    json_decref(obj);
    return rc;
}

/* The first num_prompts non-blank lines (all of them if fewer); sets *n. */
static int dataset_prompts(const tram_tokenizer *tok, const bench_opts *o, bench_req *reqs, int *n,
                           tram_error *err)
{
    FILE *f = fopen(o->dataset, "r");
    if (!f)
        return tram_fail(err, "%s: cannot open", o->dataset);
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, lineno = 0;
    *n = 0;
    while (*n < o->num_prompts && getline(&line, &cap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        if (dataset_line(tok, line, o->output_len, &reqs[*n], err)) {
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg);
            rc = tram_fail(err, "%s line %d: %s", o->dataset, lineno, why);
            break;
        }
        (*n)++;
    }
    free(line);
    fclose(f);
    if (!rc && *n == 0)
        rc = tram_fail(err, "%s: no prompts", o->dataset);
    return rc;
}

/* ---------------------------------------------------------------- runs */

static int add_request(tram_engine *e, const bench_req *r, int i, uint64_t seed, tram_error *err)
{
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.max_tokens = r->output_len;
    p.temperature = r->temperature;
    p.ignore_eos = 1;
    p.has_seed = 1;
    p.seed = seed + (uint64_t)i;
    tram_prompt pr = {.token_ids = r->ids, .num_tokens = r->num_ids};
    return tram_engine_add_request(e, (uint64_t)i, &pr, &p, 0, err);
}

static void progress(const char *mode, int done, int total, double t0)
{
    fprintf(stderr, "\r%s: %d/%d requests, %.0fs ", mode, done, total, tram_now() - t0);
}

/* One engine step, timed into r's decode figures when it ran no prefill
 * (no prompt token computed): with more requests than --max-num-seqs, the
 * steps between two admissions count too, so a batch's decode speed is
 * measured while finished sequences' places are taken, not only in the
 * tail that runs down once the last request has started. */
static int timed_step(tram_engine *e, int *done, bench_run *r, tram_error *err)
{
    const tram_output *outs;
    int num;
    tram_engine_stats before, after;
    tram_engine_stats_get(e, &before);
    double t0 = tram_now();
    if (tram_engine_step(e, &outs, &num, err))
        return -1;
    double seconds = tram_now() - t0;
    tram_engine_stats_get(e, &after);
    int decode = after.computed_prefill_tokens == before.computed_prefill_tokens;
    for (int i = 0; i < num; i++) {
        *done += outs[i].finish_reason != TRAM_FINISH_NONE;
        r->decode_tokens += decode ? (uint64_t)outs[i].num_tokens : 0;
    }
    r->decode_seconds += decode ? seconds : 0;
    return 0;
}

/* All requests at once, or (sequential) each alone after the previous one
 * finished. */
static int run(tram_engine *e, const bench_req *reqs, int n, int sequential, uint64_t seed,
               bench_run *out, tram_error *err)
{
    const char *mode = sequential ? "sequential" : "batched";
    int tty = isatty(2), next = 0, done = 0;
    *out = (bench_run){0};
    double t0 = tram_now();
    while (next < n || tram_engine_has_unfinished(e)) {
        for (; next < n && (!sequential || !tram_engine_has_unfinished(e)); next++)
            if (add_request(e, &reqs[next], next, seed, err))
                return -1;
        if (timed_step(e, &done, out, err))
            return -1;
        if (tty)
            progress(mode, done, n, t0);
    }
    out->seconds = tram_now() - t0;
    if (tty)
        fprintf(stderr, "\n");
    tram_engine_stats_get(e, &out->s);
    return 0;
}

/* ---------------------------------------------------------------- report */

/* FLOPs of the weight matmuls: per token through the layers, and per row of
 * logits (the LM head).  Attention scores are left out (print_header says so). */
static void matmul_flops(const tram_model_config *c, double *per_token, double *per_row)
{
    double q = (double)c->n_heads * c->head_dim, kv = (double)c->n_kv_heads * c->head_dim;
    /* an MoE token runs its router, its n_experts_used experts and the shared one */
    double ffns = c->n_experts ? c->n_experts_used : 1;
    double ffn = 3.0 * c->dim * (ffns * c->ffn_dim + c->shared_ffn_dim) + (double)c->dim * c->n_experts;
    double layer = c->dim * q + 2 * c->dim * kv + q * c->dim + ffn;
    *per_token = 2 * layer * c->n_layers;
    *per_row = 2.0 * c->dim * c->vocab_size;
}

/* What every row of the table is measured against. */
typedef struct {
    int n;
    double per_token, per_row;  /* matmul FLOPs */
    double peak, bandwidth;
} bench_frame;

/* Printed before the runs, so that each row can follow as soon as it is known. */
static void print_header(const tram_engine *e, const bench_opts *o, const bench_req *reqs,
                         bench_frame *f)
{
    matmul_flops(tram_engine_model_config(e), &f->per_token, &f->per_row);
    double in = 0, out = 0;
    for (int i = 0; i < f->n; i++) {
        in += reqs[i].num_ids;
        out += reqs[i].output_len;
    }
    printf("tram bench throughput: %s, %d requests, %.1f prompt + %.1f output tokens on average "
           "(%s, ignore_eos), %d threads\n",
           tram_engine_model_name(e), f->n, in / f->n, out / f->n,
           o->dataset ? o->dataset : "random token ids", o->ec.num_threads);
    if (f->peak > 0)
        printf("OpenBLAS sgemm peak (2048^3 split over the threads, best of 3): %.1f GFLOP/s; "
               "memcpy bandwidth (256 MiB): %.1f GB/s\n", f->peak * 1e-9, f->bandwidth * 1e-9);
    else
        printf("sgemm peak and memcpy bandwidth not measured (--no-peak): \"of peak\" reads 0.\n");
    printf("FLOPs counted: 2 x %.1fM weight params per token run through the model + 2 x %.1fM "
           "(LM head) per sampled token; attention scores not counted.\n",
           f->per_token / 2e6, f->per_row / 2e6);
    printf("decode tok/s: the tokens of the steps that ran no prefill (no prompt token computed) "
           "over their time.\n\n");
    printf("| mode       | req/s | total tok/s | output tok/s | time (s) | steps | ms/step | "
           "preempt | GFLOP/s | of peak | decode tok/s |\n"
           "|------------|------:|------------:|-------------:|---------:|------:|--------:|"
           "--------:|--------:|--------:|-------------:|\n");
    fflush(stdout);
}

static void print_row(const char *mode, const bench_run *r, const bench_frame *f)
{
    const tram_engine_stats *s = &r->s;
    double flops = f->per_token * (double)s->forward_tokens_total +
                   f->per_row * (double)s->generation_tokens_total;
    double tokens = (double)(s->prompt_tokens_total + s->generation_tokens_total);
    double decode = r->decode_seconds > 0 ? (double)r->decode_tokens / r->decode_seconds : 0;
    printf("| %-10s | %5.2f | %11.1f | %12.1f | %8.1f | %5llu | %7.1f | %7llu | %7.2f | %6.1f%% | %12.1f |\n",
           mode, f->n / r->seconds, tokens / r->seconds, s->generation_tokens_total / r->seconds,
           r->seconds, (unsigned long long)s->num_steps, 1e3 * r->seconds / (double)s->num_steps,
           (unsigned long long)s->num_preemptions, flops / r->seconds * 1e-9,
           f->peak > 0 ? 100 * flops / r->seconds / f->peak : 0.0, decode);
    fflush(stdout);
}

/* Speculative decoding's yield, under the table (vLLM's definitions: the mean
 * accepted length counts the draw after the drafts, 1 + accepted / drafts). */
static void print_spec(const char *mode, const bench_run *r)
{
    const tram_engine_stats *s = &r->s;
    if (!s->spec_decode_num_drafts)
        return;
    printf("%s speculation: acceptance rate %.1f%% (%llu of %llu draft tokens), mean accepted "
           "length %.2f, %llu steps too large to speculate, %llu draft tokens declined\n", mode,
           100.0 * (double)s->spec_decode_num_accepted_tokens / (double)s->spec_decode_num_draft_tokens,
           (unsigned long long)s->spec_decode_num_accepted_tokens,
           (unsigned long long)s->spec_decode_num_draft_tokens,
           1.0 + (double)s->spec_decode_num_accepted_tokens / (double)s->spec_decode_num_drafts,
           (unsigned long long)s->spec_decode_off_steps,
           (unsigned long long)s->spec_decode_num_declined_tokens);
    /* the share of verifications that reached each position and kept it:
     * where a proposer's guesses stop holding */
    printf("%s speculation: accepted per draft position, of the verifications:", mode);
    for (int i = 0; i < TRAM_SPEC_MAX_TOKENS && s->spec_decode_num_accepted_tokens_per_pos[i]; i++)
        printf(" %.0f%%", 100.0 * (double)s->spec_decode_num_accepted_tokens_per_pos[i] /
                              (double)s->spec_decode_num_drafts);
    printf("\n");
}

/* ---------------------------------------------------------------- command */

static int load_requests(tram_engine *e, const bench_opts *o, bench_req *reqs, int *n,
                         tram_error *err)
{
    const tram_tokenizer *tok = tram_engine_tokenizer(e);
    *n = o->num_prompts;
    if (o->dataset ? dataset_prompts(tok, o, reqs, n, err) : random_prompts(tok, o, reqs, err))
        return -1;
    for (int i = 0; i < *n; i++)
        reqs[i].temperature = o->temperature;
    for (int i = 0; i < *n; i++)
        if (reqs[i].num_ids + reqs[i].output_len > tram_engine_max_model_len(e))
            return tram_fail(err, "request %d: %d prompt + %d output tokens exceed max_model_len "
                                  "%d", i, reqs[i].num_ids, reqs[i].output_len,
                             tram_engine_max_model_len(e));
    return 0;
}

/* The sequential run gets a fresh engine: the batched run's blocks would be
 * prefix-cache hits. */
static int run_sequential(tram_engine **e, bench_opts *o, const bench_req *reqs, int n,
                          bench_run *r, tram_error *err)
{
    tram_engine_destroy(*e);
    if (tram_engine_create(e, &o->ec, o->model, err))
        return -1;
    return run(*e, reqs, n, 1, o->seed, r, err);
}

static int bench_throughput(bench_opts *o, bench_req *reqs, tram_error *err)
{
    tram_engine *e;
    bench_run runs[2];
    bench_frame f = {0};
    if (tram_engine_create(&e, &o->ec, o->model, err))
        return -1;
    if (!o->ec.num_threads)
        o->ec.num_threads = tram_cpu_usable();
    if (!o->no_peak) {
        f.peak = tram_bench_sgemm_peak(o->ec.num_threads, err);
        f.bandwidth = f.peak > 0 ? tram_bench_copy_bandwidth(err) : 0;
    }
    int rc = o->no_peak || f.bandwidth > 0 ? load_requests(e, o, reqs, &f.n, err) : -1;
    if (!rc) {
        print_header(e, o, reqs, &f);
        rc = run(e, reqs, f.n, 0, o->seed, &runs[0], err);
    }
    if (!rc)
        print_row("batched", &runs[0], &f);
    int sequential = !rc && o->compare_sequential && !(rc = run_sequential(&e, o, reqs, f.n, &runs[1], err));
    if (sequential)
        print_row("sequential", &runs[1], &f);
    if (!rc)
        print_spec("batched", &runs[0]);
    if (sequential) {
        print_spec("sequential", &runs[1]);
        printf("ratio: %.2f\n", runs[1].seconds / runs[0].seconds);
    }
    tram_engine_destroy(e);
    return rc;
}

static int throughput(int argc, char **argv)
{
    bench_opts o = {.model = TRAM_DEFAULT_MODEL, .num_prompts = 64, .input_len = 128,
                    .output_len = 128, .temperature = 1.0f};
    tram_engine_config_init(&o.ec);
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(bench_flags, &o), tram_engine_flags(&o.ec)};
    if (tram_flags_parse(tables, 2, argc, argv, NULL, 0) < 0 || tram_engine_flags_check(&o.ec, o.model))
        return TRAM_EXIT_USAGE;
    tram_error err = {{0}};
    bench_req *reqs = tram_calloc((size_t)o.num_prompts, sizeof(*reqs), &err);
    int rc = reqs ? bench_throughput(&o, reqs, &err) : -1;
    for (int i = 0; reqs && i < o.num_prompts; i++)
        free(reqs[i].ids);
    free(reqs);
    return tram_exit_status("tram", rc, &err);
}

const tram_command tram_cmd_bench_throughput = {
    .name = "throughput", .run = throughput, .usage = usage,
    .summary = "offline throughput"};
