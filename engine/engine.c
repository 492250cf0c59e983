/* engine.c — the engine's life cycle, its requests, and the step loop of
 * tram_engine_step: tram_scheduler_schedule() picks the work, build_batch()
 * lays it out, one forward pass runs it on every tensor-parallel rank
 * (tram_ranks_forward, or tram_cuda_runner_step on CUDA), postprocess_item()
 * samples and applies the stop rules, collect_outputs() reports. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cuda_runner.h"
#include "engine/lora_pool.h"
#include "engine/ranks.h"
#include "engine/predraw.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/spec.h"
#include "kernels/cpu/mask.h"
#include "models/gguf.h"

/* Logits rows per step for prompt logprobs, on top of one row per sequence. */
#define PROMPT_LOGPROB_ROWS 128

/* Speculation's hard limit: no drafts in a step with more decoding sequences
 * than this, unless speculative_config.disable_by_batch_size says otherwise.
 * It bounds the logits rows that drafts need; below it the automatic rule
 * (engine/spec.h) decides, and on the CPU it turns drafts off at smaller
 * batches than this by itself (docs/performance.md). */
#define SPEC_DEFAULT_MAX_BATCH 32

struct tram_engine {
    tram_engine_config cfg;
    tram_model_file *file;
    tram_tokenizer *tok;
    tram_ranks *ranks;         /* every rank's backend and model part (engine/ranks.h) */
    tram_backend *be;          /* rank 0's */
    tram_model *model;         /* rank 0's: it samples */
    tram_block_manager *bm;
    tram_scheduler sched;
    tram_sampler *sampler;
    tram_predraw *predraw;     /* the step's free draws on the host threads, or NULL */
    tram_proposer *proposer;   /* speculative decoding's, or NULL */
    tram_model_file *draft_file; /* speculative_config.model's, or NULL */
    int spec_max_batch;        /* decoding sequences past which a step does not speculate */
    int vocab, max_model_len, max_blocks_per_seq, max_rows;
    int cuda_pool;             /* the KV pool is fitted to GPU memory after a profiling pass */
    tram_cuda_runner *cuda;    /* --device cuda: CUDA graphs and sampling on the device */
    tram_lora_pool loras;      /* the adapters and the model's slots */
    int lora_pool_ready;       /* loras initialized (its mutex exists) */
    int pad_blocks;            /* KV blocks past the block manager's: the graphs' pad rows' */
    int logits_width;          /* the model's vocabulary; vocab is the part the tokenizer
                                  decodes, the only ids sampled or accepted (dummy weights
                                  may have more rows than their tokenizer has tokens) */
    char model_name[128];

    tram_request **reqs;       /* live requests, in arrival order */
    int num_reqs, cap_reqs;
    uint64_t next_arrival;

    /* per-step arrays, sized at create */
    int32_t *tok_ids, *positions, *slots, *query_start, *seq_lens, *block_tables, *rows;
    int32_t *seq_lora;         /* [max_seqs] each item's LoRA slot, -1: the base */
    int *item_lora;            /* [max_seqs] each item's adapter id, 0: the base */
    int *item_row0, *item_nrows;
    int32_t *predrawn;         /* [max_seqs] each item's token drawn by predraw, -1: none */
    tram_draw *draws;          /* [max_seqs] predraw's */
    float *logits;             /* [max_rows][logits_width] */
    float *masked;             /* [logits_width]: a grammar-constrained row, masked */
    uint32_t *mask;            /* [mask_words]: that row's allowed tokens */
    int mask_words;
    uint32_t *step_masks;      /* CUDA: [max_seqs][mask_words] the step's masks, for the device */
    int32_t *step_mask_rows;   /* [max_seqs] their logits rows */
    tram_seq **emitted;        /* sequences with an output this step */
    int num_emitted, cap_emitted;
    tram_output *outs;
    int cap_outs;
    char *text;                /* this step's text deltas */
    size_t text_len, text_cap;
    tram_pooling pooling;      /* embeddings': --pooling, else the model's, else last */
    int normalize;             /* embeddings are L2-normalized */
    float *hidden;             /* [max_seqs][dim]: final hidden states read for pooling */
    int32_t *hidden_rows;      /* [max_seqs]: their rows in the batch */

    tram_engine_stats stats;   /* engine thread's counters */
    tram_engine_stats published;
    pthread_mutex_t lock;      /* guards published */
};

void tram_engine_config_init(tram_engine_config *c)
{
    *c = (tram_engine_config){
        .block_size = 16,
        .kv_cache_memory = (size_t)2 << 30,
        .gpu_memory_utilization = 0.9,
        .max_num_batched_tokens = 2048,
        .max_num_seqs = 256,
        .enable_prefix_caching = 1,
        .policy = TRAM_POLICY_FCFS,
        .device = "cpu",
        .quantization = "none",
        .kv_cache_dtype = "auto",
        .load_format = "auto",
        .weight_format = "f32",
        .tensor_parallel_size = 1,
        .spec = {.num_speculative_tokens = 8, .prompt_lookup_min = 1, .prompt_lookup_max = 4},
        .max_lora_rank = 16,
    };
}

const char *tram_finish_reason_name(tram_finish_reason r)
{
    static const char *const names[] = {NULL, "stop", "length", "abort", "error"};
    return (unsigned)r < TRAM_ARRAY_LEN(names) ? names[r] : NULL;
}

/* ---------------------------------------------------------------- create */

static int check_config(const tram_engine_config *c, tram_error *err)
{
    if (c->block_size < 1 || c->block_size > 1024)
        return tram_fail(err, "block_size must be in [1, 1024], got %d", c->block_size);
    if (c->max_num_batched_tokens < 1 || c->max_num_seqs < 1)
        return tram_fail(err, "max_num_batched_tokens and max_num_seqs must be >= 1 (got %d, %d)",
                         c->max_num_batched_tokens, c->max_num_seqs);
    if (c->max_num_seqs > c->max_num_batched_tokens)
        return tram_fail(err, "max_num_seqs (%d) must not exceed max_num_batched_tokens (%d)",
                         c->max_num_seqs, c->max_num_batched_tokens);
    if (c->max_model_len < 0 || c->num_kv_blocks < 0 || c->num_threads < 0)
        return tram_fail(err, "max_model_len, num_kv_blocks and num_threads must be >= 0");
    if (!strcmp(c->load_format, "dummy") != !!c->preset[0])
        return tram_fail(err, c->preset[0] ? "a preset needs --load-format dummy"
                                           : "--load-format dummy needs --preset NAME");
    if (tram_kv_dtype_parse(c->kv_cache_dtype) < 0)
        return tram_fail(err, "kv_cache_dtype must be auto, int8 or fp8, got \"%s\"", c->kv_cache_dtype);
    if (tram_kernel_variants_any(&c->kernels) && strcmp(c->device, "cuda"))
        return tram_fail(err, "kernel variants (--cuda-kernels) need --device cuda");
    if (!(c->gpu_memory_utilization > 0 && c->gpu_memory_utilization <= 1))
        return tram_fail(err, "gpu_memory_utilization must be in (0, 1], got %g",
                         c->gpu_memory_utilization);
    if (!strcmp(c->spec.method, "self") && !strcmp(c->device, "cuda") && strcmp(c->quantization, "none"))
        return tram_fail(err, "speculative_config.method \"self\" on --device cuda drafts with an int8 copy of "
                              "the weights for the bf16 target; the target runs --quantization %s already",
                         c->quantization);
    if (!strcmp(c->spec.method, "self") && strcmp(c->weight_format, "f32"))
        return tram_fail(err, "speculative_config.method \"self\" drafts with the file's own blocks for "
                              "--weight-format f32; the target runs them already (--weight-format %s)",
                         c->weight_format);
    if ((!strcmp(c->spec.method, "self") || !strcmp(c->spec.method, "draft_model")) && c->tensor_parallel_size > 1)
        return tram_fail(err, "speculative_config.method \"%s\" runs with tensor_parallel_size 1, got %d",
                         c->spec.method, c->tensor_parallel_size);
    return tram_spec_config_check(&c->spec, err);
}

static tram_ranks_spec ranks_spec(const tram_engine_config *c)
{
    return (tram_ranks_spec){.device = c->device, .world_size = c->tensor_parallel_size,
                             .num_threads = c->num_threads, .kernels = &c->kernels};
}

/* The ranks' backends; the model's heads must split among them. */
static int open_ranks(tram_engine *e, tram_error *err)
{
    tram_ranks_spec spec = ranks_spec(&e->cfg);
    if (tram_ranks_check(&spec, tram_model_file_config(e->file), err) || tram_ranks_create(&e->ranks, &spec, err))
        return -1;
    e->be = tram_ranks_backend(e->ranks, 0);
    return 0;
}

