/* cli.h — subcommands of bin/tram.  Each lives in its own file, named
 * cmd_<name>.c in the module it belongs to, and is listed in engine/main.c.
 * A subcommand returns the process exit code: 0 ok, 1 runtime failure,
 * 2 usage error (unknown flag, bad value; print a usage message first). */
#ifndef TRAM_CLI_H
#define TRAM_CLI_H

#define TRAM_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define TRAM_EXIT_USAGE 2
/* OpenMP spin count between parallel regions (see engine/main.c). */
#define TRAM_GOMP_SPINCOUNT "10000"
#define TRAM_EXIT_NO_GPU 2   /* --device cuda without a usable GPU (engine/cuda_runner.h) */

int tram_cmd_generate(int argc, char **argv);
int tram_cmd_info(int argc, char **argv);
int tram_cmd_tokenize(int argc, char **argv);
int tram_cmd_chat_template(int argc, char **argv);
int tram_cmd_convert(int argc, char **argv);
int tram_cmd_serve(int argc, char **argv);
int tram_cmd_perplexity(int argc, char **argv);
int tram_cmd_quantize(int argc, char **argv);
/* `tram bench throughput|serve ...` (engine/cmd_bench.c). */
int tram_cmd_bench(int argc, char **argv);
/* `tram bench serve`: argv[0] is "serve" (server/cmd_bench_serve.c). */
int tram_cmd_bench_serve(int argc, char **argv);

/* 1 when any argument is -h or --help: checked before parsing, so that help
 * wins over errors in the other flags. */
int tram_cli_wants_help(int argc, char **argv);

/* Parses a base-10 int / float flag value in [lo, hi]; on failure prints
 * "tram: invalid value for FLAG: ..." and returns -1. */
int tram_cli_int(const char *flag, const char *s, long lo, long hi, long *out);
int tram_cli_float(const char *flag, const char *s, double lo, double hi, double *out);

#endif
