/* cmd_convert.c — `tram convert GGUF OUTDIR`: writes a GGUF model as a
 * Hugging Face directory (see models/hf_writer.h). */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "models/hf_writer.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tram convert [--dtype f32|bf16] GGUF OUTDIR\n\n"
                 "Writes the GGUF model as a Hugging Face directory: config.json, model.safetensors,\n"
                 "tokenizer.json, tokenizer_config.json, generation_config.json.\n\n"
                 "  --dtype f32|bf16   type of the weight matrices (default f32: exactly the GGUF's\n"
                 "                     dequantized values; norms are always f32)\n");
}

static const tram_flag convert_flags[] = {
    {.name = "--dtype", .kind = TRAM_FLAG_CHOICE, .choices = (const char *const[]){"f32", "bf16", NULL}},
};

static int convert(int argc, char **argv)
{
    int bf16 = 0;
    const char *paths[2];
    const tram_flag_table table = TRAM_FLAG_TABLE(convert_flags, &bf16);
    if (tram_flags_parse(&table, 1, argc, argv, paths, 2) != 2)
        return TRAM_EXIT_USAGE;
    tram_model_file *f = NULL;
    tram_error err;
    int rc = tram_model_file_open(&f, paths[0], &err) ||
             tram_hf_convert(f, paths[1], bf16 ? TRAM_HF_BF16 : TRAM_HF_F32, &err);
    tram_model_file_close(f);
    if (!rc)
        printf("wrote %s (%s)\n", paths[1], bf16 ? "bf16" : "f32");
    return tram_exit_status("tram convert", rc, &err);
}

const tram_command tram_cmd_convert = {
    .name = "convert", .run = convert, .usage = usage,
    .summary = "write a GGUF model as a Hugging Face directory (safetensors)"};