int tram_engine_check_parallel(const tram_engine_config *c, const char *model_path, tram_error *err)
{
    tram_model_file *f;
    tram_error open_err;
    int dummy = !strcmp(c->load_format, "dummy");
    if (dummy ? tram_model_file_open_dummy(&f, c->preset, &open_err) : tram_model_file_open(&f, model_path, &open_err))
        return 0; /* not a parallelism problem: create reports it */
    tram_ranks_spec spec = ranks_spec(c);
    int rc = tram_ranks_check(&spec, tram_model_file_config(f), err);
    tram_model_file_close(f);
    return rc;
}

/* Dummy weights (--load-format dummy) have no tokenizer of their own: they
 * take --tokenizer's, or the model path's (by default the default model's). */
static int open_tokenizer(tram_engine *e, const char *path, int dummy, tram_error *err)
{
    struct tram_gguf *g = tram_model_file_gguf(e->file);
    if (e->cfg.tokenizer[0] || dummy) {
        if (!tram_tokenizer_load(&e->tok, e->cfg.tokenizer[0] ? e->cfg.tokenizer : path, err))
            return 0;
        tram_error inner = *err;
        return tram_fail(err, "%s (the tokenizer comes from --tokenizer PATH, else from -m MODEL)",
                         inner.msg);
    }
    return g ? tram_tokenizer_from_gguf(&e->tok, g, err) : tram_tokenizer_from_dir(&e->tok, path, err);
}

static int open_model_file(tram_engine *e, const char *path, tram_error *err)
{
    int dummy = !strcmp(e->cfg.load_format, "dummy");
    if ((dummy ? tram_model_file_open_dummy(&e->file, e->cfg.preset, err)
               : tram_model_file_open(&e->file, path, err)) ||
        open_tokenizer(e, path, dummy, err))
        return -1;
    const char *name = dummy ? e->cfg.preset : path, *base = strrchr(name, '/');
    base = base && base[1] ? base + 1 : name;
    snprintf(e->model_name, sizeof(e->model_name), "%s%.100s", dummy ? "dummy-" : "", base);
    char *dot = strrchr(e->model_name, '.');
    if (dot && (!strcmp(dot, ".gguf") || !strcmp(dot, ".json")))
        *dot = 0;
    return 0;
}

/* Device bytes of the LoRA slots' factors at --max-lora-rank, which are
 * uploaded when an adapter first runs, after the pool is fitted: whole
 * factors, which over-counts a tensor-parallel rank's cut of them. */
static size_t lora_slot_bytes(const tram_engine *e)
{
    const tram_model_config *c = tram_model_file_config(e->file);
    size_t widths = 0;
    for (int t = 0; t < TRAM_LORA_N_TARGETS; t++) {
        int in, out;
        tram_lora_target_dims(c, t, &in, &out);
        widths += (size_t)in + (size_t)out;
    }
    return (size_t)e->cfg.max_loras * e->cfg.max_lora_rank * c->n_layers * widths * e->be->act_bytes;
}

/* A draft model's KV shares the pool's budget: as many blocks again, of the
 * draft's shape (the self-draft reads the target's pool: none). */
static size_t draft_block_bytes(const tram_engine *e, tram_kv_dtype kv)
{
    const tram_model_file *f = e->draft_file;
    return f ? tram_model_kv_block_bytes(tram_model_file_config(f), e->cfg.block_size, e->be->act_bytes, 1, kv) : 0;
}

static tram_cuda_pool_spec cuda_pool_spec(const tram_engine *e)
{
    return (tram_cuda_pool_spec){
        .max_tokens = e->cfg.max_num_batched_tokens,
        .max_seqs = e->cfg.max_num_seqs,
        .block_size = e->cfg.block_size,
        .max_blocks_per_seq = e->max_blocks_per_seq,
        .max_model_len = e->max_model_len,
        .utilization = e->cfg.gpu_memory_utilization,
        .reserved_blocks = e->pad_blocks,
        .reserved_bytes = lora_slot_bytes(e),
        .kv = tram_kv_dtype_parse(e->cfg.kv_cache_dtype),
        .draft_block_bytes = draft_block_bytes(e, tram_kv_dtype_parse(e->cfg.kv_cache_dtype)),
    };
}

/* On a GPU (no exact count given), the pool starts at what the profiling pass
 * needs and is refitted once the weights are in (fit_cuda_pool). */
static int fit_cuda_pool(tram_engine *e, tram_error *err)
{
    tram_cuda_pool_spec spec = cuda_pool_spec(e);
    int blocks;
    tram_proposer *p = e->proposer;
    if (tram_cuda_fit_pool(e->ranks, &spec, &blocks, err) ||
        tram_ranks_resize_kv(e->ranks, blocks + e->pad_blocks, err) ||
        (p && p->resize_kv && p->resize_kv(p, blocks + e->pad_blocks, err)))
        return -1;
    e->cfg.num_kv_blocks = blocks;
    return 0;
}

/* What the proposer's draft model loads from, if it has one. */
static tram_draft_env draft_env(const tram_engine *e, const tram_model_limits *lim)
{
    int self = !strcmp(e->cfg.spec.method, "self");
    tram_draft_env d = {.file = self ? e->file : e->draft_file, .be = e->be, .lim = *lim, .vocab = e->vocab,
                        .max_batch = e->spec_max_batch, .kv_from = self ? e->model : NULL};
    if (self) {
        /* the cheaper copy: the file's own GGUF blocks for the CPU's f32
         * target, int8 (W8A8, quantized at load) for CUDA's bf16 one */
        int cuda = !strcmp(e->cfg.device, "cuda");
        d.lim.keep_blocks = !cuda;
        d.lim.quantize_int8 = cuda;
        d.lim.quantize_fp8 = 0;
    }
    return d;
}

/* The KV pool: an exact count, or as many blocks as the byte budget holds. */
static int size_pool(tram_engine *e, tram_error *err)
{
    const tram_model_config *mc = tram_model_file_config(e->file);
    int model_len = mc->max_seq_len > 0 ? mc->max_seq_len : 2048;
    e->max_model_len = e->cfg.max_model_len ? e->cfg.max_model_len : model_len;
    if (e->max_model_len > model_len)
        return tram_fail(err, "max_model_len %d exceeds the model's context length %d",
                         e->max_model_len, model_len);
    int bs = e->cfg.block_size;
    e->max_blocks_per_seq = (e->max_model_len + bs - 1) / bs;
    if (tram_spec_open_draft(&e->draft_file, &e->cfg.spec, !strcmp(e->cfg.load_format, "dummy"), mc,
                             e->max_model_len, err))
        return -1;
    e->cuda_pool = !strcmp(e->cfg.device, "cuda") && !e->cfg.num_kv_blocks;
    if (e->cuda_pool) {
        tram_cuda_pool_spec spec = cuda_pool_spec(e);
        e->cfg.num_kv_blocks = tram_cuda_profile_blocks(&spec);
        return 0;
    }
    /* the budget holds every rank's part of a block */
    int world = e->cfg.tensor_parallel_size;
    tram_kv_dtype kv = tram_kv_dtype_parse(e->cfg.kv_cache_dtype);
    size_t block_bytes = tram_model_kv_block_bytes(mc, bs, e->be->act_bytes, world, kv) * world +
                         draft_block_bytes(e, kv);
    size_t blocks = e->cfg.num_kv_blocks ? (size_t)e->cfg.num_kv_blocks
                                         : e->cfg.kv_cache_memory / block_bytes;
    if (blocks < (size_t)e->max_blocks_per_seq)
        return tram_fail(err, "the KV cache holds %zu tokens (%zu blocks of %d), fewer than "
                              "max_model_len %d: raise --kv-cache-memory or lower --max-model-len",
                         blocks * bs, blocks, bs, e->max_model_len);
    e->cfg.num_kv_blocks = (int)TRAM_MIN(blocks, (size_t)1 << 30);
    return 0;
}

