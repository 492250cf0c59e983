/* main.c — bin/tram: one binary, one subcommand per job (like `git commit`),
 * every one of them in the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base.h"
#include "server/cli/commands.h"
#include "server/cli/defaults.h"
#include "engine/gpu.h"

static const tram_command commands[] = {
    {.name = "generate", .summary = "generate text from a prompt (or a JSONL batch)",
     .run = tram_cmd_generate, .usage = tram_cmd_generate_usage},
    {.name = "info", .summary = "show a model's architecture, sizes and tensor types",
     .run = tram_cmd_info, .usage = tram_cmd_info_usage},
    {.name = "tokenize", .summary = "print the token ids and pieces of a text",
     .run = tram_cmd_tokenize, .usage = tram_cmd_tokenize_usage},
    {.name = "chat-template", .summary = "print the prompt a model's chat template makes of messages",
     .run = tram_cmd_chat_template, .usage = tram_cmd_chat_template_usage},
    {.name = "convert", .summary = "write a GGUF model as a Hugging Face directory (safetensors)",
     .run = tram_cmd_convert, .usage = tram_cmd_convert_usage},
    {.name = "serve", .summary = "serve the OpenAI-compatible HTTP API",
     .run = tram_cmd_serve, .usage = tram_cmd_serve_usage},
    {.name = "bench", .summary = "benchmarks: offline throughput, or a server under load",
     .group = &tram_bench_commands},
    {.name = "perplexity", .summary = "perplexity over a text; KL and top-1 agreement with another model",
     .run = tram_cmd_perplexity, .usage = tram_cmd_perplexity_usage},
    {.name = "quantize", .summary = "write a W8A8 (int8) GGUF, with SmoothQuant calibrated on a text",
     .run = tram_cmd_quantize, .usage = tram_cmd_quantize_usage},
};

static const tram_command_group tram = {
    .name = "tram", .noun = "command", .commands = commands, .n_commands = TRAM_ARRAY_LEN(commands)};

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
        if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda") && tram_gpu_probe(&err)) {
            fprintf(stderr, "tram: %s\n", err.msg);
            return 1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    set_openmp_spin(argv);
    if (gpu_missing(argc, argv))
        return TRAM_EXIT_NO_GPU;
    return tram_command_dispatch(&tram, argc, argv);
}
