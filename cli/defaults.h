/* defaults.h — what bin/tram runs with when not told otherwise; the tests and
 * benchmarks use the same. */
#ifndef TRAM_CLI_DEFAULTS_H
#define TRAM_CLI_DEFAULTS_H

/* The model every `-m MODEL` defaults to (`make model` fetches it). */
#define TRAM_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* OpenMP spin count between parallel regions (why: cli/main.c). */
#define TRAM_GOMP_SPINCOUNT "10000"

#endif