static int alloc_step_arrays(tram_engine *e, tram_error *err)
{
    size_t t = (size_t)e->cfg.max_num_batched_tokens, s = (size_t)e->cfg.max_num_seqs;
    /* drafts add k rows for each speculating sequence */
    size_t spec_rows = e->cfg.spec.method[0] ? (size_t)e->spec_max_batch * e->cfg.spec.num_speculative_tokens : 0;
    e->max_rows = (int)TRAM_MIN(t, s + PROMPT_LOGPROB_ROWS + spec_rows);
    e->cap_emitted = e->cap_outs = (int)s;
    e->text_cap = 4096;
    e->tok_ids = tram_calloc(t, sizeof(int32_t), err);
    e->positions = tram_calloc(t, sizeof(int32_t), err);
    e->slots = tram_calloc(t, sizeof(int32_t), err);
    e->rows = tram_calloc(t, sizeof(int32_t), err);
    e->query_start = tram_calloc(s + 1, sizeof(int32_t), err);
    e->seq_lens = tram_calloc(s, sizeof(int32_t), err);
    e->block_tables = tram_calloc(s * e->max_blocks_per_seq, sizeof(int32_t), err);
    e->item_row0 = tram_calloc(s, sizeof(int), err);
    e->item_nrows = tram_calloc(s, sizeof(int), err);
    e->predrawn = tram_calloc(s, sizeof(int32_t), err);
    e->draws = tram_calloc(s, sizeof(tram_draw), err);
    e->seq_lora = tram_calloc(s, sizeof(int32_t), err);
    e->item_lora = tram_calloc(s, sizeof(int), err);
    e->logits = tram_calloc((size_t)e->max_rows * e->logits_width, sizeof(float), err);
    e->emitted = tram_calloc(s, sizeof(*e->emitted), err);
    e->outs = tram_calloc(s, sizeof(*e->outs), err);
    e->text = tram_calloc(e->text_cap, 1, err);
    e->hidden = tram_calloc(s * (size_t)tram_model_file_config(e->file)->dim, sizeof(float), err);
    e->hidden_rows = tram_calloc(s, sizeof(int32_t), err);
    e->mask_words = (tram_tokenizer_vocab_size(e->tok) + 31) / 32;
    e->masked = tram_calloc((size_t)e->logits_width, sizeof(float), err);
    e->mask = tram_calloc((size_t)e->mask_words, sizeof(uint32_t), err);
    int cuda = !strcmp(e->cfg.device, "cuda");
    e->step_masks = cuda ? tram_calloc(s * (size_t)e->mask_words, sizeof(uint32_t), err) : NULL;
    e->step_mask_rows = cuda ? tram_calloc(s, sizeof(int32_t), err) : NULL;
    if (cuda && (!e->step_masks || !e->step_mask_rows))
        return -1;
    return e->masked && e->mask && e->tok_ids && e->positions && e->slots && e->rows && e->query_start && e->seq_lens &&
                   e->block_tables && e->item_row0 && e->item_nrows && e->seq_lora && e->item_lora && e->logits &&
                   e->emitted && e->outs && e->text && e->hidden && e->hidden_rows && e->predrawn && e->draws
               ? 0
               : -1;
}

/* Logits rows a CUDA pass keeps on the device: a speculating step's drafts
 * add theirs, which the runner verifies there. */
static int device_logits_rows(const tram_engine *e)
{
    return strcmp(e->cfg.device, "cuda") || !e->cfg.spec.method[0] ? e->cfg.max_num_seqs : e->max_rows;
}

/* --device cuda: created before the pool is fitted, so its device buffers
 * count; it learns the pad block once the pool is sized. */
static int open_cuda_runner(tram_engine *e, tram_error *err)
{
    if (strcmp(e->cfg.device, "cuda"))
        return 0;
    tram_cuda_runner_spec spec = {
        .max_seqs = e->cfg.max_num_seqs,
        .max_rows = e->max_rows,
        .max_logits = device_logits_rows(e),
        .vocab = e->vocab,
        .logits_width = e->logits_width,
        .max_model_len = e->max_model_len,
        .block_size = e->cfg.block_size,
        .pad_block = -1,
        .mask_words = e->mask_words,
    };
    return tram_cuda_runner_create(&e->cuda, e->be, &spec, err);
}

/* --pooling, else the model's own, else the last token's (what decoder
 * embedding models use); a model that names its pooling says whether it
 * normalizes, one that does not is normalized as OpenAI's embeddings are. */
static void choose_pooling(tram_engine *e)
{
    const tram_model_config *mc = tram_model_file_config(e->file);
    e->pooling = e->cfg.pooling ? e->cfg.pooling : mc->pooling ? mc->pooling : TRAM_POOLING_LAST;
    e->normalize = mc->pooling ? mc->pooling_normalize : 1;
}

static int create_parts(tram_engine *e, const char *path, tram_error *err)
{
    if (check_config(&e->cfg, err) || open_model_file(e, path, err))
        return -1;
    choose_pooling(e);
    /* MoE layers size their grouped GEMMs on the host (kernels/cuda/moe.cu):
     * no CUDA graphs, so no pad blocks for them */
    e->pad_blocks = !strcmp(e->cfg.device, "cuda") && !e->cfg.enforce_eager &&
                    !tram_model_file_config(e->file)->n_experts;
    if (open_ranks(e, err) || size_pool(e, err))
        return -1;
    e->logits_width = tram_model_file_config(e->file)->vocab_size;
    e->vocab = TRAM_MIN(e->logits_width, tram_tokenizer_vocab_size(e->tok));
    int bs = e->cfg.block_size;
    tram_model_limits lim = {
        .max_tokens = e->cfg.max_num_batched_tokens,
        .max_seqs = e->cfg.max_num_seqs,
        .max_blocks_per_seq = e->max_blocks_per_seq,
        .num_blocks = e->cfg.num_kv_blocks + e->pad_blocks,
        .block_size = bs,
        .weight_type = strcmp(e->cfg.device, "cpu") ? TRAM_W_BF16 : TRAM_W_F32,
        .quantize_int8 = !strcmp(e->cfg.quantization, "int8"),
        .quantize_fp8 = !strcmp(e->cfg.quantization, "fp8"),
        .keep_blocks = !strcmp(e->cfg.weight_format, "native"),
        .kv_dtype = tram_kv_dtype_parse(e->cfg.kv_cache_dtype),
        .max_loras = e->cfg.max_loras,
        .max_lora_rank = e->cfg.max_lora_rank,
    };
    int cpu_loras = e->cfg.max_cpu_loras ? e->cfg.max_cpu_loras : e->cfg.max_loras;
    if (tram_lora_pool_init(&e->loras, e->cfg.max_loras, e->cfg.max_lora_rank, cpu_loras, err))
        return -1;
    e->lora_pool_ready = 1;
    e->spec_max_batch = e->cfg.spec.disable_by_batch_size ? e->cfg.spec.disable_by_batch_size
                                                          : SPEC_DEFAULT_MAX_BATCH;
    if (alloc_step_arrays(e, err))
        return -1;
    lim.max_logits = device_logits_rows(e);
    if (tram_ranks_load(e->ranks, e->file, &lim, err) || !(e->model = tram_ranks_model(e->ranks, 0)))
        return -1;
    tram_draft_env draft = draft_env(e, &lim);
    if (tram_proposer_create(&e->proposer, &e->cfg.spec, &draft, err) || open_cuda_runner(e, err) ||
        (e->cuda_pool && fit_cuda_pool(e, err)) ||
        tram_bm_create(&e->bm, e->cfg.num_kv_blocks, bs, e->cfg.enable_prefix_caching,
                       tram_fnv1a(e->model_name, strlen(e->model_name)), err) ||
        tram_scheduler_init(&e->sched, e->bm, e->cfg.policy, e->cfg.max_num_batched_tokens,
                            e->cfg.max_num_seqs, PROMPT_LOGPROB_ROWS, err) ||
        tram_sampler_create(&e->sampler, e->vocab, err) ||
        (!e->cuda && tram_predraw_create(&e->predraw, e->be, e->vocab, err)))
        return -1;
    if (e->cuda && e->pad_blocks)
        tram_cuda_runner_set_pad_block(e->cuda, e->cfg.num_kv_blocks);
    if (e->proposer)
        tram_scheduler_set_spec(&e->sched, e->proposer, e->cfg.spec.num_speculative_tokens,
                                e->spec_max_batch, e->cfg.spec.always_verify);
    e->sched.max_loras = e->cfg.max_loras;
    return 0;
}

static void publish_stats(tram_engine *e);

int tram_engine_create(tram_engine **out, const tram_engine_config *c, const char *model_path,
                       tram_error *err)
{
    *out = NULL;
    tram_engine *e = tram_calloc(1, sizeof(*e), err);
    if (!e)
        return -1;
    e->cfg = *c;
    pthread_mutex_init(&e->lock, NULL);
    if (create_parts(e, model_path, err)) {
        tram_engine_destroy(e);
        return -1;
    }
    publish_stats(e);
    *out = e;
    return 0;
}

