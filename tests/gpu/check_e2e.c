/* check_e2e.c — the whole model and the engine on the GPU, without model files:
 * dummy weights of a preset (models/dummy.h: the same bf16-exact values on
 * both backends) stand in for the default model, which is too large to carry
 * to the device machine.
 *
 *   greedy   8 token-id prompts, 16 greedy tokens each, decoded as one batch
 *            on the CPU backend (f32, the reference) and on CUDA (bf16).
 *            While a sequence's tokens agree, its logits rows must agree:
 *            ‖cuda − cpu‖ / ‖cpu‖ under LOGITS_TOL, no NaN.  Tokens must be
 *            equal, except at a near-tie that bf16 rounding may flip: both
 *            tokens' logit errors ordinary for that row (tests/gpu/near_tie.h),
 *            reported as such, after which that sequence is no longer compared.
 *   graph    a decode step of the same model captured as a CUDA graph and
 *            replayed on new token ids: its logits must equal, bit for bit,
 *            those of the eager pass on the same ids.
 *   lora     greedy and logits again with a random rank-8 adapter on all seven
 *            projections in slot 0 of both models, used by the even prompts
 *            (the odd ones stay on the base, in the same batch); the adapter
 *            must change some of the CPU's greedy tokens, or it proved nothing.
 *   llama    greedy, logits and graph again on a Llama shape: llama-3.1-8b cut
 *            to 2 layers (head dim 128, GQA group 4, vocabulary 128256).
 *   dummy    weights drawn on the device (upload_weight_dummy) equal, bit for
 *            bit, those the host reads (models/dummy.c), stacked parts too.
 *   engine   64 concurrent requests (shared prefixes, sampled and greedy, a
 *            few aborted midway) through tram_engine on CUDA, three times:
 *            with the KV pool sized from --gpu-memory-utilization after the
 *            profiling pass, with a pool so small that the scheduler must
 *            preempt, and with --enforce-eager.  Every request must finish
 *            with its token count and every block must be free again at the
 *            end; with graphs on, steps must have replayed graphs and tokens
 *            must have been drawn on the device.  How many greedy requests
 *            agree between graphs and eager is printed (INFO): padding
 *            changes GEMM shapes, so bf16 near-ties may flip.
 *   lora-engine  the random adapter as a GGUF LoRA file, through tram_engine:
 *            8 greedy requests, pairs of one prompt with and without the
 *            adapter (the base ones 8 tokens longer), on CUDA with graphs and
 *            with --enforce-eager.  Every request must finish; with graphs,
 *            the base-only tail must replay graphs; a step with an adapter
 *            runs eagerly and unpadded in both, so the adapter requests'
 *            tokens must be equal bit for bit; the adapter must change some
 *            pair's tokens.  Agreement with the CPU engine is printed (INFO:
 *            bf16 near-ties may flip, the greedy and lora cases judge them).
 *
 *   formats  greedy, logits and graph again with each compressed format on
 *            both backends: an int8 KV cache (kv-int8), an fp8 (E4M3) one
 *            (kv-fp8), and FP8 W8A8 weights quantized at load (fp8w,
 *            --quantization fp8), the CPU emulating the CUDA rounding
 *            (kernels/kv_format.h, kernels/cpu/fp8.c).  CUDA rounds its bf16
 *            activations, the CPU its f32 ones, so a value near a code
 *            boundary may land on the next code: each format has its own
 *            tolerance (formats[] below).  The logits row also prints the
 *            first step's error (relative and largest absolute), the greedy
 *            row the first token at which a prompt diverged; divergences are
 *            judged by the near-tie rule as in greedy, and graph replay runs
 *            over each format's cache.
 *
 *   spec     speculative decoding through tram_engine (--spec), for n-gram
 *            lookup, a draft model (the preset's own dummy weights, so its
 *            guesses are mostly right) and the self-draft (on CUDA the
 *            weights quantized to int8, in the target's KV pool; on the CPU
 *            a dummy file has no blocks to keep, so it drafts with the f32
 *            weights themselves): 8 requests with repetitive
 *            prompts, greedy and sampled (seeded, penalties, top-k), 4 drafts
 *            verified every step (always_verify), on the CPU and on CUDA (the
 *            pool fitted to GPU memory, the draft's blocks beside the
 *            target's), and on CUDA without speculation.  Every request must finish with its
 *            length and every block be free; on CUDA, rows must have been
 *            verified on the device (tram_cuda_verify) and, with a draft
 *            model, drafts accepted; at least half the greedy requests must
 *            give the CPU's tokens (bf16 near-ties may flip the others; a
 *            verifier reading the wrong rows or keeping a wrong draft
 *            changes nearly every one).  How many requests (greedy and
 *            sampled) equal CUDA's without speculation is printed (INFO): a
 *            verified row is drawn as that decode step would draw it, only
 *            the GEMM shapes differ.
 *
 * With --lora, only greedy (again, the base of lora), lora, lora-cpu and
 * lora-engine run; with --formats, only the formats cases; with --spec, only
 * spec; with none, every case but those.
 *
 * One line per case (PASS/FAIL); exit 0 when all pass, 1 on a failure, 2 when
 * no GPU is usable.  Usage: check_e2e [--cuda-kernels SPEC] [--lora | --formats | --spec] [preset] [tokenizer]
 * (SPEC: the GPU side's kernel variants, kernels/variants.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tram.h"
#include "kernels/cuda/cuda.h"
#include "models/gguf_writer.h"
#include "models/lora.h"
#include "models/model.h"
#include "models/presets.h"
#include "tests/gpu/near_tie.h"
#include "tokenizer/tokenizer.h"
#include "tests/gpu/kernels_arg.h"

/* 30 layers of bf16 activations: each op stays within the 1e-2 bf16
 * band, and the errors of a deep stack add up without growing much, since
 * every RMSNorm rescales them with the signal. */
