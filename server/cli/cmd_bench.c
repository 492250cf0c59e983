/* cmd_bench.c — `tram bench`: the benchmarks, one file each
 * (cmd_bench_<name>.c). */
#include "server/cli/commands.h"

#include "kernels/base.h"

static const tram_command benchmarks[] = {
    {.name = "throughput", .summary = "offline throughput",
     .run = tram_cmd_bench_throughput, .usage = tram_cmd_bench_throughput_usage},
    {.name = "serve", .summary = "an OpenAI server under Poisson arrivals",
     .run = tram_cmd_bench_serve},
};

const tram_command_group tram_bench_commands = {
    .name = "tram bench", .noun = "benchmark", .commands = benchmarks, .n_commands = TRAM_ARRAY_LEN(benchmarks)};