void tram_engine_destroy(tram_engine *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->num_reqs; i++)
        tram_request_free(e->reqs[i]);
    free(e->reqs);
    tram_scheduler_free(&e->sched);
    tram_bm_destroy(e->bm);
    tram_sampler_destroy(e->sampler);
    tram_predraw_destroy(e->predraw);
    tram_proposer_destroy(e->proposer);
    tram_model_file_close(e->draft_file);
    tram_cuda_runner_destroy(e->cuda);
    tram_ranks_destroy(e->ranks);
    tram_tokenizer_free(e->tok);
    tram_model_file_close(e->file);
    if (e->lora_pool_ready)
        tram_lora_pool_free(&e->loras);
    void *bufs[] = {e->tok_ids, e->positions, e->slots, e->query_start, e->seq_lens,
                    e->block_tables, e->rows, e->item_row0, e->item_nrows, e->seq_lora, e->item_lora, e->logits,
                    e->emitted, e->outs, e->text, e->masked, e->mask, e->step_masks,
                    e->step_mask_rows, e->hidden, e->hidden_rows, e->predrawn, e->draws};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bufs); i++)
        free(bufs[i]);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* ---------------------------------------------------------------- accessors */

const tram_model_config *tram_engine_model_config(const tram_engine *e)
{
    return tram_model_file_config(e->file);
}

const struct tram_tokenizer *tram_engine_tokenizer(const tram_engine *e) { return e->tok; }
int tram_engine_max_model_len(const tram_engine *e) { return e->max_model_len; }
const char *tram_engine_model_name(const tram_engine *e) { return e->model_name; }
int tram_engine_spec_tokens(const tram_engine *e)
{
    return e->proposer ? e->cfg.spec.num_speculative_tokens : 0;
}

int tram_engine_validate_params(const tram_engine *e, const tram_sampling_params *p,
                                const char **param, tram_error *err)
{
    if (p->grammar && tram_grammar_vocab(p->grammar) != tram_tokenizer_vocab_size(e->tok)) {
        if (param)
            *param = "grammar";
        return tram_fail(err, "grammar: compiled for a vocabulary of %d tokens, the model's has %d",
                         tram_grammar_vocab(p->grammar), tram_tokenizer_vocab_size(e->tok));
    }
    return tram_params_check(p, e->vocab, e->cfg.max_num_seqs, param, err);
}

/* The pool is the engine's one part with a lock of its own (the adapters
 * registry): the const engine other threads hold may use it. */
static tram_lora_pool *lora_pool(const tram_engine *e) { return (tram_lora_pool *)&e->loras; }

/* An adapter directory that carries a tokenizer (one trained with added
 * tokens) must carry the base's vocabulary: tram tokenizes with the base's. */
static int check_lora_tokenizer(const tram_engine *e, const char *path, tram_error *err)
{
    char json[600], spm[600];
    snprintf(json, sizeof(json), "%s/tokenizer.json", path);
    snprintf(spm, sizeof(spm), "%s/tokenizer.model", path);
    if (access(json, R_OK) && access(spm, R_OK))
        return 0;
    tram_tokenizer *t;
    if (tram_tokenizer_from_dir(&t, path, err))
        return -1;
    int n = tram_tokenizer_vocab_size(t), base = tram_tokenizer_vocab_size(e->tok);
    tram_tokenizer_free(t);
    if (n != base)
        return tram_fail(err, "%s: the adapter's tokenizer has a vocabulary of %d tokens, the base model's has %d: "
                              "the adapter was trained on another vocabulary", path, n, base);
    return 0;
}

int tram_engine_add_lora(const tram_engine *e, const char *name, const char *path, tram_error *err)
{
    tram_lora_adapter *a;
    if (check_lora_tokenizer(e, path, err) ||
        tram_lora_open(&a, path, tram_model_file_config(e->file), e->cfg.max_lora_rank, err))
        return -1;
    return tram_lora_pool_add(lora_pool(e), name, a, err);
}

int tram_engine_remove_lora(const tram_engine *e, const char *name, tram_error *err)
{
    return tram_lora_pool_remove(lora_pool(e), name, err);
}

int tram_engine_lora_names(const tram_engine *e, char (*names)[TRAM_LORA_NAME_MAX], int cap)
{
    return tram_lora_pool_names(lora_pool(e), names, cap);
}

/* Appends adapter id's name to the comma-separated list, once. */
static void list_lora(tram_engine *e, char *list, size_t cap, int id)
{
    char name[TRAM_LORA_NAME_MAX];
    tram_lora_pool_name_of(&e->loras, id, name);
    size_t len = strlen(list), n = strlen(name);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, ",");
        if (w == n && !strncmp(p, name, n))
            return;
        p += w + (p[w] == ',');
    }
    if (n && len + n + 1 < cap)
        snprintf(list + len, cap - len, "%s%s", len ? "," : "", name);
}

static void count_requests(const tram_engine *e, int *running, int *waiting)
{
    *running = *waiting = 0;
    for (int i = 0; i < e->num_reqs; i++) {
        const tram_request *r = e->reqs[i];
        if (r->num_finished == r->n)
            continue;
        int run = 0;
        for (int j = 0; j < r->num_seqs; j++)
            run |= r->seqs[j].status == TRAM_SEQ_RUNNING;
        *running += run;
        *waiting += !run;
    }
}

/* vllm:lora_requests_info's lists: the adapters of running requests, and
 * of requests with every sequence waiting. */
static void list_loras(tram_engine *e, tram_engine_stats *s)
{
    s->running_loras[0] = s->waiting_loras[0] = 0;
    s->max_loras = e->cfg.max_loras;
    for (int i = 0; i < e->num_reqs; i++) {
        const tram_request *r = e->reqs[i];
        if (!r->lora_id || r->num_finished == r->n)
            continue;
        int run = 0;
        for (int j = 0; j < r->num_seqs; j++)
            run |= r->seqs[j].status == TRAM_SEQ_RUNNING;
        if (run)
            list_lora(e, s->running_loras, sizeof(s->running_loras), r->lora_id);
        else
            list_lora(e, s->waiting_loras, sizeof(s->waiting_loras), r->lora_id);
    }
}

static void publish_stats(tram_engine *e)
{
    tram_engine_stats *s = &e->stats;
    count_requests(e, &s->num_running, &s->num_waiting);
    list_loras(e, s);
    s->num_blocks_total = tram_bm_num_total(e->bm);
    s->num_blocks_free = tram_bm_num_free(e->bm);
    s->num_blocks_cached = tram_bm_num_cached(e->bm);
    s->kv_usage = 1.0 - (double)s->num_blocks_free / s->num_blocks_total;
    s->prefix_cache_queries = e->sched.cache_queries;
    s->prefix_cache_hits = e->sched.cache_hits;
    s->num_preemptions = e->sched.num_preemptions;
    s->prompt_tokens_total = e->sched.prompt_tokens;
    s->spec_decode_off_steps = e->sched.spec_off_steps;
    s->spec_decode_num_declined_tokens = e->sched.spec_declined;
    if (e->cuda) {
        tram_cuda_runner_stats c;
        tram_cuda_runner_stats_get(e->cuda, &c);
        s->graph_steps = c.graph_steps;
        s->device_samples = c.device_rows;
        s->device_verified_tokens = c.verified_rows;
    }
    pthread_mutex_lock(&e->lock);
    e->published = *s;
    pthread_mutex_unlock(&e->lock);
}

void tram_engine_stats_get(const tram_engine *e, tram_engine_stats *s)
{
    pthread_mutex_t *lock = (pthread_mutex_t *)&e->lock; /* the lock is not the data */
    pthread_mutex_lock(lock);
    *s = e->published;
    pthread_mutex_unlock(lock);
}

/* ---------------------------------------------------------------- requests */

static tram_request *find_request(const tram_engine *e, uint64_t id)
{
    for (int i = 0; i < e->num_reqs; i++)
        if (e->reqs[i]->id == id && e->reqs[i]->num_reported < e->reqs[i]->n)
            return e->reqs[i];
    return NULL;
}

static int tokenize_prompt(tram_engine *e, const tram_prompt *pr, int32_t **ids, int *n,
                           tram_error *err)
{
    if (pr->text)
        return tram_tokenizer_encode(e->tok, pr->text, strlen(pr->text), !pr->skip_bos, 1, ids, n,
                                     err);
    if (!pr->token_ids || pr->num_tokens < 1)
        return tram_fail(err, "prompt: give text or at least one token id");
    for (int i = 0; i < pr->num_tokens; i++)
        if (pr->token_ids[i] < 0 || pr->token_ids[i] >= e->vocab)
            return tram_fail(err, "prompt: token id %d at position %d is outside the vocabulary "
                                  "[0, %d)", pr->token_ids[i], i, e->vocab);
    *ids = malloc((size_t)pr->num_tokens * sizeof(int32_t));
    if (!*ids)
        return tram_fail(err, "out of memory copying the prompt");
    memcpy(*ids, pr->token_ids, (size_t)pr->num_tokens * sizeof(int32_t));
    *n = pr->num_tokens;
    return 0;
}

