/* engine_flags.c — the engine flags every subcommand that runs a model shares. */
#include "cli/engine_flags.h"

#include "engine/spec.h"
#include "server/server.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void tram_engine_print_flags(FILE *out)
{
    fprintf(out,
            "engine flags:\n"
            "  --device cpu|cuda              backend (cpu)\n"
            "  -t, --threads N                CPU threads (the usable CPUs: affinity, cgroup quota;\n"
            "                                 tensor-parallel ranks share them)\n"
            "  -tp, --tensor-parallel-size N  ranks, one thread each (one GPU each on cuda), the\n"
            "                                 model's heads and FFN split among them (1)\n"
            "  --block-size N                 tokens per KV block (16)\n"
            "  --kv-cache-memory SIZE         KV cache budget on the CPU, e.g. 2GiB (2GiB)\n"
            "  --kv-cache-dtype auto|int8|fp8 K/V stored as one byte a value, a scale per token and\n"
            "                                 KV head (about 4x the tokens of auto on the CPU, 2x on\n"
            "                                 CUDA) (auto)\n"
            "  --gpu-memory-utilization F     GPU memory fraction for weights and KV (0.9)\n"
            "  --enforce-eager                CUDA: no CUDA graphs for decode steps (off)\n"
            "  --cuda-kernels SPEC            CUDA: kernel variants, e.g. decode=2,gemm=2 or all=2;\n"
            "                                 families decode, prefill, rope-kv, gemm, sampler (all=1)\n"
            "  --num-kv-blocks N              exact KV pool size, overriding the budgets\n"
            "  --max-num-batched-tokens N     token budget of one step (2048)\n"
            "  --max-num-seqs N               sequences in one step (256)\n"
            "  --max-model-len N              prompt + completion limit (the model's)\n"
            "  --enable-prefix-caching / --no-enable-prefix-caching   (on)\n"
            "  --scheduling-policy fcfs|priority                      (fcfs)\n"
            "  --seed N                       seed of requests without one (0)\n"
            "  --quantization none|int8|fp8   W8A8 weights quantized at load: int8, or FP8 (E4M3,\n"
            "                                 per row, as tram quantize --format fp8) (none)\n"
            "  --weight-format f32|native     native: Q8_0/Q4_0/Q4_1 matrices of a GGUF run as\n"
            "                                 stored on the CPU, activations rounded to int8 as\n"
            "                                 llama.cpp does (4x less memory, faster, not exact);\n"
            "                                 f32: dequantized at load, exact (f32)\n"
            "  --load-format auto|dummy       dummy: random weights of --preset's shape; the\n"
            "                                 model (-m) then only gives the tokenizer (auto)\n"
            "  --preset NAME                  models/presets/NAME.json, or a .json path\n"
            "  --tokenizer PATH               tokenizer .gguf or directory (the model's)\n"
            "  --pooling model|mean|cls|last  embeddings' pooling: the model's metadata, else\n"
            "                                 the last token's (model)\n"
            "  --speculative-config JSON      speculative decoding, as vLLM spells it:\n"
            "                                 {\"method\": \"ngram\"|\"self\"|\"draft_model\", \"model\": PATH,\n"
            "                                 \"num_speculative_tokens\": 8,\n"
            "                                 \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 4,\n"
            "                                 \"disable_by_batch_size\": 32} (off)\n"
            "  --max-loras N                  LoRA slots: distinct adapters in one step (0; 1 with\n"
            "                                 --lora-modules)\n"
            "  --max-lora-rank N              the largest adapter rank (16)\n"
            "  --max-cpu-loras N              adapters held in host memory (--max-loras)\n");
}

static int policy_flag(const char *flag, const char *value, void *field)
{
    static const char *const names[] = {"fcfs", "priority", NULL};
    int i = tram_flag_choice(flag, value, names);
    if (i < 0)
        return -1;
    *(tram_sched_policy *)field = i ? TRAM_POLICY_PRIORITY : TRAM_POLICY_FCFS;
    return 0;
}

