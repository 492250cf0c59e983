/* main.c — bin/tram: one binary, one subcommand per job (like `git commit`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/cli/cli.h"
#include "engine/cuda_runner.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} tram_command;

static const tram_command commands[] = {
    {"generate", tram_cmd_generate, "generate text from a prompt (or a JSONL batch)"},
    {"info", tram_cmd_info, "show a model's architecture, sizes and tensor types"},
    {"tokenize", tram_cmd_tokenize, "print the token ids and pieces of a text"},
    {"chat-template", tram_cmd_chat_template, "print the prompt a model's chat template makes of messages"},
    {"convert", tram_cmd_convert, "write a GGUF model as a Hugging Face directory (safetensors)"},
    {"serve", tram_cmd_serve, "serve the OpenAI-compatible HTTP API"},
    {"bench", tram_cmd_bench, "benchmarks: offline throughput, or a server under load"},
    {"perplexity", tram_cmd_perplexity, "perplexity over a text; KL and top-1 agreement with another model"},
    {"quantize", tram_cmd_quantize, "write a W8A8 (int8) GGUF, with SmoothQuant calibrated on a text"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tram <command> [options]    (tram <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].help);
}

/* How long OpenMP workers spin between parallel regions.  A forward pass
 * opens ~200 of them per token: sleeping workers (passive) pay a futex wake
 * each time, decoding 2.5x slower on an idle machine, while workers spinning
 * for long (libgomp's default) starve everything else on a busy one, 2x
 * slower again.  A short spin wins both (bench/NOTES.md).  libgomp reads the
 * setting once, at start-up, so set it and execute ourselves again; an
 * explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT from the user wins. */
static void set_openmp_spin(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    setenv("GOMP_SPINCOUNT", TRAM_GOMP_SPINCOUNT, 1);
    execv("/proc/self/exe", argv); /* returns only on failure: keep the default */
}

/* `--device cuda` without a usable GPU: one sentence and exit status 2,
 * before any work starts. */
static int gpu_missing(int argc, char **argv)
{
    tram_error err;
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda") && tram_cuda_runner_probe(&err)) {
            fprintf(stderr, "tram: %s\n", err.msg);
            return 1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    set_openmp_spin(argv);
    if (argc < 2) {
        usage(stderr);
        return TRAM_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (gpu_missing(argc, argv))
        return TRAM_EXIT_NO_GPU;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tram: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return TRAM_EXIT_USAGE;
}