static int check_prompt_len(const tram_engine *e, int n, int embed, tram_error *err)
{
    if (n < 1)
        return tram_fail(err, "prompt: it is empty after tokenization");
    if (embed && n > e->max_model_len)
        return tram_fail(err, "prompt: it has %d tokens, but this model's maximum context length is "
                              "%d tokens", n, e->max_model_len);
    if (!embed && n >= e->max_model_len)
        return tram_fail(err, "prompt: it has %d tokens, but this model's maximum context length is "
                              "%d tokens, which must also hold at least one generated token",
                         n, e->max_model_len);
    return 0;
}

static int track_request(tram_engine *e, tram_request *r, tram_error *err)
{
    if (e->num_reqs == e->cap_reqs) {
        int cap = TRAM_MAX(16, 2 * e->cap_reqs);
        tram_request **q = realloc(e->reqs, (size_t)cap * sizeof(*q));
        if (!q)
            return tram_fail(err, "out of memory tracking requests");
        e->reqs = q;
        e->cap_reqs = cap;
    }
    if (tram_scheduler_check_fits(&e->sched, &r->seqs[0], err) ||
        tram_scheduler_reserve(&e->sched, r->n, err))
        return -1;
    e->reqs[e->num_reqs++] = r;
    tram_scheduler_add_waiting(&e->sched, &r->seqs[0]);
    return 0;
}

/* The request runs with adapter `name`: its sequences' blocks are hashed
 * apart from every other adapter's (the id is never reused). */
static int use_lora(tram_engine *e, tram_request *r, const char *name, tram_error *err)
{
    int id = tram_lora_pool_acquire(&e->loras, name, err);
    if (id < 0)
        return -1;
    r->lora_id = id;
    for (int i = 0; i < r->n; i++)
        r->seqs[i].table.salt = tram_mix64((uint64_t)id);
    return 0;
}

/* The prompt's ids, checked: an embedding may fill the context, a
 * generation must leave room for a token. */
static int prompt_ids(tram_engine *e, const tram_prompt *prompt, int embed, int32_t **ids, int *n,
                      tram_error *err)
{
    *ids = NULL;
    *n = 0;
    if (tokenize_prompt(e, prompt, ids, n, err) || check_prompt_len(e, *n, embed, err)) {
        free(*ids);
        return -1;
    }
    return 0;
}

/* The request of the prompt (its id free, its ids checked), queued; embed
 * NULL: a generation. */
static int queue_request(tram_engine *e, uint64_t request_id, const tram_prompt *prompt,
                         const tram_sampling_params *p, int priority, const tram_embed_params *embed,
                         tram_error *err);

int tram_engine_add_request(tram_engine *e, uint64_t request_id, const tram_prompt *prompt,
                            const tram_sampling_params *p, int priority, tram_error *err)
{
    if (tram_engine_model_config(e)->embedding_only)
        return tram_fail(err, "this model has no language-model head (lm_head): it serves embeddings only");
    if (tram_engine_validate_params(e, p, NULL, err))
        return -1;
    return queue_request(e, request_id, prompt, p, priority, NULL, err);
}

/* ---------------------------------------------------------------- embeddings */

const char *tram_pooling_name(tram_pooling p)
{
    static const char *const names[] = {NULL, "mean", "cls", "last"};
    return (unsigned)p < TRAM_ARRAY_LEN(names) ? names[p] : NULL;
}

void tram_engine_pooling(const tram_engine *e, tram_pooling *pooling, int *normalize)
{
    *pooling = e->pooling;
    *normalize = e->normalize;
}

int tram_engine_check_embed(const tram_engine *e, const tram_embed_params *p, const char **param,
                            tram_error *err)
{
    const tram_model_config *mc = tram_engine_model_config(e);
    const char *unused;
    param = param ? param : &unused;
    *param = "dimensions";
    if (p->dimensions && !mc->matryoshka)
        return tram_fail(err, "dimensions: this model defines no Matryoshka truncation (config.json's "
                              "is_matryoshka or matryoshka_dimensions), so its embeddings cannot be shortened");
    if (p->dimensions < 0 || p->dimensions > mc->dim)
        return tram_fail(err, "dimensions must be in [1, %d], got %d", mc->dim, p->dimensions);
    *param = NULL;
    if (e->cuda)
        return tram_fail(err, "embeddings run on --device cpu: the CUDA runner returns no hidden states yet");
    return 0;
}

/* The request's pooled state and result, once it is created. */
static int setup_embedding(tram_engine *e, tram_request *r, const tram_embed_params *p, tram_error *err)
{
    int dim = tram_engine_model_config(e)->dim;
    r->pooling = e->pooling;
    r->skip_cache = e->pooling != TRAM_POOLING_LAST;  /* mean and CLS need rows a cache hit skips */
    r->max_tokens = 0;
    r->embed_dims = p->dimensions ? p->dimensions : dim;
    r->pool = tram_calloc((size_t)dim, sizeof(double), err);
    r->embedding = tram_calloc((size_t)r->embed_dims, sizeof(float), err);
    return r->pool && r->embedding ? 0 : -1;
}

int tram_engine_add_embedding(tram_engine *e, uint64_t request_id, const tram_prompt *prompt,
                              const tram_embed_params *p, int priority, tram_error *err)
{
    if (tram_engine_check_embed(e, p, NULL, err))
        return -1;
    tram_sampling_params sp;
    tram_sampling_params_init(&sp);
    return queue_request(e, request_id, prompt, &sp, priority, p, err);
}

static int queue_request(tram_engine *e, uint64_t request_id, const tram_prompt *prompt,
                         const tram_sampling_params *p, int priority, const tram_embed_params *embed,
                         tram_error *err)
{
    if (find_request(e, request_id))
        return tram_fail(err, "request id %llu is already in use", (unsigned long long)request_id);
    int32_t *ids;
    int n;
    if (prompt_ids(e, prompt, embed != NULL, &ids, &n, err))
        return -1;
    uint64_t arrival = e->next_arrival++;
    tram_request_env env = {
        .tok = e->tok,
        .vocab = e->vocab,
        .max_model_len = e->max_model_len,
        .max_blocks_per_seq = e->max_blocks_per_seq,
        .max_num_seqs = e->cfg.max_num_seqs,
        .seed = e->cfg.seed ^ (arrival * 0x9e3779b97f4a7c15ULL),
        .arrival = arrival,
    };
    tram_request *r;
    int rc = tram_request_create(&r, request_id, p, ids, n, priority, &env, err);
    free(ids);
    if (rc)
        return -1;
    if (embed && setup_embedding(e, r, embed, err)) {
        tram_request_free(r);
        return -1;
    }
    r->added_at = tram_now();
    if ((prompt->lora && use_lora(e, r, prompt->lora, err)) || track_request(e, r, err)) {
        if (r->lora_id)
            tram_lora_pool_release(&e->loras, r->lora_id);
        tram_request_free(r);
        return -1;
    }
    publish_stats(e);
    return 0;
}

static void finish_seq(tram_engine *e, tram_seq *s, tram_finish_reason why)
{
    tram_scheduler_remove(&e->sched, s);
    tram_bm_release(e->bm, &s->table);
    s->status = TRAM_SEQ_FINISHED;
    s->finish = why;
    if (++s->req->num_finished == s->req->n) {
        e->stats.requests_finished[why]++;
        if (s->req->lora_id)
            tram_lora_pool_release(&e->loras, s->req->lora_id);
    }
}

int tram_engine_abort(tram_engine *e, uint64_t request_id)
{
    tram_request *r = find_request(e, request_id);
    if (!r || r->num_finished == r->n)
        return -1;
    /* The samples not forked yet never started: they finish as aborted too. */
    r->num_seqs = r->n;
    for (int i = 0; i < r->n; i++)
        if (r->seqs[i].status != TRAM_SEQ_FINISHED)
            finish_seq(e, &r->seqs[i], TRAM_FINISH_ABORT);
    r->aborted = 1;
    publish_stats(e);
    return 0;
}

