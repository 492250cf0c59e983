/* tram.h — the public engine API: requests in, per-step outputs out.
 *
 * One engine runs one model with a paged KV cache, a continuous-batching
 * scheduler and a sampler.  Every call to tram_engine_step() schedules the
 * waiting and running sequences under a token budget, runs one forward pass
 * over the unified batch, samples, applies the stop rules and returns what
 * each request produced in that step.
 *
 * THREADING CONTRACT
 *   - One thread, the engine thread, owns a tram_engine: tram_engine_create,
 *     _add_request, _abort, _step, _has_unfinished and _destroy are called from
 *     that thread only, never concurrently.  Nothing in the engine takes locks
 *     or blocks except the forward pass itself.  With tensor_parallel_size
 *     N > 1 the engine starts N - 1 rank threads of its own (engine/ranks.h),
 *     which only run the passes the engine thread hands them, and wait.
 *   - Callable from ANY thread, at any time between create and destroy:
 *       tram_engine_validate_params, tram_engine_stats_get, tram_engine_model_config,
 *       tram_engine_tokenizer, tram_engine_max_model_len, tram_engine_model_name,
 *       tram_engine_spec_tokens,
 *       tram_sampling_params_init, tram_finish_reason_name.
 *     These read only what is immutable after create, or
 *     (tram_engine_stats_get) a snapshot that the engine thread publishes under
 *     a mutex at the end of each step.  The tokenizer is immutable after create; see
 *     tokenizer/tokenizer.h for which of its functions are thread-safe.
 *   - A server therefore parses and validates on its I/O thread, hands
 *     requests and aborts to the engine thread through its own queue, and gets
 *     outputs back from the engine thread after each step.
 *
 * MEMORY
 *   - add_request copies everything it is given (prompt, stop strings, logit
 *     bias, stop token ids) and takes a reference to the grammar; the
 *     caller's buffers may be freed, and its grammar reference released, on
 *     return.
 *   - The outputs returned by tram_engine_step (and every pointer inside them)
 *     belong to the engine and stay valid until the next call to
 *     tram_engine_step or tram_engine_destroy (adding or aborting requests
 *     while walking them is fine).
 *
 * REQUEST LIFETIME
 *   - Each sample of a request (0 <= sample_index < n) is reported separately.
 *     A sample gets at most one output per step, and exactly one output with a
 *     finish reason other than TRAM_FINISH_NONE, after which it never appears
 *     again.  A request is finished when all its n samples are.
 *   - tram_engine_abort frees the request's KV blocks at once; the next step
 *     then reports each unfinished sample once with TRAM_FINISH_ABORT and no
 *     new tokens.
 *
 * Errors follow kernels/base.h: -1 and a message in tram_error. */
#ifndef TRAM_ENGINE_H
#define TRAM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "grammar/grammar.h"
#include "kernels/sampling_params.h"
#include "kernels/variants.h"
#include "models/model.h"

struct tram_tokenizer;
typedef struct tram_engine tram_engine;

/* ------------------------------------------------------------ configuration */

typedef enum {
    TRAM_POLICY_FCFS = 0,      /* arrival order */
    TRAM_POLICY_PRIORITY = 1,  /* smaller priority value first, then arrival order */
} tram_sched_policy;

/* Most tokens one speculation step may propose per sequence. */
#define TRAM_SPEC_MAX_TOKENS 16

/* --speculative-config, as vLLM spells it (engine/spec.h). */
typedef struct {
    char method[16];              /* "" = off; "ngram": prompt lookup; "self": the quantized
                                     self-draft; "draft_model": a separate draft model */
    char model[256];              /* draft_model's file or directory (with --load-format dummy:
                                     the preset whose shape it has) */
    int num_speculative_tokens;   /* the most drafts a sequence verifies a step, <= TRAM_SPEC_MAX_TOKENS (8) */
    int prompt_lookup_min;        /* shortest n-gram matched (1) */
    int prompt_lookup_max;        /* longest, tried first (4) */
    int disable_by_batch_size;    /* no speculation in a step with more decoding sequences than
                                     this; 0 = the default, 32 (docs/performance.md) */
    int always_verify;            /* 1: verify every proposal, without the automatic rule that
                                     weighs acceptance against the step's cost (0) */
} tram_spec_config;

