/* engine_flags.c — the engine flags every subcommand that runs a model shares. */
#include <stdio.h>
#include <string.h>

#include "server/cli/cli.h"
#include "engine/tram.h"

void tram_engine_print_flags(FILE *out)
{
    fprintf(out,
            "engine flags:\n"
            "  --device cpu|cuda              backend (cpu)\n"
            "  -t, --threads N                CPU threads (all cores)\n"
            "  --block-size N                 tokens per KV block (16)\n"
            "  --kv-cache-memory SIZE         KV cache budget on the CPU, e.g. 2GiB (2GiB)\n"
            "  --gpu-memory-utilization F     GPU memory fraction for weights and KV (0.9)\n"
            "  --enforce-eager                CUDA: no CUDA graphs for decode steps (off)\n"
            "  --num-kv-blocks N              exact KV pool size, overriding the budgets\n"
            "  --max-num-batched-tokens N     token budget of one step (2048)\n"
            "  --max-num-seqs N               sequences in one step (256)\n"
            "  --max-model-len N              prompt + completion limit (the model's)\n"
            "  --enable-prefix-caching / --no-enable-prefix-caching   (on)\n"
            "  --scheduling-policy fcfs|priority                      (fcfs)\n"
            "  --seed N                       seed of requests without one (0)\n"
            "  --quantization none|int8       int8: W8A8 weights quantized at load (none)\n"
            "  --weight-format f32|native     native: Q8_0/Q4_0/Q4_1 matrices of a GGUF run as\n"
            "                                 stored on the CPU, activations rounded to int8 as\n"
            "                                 llama.cpp does (4x less memory, faster, not exact);\n"
            "                                 f32: dequantized at load, exact (f32)\n"
            "  --load-format auto|dummy       dummy: random weights of --preset's shape; the\n"
            "                                 model (-m) then only gives the tokenizer (auto)\n"
            "  --preset NAME                  models/presets/NAME.json, or a .json path\n"
            "  --tokenizer PATH               tokenizer .gguf or directory (the model's)\n");
}

static int int_flag(const char *flag, const char *v, long lo, long hi, int *out)
{
    long x;
    if (tram_cli_int(flag, v, lo, hi, &x))
        return -1;
    *out = (int)x;
    return 0;
}

static int parse_value(tram_engine_config *c, const char *f, const char *v)
{
    if (!strcmp(f, "--block-size"))
        return int_flag(f, v, 1, 1024, &c->block_size);
    if (!strcmp(f, "--num-kv-blocks"))
        return int_flag(f, v, 1, 1L << 30, &c->num_kv_blocks);
    if (!strcmp(f, "--max-num-batched-tokens"))
        return int_flag(f, v, 1, 1 << 20, &c->max_num_batched_tokens);
    if (!strcmp(f, "--max-num-seqs"))
        return int_flag(f, v, 1, 1 << 16, &c->max_num_seqs);
    if (!strcmp(f, "--max-model-len"))
        return int_flag(f, v, 2, 1 << 24, &c->max_model_len);
    if (!strcmp(f, "--threads") || !strcmp(f, "-t"))
        return int_flag(f, v, 1, 4096, &c->num_threads);
    if (!strcmp(f, "--seed")) {
        long x;
        if (tram_cli_int(f, v, 0, 0x7fffffffffffffffL, &x))
            return -1;
        c->seed = (uint64_t)x;
        return 0;
    }
    if (!strcmp(f, "--gpu-memory-utilization")) {
        double x;
        if (tram_cli_float(f, v, 0.01, 1.0, &x))
            return -1;
        c->gpu_memory_utilization = x;
        return 0;
    }
    if (!strcmp(f, "--kv-cache-memory")) {
        if (tram_parse_size(v, &c->kv_cache_memory) || c->kv_cache_memory == 0) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected a size like 2GiB)\n", f, v);
            return -1;
        }
        return 0;
    }
    if (!strcmp(f, "--scheduling-policy")) {
        if (strcmp(v, "fcfs") && strcmp(v, "priority")) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected fcfs or priority)\n", f, v);
            return -1;
        }
        c->policy = strcmp(v, "fcfs") ? TRAM_POLICY_PRIORITY : TRAM_POLICY_FCFS;
        return 0;
    }
    if (!strcmp(f, "--quantization")) {
        if (strcmp(v, "none") && strcmp(v, "int8")) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected none or int8)\n", f, v);
            return -1;
        }
        snprintf(c->quantization, sizeof(c->quantization), "%s", v);
        return 0;
    }
    if (!strcmp(f, "--weight-format")) {
        if (strcmp(v, "native") && strcmp(v, "f32")) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected f32 or native)\n", f, v);
            return -1;
        }
        snprintf(c->weight_format, sizeof(c->weight_format), "%s", v);
        return 0;
    }
    if (!strcmp(f, "--load-format")) {
        if (strcmp(v, "auto") && strcmp(v, "dummy")) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected auto or dummy)\n", f, v);
            return -1;
        }
        snprintf(c->load_format, sizeof(c->load_format), "%s", v);
        return 0;
    }
    if (!strcmp(f, "--preset") || !strcmp(f, "--tokenizer")) {
        char *dst = f[2] == 'p' ? c->preset : c->tokenizer;
        size_t cap = f[2] == 'p' ? sizeof(c->preset) : sizeof(c->tokenizer);
        if (!*v || strlen(v) >= cap) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (empty, or longer than %zu)\n", f, v, cap - 1);
            return -1;
        }
        memcpy(dst, v, strlen(v) + 1);
        return 0;
    }
    if (strcmp(v, "cpu") && strcmp(v, "cuda")) { /* --device */
        fprintf(stderr, "tram: invalid value for %s: '%s' (expected cpu or cuda)\n", f, v);
        return -1;
    }
    snprintf(c->device, sizeof(c->device), "%s", v);
    return 0;
}

int tram_engine_parse_flag(tram_engine_config *c, int argc, char **argv, int *i)
{
    static const char *const valued[] = {
        "--block-size", "--num-kv-blocks", "--max-num-batched-tokens", "--max-num-seqs",
        "--max-model-len", "--threads", "-t", "--seed", "--gpu-memory-utilization",
        "--kv-cache-memory", "--scheduling-policy", "--device", "--quantization",
        "--load-format", "--preset", "--tokenizer", "--weight-format",
    };
    const char *f = argv[*i];
    if (!strcmp(f, "--enforce-eager")) {
        c->enforce_eager = 1;
        (*i)++;
        return 1;
    }
    if (!strcmp(f, "--enable-prefix-caching") || !strcmp(f, "--no-enable-prefix-caching")) {
        c->enable_prefix_caching = f[2] != 'n';
        (*i)++;
        return 1;
    }
    for (size_t k = 0; k < TRAM_ARRAY_LEN(valued); k++) {
        if (strcmp(f, valued[k]))
            continue;
        if (*i + 1 >= argc) {
            fprintf(stderr, "tram: %s needs a value\n", f);
            return -1;
        }
        if (parse_value(c, f, argv[*i + 1]))
            return -1;
        *i += 2;
        return 1;
    }
    return 0;
}