int tram_engine_has_unfinished(const tram_engine *e)
{
    for (int i = 0; i < e->num_reqs; i++)
        if (e->reqs[i]->num_reported < e->reqs[i]->n)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- step: batch */

/* Rows of logits an item needs: every token of a prompt-logprobs chunk, the
 * last real token and each draft of a speculating one, else only the last
 * token, when it completes the sequence's known tokens. */
static int item_rows(const tram_sched_item *it)
{
    if (it->seq->req->pooling)
        return 0;  /* pooled from the hidden states (pool_item) */
    if (it->num_draft)
        return it->num_draft + 1;
    if (tram_seq_wants_prompt_logprobs(it->seq))
        return it->num_new;
    return it->seq->num_computed + it->num_new == it->seq->num_tokens;
}

static tram_batch build_batch(tram_engine *e)
{
    const tram_scheduler *sc = &e->sched;
    int bs = e->cfg.block_size, t = 0, r = 0;
    e->query_start[0] = 0;
    for (int i = 0; i < sc->num_items; i++) {
        const tram_seq *s = sc->items[i].seq;
        int start = s->num_computed, n = sc->items[i].num_new;
        for (int k = 0; k < n; k++, t++) {
            int pos = start + k;
            e->tok_ids[t] = s->tokens[pos];
            e->positions[t] = pos;
            e->slots[t] = s->table.blocks[pos / bs] * bs + pos % bs;
        }
        e->query_start[i + 1] = t;
        e->seq_lens[i] = start + n;
        memcpy(e->block_tables + (size_t)i * e->max_blocks_per_seq, s->table.blocks,
               (size_t)s->table.num_blocks * sizeof(int32_t));
        e->item_row0[i] = r;
        e->item_nrows[i] = item_rows(&sc->items[i]);
        for (int k = 0; k < e->item_nrows[i]; k++)
            e->rows[r++] = t - e->item_nrows[i] + k;
    }
    return (tram_batch){.num_tokens = t, .num_seqs = sc->num_items, .token_ids = e->tok_ids,
                        .positions = e->positions, .slot_mapping = e->slots,
                        .query_start = e->query_start, .seq_lens = e->seq_lens,
                        .block_tables = e->block_tables, .max_blocks_per_seq = e->max_blocks_per_seq,
                        .logits_rows = e->rows, .num_logits = r,
                        .seq_lora = e->cfg.max_loras ? e->seq_lora : NULL};
}

/* ---------------------------------------------------------------- step: outputs */

/* Texts are laid out one after another, each followed by its NUL. */
static int text_append(tram_engine *e, const char *s, size_t n)
{
    if (e->text_len + n > e->text_cap) {
        size_t cap = TRAM_MAX(2 * e->text_cap, e->text_len + n);
        char *t = realloc(e->text, cap);
        if (!t)
            return -1;
        e->text = t;
        e->text_cap = cap;
    }
    memcpy(e->text + e->text_len, s, n);
    e->text_len += n;
    return 0;
}

/* Opens the sequence's output of this step; its text follows. */
static void emit(tram_engine *e, tram_seq *s)
{
    s->step_tokens = 0;
    s->text_off = e->text_len;
    s->text_len = 0;
    e->emitted[e->num_emitted++] = s;
}

static int emit_text(tram_engine *e, tram_seq *s, const char *text, size_t len)
{
    if (text_append(e, text, len))
        return -1;
    s->text_len += len;
    return 0;
}

static int is_stop_token(const tram_request *r, int32_t tok)
{
    for (int i = 0; i < r->p.num_stop_token_ids; i++)
        if (r->stop_ids[i] == tok)
            return 1;
    return 0;
}

static tram_finish_reason stop_reason(const tram_engine *e, const tram_seq *s, int32_t tok,
                                      int stopped_by_string)
{
    const tram_request *r = s->req;
    if (stopped_by_string || is_stop_token(r, tok) ||
        (!r->p.ignore_eos && tram_tokenizer_is_eog(e->tok, tok)))
        return TRAM_FINISH_STOP;
    if (s->num_tokens - s->prompt_len >= r->max_tokens || s->num_tokens >= e->max_model_len)
        return TRAM_FINISH_LENGTH;
    return TRAM_FINISH_NONE;
}

/* A grammar-constrained sequence draws from its row with every token the
 * grammar forbids at -INFINITY (its logprobs are those of that masked
 * distribution too); a free one from the row as it is. */
static const float *constrained_row(tram_engine *e, tram_seq *s, const float *row)
{
    if (!s->matcher)
        return row;
    tram_matcher_fill_mask(s->matcher, e->mask);
    tram_mask_logits(e->masked, row, e->mask, e->vocab);
    return e->masked;
}

/* Alternatives the mask ruled out (logprob -INFINITY) are not reported. */
static void drop_masked_alternatives(tram_logprob_entry *lp)
{
    while (lp->num_top > 0 && isinf(lp->top[lp->num_top - 1].logprob))
        lp->num_top--;
}

/* Draws s's next token from row and appends it to this step's output.
 * drawn: the token the device drew for this row, or -1: the host draws.
 * Returns 1 when s finished with it, 0 when it goes on, -1 on error. */
static int draw_token(tram_engine *e, tram_seq *s, const float *row, int32_t drawn, tram_error *err)
{
    const tram_request *r = s->req;
    int held = tram_seq_holds_stops(s);
    tram_sample_input in = tram_seq_sample_input(s);
    row = drawn >= 0 ? row : constrained_row(e, s, row);
    int32_t tok = drawn >= 0 ? drawn : tram_sample(e->sampler, row, &in);
    if (s->matcher && !tram_matcher_accept(s->matcher, tok)) {
        /* the grammar allows no token here, or none the sampler could draw
         * (every one it allows was banned): the sample ends without one,
         * saying why, never with a text the grammar does not match */
        const char *stuck = tram_matcher_stuck(s->matcher);
        s->error = stuck ? stuck : TRAM_TOKENS_BANNED;
        finish_seq(e, s, TRAM_FINISH_ERROR);
        return 1;
    }
    if (r->p.logprobs >= 0) {
        tram_logprob_entry *lp = &s->lp[s->step_tokens];
        tram_logprobs(e->sampler, row, tok, r->p.logprobs, lp, s->top[s->step_tokens]);
        drop_masked_alternatives(lp);
    }
    s->tokens[s->num_tokens++] = tok;
    s->step_tokens++;
    e->stats.generation_tokens_total++;
    const char *text;
    size_t len;
    /* vLLM's rule: stop strings, like EOS and stop tokens, only count after min_tokens */
    tram_detok_check_stops(s->detok, !held);
    int stop = tram_detok_push(s->detok, tok, &text, &len, &s->stop_index, err);
    if (stop < 0 || emit_text(e, s, text, len))
        return -1;
    tram_finish_reason why = stop_reason(e, s, tok, stop == 1);
    if (why == TRAM_FINISH_NONE && s->matcher && tram_matcher_is_done(s->matcher))
        why = TRAM_FINISH_STOP;   /* the structured output is complete */
    if (why != TRAM_FINISH_NONE && stop != 1) {
        tram_detok_finish(s->detok, &text, &len);
        if (emit_text(e, s, text, len))
            return -1;
    }
    if (why == TRAM_FINISH_NONE)
        return 0;
    finish_seq(e, s, why);
    return 1;
}

static int sample_and_append(tram_engine *e, tram_seq *s, const float *row, int32_t drawn, tram_error *err)
{
    emit(e, s);
    if (draw_token(e, s, row, drawn, err) < 0)
        return -1;
    return text_append(e, "", 1);
}

static const float *logits_row(const tram_engine *e, int row)
{
    return e->logits + (size_t)row * e->logits_width;
}

/* Counts the drafts accepted: those the draws of this step matched, in
 * order; the sequence's record learns how many. */
static void count_accepted(tram_engine *e, tram_seq *s, const int32_t *draft, int k)
{
    const int32_t *drawn = s->tokens + s->num_tokens - s->step_tokens;
    int n = TRAM_MIN(k, s->step_tokens), j = 0;
    e->stats.spec_decode_num_drafts++;
    e->stats.spec_decode_num_draft_tokens += (uint64_t)k;
    for (; j < n && drawn[j] == draft[j]; j++) {
        e->stats.spec_decode_num_accepted_tokens++;
        e->stats.spec_decode_num_accepted_tokens_per_pos[j]++;
    }
    tram_spec_record_add(&s->spec, j, k);
    /* a draft model holds the KV of the drafts it ran that were accepted */
    s->draft_computed = TRAM_MIN(s->draft_computed, s->num_tokens - s->step_tokens + j);
}

/* A sequence whose drafts the automatic rule declined learns whether the
 * first would have been accepted: the token just drawn tells. */
static void check_shadow(tram_seq *s)
{
    if (s->spec.shadow < 0 || s->step_tokens == 0)
        return;
    tram_spec_record_add(&s->spec, s->tokens[s->num_tokens - 1] == s->spec.shadow, 1);
    s->spec.shadow = -1;
}

/* Verification of a speculating sequence's k drafts.  Row j of its 1 + k
 * rows follows draft j - 1 (row 0 its last real token).  Each row is drawn
 * from as decoding without drafts would draw (same sampling parameters,
 * grammar state, penalties over the tokens so far, and the same uniform
 * number for the same position); the run goes on while the draw equals the
 * draft, so it ends with the first draw that differs, or with the bonus draw
 * of row k.  For a proposer that guesses one token d (q a point mass on d),
 * this is the rejection sampler exactly: d is kept with probability
 * min(1, p(d)/q(d)) = p(d), and on rejection the token is drawn from
 * norm(max(0, p - q)) = p without d.  Hence outputs, seeded ones too, are the
 * very tokens decoding without speculation gives.  The KV of the rejected
 * drafts is rolled back: computed stops after the last accepted one, and the
 * blocks past the new tokens go back to the pool. */
static int verify_drafts(tram_engine *e, tram_seq *s, int row0, int k, tram_error *err)
{
    int32_t draft[TRAM_SPEC_MAX_TOKENS];
    memcpy(draft, s->tokens + s->num_tokens, (size_t)k * sizeof(int32_t));
    int rc = 0;
    emit(e, s);
    for (int j = 0; j <= k && rc == 0; j++) {
        /* on CUDA the device may have verified the run (cuda_runner.h): its
         * draws stop where this loop does */
        int32_t drawn = e->cuda ? tram_cuda_runner_token(e->cuda, row0 + j) : -1;
        if (drawn == TRAM_CUDA_NOT_DRAWN)
            return tram_fail(err, "CUDA verification stopped before draft %d of %d that the engine accepts", j, k);
        rc = draw_token(e, s, logits_row(e, row0 + j), drawn, err);
        if (j == k || s->tokens[s->num_tokens - 1] != draft[j])
            break;
    }
    if (rc < 0)
        return -1;
    count_accepted(e, s, draft, k);
    if (s->status != TRAM_SEQ_FINISHED) {
        /* the KV of every drawn token but the last is in: the accepted
         * drafts' own rows computed it */
        s->num_computed = s->num_tokens - 1;
        tram_bm_commit(e->bm, &s->table, s->tokens, s->num_computed);
        tram_bm_truncate(e->bm, &s->table, s->num_tokens);
    }
    return text_append(e, "", 1);
}

/* The other samples start from the parent's computed prompt, sharing its full
 * blocks; each recomputes the partial last block into a block of its own. */
static void fork_samples(tram_engine *e, tram_seq *parent)
{
    tram_request *r = parent->req;
    int bs = e->cfg.block_size, full = parent->prompt_len / bs;
    for (int i = 1; i < r->n; i++) {
        tram_seq *c = &r->seqs[i];
        memcpy(c->tokens, parent->tokens, (size_t)parent->prompt_len * sizeof(int32_t));
        c->num_tokens = c->prompt_len = parent->prompt_len;
        tram_bm_fork(e->bm, &parent->table, &c->table, full);
        c->num_computed = full * bs;
    }
    r->num_seqs = r->n;
    tram_scheduler_add_forked(&e->sched, parent, r->seqs + 1, r->n - 1);
}

static void prompt_logprobs(tram_engine *e, tram_seq *s, int start, int row0)
{
    tram_request *r = s->req;
    int k = r->p.prompt_logprobs, kk = TRAM_MAX(k, 1);
    if (start == 0)
        r->prompt_lp[0] = (tram_logprob_entry){.token = s->tokens[0], .logprob = NAN, .top = r->prompt_top};
    int end = TRAM_MIN(s->num_computed, s->prompt_len - 1);
    for (int p = start; p < end; p++)
        tram_logprobs(e->sampler, e->logits + (size_t)(row0 + p - start) * e->logits_width,
                      s->tokens[p + 1], k, &r->prompt_lp[p + 1], r->prompt_top + (size_t)(p + 1) * kk);
    r->prompt_lp_done = TRAM_MIN(s->num_computed + 1, s->prompt_len);
}

/* ---------------------------------------------------------------- step: pooling */

/* Adds the final hidden states of n batch rows from row0 to r's pool:
 * summed for mean, kept for CLS (position 0) and last. */
static int pool_rows(tram_engine *e, tram_request *r, int row0, int n, tram_error *err)
{
    int dim = tram_engine_model_config(e)->dim, max = e->cfg.max_num_seqs;
    for (int first = 0; first < n; first += max) {
        int k = TRAM_MIN(max, n - first);
        for (int j = 0; j < k; j++)
            e->hidden_rows[j] = row0 + first + j;
        if (tram_model_hidden_rows(e->model, e->hidden_rows, k, e->hidden, err))
            return -1;
        for (int j = 0; j < k; j++) {
            const float *h = e->hidden + (size_t)j * dim;
            int keep = r->pooling != TRAM_POOLING_MEAN;
            for (int d = 0; d < dim; d++)
                r->pool[d] = keep ? h[d] : r->pool[d] + h[d];
        }
    }
    return 0;
}

/* The pooled state cut to its dimensions, then L2-normalized (as
 * torch.nn.functional.normalize, eps 1e-12). */
static void finish_embedding(tram_engine *e, tram_seq *s)
{
    tram_request *r = s->req;
    double scale = r->pooling == TRAM_POOLING_MEAN ? 1.0 / s->prompt_len : 1.0, sum = 0;
    for (int d = 0; d < r->embed_dims; d++)
        sum += r->pool[d] * scale * r->pool[d] * scale;
    double norm = e->normalize ? TRAM_MAX(sqrt(sum), 1e-12) : 1.0;
    for (int d = 0; d < r->embed_dims; d++)
        r->embedding[d] = (float)(r->pool[d] * scale / norm);
    emit(e, s);
    finish_seq(e, s, TRAM_FINISH_STOP);
}

/* An embedding sequence's rows of this step (tokens start.. of item i);
 * a sequence preempted and run again starts its pool over. */
static int pool_item(tram_engine *e, int i, int start, tram_error *err)
{
    tram_seq *s = e->sched.items[i].seq;
    tram_request *r = s->req;
    int row0 = e->query_start[i], n = e->sched.items[i].num_new;
    if (start == 0)
        memset(r->pool, 0, (size_t)tram_engine_model_config(e)->dim * sizeof(double));
    int done = s->num_computed == s->prompt_len;
    int rc = r->pooling == TRAM_POOLING_MEAN ? pool_rows(e, r, row0, n, err)
             : r->pooling == TRAM_POOLING_CLS ? (start == 0 ? pool_rows(e, r, row0, 1, err) : 0)
             : done ? pool_rows(e, r, row0 + n - 1, 1, err) : 0;
    if (rc)
        return -1;
    if (done) {
        finish_embedding(e, s);
        return text_append(e, "", 1);
    }
    return 0;
}

/* Whether item i's step ends in the one draw postprocess_item takes for it
 * from its last row with nothing before it that the draw depends on: no
 * drafts to verify, no pooling, no grammar (its mask is filled per row), no
 * samples still to fork. */
static int draws_freely(const tram_engine *e, int i)
{
    const tram_sched_item *it = &e->sched.items[i];
    const tram_seq *s = it->seq;
    const tram_request *r = s->req;
    return !it->num_draft && !r->pooling && !s->matcher && r->num_seqs >= r->n && e->item_nrows[i] > 0 &&
           s->num_computed + it->num_new >= s->num_tokens;
}

/* The step's free draws, side by side (predraw.h), before the items are
 * walked in order; one alone is left to postprocess_item. */
static void predraw_step(tram_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->sched.num_items; i++) {
        e->predrawn[i] = -1;
        if (!e->predraw || !draws_freely(e, i))
            continue;
        const tram_seq *s = e->sched.items[i].seq;
        e->draws[n++] = (tram_draw){.row = logits_row(e, e->item_row0[i] + e->item_nrows[i] - 1),
                                    .in = tram_seq_sample_input(s), .out = &e->predrawn[i]};
    }
    if (n >= 2)
        tram_predraw_run(e->predraw, e->draws, n);
}