#define LOGITS_TOL 3e-2
#define PROMPTS 8
#define GEN 16
#define BLOCK 16
#define MAX_BLOCKS 8 /* 128 tokens per sequence */
#define REQUESTS 64
#define LORA_RANK 8

/* One greedy comparison: what both models load with. */
typedef struct {
    const char *label;                 /* the rows' prefix: "", "llama-", "lora-", "kv-fp8-"... */
    const tram_lora_adapter *adapter;  /* in slot 0, used by the even prompts; NULL: none */
    tram_kv_dtype kv;                  /* the KV cache's format on both backends */
    int fp8_weights;                   /* matrices to FP8 at load on both (--quantization fp8) */
    double tol;                        /* logits tolerance, ‖cuda − cpu‖ / ‖cpu‖ */
} greedy_case;

static const greedy_case plain = {.label = "", .tol = LOGITS_TOL};

/* The compressed formats, each on both backends.  Both round the same way,
 * but CUDA rounds bf16 values and the CPU f32 ones, which differ by up to
 * 2^-9 of the value: one that this moves across a code boundary lands one
 * code away.  For int8 a code is 1/127 of the head's largest value, four
 * times bf16's error at most and for few values: about the plain error.
 * For E4M3 a code is 1/16 to 1/8 of the value itself: some 3 % of values
 * move, each by ~6 %, about 1 % RMS against bf16's 0.2 %, so a few times
 * the plain error, in the KV cache only (kv-fp8) or at every matmul's input
 * (fp8w).  These tolerances are that arithmetic over LOGITS_TOL, not yet
 * measured: the first GPU run's rows say how far inside them the errors
 * are, and they tighten then. */
static const greedy_case formats[] = {
    {.label = "kv-int8-", .kv = TRAM_KV_INT8, .tol = 4e-2},
    {.label = "kv-fp8-", .kv = TRAM_KV_FP8, .tol = 8e-2},
    {.label = "fp8w-", .fp8_weights = 1, .tol = 1.5e-1},
};

static int failures, cases;
static tram_kernel_variants kernels;  /* --cuda-kernels: the GPU side's variants */

static void report(int ok, const char *what, const char *detail)
{
    printf("%-6s %-10s %s\n", ok ? "PASS" : "FAIL", what, detail);
    failures += !ok;
    cases++;
}

static void die(const char *what, const tram_error *err)
{
    fprintf(stderr, "check_e2e: %s: %s\n", what, err->msg);
    exit(1);
}

/* ---------------------------------------------------------------- greedy */

typedef struct {
    tram_backend *be;
    tram_model *m;
    int32_t tokens[PROMPTS][MAX_BLOCKS * BLOCK];
    int len[PROMPTS];
    float *logits;  /* [PROMPTS][vocab] of the last step */
    const int32_t *seq_lora;  /* [PROMPTS] each prompt's LoRA slot (-1: the base); NULL: no adapter */
} runner;

/* Prompt p: 5 + 4p tokens from a fixed LCG, the same on every machine. */
static void make_prompts(runner *r, int vocab)
{
    uint32_t x = 12345;
    for (int p = 0; p < PROMPTS; p++) {
        r->len[p] = 5 + 4 * p;
        for (int i = 0; i < r->len[p]; i++) {
            x = x * 1664525u + 1013904223u;
            r->tokens[p][i] = (int32_t)((x >> 8) % (uint32_t)vocab);
        }
    }
}

/* One step over every sequence: the tokens from `from[p]` on (the whole
 * prompt first, then the last token), logits of each sequence's last row. */
static void step(runner *r, const int *from)
{
    static int32_t ids[PROMPTS * 64], pos[PROMPTS * 64], slots[PROMPTS * 64], tables[PROMPTS * MAX_BLOCKS];
    int32_t qs[PROMPTS + 1] = {0}, lens[PROMPTS], rows[PROMPTS];
    int n = 0;
    for (int p = 0; p < PROMPTS; p++) {
        for (int j = 0; j < MAX_BLOCKS; j++)
            tables[p * MAX_BLOCKS + j] = (PROMPTS - 1 - p) * MAX_BLOCKS + j;  /* not the identity */
        for (int i = from[p]; i < r->len[p]; i++, n++) {
            ids[n] = r->tokens[p][i];
            pos[n] = i;
            slots[n] = tables[p * MAX_BLOCKS + i / BLOCK] * BLOCK + i % BLOCK;
        }
        qs[p + 1] = n;
        lens[p] = r->len[p];
        rows[p] = n - 1;
    }
    tram_batch b = {.num_tokens = n, .num_seqs = PROMPTS, .token_ids = ids, .positions = pos, .slot_mapping = slots,
                    .query_start = qs, .seq_lens = lens, .block_tables = tables, .max_blocks_per_seq = MAX_BLOCKS,
                    .logits_rows = rows, .num_logits = PROMPTS, .seq_lora = r->seq_lora};
    tram_error err = {{0}};
    if (tram_model_forward(r->m, &b, r->logits, &err))
        die(r->be->name, &err);
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        best = x[i] > x[best] ? i : best;
    return best;
}

/* The even prompts use slot 0, the odd ones the base. */
static const int32_t even_prompts_on_slot_0[PROMPTS] = {0, -1, 0, -1, 0, -1, 0, -1};

