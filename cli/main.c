/* main.c — bin/tram: one binary, one subcommand per job (like `git commit`),
 * every one of them in the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/base.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "engine/cuda_runner.h"

/* In the order `tram --help` lists them. */
static const tram_command *const commands[] = {
    &tram_cmd_generate, &tram_cmd_embed, &tram_cmd_info,  &tram_cmd_tokenize,   &tram_cmd_chat_template, &tram_cmd_convert,
    &tram_cmd_serve,    &tram_cmd_bench, &tram_cmd_perplexity, &tram_cmd_quantize,
    &tram_cmd_fields,    &tram_cmd_validate_schema,
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
        if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda") && tram_cuda_runner_probe(&err)) {
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
