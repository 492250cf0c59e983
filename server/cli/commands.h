/* commands.h — the subcommands of bin/tram, one file each
 * (server/cli/cmd_<name>.c), listed in the one command table of
 * server/cli/main.c.
 *
 * The convention every command follows: `tram X -h` or `--help` (anywhere on
 * the line) prints X's usage to stdout and exits 0, before X's run is called;
 * run returns the process exit status, and when it returns TRAM_EXIT_USAGE
 * (after saying what is wrong: an unknown flag, a bad value, a missing
 * argument), the usage follows on stderr. */
#ifndef TRAM_CLI_COMMANDS_H
#define TRAM_CLI_COMMANDS_H

#include <stdio.h>

#define TRAM_EXIT_USAGE 2
#define TRAM_EXIT_NO_GPU 2   /* --device cuda without a usable GPU (server/cli/main.c) */

typedef struct tram_command_group tram_command_group;

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
    const tram_command *commands;
    int n_commands;
};

/* Runs the member argv[1] names with the arguments after it; argv[0] is the
 * group's last word. */
int tram_command_dispatch(const tram_command_group *g, int argc, char **argv);

int tram_cmd_generate(int argc, char **argv);
void tram_cmd_generate_usage(FILE *out);
int tram_cmd_info(int argc, char **argv);
void tram_cmd_info_usage(FILE *out);
int tram_cmd_tokenize(int argc, char **argv);
void tram_cmd_tokenize_usage(FILE *out);
int tram_cmd_chat_template(int argc, char **argv);
void tram_cmd_chat_template_usage(FILE *out);
int tram_cmd_convert(int argc, char **argv);
void tram_cmd_convert_usage(FILE *out);
int tram_cmd_serve(int argc, char **argv);
void tram_cmd_serve_usage(FILE *out);
int tram_cmd_perplexity(int argc, char **argv);
void tram_cmd_perplexity_usage(FILE *out);
int tram_cmd_quantize(int argc, char **argv);
void tram_cmd_quantize_usage(FILE *out);
/* `tram bench throughput|serve` (server/cli/cmd_bench.c) */
extern const tram_command_group tram_bench_commands;
int tram_cmd_bench_throughput(int argc, char **argv);
void tram_cmd_bench_throughput_usage(FILE *out);
/* runs bench/bench_serve.py, which answers --help */
int tram_cmd_bench_serve(int argc, char **argv);

#endif