static void runner_init(runner *r, tram_backend *be, tram_model_file *f, tram_wtype type, const greedy_case *gc)
{
    const tram_lora_adapter *adapter = gc->adapter;
    tram_model_limits lim = {.max_tokens = PROMPTS * 64, .max_seqs = PROMPTS, .max_blocks_per_seq = MAX_BLOCKS,
                             .num_blocks = PROMPTS * MAX_BLOCKS, .block_size = BLOCK, .weight_type = type,
                             .quantize_fp8 = gc->fp8_weights, .kv_dtype = gc->kv,
                             .max_loras = adapter != NULL, .max_lora_rank = LORA_RANK};
    tram_error err = {{0}};
    memset(r, 0, sizeof(*r));
    r->be = be;
    if (tram_model_create(&r->m, f, be, &lim, &err) || (adapter && tram_model_lora_load(r->m, 0, adapter, &err)))
        die("model", &err);
    r->seq_lora = adapter ? even_prompts_on_slot_0 : NULL;
    int vocab = tram_model_file_config(f)->vocab_size;
    r->logits = malloc((size_t)PROMPTS * vocab * sizeof(float));
    make_prompts(r, vocab);
}

/* What a greedy comparison found. */
typedef struct {
    int live[PROMPTS];     /* the prompts whose tokens still agree */
    double worst_rel;      /* the worst row's ‖cuda − cpu‖ / ‖cpu‖ while tokens agree */
    double first_rel, first_max;  /* the first step's worst relative error and largest |cuda − cpu| */
    int nan, ties, splits; /* NaN logits; near-tie flips; real divergences */
    int first_flip;        /* the earliest step (from 0) at which a prompt diverged (GEN: none) */
} greedy_stats;

/* Compares step t's rows of the sequences still in agreement; appends each
 * backend's greedy token; a divergence ends that sequence's comparison. */
static void compare_step(runner *c, runner *g, int vocab, int t, greedy_stats *st)
{
    for (int p = 0; p < PROMPTS; p++) {
        if (!st->live[p])
            continue;
        const float *a = c->logits + (size_t)p * vocab, *b = g->logits + (size_t)p * vocab;
        double diff = 0, ref = 0, largest = 0;
        for (int i = 0; i < vocab; i++) {
            double d = (double)b[i] - a[i];
            st->nan += isnan(b[i]);
            diff += d * d;
            ref += (double)a[i] * a[i];
            largest = fmax(largest, fabs(d));
        }
        st->worst_rel = fmax(st->worst_rel, sqrt(diff / ref));
        if (t == 0) {
            st->first_rel = fmax(st->first_rel, sqrt(diff / ref));
            st->first_max = fmax(st->first_max, largest);
        }
        int tc = argmax(a, vocab), tg = argmax(b, vocab);
        c->tokens[p][c->len[p]++] = tc;
        g->tokens[p][g->len[p]++] = tg;
        if (tc != tg) {
            st->live[p] = 0;
            st->first_flip = t < st->first_flip ? t : st->first_flip;
            if (tram_near_tie(a, b, tc, tg, sqrt(diff / vocab)))
                st->ties++;
            else
                st->splits++;
        }
    }
}

/* Logits of one decode step at every sequence's last position with ids
 * shifted by `shift`: eagerly, or by replaying the graph of PROMPTS rows. */
static void decode_logits(runner *g, int vocab, int shift, int replay, float *out)
{
    int32_t ids[PROMPTS], pos[PROMPTS], slots[PROMPTS], qs[PROMPTS + 1] = {0}, lens[PROMPTS], rows[PROMPTS];
    int32_t tables[PROMPTS * MAX_BLOCKS];
    for (int p = 0; p < PROMPTS; p++) {
        for (int j = 0; j < MAX_BLOCKS; j++)
            tables[p * MAX_BLOCKS + j] = (PROMPTS - 1 - p) * MAX_BLOCKS + j;  /* as step() wrote the KV */
        pos[p] = g->len[p] - 1;
        ids[p] = (g->tokens[p][pos[p]] + shift) % vocab;
        slots[p] = tables[p * MAX_BLOCKS + pos[p] / BLOCK] * BLOCK + pos[p] % BLOCK;
        qs[p + 1] = p + 1;
        lens[p] = g->len[p];
        rows[p] = p;
    }
    tram_batch b = {.num_tokens = PROMPTS, .num_seqs = PROMPTS, .token_ids = ids, .positions = pos, .slot_mapping = slots,
                    .query_start = qs, .seq_lens = lens, .block_tables = tables, .max_blocks_per_seq = MAX_BLOCKS,
                    .logits_rows = rows, .num_logits = PROMPTS};
    tram_error err = {{0}};
    if (tram_model_prepare(g->m, &b, &err))
        die("prepare", &err);
    static const void *dev;  /* the model's logits buffer: the same for every pass */
    if (!replay)
        dev = tram_model_run(g->m);
    else if (tram_cuda_graph_replay(g->be, PROMPTS, &err))
        die("graph replay", &err);
    g->be->to_host_f32(g->be, out, dev, (size_t)PROMPTS * vocab);
    if (g->be->sync(g->be, &err))
        die("decode step", &err);
}

/* Eager pass, capture, then replays on other ids against eager passes on them. */
static void check_graph_replay(runner *g, int vocab, const char *label)
{
    size_t n = (size_t)PROMPTS * vocab;
    float *eager = malloc(n * sizeof(float)), *graph = malloc(n * sizeof(float));
    tram_error err = {{0}};
    decode_logits(g, vocab, 0, 0, eager);
    if (tram_cuda_graph_begin(g->be, &err))
        die("graph begin", &err);
    tram_model_run(g->m);
    if (tram_cuda_graph_end(g->be, PROMPTS, &err))
        die("graph end", &err);
    size_t differ = 0;
    for (int shift = 1; shift <= 3; shift++) {
        decode_logits(g, vocab, shift, 0, eager);
        memset(graph, 0xff, n * sizeof(float));
        decode_logits(g, vocab, shift, 1, graph);
        differ += memcmp(eager, graph, n * sizeof(float)) != 0;
    }
    char line[160];
    snprintf(line, sizeof(line), "%d rows replayed on 3 new id sets: %zu differ from eager bit for bit", PROMPTS,
             differ);
    report(differ == 0, label, line);
    free(eager);
    free(graph);
}

