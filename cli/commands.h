/* commands.h — the subcommands of bin/tram, one file each
 * (cli/cmd_<name>.c), listed in the command table of cli/main.c
 * (the benchmarks of `tram bench` in cmd_bench.c's).
 *
 * The convention every command follows: `tram X -h` or `--help` (anywhere on
 * the line) prints X's usage to stdout and exits 0, before X's run is called;
 * run returns the process exit status, and when it returns TRAM_EXIT_USAGE
 * (after saying what is wrong: an unknown flag, a bad value, a missing
 * argument), the usage follows on stderr. */
#ifndef TRAM_CLI_COMMANDS_H
#define TRAM_CLI_COMMANDS_H

#include <stdio.h>

#include "kernels/base.h"

#define TRAM_EXIT_USAGE 2
/* A run that refused its input (not its flags) before doing anything: exit
 * status 2 as for a usage error, after saying what is wrong, without the usage. */
#define TRAM_EXIT_INPUT (256 + TRAM_EXIT_USAGE)
#define TRAM_EXIT_NO_GPU 2   /* --device cuda without a usable GPU (cli/main.c) */

typedef struct tram_command_group tram_command_group;

/* What a command file exports: `const tram_command tram_cmd_<name>`. */
typedef struct {
    const char *name;
    const char *summary;                /* its line in the group's usage */
    int (*run)(int argc, char **argv);  /* argv[0] is the command's name */
    void (*usage)(FILE *out);           /* NULL: run answers --help itself */
    const tram_command_group *group;    /* instead of run and usage: subcommands */
} tram_command;

/* Commands under one name: bin/tram's, or `tram bench`'s. */
struct tram_command_group {
    const char *name;                   /* "tram", "tram bench" */
    const char *noun;                   /* what a member is called: "command", "benchmark" */
    const tram_command *const *commands;
    int n_commands;
};

/* Runs the member argv[1] names with the arguments after it; argv[0] is the
 * group's last word. */
int tram_command_dispatch(const tram_command_group *g, int argc, char **argv);

/* A run's exit status: 0 when it succeeded, else 1 after printing
 * "<who>: <what went wrong>". */
int tram_exit_status(const char *who, int failed, const tram_error *err);

extern const tram_command tram_cmd_generate, tram_cmd_embed, tram_cmd_info, tram_cmd_tokenize, tram_cmd_chat_template,
    tram_cmd_convert, tram_cmd_serve, tram_cmd_bench, tram_cmd_perplexity, tram_cmd_quantize,
    tram_cmd_fields, tram_cmd_validate_schema;
/* the members of tram_cmd_bench */
extern const tram_command tram_cmd_bench_throughput, tram_cmd_bench_serve, tram_cmd_bench_roofline;

#endif
