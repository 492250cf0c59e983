/* engine_flags.h — the engine flags every subcommand that runs a model takes
 * (generate, serve, bench throughput). */
#ifndef TRAM_CLI_ENGINE_FLAGS_H
#define TRAM_CLI_ENGINE_FLAGS_H

#include <stdio.h>

#include "engine/tram.h"
#include "cli/flags.h"

/* The engine flags as a table over c, for tram_flags_parse: --block-size N,
 * --kv-cache-memory SIZE, --gpu-memory-utilization F, --num-kv-blocks N,
 * --max-num-batched-tokens N, --max-num-seqs N, --max-model-len N,
 * --[no-]enable-prefix-caching, --scheduling-policy fcfs|priority,
 * --device cpu|cuda, --threads N (also -t), --seed N, --quantization
 * none|int8, --weight-format f32|native, --load-format auto|dummy,
 * --preset NAME, --tokenizer PATH, --enforce-eager, --tensor-parallel-size N
 * (also -tp). */
tram_flag_table tram_engine_flags(tram_engine_config *c);

/* After parsing: checks what needs the model (--tensor-parallel-size
 * against its heads and the GPUs present); prints one sentence and returns
 * -1 (exit TRAM_EXIT_USAGE) when a flag cannot be honoured. */
int tram_engine_flags_check(const tram_engine_config *c, const char *model_path);

/* --lora-modules NAME=PATH[,...] (repeatable) into a NULL-terminated list
 * of TRAM_MAX_LORA_MODULES (server/server.h; a TRAM_FLAG_CUSTOM parser). */
int tram_lora_modules_flag(const char *flag, const char *value, void *field);

/* Prints the engine flags' help lines (for a subcommand's usage). */
void tram_engine_print_flags(FILE *out);

#endif