/* A rank-LORA_RANK adapter of every projection with bf16-exact values in
 * ±1/16 from a fixed LCG: both backends hold the same factors. */
static tram_lora_adapter *random_adapter(const tram_model_config *c)
{
    size_t n = (size_t)c->n_layers * TRAM_LORA_N_TARGETS;
    tram_lora_adapter *a = calloc(1, sizeof(*a));
    a->a = calloc(n, sizeof(float *));
    a->b = calloc(n, sizeof(float *));
    *a = (tram_lora_adapter){.path = "random", .rank = LORA_RANK, .alpha = 2 * LORA_RANK, .scale = 2,
                             .targets = (1u << TRAM_LORA_N_TARGETS) - 1, .n_layers = c->n_layers, .a = a->a, .b = a->b};
    uint32_t x = 4242;
    for (size_t k = 0; k < n; k++) {
        int in, out;
        tram_lora_target_dims(c, (tram_lora_target)(k % TRAM_LORA_N_TARGETS), &in, &out);
        a->a[k] = malloc((size_t)LORA_RANK * in * sizeof(float));
        a->b[k] = malloc((size_t)out * LORA_RANK * sizeof(float));
        for (size_t i = 0; i < (size_t)LORA_RANK * in; i++, x = x * 1664525u + 1013904223u)
            a->a[k][i] = (float)((int)(x >> 24) - 128) / 2048.0f;
        for (size_t i = 0; i < (size_t)out * LORA_RANK; i++, x = x * 1664525u + 1013904223u)
            a->b[k][i] = (float)((int)(x >> 24) - 128) / 2048.0f;
    }
    return a;
}

/* cpu_tokens: the CPU's tokens, kept for the caller. */
static void check_greedy(tram_backend *cpu, tram_backend *gpu, tram_model_file *f, const greedy_case *gc,
                         int32_t (*cpu_tokens)[MAX_BLOCKS * BLOCK])
{
    int vocab = tram_model_file_config(f)->vocab_size;
    static runner c, g;
    runner_init(&c, cpu, f, TRAM_W_F32, gc);
    runner_init(&g, gpu, f, TRAM_W_BF16, gc);
    int from[PROMPTS] = {0};
    greedy_stats st = {.first_flip = GEN};
    for (int p = 0; p < PROMPTS; p++)
        st.live[p] = 1;
    for (int t = 0; t < GEN; t++) {
        step(&c, from);
        step(&g, from);
        compare_step(&c, &g, vocab, t, &st);
        for (int p = 0; p < PROMPTS; p++)
            from[p] = c.len[p] - 1;
    }
    int equal = 0;
    for (int p = 0; p < PROMPTS; p++)
        equal += st.live[p];
    char line[256], name[32], flip[32] = "none";
    snprintf(line, sizeof(line), "worst logits rel %.2e (tol %.0e), first step rel %.2e, max |diff| %.3f, nan %d",
             st.worst_rel, gc->tol, st.first_rel, st.first_max, st.nan);
    snprintf(name, sizeof(name), "%slogits", gc->label);
    report(st.worst_rel < gc->tol && !st.nan, name, line);
    if (st.first_flip < GEN)
        snprintf(flip, sizeof(flip), "token %d", st.first_flip + 1);
    snprintf(line, sizeof(line), "%d of %d prompts: %d greedy tokens equal; %d near-tie flips, %d real; first at %s",
             equal, PROMPTS, GEN, st.ties, st.splits, flip);
    snprintf(name, sizeof(name), "%sgreedy", gc->label);
    report(st.splits == 0, name, line);
    if (!gc->adapter) {  /* the graph holds base rows only (engine/cuda_runner.c) */
        snprintf(name, sizeof(name), "%sgraph", gc->label);
        check_graph_replay(&g, vocab, name);
    }
    memcpy(cpu_tokens, c.tokens, sizeof(c.tokens));
    tram_model_destroy(c.m);
    tram_model_destroy(g.m);
    free(c.logits);
    free(g.logits);
}

/* The Llama shape at a CPU reference's cost: llama-3.1-8b with 2 layers. */
static void check_llama_shape(tram_backend *cpu, tram_backend *gpu)
{
    tram_model_config c;
    tram_model_file *f;
    tram_error err = {{0}};
    if (tram_preset_load("llama-3.1-8b", &c, &err))
        die("preset llama-3.1-8b", &err);
    c.n_layers = 2;
    if (tram_model_file_open_dummy_config(&f, &c, "llama-3.1-8b, 2 layers", &err))
        die("dummy weights", &err);
    static int32_t tokens[PROMPTS][MAX_BLOCKS * BLOCK];
    check_greedy(cpu, gpu, f, &(greedy_case){.label = "llama-", .tol = LOGITS_TOL}, tokens);
    tram_model_file_close(f);
}

/* The default model's greedy case without and with the adapter; the
 * adapter's prompts must have changed on the CPU. */
static void check_adapter_greedy(tram_backend *cpu, tram_backend *gpu, tram_model_file *f)
{
    static int32_t base[PROMPTS][MAX_BLOCKS * BLOCK], adapted[PROMPTS][MAX_BLOCKS * BLOCK];
    tram_lora_adapter *a = random_adapter(tram_model_file_config(f));
    check_greedy(cpu, gpu, f, &plain, base);
    check_greedy(cpu, gpu, f, &(greedy_case){.label = "lora-", .adapter = a, .tol = LOGITS_TOL}, adapted);
    tram_lora_free(a);
    int changed = 0, same_base = 1;
    for (int p = 0; p < PROMPTS; p++) {
        int differ = memcmp(base[p], adapted[p], sizeof(base[p])) != 0;
        changed += p % 2 == 0 && differ;
        same_base &= p % 2 == 1 ? !differ : 1;
    }
    char line[160];
    snprintf(line, sizeof(line), "CPU: %d of %d adapter prompts changed by it, base prompts %s", changed,
             PROMPTS / 2, same_base ? "unchanged" : "CHANGED");
    report(changed > 0 && same_base, "lora-cpu", line);
}