static int postprocess_item(tram_engine *e, int i, tram_error *err)
{
    const tram_sched_item *it = &e->sched.items[i];
    tram_seq *s = it->seq;
    int start = s->num_computed;
    s->num_computed += it->num_new - it->num_draft;
    tram_bm_commit(e->bm, &s->table, s->tokens, s->num_computed);
    if (it->num_draft)
        return verify_drafts(e, s, e->item_row0[i], it->num_draft, err);
    if (start < s->prompt_len)
        e->stats.computed_prefill_tokens += TRAM_MIN(s->num_computed, s->prompt_len) - start;
    if (s->req->pooling)
        return pool_item(e, i, start, err);
    int row0 = e->item_row0[i], nrows = e->item_nrows[i];
    if (tram_seq_wants_prompt_logprobs(s))
        prompt_logprobs(e, s, start, row0);
    if (s->num_computed < s->num_tokens || nrows == 0)
        return 0;
    const float *row = logits_row(e, row0 + nrows - 1);
    tram_request *r = s->req;
    if (r->num_seqs < r->n) {
        fork_samples(e, s);
        for (int j = 1; j < r->n; j++)
            if (sample_and_append(e, &r->seqs[j], row, -1, err))
                return -1;
    }
    int32_t drawn = e->cuda ? tram_cuda_runner_token(e->cuda, row0 + nrows - 1) : e->predrawn[i];
    if (sample_and_append(e, s, row, drawn, err))
        return -1;
    check_shadow(s);
    return 0;
}

