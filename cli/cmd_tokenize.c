/* cmd_tokenize.c — `tram tokenize [-m MODEL] TEXT`: prints the ids and
 * pieces a model's tokenizer makes of a text. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tram tokenize [-m MODEL] [--special] [--bos] TEXT\n\n"
                 "Prints one line per token: its id, its vocabulary piece and the text it stands for.\n\n"
                 "  -m MODEL    a .gguf file or a Hugging Face directory (default %s)\n"
                 "  --special   treat special tokens written in TEXT (<|im_end|>, ...) as special\n"
                 "  --bos       add BOS when the model asks for it\n",
                 TRAM_DEFAULT_MODEL);
}

/* Prints bytes with control characters and quotes escaped, C style. */
static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void print_tokens(const tram_tokenizer *t, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *bytes = tram_tokenizer_token_bytes(t, ids[i], &len);
        printf("%6d  %-20s \"", ids[i], tram_tokenizer_piece(t, ids[i]));
        print_escaped(bytes, len);
        printf("\"\n");
    }
    printf("%d tokens\n", n);
}

typedef struct {
    const char *model;
    int special, bos;
} tokenize_opts;

static const tram_flag tokenize_flags[] = {
    {.name = "-m", .kind = TRAM_FLAG_STRING, .field = offsetof(tokenize_opts, model)},
    {.name = "--special", .kind = TRAM_FLAG_SET, .field = offsetof(tokenize_opts, special)},
    {.name = "--bos", .kind = TRAM_FLAG_SET, .field = offsetof(tokenize_opts, bos)},
};

static int tokenize(int argc, char **argv)
{
    tokenize_opts o = {.model = TRAM_DEFAULT_MODEL};
    const char *text;
    const tram_flag_table table = TRAM_FLAG_TABLE(tokenize_flags, &o);
    if (tram_flags_parse(&table, 1, argc, argv, &text, 1) != 1)
        return TRAM_EXIT_USAGE;
    tram_tokenizer *t = NULL;
    tram_error err;
    int32_t *ids = NULL;
    int n = 0;
    int rc = tram_tokenizer_load(&t, o.model, &err) ||
             tram_tokenizer_encode(t, text, strlen(text), o.bos, o.special, &ids, &n, &err);
    if (!rc)
        print_tokens(t, ids, n);
    free(ids);
    tram_tokenizer_free(t);
    return tram_exit_status("tram tokenize", rc, &err);
}

const tram_command tram_cmd_tokenize = {
    .name = "tokenize", .run = tokenize, .usage = usage,
    .summary = "print the token ids and pieces of a text"};
