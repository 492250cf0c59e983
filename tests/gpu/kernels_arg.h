/* kernels_arg.h — the GPU check programs' `--cuda-kernels SPEC` option (the
 * same spec as the CLI flag, kernels/variants.h): taken out of argv wherever
 * it stands, so each program's own positional arguments keep their places. */
#ifndef TRAM_TESTS_GPU_KERNELS_ARG_H
#define TRAM_TESTS_GPU_KERNELS_ARG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/variants.h"

/* Removes `--cuda-kernels SPEC` from argv into *kv (zeroed: every family
 * variant 1 when absent); a bad or missing spec exits 1 with one sentence
 * (2 is the programs' "no usable GPU", which stops tests/gpu/run.sh). */
static inline void take_kernels_arg(const char *prog, int *argc, char **argv, tram_kernel_variants *kv)
{
    memset(kv, 0, sizeof(*kv));
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--cuda-kernels"))
            continue;
        tram_error err = {{0}};
        if (i + 1 >= *argc || tram_kernel_variants_parse(argv[i + 1], kv, &err)) {
            fprintf(stderr, "%s: --cuda-kernels: %s\n", prog, i + 1 >= *argc ? "needs a SPEC" : err.msg);
            exit(1);
        }
        memmove(&argv[i], &argv[i + 2], (size_t)(*argc - i - 2 + 1) * sizeof(char *));
        *argc -= 2;
        i--;
    }
}

#endif