typedef struct {
    int block_size;               /* tokens per KV block (16) */
    size_t kv_cache_memory;       /* bytes of KV cache on the CPU backend (2 GiB) */
    double gpu_memory_utilization;/* fraction of GPU memory for weights + KV (0.9) */
    int num_kv_blocks;            /* > 0: exact pool size, overriding both budgets (tests) */
    int max_num_batched_tokens;   /* token budget of one step (2048) */
    int max_num_seqs;             /* sequences in one step (256) */
    int max_model_len;            /* prompt + completion; 0 = the model's context length */
    int enable_prefix_caching;    /* 1 */
    tram_sched_policy policy;     /* TRAM_POLICY_FCFS */
    char device[16];              /* "cpu" or "cuda" ("cpu") */
    int num_threads;              /* CPU backend threads; 0 = all cores */
    uint64_t seed;                /* seeds requests that bring no seed of their own (0) */
    char quantization[8];         /* "none", "int8" or "fp8": W8A8 weights quantized at load ("none") */
    char kv_cache_dtype[8];       /* "auto": K/V as activations; "int8" or "fp8" (E4M3): one byte a
                                     value and a scale per token and KV head, on either
                                     backend (kernels/kv_format.h) ("auto") */
    char load_format[8];          /* "auto": weights from the model path; "dummy": random weights
                                     of `preset` (models/dummy.h), and the model path only gives
                                     the tokenizer ("auto") */
    char weight_format[8];        /* "f32": every matrix dequantized at load, exact ("f32");
                                     "native": matrices the file stores as GGUF Q8_0/Q4_0/Q4_1
                                     blocks run as stored where the backend can (the CPU), against
                                     activations rounded to int8 per 32 values, as llama.cpp does */
    char preset[256];             /* dummy weights' shape: a name in models/presets or a .json */
    char tokenizer[512];          /* tokenizer file or directory; "" = the model path's own */
    int enforce_eager;            /* CUDA: run decode steps op by op, no CUDA graphs (0) */
    int tensor_parallel_size;     /* ranks, one thread each (GPUs on CUDA): heads and FFN split
                                     among them (engine/ranks.h) (1) */
    tram_kernel_variants kernels; /* CUDA: kernel variant per family (kernels/variants.h); zeroed:
                                     every family variant 1 */
    tram_spec_config spec;        /* speculative decoding (off) */
    tram_pooling pooling;         /* embeddings' pooling (--pooling); UNSET: the model's own, and
                                     last-token pooling when it names none */
    int max_loras;                /* LoRA slots: the most distinct adapters in one step; 0: no
                                     adapters (0) */
    int max_lora_rank;            /* the largest adapter rank a slot takes (16) */
    int max_cpu_loras;            /* the most adapters registered, each held in host memory; 0:
                                     max_loras (0) */
} tram_engine_config;

void tram_engine_config_init(tram_engine_config *c);

/* Checks c->tensor_parallel_size against the model at model_path (or the
 * dummy preset): the heads and FFN must split evenly, and on CUDA as many
 * GPUs must exist.  -1 and one sentence on failure; 0 also when the model
 * cannot be opened (create reports that).  create checks the same. */
int tram_engine_check_parallel(const tram_engine_config *c, const char *model_path, tram_error *err);

/* Opens the model file (GGUF or HF directory) and its tokenizer, creates the
 * backend named by c->device and the model with a KV pool sized from the
 * budget.  Fails with a clear message when the pool cannot hold one sequence of
 * max_model_len tokens. */
int tram_engine_create(tram_engine **out, const tram_engine_config *c, const char *model_path,
                       tram_error *err);
