/* cmd_convert.c — `tram convert GGUF OUTDIR`: writes a GGUF model as a
 * Hugging Face directory (see models/hf_writer.h). */
#include <stdio.h>
#include <string.h>

#include "server/cli/cli.h"
#include "models/hf_writer.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tram convert [--dtype f32|bf16] GGUF OUTDIR\n\n"
                 "Writes the GGUF model as a Hugging Face directory: config.json, model.safetensors,\n"
                 "tokenizer.json, tokenizer_config.json, generation_config.json.\n\n"
                 "  --dtype f32|bf16   type of the weight matrices (default f32: exactly the GGUF's\n"
                 "                     dequantized values; norms are always f32)\n");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "tram convert: %s '%s'\n\n", what, arg);
    usage(stderr);
    return TRAM_EXIT_USAGE;
}

int tram_cmd_convert(int argc, char **argv)
{
    const char *paths[2];
    int n_paths = 0;
    tram_hf_dtype dtype = TRAM_HF_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dtype")) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            if (strcmp(v, "f32") && strcmp(v, "bf16"))
                return usage_error("--dtype must be f32 or bf16, not", v);
            dtype = strcmp(v, "bf16") ? TRAM_HF_F32 : TRAM_HF_BF16;
        } else if (argv[i][0] == '-') {
            return usage_error("unknown option", argv[i]);
        } else if (n_paths == 2) {
            return usage_error("unexpected argument", argv[i]);
        } else {
            paths[n_paths++] = argv[i];
        }
    }
    if (n_paths != 2) {
        usage(stderr);
        return TRAM_EXIT_USAGE;
    }
    tram_model_file *f;
    tram_error err;
    if (tram_model_file_open(&f, paths[0], &err)) {
        fprintf(stderr, "tram convert: %s\n", err.msg);
        return 1;
    }
    int rc = tram_hf_convert(f, paths[1], dtype, &err);
    tram_model_file_close(f);
    if (rc) {
        fprintf(stderr, "tram convert: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s (%s)\n", paths[1], dtype == TRAM_HF_BF16 ? "bf16" : "f32");
    return 0;
}