/* q‖k‖v of layer 0 and a norm, drawn on the device, against the host's values. */
static void check_dummy_on_device(tram_backend *gpu, tram_model_file *f)
{
    const tram_model_config *c = tram_model_file_config(f);
    int qd = c->n_heads * c->head_dim, kd = c->n_kv_heads * c->head_dim, rows = qd + 2 * kd;
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
    int64_t counts[] = {(int64_t)qd * c->dim, (int64_t)kd * c->dim, (int64_t)kd * c->dim};
    size_t n = (size_t)rows * c->dim;
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    tram_dummy_stream parts[3];
    tram_error err = {{0}};
    size_t off = 0;
    for (int i = 0; i < 3; off += (size_t)counts[i++])
        if (tram_model_file_dummy_stream(f, names[i], counts[i], &parts[i], &err) != 1 ||
            tram_model_file_read_f32(f, names[i], want + off, counts[i], &err))
            die(names[i], &err);
    tram_weight w, norm;
    gpu->upload_weight_dummy(gpu, &w, parts, counts, 3, rows, c->dim, TRAM_W_BF16);
    gpu->to_host_f32(gpu, got, w.data, n);
    int64_t dim = c->dim;
    tram_dummy_stream ns;
    if (tram_model_file_dummy_stream(f, "output_norm.weight", dim, &ns, &err) != 1)
        die("output_norm.weight", &err);
    gpu->upload_weight_dummy(gpu, &norm, &ns, &dim, 1, 1, c->dim, TRAM_W_BF16);
    float *norm_got = malloc(dim * sizeof(float)), *norm_want = malloc(dim * sizeof(float));
    gpu->download(gpu, norm_got, norm.data, dim * sizeof(float));
    if (gpu->sync(gpu, &err) || tram_model_file_read_f32(f, "output_norm.weight", norm_want, dim, &err))
        die("dummy weights on the device", &err);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&got[i], &want[i], 4) != 0;
    for (int64_t i = 0; i < dim; i++)
        differ += memcmp(&norm_got[i], &norm_want[i], 4) != 0;
    char line[160];
    snprintf(line, sizeof(line), "layer 0 q|k|v (%d x %d, bf16) and output_norm (f32): %zu values differ from the host's",
             rows, c->dim, differ);
    report(differ == 0, "dummy", line);
    gpu->free_weight(gpu, &w);
    gpu->free_weight(gpu, &norm);
    free(want), free(got), free(norm_got), free(norm_want);
}

/* ---------------------------------------------------------------- engine */

/* Request i: a prompt of 16..100 tokens, the first 32 shared by every fourth
 * request (prefix-cache hits), max_tokens 8..71; even ones greedy, odd ones
 * sampled with a seed. */
static void request_of(int i, int vocab, int32_t *ids, int *n, tram_sampling_params *p)
{
    uint32_t x = 777u + (uint32_t)(i % 4 == 0 ? 0 : i);
    *n = 16 + (i * 37) % 85;
    for (int k = 0; k < *n; k++) {
        if (k == 32 && i % 4 == 0)
            x ^= (uint32_t)i;
        x = x * 1664525u + 1013904223u;
        ids[k] = (int32_t)((x >> 8) % (uint32_t)vocab);
    }
    tram_sampling_params_init(p);
    p->max_tokens = 8 + (i * 13) % 64;
    p->ignore_eos = 1;
    p->temperature = i % 2 ? 0.8f : 0.0f;
    p->has_seed = 1;
    p->seed = (uint64_t)i;
}

/* The tokens each request got, for comparing runs. */
typedef struct {
    int32_t tok[REQUESTS][80];
    int n[REQUESTS];
} engine_tokens;

/* An engine on device over the preset's dummy weights, max_model_len 256. */
static tram_engine_config dummy_config(const char *device, const char *preset, const char *tokenizer, int eager)
{
    tram_engine_config ec;
    tram_engine_config_init(&ec);
    snprintf(ec.device, sizeof(ec.device), "%s", device);
    snprintf(ec.load_format, sizeof(ec.load_format), "dummy");
    snprintf(ec.preset, sizeof(ec.preset), "%s", preset);
    snprintf(ec.tokenizer, sizeof(ec.tokenizer), "%s", tokenizer);
    ec.max_model_len = 256;
    ec.enforce_eager = eager;
    ec.kernels = kernels;
    return ec;
}

typedef void request_maker(int i, int vocab, int32_t *ids, int *n, tram_sampling_params *p);

/* Requests 0..count-1 of `make` submitted to e; want[i]: each one's
 * max_tokens. */
static void add_requests(tram_engine *e, int count, request_maker *make, int *want)
{
    /* the engine takes the ids its tokenizer decodes (the preset's vocabulary may be larger) */
    int vocab = tram_tokenizer_vocab_size(tram_engine_tokenizer(e));
    tram_error err = {{0}};
    for (int i = 0; i < count; i++) {
        int32_t ids[128];
        int n;
        tram_sampling_params p;
        make(i, vocab, ids, &n, &p);
        want[i] = p.max_tokens;
        tram_prompt pr = {.token_ids = ids, .num_tokens = n};
        if (tram_engine_add_request(e, (uint64_t)i, &pr, &p, 0, &err))
            die("add_request", &err);
    }
}