void tram_engine_destroy(tram_engine *e);

/* ------------------------------------------------------------ sampling */

/* tram_logit_bias comes from kernels/sampling_params.h, shared with the samplers. */
typedef struct {
    int n;                        /* samples per request (1) */
    float temperature;            /* 0 = greedy (1.0) */
    float top_p;                  /* in (0, 1] (1.0) */
    int top_k;                    /* 0 = off (0) */
    float min_p;                  /* in [0, 1] (0) */
    float repetition_penalty;     /* > 0; 1 = off; over prompt and output tokens (1.0) */
    float presence_penalty;       /* in [-2, 2]; over output tokens (0) */
    float frequency_penalty;      /* in [-2, 2]; over output tokens (0) */
    const tram_logit_bias *logit_bias;
    int num_logit_bias;
    int has_seed;                 /* 0: the engine picks a seed */
    uint64_t seed;                /* same seed, same tokens, whatever else is batched */
    int max_tokens;               /* completion tokens; 0 = until max_model_len (16) */
    int min_tokens;               /* EOS, stop tokens and stop strings count only after this many
                                     tokens (0) */
    int ignore_eos;               /* 0 */
    const char *const *stop;      /* stop strings: matched on the text, never emitted */
    int num_stop;
    const int32_t *stop_token_ids;/* finish with reason "stop"; the token is returned */
    int num_stop_token_ids;
    int logprobs;                 /* -1 = off; k >= 0: chosen token + k top alternatives (-1) */
    int prompt_logprobs;          /* -1 = off; k >= 0: per prompt token + k alternatives (-1) */
    int skip_special_tokens;      /* leave special tokens out of the text (1) */
    const tram_grammar *grammar;  /* structured output: only tokens the grammar allows are drawn,
                                     and the sample finishes with reason "stop" once the grammar is
                                     complete; compiled against this engine's tokenizer
                                     (grammar/grammar.h); add_request retains it (NULL: free) */
} tram_sampling_params;

#define TRAM_MAX_LOGPROBS 20      /* most alternatives for logprobs / prompt_logprobs */
#define TRAM_MAX_N 128            /* most samples per request */

void tram_sampling_params_init(tram_sampling_params *p);

/* Checks every field against its range (and token ids against the
 * vocabulary).  On failure returns -1, writes a message naming the parameter
 * and the allowed range, and sets *param (if not NULL) to the parameter's
 * OpenAI name, a static string ("temperature", "top_p", "n", "stop", ...). */
int tram_engine_validate_params(const tram_engine *e, const tram_sampling_params *p,
                                const char **param, tram_error *err);

/* ------------------------------------------------------------ requests */

typedef struct {
    const char *text;             /* tokenized by the model's tokenizer, or NULL */
    const int32_t *token_ids;     /* used when text is NULL */
    int num_tokens;
    int skip_bos;                 /* text only: never prepend BOS, e.g. when a chat template
                                     wrote it already (HF's add_special_tokens=False) */
    const char *lora;             /* the LoRA adapter (tram_engine_add_lora's name) the request
                                     runs with; NULL: the base model alone */
} tram_prompt;

/* Queues a request.  request_id is chosen by the caller and must be unique
 * among unfinished requests (a pointer cast to uintptr_t is fine).  priority
 * matters under TRAM_POLICY_PRIORITY: smaller values are served first and
 * preempted last.  Fails (and queues nothing) on invalid params, an empty
 * prompt, a token id outside the vocabulary, a duplicate id, or a prompt that
 * can never fit (the message gives the prompt length and the limit). */
int tram_engine_add_request(tram_engine *e, uint64_t request_id, const tram_prompt *prompt,
                            const tram_sampling_params *p, int priority, tram_error *err);

/* An embedding request: the prompt is prefilled (batched with everything
 * else, through the prefix cache when the pooling allows) and its final
 * hidden states pooled as tram_engine_pooling says instead of sampled; the
 * request's one output, with finish reason "stop", carries the vector. */
