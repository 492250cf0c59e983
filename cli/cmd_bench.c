/* cmd_bench.c — `tram bench`: the benchmarks, one file each
 * (cmd_bench_<name>.c). */
#include "cli/commands.h"

#include "kernels/base.h"

static const tram_command *const benchmarks[] = {&tram_cmd_bench_throughput, &tram_cmd_bench_serve,
                                                  &tram_cmd_bench_roofline};

static const tram_command_group bench = {
    .name = "tram bench", .noun = "benchmark", .commands = benchmarks, .n_commands = TRAM_ARRAY_LEN(benchmarks)};

const tram_command tram_cmd_bench = {
    .name = "bench", .group = &bench,
    .summary = "benchmarks: offline throughput, a server under load, the CPU roofline"};