static void check_engine(const char *preset, const char *tokenizer, int num_kv_blocks, int eager, const char *what,
                         engine_tokens *toks)
{
    tram_engine_config ec = dummy_config("cuda", preset, tokenizer, eager);
    ec.num_kv_blocks = num_kv_blocks;
    memset(toks, 0, sizeof(*toks));
    tram_engine *e;
    tram_error err = {{0}};
    if (tram_engine_create(&e, &ec, "", &err))
        die(what, &err);
    int want[REQUESTS], got[REQUESTS] = {0}, done = 0, bad = 0;
    add_requests(e, REQUESTS, request_of, want);
    for (int steps = 0; tram_engine_has_unfinished(e); steps++) {
        const tram_output *outs;
        int n;
        if (tram_engine_step(e, &outs, &n, &err))
            die("step", &err);
        if (steps == 5)  /* every ninth request is aborted while it runs */
            for (int i = 0; i < REQUESTS; i += 9)
                tram_engine_abort(e, (uint64_t)i);
        for (int k = 0; k < n; k++) {
            int i = (int)outs[k].request_id;
            got[i] = outs[k].completion_tokens;
            for (int t = 0; t < outs[k].num_tokens && toks->n[i] < 80; t++)
                toks->tok[i][toks->n[i]++] = outs[k].token_ids[t];
            if (outs[k].finish_reason == TRAM_FINISH_NONE)
                continue;
            done++;
            bad += outs[k].finish_reason == TRAM_FINISH_ABORT ? i % 9 != 0 : got[i] != want[i];
        }
    }
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    char line[320];
    snprintf(line, sizeof(line), "%s: %d of %d finished, %d wrong lengths, blocks free %d of %d, %llu preemptions, "
             "%llu graph steps, %llu device draws", what, done, REQUESTS, bad, s.num_blocks_free, s.num_blocks_total,
             (unsigned long long)s.num_preemptions, (unsigned long long)s.graph_steps,
             (unsigned long long)s.device_samples);
    int used = eager ? s.graph_steps == 0 : s.graph_steps > 0 && s.device_samples > 0;
    report(done == REQUESTS && !bad && s.num_blocks_free == s.num_blocks_total && used, "engine", line);
    tram_engine_destroy(e);
}

/* The adapter as llama.cpp's converter writes a LoRA GGUF (models/lora_gguf.c):
 * A (rank, in) as ne {in, rank}, B (out, rank) as ne {rank, out}, f32. */
static void write_adapter(const char *path, const tram_lora_adapter *a, const tram_model_config *c)
{
    tram_gguf_writer *w;
    tram_error err = {{0}};
    int rc = tram_gguf_writer_create(&w, path, &err) ||
             tram_gguf_writer_add_str(w, "general.architecture", "llama", &err) ||
             tram_gguf_writer_add_str(w, "general.type", "adapter", &err) ||
             tram_gguf_writer_add_str(w, "adapter.type", "lora", &err) ||
             tram_gguf_writer_add_f32(w, "adapter.lora.alpha", (float)a->alpha, &err);
    for (int pass = 0; !rc && pass < 2; pass++)  /* the tensors declared, then their data in that order */
        for (int k = 0; !rc && k < c->n_layers * TRAM_LORA_N_TARGETS; k++) {
            int in, out;
            char name[80], base[64];
            tram_lora_target_dims(c, (tram_lora_target)(k % TRAM_LORA_N_TARGETS), &in, &out);
            tram_lora_base_name((tram_lora_target)(k % TRAM_LORA_N_TARGETS), k / TRAM_LORA_N_TARGETS, base,
                                sizeof(base));
            int64_t ne_a[2] = {in, a->rank}, ne_b[2] = {a->rank, out};
            snprintf(name, sizeof(name), "%s.lora_a", base);
            rc = pass ? tram_gguf_writer_write(w, a->a[k], sizeof(float) * in * a->rank, &err)
                      : tram_gguf_writer_add_tensor(w, name, TRAM_GGML_F32, 2, ne_a, &err);
            snprintf(name, sizeof(name), "%s.lora_b", base);
            rc = rc ? rc : pass ? tram_gguf_writer_write(w, a->b[k], sizeof(float) * out * a->rank, &err)
                                : tram_gguf_writer_add_tensor(w, name, TRAM_GGML_F32, 2, ne_b, &err);
        }
    if (rc) {
        tram_gguf_writer_abort(w);
        die("adapter file", &err);
    }
    if (tram_gguf_writer_finish(w, &err))
        die("adapter file", &err);
}

#define LORA_REQUESTS 8

/* Steps e until every request has finished, each one's tokens into toks. */
static void run_to_end(tram_engine *e, engine_tokens *toks)
{
    tram_error err = {{0}};
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n;
        if (tram_engine_step(e, &outs, &n, &err))
            die("step", &err);
        for (int k = 0; k < n; k++)
            for (int t = 0, i = (int)outs[k].request_id; t < outs[k].num_tokens && toks->n[i] < 80; t++)
                toks->tok[i][toks->n[i]++] = outs[k].token_ids[t];
    }
}

/* The greedy tokens of each lora-engine request on device (eager: no graphs). */
static void run_lora_engine(const char *device, int eager, const char *preset, const char *tokenizer,
                            const char *adapter, engine_tokens *toks, tram_engine_stats *s)
{
    tram_engine_config ec = dummy_config(device, preset, tokenizer, eager);
    ec.max_loras = 1;
    ec.max_lora_rank = LORA_RANK;
    memset(toks, 0, sizeof(*toks));
    tram_engine *e;
    tram_error err = {{0}};
    if (tram_engine_create(&e, &ec, "", &err) || tram_engine_add_lora(e, "random", adapter, &err))
        die(device, &err);
    int vocab = tram_tokenizer_vocab_size(tram_engine_tokenizer(e));
    for (int i = 0; i < LORA_REQUESTS; i++) {
        int32_t ids[128];
        int n;
        tram_sampling_params p;
        request_of(i & ~1, vocab, ids, &n, &p);  /* pairs of one prompt */
        p.temperature = 0;
        p.max_tokens = i % 2 ? 24 : 16;
        tram_prompt pr = {.token_ids = ids, .num_tokens = n, .lora = i % 2 ? NULL : "random"};
        if (tram_engine_add_request(e, (uint64_t)i, &pr, &p, 0, &err))
            die("add_request", &err);
    }
    run_to_end(e, toks);
    tram_engine_stats_get(e, s);
    tram_engine_destroy(e);
}