typedef struct {
    int dimensions;               /* keep the first this many values, then normalize (Matryoshka
                                     truncation: only for a model that defines it); 0: all */
} tram_embed_params;

/* Any thread: -1 with a message (and *param = "dimensions") when p cannot be
 * honoured for this model. */
int tram_engine_check_embed(const tram_engine *e, const tram_embed_params *p, const char **param,
                            tram_error *err);

/* Queues an embedding request, as add_request queues a generation: the same
 * ids, priorities and aborts.  The prompt may fill the whole context. */
int tram_engine_add_embedding(tram_engine *e, uint64_t request_id, const tram_prompt *prompt,
                              const tram_embed_params *p, int priority, tram_error *err);

/* Any thread: the pooling embeddings get (never UNSET) and whether they are
 * L2-normalized. */
void tram_engine_pooling(const tram_engine *e, tram_pooling *pooling, int *normalize);
/* "mean", "cls", "last", or NULL for UNSET. */
const char *tram_pooling_name(tram_pooling p);

/* Aborts an unfinished request: frees its blocks now; the next step reports
 * its samples with TRAM_FINISH_ABORT.  Returns 0, or -1 if the id is unknown
 * or already finished. */
int tram_engine_abort(tram_engine *e, uint64_t request_id);

/* ------------------------------------------------------------ LoRA adapters */

/* The registry of adapters has a lock of its own: these three are callable
 * from any thread, on the const engine a server holds.
 *
 * Reads the PEFT adapter directory at path (models/lora.h),
 * checks it against the model and registers it as `name`, which requests
 * then name in tram_prompt.lora.  Fails naming the problem: a bad adapter, a
 * duplicate name, more than max_cpu_loras adapters, no slots (max_loras 0). */
int tram_engine_add_lora(const tram_engine *e, const char *name, const char *path, tram_error *err);
/* Unregisters it; refused (-1, saying so) while unfinished
 * requests use it: the caller retries once they are done. */
int tram_engine_remove_lora(const tram_engine *e, const char *name, tram_error *err);
#define TRAM_LORA_NAME_MAX 128
/* The registered adapters' names (at most cap); returns how many. */
int tram_engine_lora_names(const tram_engine *e, char (*names)[TRAM_LORA_NAME_MAX], int cap);

/* ------------------------------------------------------------ outputs */

typedef enum {
    TRAM_FINISH_NONE = 0,         /* still running */
    TRAM_FINISH_STOP = 1,         /* EOS, a stop token or a stop string */
    TRAM_FINISH_LENGTH = 2,       /* max_tokens or max_model_len */
    TRAM_FINISH_ABORT = 3,
    TRAM_FINISH_ERROR = 4,        /* it cannot go on: tram_output.error says why */
} tram_finish_reason;

/* "stop", "length", "abort", "error", or NULL for TRAM_FINISH_NONE. */
const char *tram_finish_reason_name(tram_finish_reason r);

#define TRAM_TOKENS_BANNED "grammar_tokens_banned"

/* The logprob records tram_logprob_entry and tram_token_logprob come from
 * kernels/sampling_params.h: the samplers fill them. */

typedef struct {
    uint64_t request_id;
    int sample_index;             /* 0 .. n-1 */
    const int32_t *token_ids;     /* tokens generated in this step */
    int num_tokens;
    const char *text;             /* new text, NUL-terminated; never part of a stop string */
    size_t text_len;
    const tram_logprob_entry *logprobs;         /* [num_tokens], NULL unless asked */
    const tram_logprob_entry *prompt_logprobs;  /* [prompt_tokens] on a sample's first
                                                   output when asked, else NULL */
    tram_finish_reason finish_reason;
    const char *stop_string;      /* the stop string that finished it, else NULL */
    const char *error;            /* TRAM_FINISH_ERROR's cause, an API error code: the grammar
                                     allows no token (grammar.h's TRAM_GRAMMAR_DEAD_END,
                                     TRAM_GRAMMAR_BOUND), or every one it allows is held back by
                                     the sampling (min_tokens: TRAM_TOKENS_BANNED); else NULL */
    int prompt_tokens;
    int completion_tokens;        /* generated so far by this sample */
    int cached_tokens;            /* prompt tokens served from the prefix cache */
    double queue_time;            /* seconds from add_request to the request's first step */
    const float *embedding;       /* an embedding request's final output: [embedding_dim] */
    int embedding_dim;
} tram_output;

