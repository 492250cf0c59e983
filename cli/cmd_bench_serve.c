/* cmd_bench_serve.c — `tram bench serve`: runs bench/bench_serve.py, the
 * asyncio client that measures any OpenAI-compatible server (the script
 * needs only python3's standard library). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"

/* bench/bench_serve.py next to the binary's directory (bin/../bench), else
 * under the current directory. */
static void script_path(char *out, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, size, "%s/../bench/bench_serve.py", exe);
            if (access(out, R_OK) == 0)
                return;
        }
    }
    snprintf(out, size, "bench/bench_serve.py");
}

static int bench_serve(int argc, char **argv)
{
    char script[PATH_MAX + 32];
    script_path(script, sizeof(script));
    char **args = calloc((size_t)argc + 2, sizeof(*args));
    if (!args)
        return 1;
    args[0] = "python3";
    args[1] = script;
    for (int i = 1; i < argc; i++)
        args[i + 1] = argv[i];
    execvp("python3", args);
    fprintf(stderr, "tram: cannot run python3 %s: is python3 installed?\n", script);
    free(args);
    return 1;
}

const tram_command tram_cmd_bench_serve = {
    .name = "serve", .run = bench_serve,
    .summary = "an OpenAI server under Poisson arrivals"};