static int same_tokens(const engine_tokens *a, const engine_tokens *b, int i)
{
    return a->n[i] == b->n[i] && !memcmp(a->tok[i], b->tok[i], (size_t)a->n[i] * sizeof(int32_t));
}

static void check_lora_engine(const char *preset, const char *tokenizer)
{
    static engine_tokens cpu, graphs, eager;
    tram_engine_stats s_cpu, s_graphs, s_eager;
    tram_model_config c;
    tram_error err = {{0}};
    if (tram_preset_load(preset, &c, &err))
        die(preset, &err);
    char path[] = "/tmp/tram-lora-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        die("mkstemp", &err);
    close(fd);
    tram_lora_adapter *a = random_adapter(&c);
    write_adapter(path, a, &c);
    tram_lora_free(a);
    run_lora_engine("cuda", 0, preset, tokenizer, path, &graphs, &s_graphs);
    run_lora_engine("cuda", 1, preset, tokenizer, path, &eager, &s_eager);
    run_lora_engine("cpu", 0, preset, tokenizer, path, &cpu, &s_cpu);
    unlink(path);
    int lengths = 1, adapted_equal = 1, changed = 0, with_cpu = 0;
    for (int i = 0; i < LORA_REQUESTS; i++) {
        lengths &= graphs.n[i] == (i % 2 ? 24 : 16) && eager.n[i] == graphs.n[i];
        adapted_equal &= i % 2 || same_tokens(&graphs, &eager, i);
        changed += i % 2 == 0 && memcmp(graphs.tok[i], graphs.tok[i + 1], 16 * sizeof(int32_t)) != 0;
        with_cpu += same_tokens(&graphs, &cpu, i);
    }
    char line[320];
    snprintf(line, sizeof(line), "lengths %s, adapter requests graphs = eager %s, %d of %d pairs changed by the "
             "adapter, %llu graph steps", lengths ? "right" : "WRONG", adapted_equal ? "yes" : "NO", changed,
             LORA_REQUESTS / 2, (unsigned long long)s_graphs.graph_steps);
    report(lengths && adapted_equal && changed > 0 && s_graphs.graph_steps > 0 && s_eager.graph_steps == 0,
           "lora-engine", line);
    printf("INFO   lora-cpu   %d of %d greedy requests identical on CUDA (graphs) and on the CPU\n", with_cpu,
           LORA_REQUESTS);
}

#define SPEC_REQUESTS 8

/* Request i of the spec case: a prompt of a 6-token phrase said five times
 * (what prompt lookup finds), greedy when i is even, else sampled. */
static void spec_request_of(int i, int vocab, int32_t *ids, int *n, tram_sampling_params *p)
{
    uint32_t x = 4242u + (uint32_t)i;
    *n = 30;
    for (int k = 0; k < 6; k++) {
        x = x * 1664525u + 1013904223u;
        ids[k] = (int32_t)((x >> 8) % (uint32_t)vocab);
    }
    for (int k = 6; k < *n; k++)
        ids[k] = ids[k % 6];
    tram_sampling_params_init(p);
    p->max_tokens = 24 + i;
    p->ignore_eos = 1;
    p->has_seed = 1;
    p->seed = (uint64_t)i;
    if (i % 2) {
        p->temperature = 0.8f;
        p->top_k = 40;
        p->presence_penalty = 0.3f;
    } else {
        p->temperature = 0.0f;
    }
}

/* The spec case's requests on device with method ("": no speculation). */
static void run_spec_engine(const char *device, const char *method, const char *preset, const char *tokenizer,
                            engine_tokens *toks, tram_engine_stats *s, int *lengths_ok)
{
    /* eager: the reference without speculation runs as the speculating steps do */
    tram_engine_config ec = dummy_config(device, preset, tokenizer, 1);
    snprintf(ec.spec.method, sizeof(ec.spec.method), "%s", method);
    if (!strcmp(method, "draft_model"))
        snprintf(ec.spec.model, sizeof(ec.spec.model), "%s", preset);
    ec.spec.num_speculative_tokens = 4;
    ec.spec.always_verify = 1;
    memset(toks, 0, sizeof(*toks));
    tram_engine *e;
    tram_error err = {{0}};
    if (tram_engine_create(&e, &ec, "", &err))
        die(method[0] ? method : device, &err);
    int want[SPEC_REQUESTS];
    add_requests(e, SPEC_REQUESTS, spec_request_of, want);
    run_to_end(e, toks);
    tram_engine_stats_get(e, s);
    *lengths_ok = s->num_blocks_free == s->num_blocks_total;
    for (int i = 0; i < SPEC_REQUESTS; i++)
        *lengths_ok &= toks->n[i] == want[i];
    tram_engine_destroy(e);
}

/* The first token at which request i differs between a and b, or -1. */
static int first_difference(const engine_tokens *a, const engine_tokens *b, int i)
{
    for (int t = 0; t < a->n[i] && t < b->n[i]; t++)
        if (a->tok[i][t] != b->tok[i][t])
            return t;
    return a->n[i] == b->n[i] ? -1 : TRAM_MIN(a->n[i], b->n[i]);
}