/* the names index tram_pooling: "model" is UNSET */
static int pooling_flag(const char *flag, const char *value, void *field)
{
    static const char *const names[] = {"model", "mean", "cls", "last", NULL};
    int i = tram_flag_choice(flag, value, names);
    if (i < 0)
        return -1;
    *(tram_pooling *)field = (tram_pooling)i;
    return 0;
}

/* --cuda-kernels: checked here, so a variant that does not exist is a usage error */
static int kernels_flag(const char *flag, const char *value, void *field)
{
    tram_error err = {{0}};
    if (!tram_kernel_variants_parse(value, field, &err))
        return 0;
    fprintf(stderr, "tram: invalid value for %s: %s\n", flag, err.msg);
    return -1;
}

static int is_lora_module(const char *item) { return strchr(item, '=') && *item != '='; }

int tram_lora_modules_flag(const char *flag, const char *value, void *field)
{
    return tram_flag_append_list(flag, value, field, TRAM_MAX_LORA_MODULES, "NAME=PATH adapters separated by commas",
                                 is_lora_module);
}

/* One integer member of --speculative-config. */
static int spec_int(const char *flag, json_t *v, const char *key, int *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 20) {
        fprintf(stderr, "tram: invalid value for %s: %s must be an integer in [0, %d]\n", flag, key,
                1 << 20);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int spec_member(const char *flag, const char *key, json_t *v, tram_spec_config *c)
{
    static const struct {
        const char *key;
        size_t off;
    } ints[] = {
        {"num_speculative_tokens", offsetof(tram_spec_config, num_speculative_tokens)},
        {"prompt_lookup_min", offsetof(tram_spec_config, prompt_lookup_min)},
        {"prompt_lookup_max", offsetof(tram_spec_config, prompt_lookup_max)},
        {"disable_by_batch_size", offsetof(tram_spec_config, disable_by_batch_size)},
        {"always_verify", offsetof(tram_spec_config, always_verify)},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(ints); i++)
        if (!strcmp(key, ints[i].key))
            return spec_int(flag, v, key, (int *)((char *)c + ints[i].off));
    static const struct {
        const char *key;
        size_t off, size;
    } strings[] = {
        {"method", offsetof(tram_spec_config, method), sizeof(c->method)},
        {"model", offsetof(tram_spec_config, model), sizeof(c->model)},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(strings); i++) {
        if (strcmp(key, strings[i].key))
            continue;
        if (json_is_string(v) && strlen(json_string_value(v)) < strings[i].size) {
            snprintf((char *)c + strings[i].off, strings[i].size, "%s", json_string_value(v));
            return 0;
        }
        fprintf(stderr, "tram: invalid value for %s: %s must be a string of fewer than %zu bytes\n", flag, key,
                strings[i].size);
        return -1;
    }
    fprintf(stderr, "tram: invalid value for %s: unknown key \"%s\" (known: method, model, "
                    "num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, "
                    "disable_by_batch_size, always_verify)\n", flag, key);
    return -1;
}

/* --speculative-config: a JSON object; what it asks is checked here, so that
 * an unknown key or method is a usage error naming it. */
static int spec_flag(const char *flag, const char *value, void *field)
{
    tram_spec_config *c = field;
    json_error_t jerr;
    json_t *root = json_loads(value, JSON_REJECT_DUPLICATES, &jerr), *v;
    const char *key;
    if (!json_is_object(root)) {
        fprintf(stderr, "tram: invalid value for %s: a JSON object is expected (%s)\n", flag,
                root ? "got another JSON value" : jerr.text);
        json_decref(root);
        return -1;
    }
    int rc = 0;
    json_object_foreach(root, key, v)
        if (!rc)
            rc = spec_member(flag, key, v, c);
    json_decref(root);
    if (rc)
        return -1;
    tram_error err = {{0}};
    if (!c->method[0])
        snprintf(err.msg, sizeof(err.msg), "it needs a \"method\"");
    else if (!tram_spec_config_check(c, &err))
        return 0;
    fprintf(stderr, "tram: invalid value for %s: %s\n", flag, err.msg);
    return -1;
}

#define FIELD(name) offsetof(tram_engine_config, name)
/* a char array of the config: the value copied in, if it fits */
#define BUFFER(name) .kind = TRAM_FLAG_BUFFER, .field = FIELD(name), .cap = sizeof(((tram_engine_config *)0)->name)

static const tram_flag engine_flags[] = {
    {.name = "--block-size", .kind = TRAM_FLAG_INT, .field = FIELD(block_size), .lo = 1, .hi = 1024},
    {.name = "--num-kv-blocks", .kind = TRAM_FLAG_INT, .field = FIELD(num_kv_blocks), .lo = 1, .hi = 1 << 30},
    {.name = "--max-num-batched-tokens", .kind = TRAM_FLAG_INT, .field = FIELD(max_num_batched_tokens), .lo = 1,
     .hi = 1 << 20},
    {.name = "--max-num-seqs", .kind = TRAM_FLAG_INT, .field = FIELD(max_num_seqs), .lo = 1, .hi = 1 << 16},
    {.name = "--max-model-len", .kind = TRAM_FLAG_INT, .field = FIELD(max_model_len), .lo = 2, .hi = 1 << 24},
    {.name = "--tensor-parallel-size", .alias = "-tp", .kind = TRAM_FLAG_INT, .field = FIELD(tensor_parallel_size),
     .lo = 1, .hi = 64},
    {.name = "--threads", .alias = "-t", .kind = TRAM_FLAG_INT, .field = FIELD(num_threads), .lo = 1, .hi = 4096},
    {.name = "--seed", .kind = TRAM_FLAG_SEED, .field = FIELD(seed)},
    {.name = "--gpu-memory-utilization", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(gpu_memory_utilization),
     .lo = 0.01, .hi = 1.0},
    {.name = "--kv-cache-memory", .kind = TRAM_FLAG_SIZE, .field = FIELD(kv_cache_memory),
     .expected = "a size like 2GiB"},
    {.name = "--scheduling-policy", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(policy), .parse = policy_flag},
    {.name = "--device", BUFFER(device), .choices = (const char *const[]){"cpu", "cuda", NULL}},
    {.name = "--quantization", BUFFER(quantization), .choices = (const char *const[]){"none", "int8", "fp8", NULL}},
    {.name = "--kv-cache-dtype", BUFFER(kv_cache_dtype), .choices = (const char *const[]){"auto", "int8", "fp8", NULL}},
    {.name = "--weight-format", BUFFER(weight_format), .choices = (const char *const[]){"f32", "native", NULL}},
    {.name = "--load-format", BUFFER(load_format), .choices = (const char *const[]){"auto", "dummy", NULL}},
    {.name = "--preset", BUFFER(preset)},
    {.name = "--tokenizer", BUFFER(tokenizer)},
    {.name = "--speculative-config", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(spec), .parse = spec_flag},
    {.name = "--pooling", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(pooling), .parse = pooling_flag},
    {.name = "--cuda-kernels", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(kernels), .parse = kernels_flag},
    {.name = "--enforce-eager", .kind = TRAM_FLAG_SET, .field = FIELD(enforce_eager)},
    {.name = "--max-loras", .kind = TRAM_FLAG_INT, .field = FIELD(max_loras), .lo = 1, .hi = 64},
    {.name = "--max-lora-rank", .kind = TRAM_FLAG_INT, .field = FIELD(max_lora_rank), .lo = 1, .hi = 1 << 16},
    {.name = "--max-cpu-loras", .kind = TRAM_FLAG_INT, .field = FIELD(max_cpu_loras), .lo = 1, .hi = 1 << 16},
    {.name = "--enable-prefix-caching", .kind = TRAM_FLAG_SET, .field = FIELD(enable_prefix_caching)},
    {.name = "--no-enable-prefix-caching", .kind = TRAM_FLAG_CLEAR, .field = FIELD(enable_prefix_caching)},
};

tram_flag_table tram_engine_flags(tram_engine_config *c)
{
    return TRAM_FLAG_TABLE(engine_flags, c);
}

int tram_engine_flags_check(const tram_engine_config *c, const char *model_path)
{
    tram_error err;
    if (!tram_engine_check_parallel(c, model_path, &err))
        return 0;
    fprintf(stderr, "tram: --tensor-parallel-size: %s\n", err.msg);
    return -1;
}