/* Runs one step.  *outs receives the outputs of this step (possibly none, e.g.
 * while a long prompt is being prefilled in chunks).  Returns -1 only when the
 * forward pass fails; the engine is then unusable except for destroy. */
int tram_engine_step(tram_engine *e, const tram_output **outs, int *num_outs, tram_error *err);

/* 1 while any request is waiting or running, or has an abort still to report. */
int tram_engine_has_unfinished(const tram_engine *e);

/* ------------------------------------------------------------ introspection */

typedef struct {
    int num_running;              /* requests with a sequence in the running batch */
    int num_waiting;              /* requests with every sequence waiting */
    int num_blocks_total;
    int num_blocks_free;          /* unused, including cached blocks nobody owns */
    int num_blocks_cached;        /* blocks with a prefix-cache hash */
    double kv_usage;              /* 1 - free / total */
    uint64_t prefix_cache_queries;/* prompt tokens looked up in the prefix cache */
    uint64_t prefix_cache_hits;   /* of those, tokens found */
    uint64_t num_preemptions;
    uint64_t prompt_tokens_total;     /* prompt tokens of admitted requests */
    uint64_t computed_prefill_tokens; /* prompt (and recomputed) tokens run through the model */
    uint64_t generation_tokens_total; /* tokens sampled */
    uint64_t requests_finished[5];    /* indexed by tram_finish_reason */
    uint64_t num_steps;
    uint64_t forward_tokens_total;    /* tokens run through the model: prefill, recompute, decode */
    uint64_t graph_steps;             /* CUDA: steps replayed from a CUDA graph */
    uint64_t device_samples;          /* CUDA: tokens drawn on the device (the rest on the host) */
    uint64_t device_verified_tokens;  /* CUDA: device_samples drawn verifying drafts (tram_cuda_verify) */
    /* speculative decoding, in vLLM's names */
    uint64_t spec_decode_num_drafts;          /* verifications: sequence-steps with drafts */
    uint64_t spec_decode_num_draft_tokens;    /* tokens proposed */
    uint64_t spec_decode_num_accepted_tokens; /* of those, accepted */
    uint64_t spec_decode_num_accepted_tokens_per_pos[TRAM_SPEC_MAX_TOKENS]; /* accepted at draft
                                                 position i (0 = the first guess) */
    uint64_t spec_decode_off_steps;   /* steps with a batch too large to speculate */
    uint64_t spec_decode_num_declined_tokens; /* proposed, but not worth verifying (the rule) */
    int max_loras;                    /* the LoRA slots */
    char running_loras[512];          /* adapters of running requests, comma-separated */
    char waiting_loras[512];          /* adapters of requests with every sequence waiting */
} tram_engine_stats;

/* Any thread: the snapshot published at the end of the last step (or create). */
void tram_engine_stats_get(const tram_engine *e, tram_engine_stats *s);

const tram_model_config *tram_engine_model_config(const tram_engine *e);
const struct tram_tokenizer *tram_engine_tokenizer(const tram_engine *e);
int tram_engine_max_model_len(const tram_engine *e);
/* Tokens speculative decoding proposes per step (num_speculative_tokens),
 * 0 when it is off. */
int tram_engine_spec_tokens(const tram_engine *e);
/* The file name of the model without directory or extension. */
const char *tram_engine_model_name(const tram_engine *e);

#endif