static void check_spec(const char *preset, const char *tokenizer)
{
    static engine_tokens cpu, gpu, plain;
    tram_engine_stats s_cpu, s_gpu, s_plain;
    int ok_cpu, ok_gpu, ok_plain;
    run_spec_engine("cuda", "", preset, tokenizer, &plain, &s_plain, &ok_plain);
    const char *methods[] = {"ngram", "draft_model", "self"};
    for (int m = 0; m < 3; m++) {
        run_spec_engine("cpu", methods[m], preset, tokenizer, &cpu, &s_cpu, &ok_cpu);
        run_spec_engine("cuda", methods[m], preset, tokenizer, &gpu, &s_gpu, &ok_gpu);
        int greedy = 0, with_cpu = 0, with_plain = 0;
        char where[96] = "";
        for (int i = 0; i < SPEC_REQUESTS; i++) {
            int d = first_difference(&gpu, &cpu, i);
            if (i % 2 == 0) {
                greedy++;
                with_cpu += d < 0;
                if (d >= 0 && !where[0])
                    snprintf(where, sizeof(where), ", request %d first differs at token %d", i, d);
            }
            with_plain += first_difference(&gpu, &plain, i) < 0;
        }
        int accepted_ok = m == 0 || s_gpu.spec_decode_num_accepted_tokens > 0;  /* a model's guesses */
        char line[400];
        snprintf(line, sizeof(line), "%s: lengths and blocks %s (CPU %s), %d of %d greedy as the CPU%s; CUDA "
                 "accepted %llu of %llu drafts (CPU %llu of %llu), %llu of %llu device draws verifying",
                 methods[m], ok_gpu ? "right" : "WRONG", ok_cpu ? "right" : "WRONG", with_cpu, greedy, where,
                 (unsigned long long)s_gpu.spec_decode_num_accepted_tokens,
                 (unsigned long long)s_gpu.spec_decode_num_draft_tokens,
                 (unsigned long long)s_cpu.spec_decode_num_accepted_tokens,
                 (unsigned long long)s_cpu.spec_decode_num_draft_tokens,
                 (unsigned long long)s_gpu.device_verified_tokens, (unsigned long long)s_gpu.device_samples);
        report(ok_gpu && ok_cpu && ok_plain && accepted_ok && s_gpu.device_verified_tokens > 0 &&
                   2 * with_cpu >= greedy,
               "spec", line);
        printf("INFO   spec       %s: %d of %d requests identical on CUDA with and without speculation\n",
               methods[m], with_plain, SPEC_REQUESTS);
    }
}

int main(int argc, char **argv)
{
    take_kernels_arg("check_e2e", &argc, argv, &kernels);
    int lora = argc > 1 && !strcmp(argv[1], "--lora"), compressed = argc > 1 && !strcmp(argv[1], "--formats");
    int spec = argc > 1 && !strcmp(argv[1], "--spec");
    if (lora || compressed || spec)
        argv++, argc--;
    const char *preset = argc > 1 ? argv[1] : "smollm2-135m";
    const char *tokenizer = argc > 2 ? argv[2] : "tests/fixtures/tokenizer/spm/spm.gguf";
    tram_backend *cpu, *gpu;
    tram_error err = {{0}};
    if (tram_backend_cuda_create(&gpu, 0, &err)) {
        fprintf(stderr, "check_e2e: %s\n", err.msg);
        return 2;
    }
    if (spec) {  /* through the engine only, which makes its own backends */
        gpu->destroy(gpu);
        printf("check_e2e: dummy %s, speculative decoding\n", preset);
        check_spec(preset, tokenizer);
        printf("check_e2e: %d of %d cases passed\n", cases - failures, cases);
        return failures ? 1 : 0;
    }
    if (tram_backend_cpu_create(&cpu, 0, &err) || tram_cuda_set_kernel_variants(gpu, &kernels, &err))
        die("backends", &err);
    tram_model_file *f;
    if (tram_model_file_open_dummy(&f, preset, &err))
        die("dummy weights", &err);
    printf("check_e2e: dummy %s, logits tolerance %.0e\n", preset, LOGITS_TOL);
    if (lora) {
        check_adapter_greedy(cpu, gpu, f);
        tram_model_file_close(f);
        cpu->destroy(cpu);
        gpu->destroy(gpu);
        check_lora_engine(preset, tokenizer);
        printf("check_e2e: %d of %d cases passed\n", cases - failures, cases);
        return failures ? 1 : 0;
    }
    if (compressed) {  /* the plain case is e2e's, in the row above this one */
        static int32_t tokens[PROMPTS][MAX_BLOCKS * BLOCK];
        for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
            check_greedy(cpu, gpu, f, &formats[i], tokens);
        tram_model_file_close(f);
        cpu->destroy(cpu);
        gpu->destroy(gpu);
        printf("check_e2e: %d of %d cases passed\n", cases - failures, cases);
        return failures ? 1 : 0;
    }
    check_dummy_on_device(gpu, f);
    static int32_t tokens[PROMPTS][MAX_BLOCKS * BLOCK];
    check_greedy(cpu, gpu, f, &plain, tokens);
    tram_model_file_close(f);
    check_llama_shape(cpu, gpu);
    cpu->destroy(cpu);
    gpu->destroy(gpu);
    static engine_tokens graphs, other;
    check_engine(preset, tokenizer, 0, 0, "pool from --gpu-memory-utilization", &graphs);
    check_engine(preset, tokenizer, 48, 0, "48 blocks, preempting", &other);
    check_engine(preset, tokenizer, 0, 1, "--enforce-eager", &other);
    int same = 0, greedy = 0;
    for (int i = 0; i < REQUESTS; i += 2) {
        if (i % 9 == 0)
            continue;  /* aborted */
        greedy++;
        same += graphs.n[i] == other.n[i] && !memcmp(graphs.tok[i], other.tok[i], graphs.n[i] * sizeof(int32_t));
    }
    printf("INFO   graphs     %d of %d greedy requests identical with CUDA graphs and with --enforce-eager\n", same,
           greedy);
    printf("check_e2e: %d of %d cases passed\n", cases - failures, cases);
    return failures ? 1 : 0;
}