/* Finished requests stay one step after their last output (it points into
 * them); then they go. */
static void drop_reported(tram_engine *e)
{
    int kept = 0;
    for (int i = 0; i < e->num_reqs; i++) {
        if (e->reqs[i]->num_reported == e->reqs[i]->n)
            tram_request_free(e->reqs[i]);
        else
            e->reqs[kept++] = e->reqs[i];
    }
    e->num_reqs = kept;
}

/* Aborted samples are reported once, without tokens. */
static int emit_aborts(tram_engine *e, tram_error *err)
{
    for (int i = 0; i < e->num_reqs; i++) {
        tram_request *r = e->reqs[i];
        for (int j = 0; r->aborted && j < r->n; j++) {
            if (r->seqs[j].finish != TRAM_FINISH_ABORT || r->seqs[j].reported_final)
                continue;
            emit(e, &r->seqs[j]);
            if (text_append(e, "", 1))
                return tram_fail(err, "out of memory for output text");
        }
    }
    return 0;
}

static void fill_output(tram_engine *e, tram_seq *s, tram_output *o)
{
    const tram_request *r = s->req;
    int got = s->step_tokens, pooled = r->pooling && s->finish == TRAM_FINISH_STOP;
    *o = (tram_output){
        .request_id = r->id,
        .sample_index = s->sample_index,
        .token_ids = got ? s->tokens + s->num_tokens - got : NULL,
        .num_tokens = got,
        .text = e->text + s->text_off,
        .text_len = s->text_len,
        .logprobs = got && r->p.logprobs >= 0 ? s->lp : NULL,
        .prompt_logprobs = got && !s->reported_first && r->prompt_lp ? r->prompt_lp : NULL,
        .finish_reason = s->finish,
        .stop_string = s->stop_index >= 0 ? r->stop[s->stop_index] : NULL,
        .error = s->finish == TRAM_FINISH_ERROR ? s->error : NULL,
        .prompt_tokens = r->seqs[0].prompt_len,
        .completion_tokens = s->num_tokens - s->prompt_len,
        .cached_tokens = r->cached_tokens,
        .queue_time = r->scheduled_at > 0 ? r->scheduled_at - r->added_at : 0,
        .embedding = pooled ? r->embedding : NULL,
        .embedding_dim = pooled ? r->embed_dims : 0,
    };
}

static int collect_outputs(tram_engine *e, const tram_output **outs, int *num_outs,
                           tram_error *err)
{
    if (e->num_emitted > e->cap_outs) {
        tram_output *o = realloc(e->outs, (size_t)e->num_emitted * sizeof(*o));
        if (!o)
            return tram_fail(err, "out of memory for %d outputs", e->num_emitted);
        e->outs = o;
        e->cap_outs = e->num_emitted;
    }
    for (int i = 0; i < e->num_emitted; i++) {
        tram_seq *s = e->emitted[i];
        fill_output(e, s, &e->outs[i]);
        s->reported_first = 1;
        if (s->finish != TRAM_FINISH_NONE) {
            s->reported_final = 1;
            s->req->num_reported++;
        }
    }
    *outs = e->outs;
    *num_outs = e->num_emitted;
    return 0;
}

static int reserve_emitted(tram_engine *e, tram_error *err)
{
    int need = 0;
    for (int i = 0; i < e->num_reqs; i++)
        need += e->reqs[i]->n;
    if (tram_grow((void **)&e->emitted, &e->cap_emitted, need, sizeof(*e->emitted)))
        return tram_fail(err, "out of memory for %d outputs", need);
    return 0;
}

/* CUDA: the masks of the step's grammar-constrained rows, computed before
 * the forward pass so that the device masks its logits before drawing. */
static void cuda_step_masks(tram_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->sched.num_items; i++) {
        tram_seq *s = e->sched.items[i].seq;
        /* a speculating sequence's rows past the first need the matcher moved
         * through its drafts: the host masks and verifies them */
        if (!s->matcher || e->item_nrows[i] == 0 || e->sched.items[i].num_draft ||
            s->num_computed + e->sched.items[i].num_new < s->num_tokens)
            continue;
        tram_matcher_fill_mask(s->matcher, e->step_masks + (size_t)n * e->mask_words);
        e->step_mask_rows[n++] = e->item_row0[i] + e->item_nrows[i] - 1;
    }
    tram_cuda_runner_set_masks(e->cuda, e->step_mask_rows, e->step_masks, n);
}

/* Every adapter of the step in a slot (the scheduler admitted no more
 * adapters than there are slots), and each item's slot for the batch. */
static int assign_lora_slots(tram_engine *e, tram_error *err)
{
    if (!e->cfg.max_loras)
        return 0;
    for (int i = 0; i < e->sched.num_items; i++)
        e->item_lora[i] = e->sched.items[i].seq->req->lora_id;
    return tram_lora_pool_slots(&e->loras, e->ranks, e->item_lora, e->sched.num_items, e->seq_lora,
                                e->stats.num_steps, err);
}

/* 1 when every item of the step decodes (one real token, maybe drafts):
 * the steps whose time speculation's automatic rule learns from. */
static int decode_step(const tram_engine *e)
{
    for (int i = 0; i < e->sched.num_items; i++) {
        const tram_sched_item *it = &e->sched.items[i];
        const tram_seq *s = it->seq;
        if (it->num_new - it->num_draft != 1 || s->num_computed + 1 != s->num_tokens ||
            s->req->pooling || tram_seq_wants_prompt_logprobs(s))
            return 0;
    }
    return 1;
}

/* Stamps requests scheduled for the first time: their queue time ends here. */
static void mark_scheduled(tram_engine *e)
{
    double now = tram_now();
    for (int i = 0; i < e->sched.num_items; i++) {
        tram_request *r = e->sched.items[i].seq->req;
        if (r->scheduled_at == 0)
            r->scheduled_at = now;
    }
}

int tram_engine_step(tram_engine *e, const tram_output **outs, int *num_outs, tram_error *err)
{
    *outs = NULL;
    *num_outs = 0;
    drop_reported(e);
    e->num_emitted = 0;
    e->text_len = 0;
    if (reserve_emitted(e, err) || emit_aborts(e, err))
        return -1;
    double t0 = tram_now();
    tram_scheduler_schedule(&e->sched);
    mark_scheduled(e);
    if (e->sched.num_items > 0) {
        if (assign_lora_slots(e, err))
            return -1;
        int decode_only = e->proposer && decode_step(e);
        tram_batch b = build_batch(e);
        if (e->cuda)
            cuda_step_masks(e);
        if (e->cuda ? tram_cuda_runner_step(e->cuda, e->ranks, &b, e->sched.items, e->item_row0,
                                            e->item_nrows, e->logits, err)
                   : tram_ranks_forward(e->ranks, &b, e->logits, err))
            return -1;
        e->stats.forward_tokens_total += (uint64_t)b.num_tokens;
        predraw_step(e);
        for (int i = 0; i < e->sched.num_items; i++)
            if (postprocess_item(e, i, err))
                return -1;
        if (decode_only)
            tram_step_cost_add(&e->sched.cost, b.num_tokens, tram_now() - t0 - e->sched.propose_seconds);
    }
    e->stats.num_steps++;
    publish_stats(e);
    return collect_outputs(e, outs, num_outs, err);
}
