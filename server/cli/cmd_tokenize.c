/* cmd_tokenize.c — `tram tokenize [-m MODEL] TEXT`: prints the ids and
 * pieces a model's tokenizer makes of a text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/cli.h"
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

int tram_cmd_tokenize(int argc, char **argv)
{
    const char *model = TRAM_DEFAULT_MODEL, *text = NULL;
    int special = 0, bos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(argv[i], "--special")) {
            special = 1;
        } else if (!strcmp(argv[i], "--bos")) {
            bos = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tram tokenize: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return TRAM_EXIT_USAGE;
        } else if (!text) {
            text = argv[i];
        } else {
            fprintf(stderr, "tram tokenize: unexpected argument '%s'\n\n", argv[i]);
            usage(stderr);
            return TRAM_EXIT_USAGE;
        }
    }
    if (!text) {
        usage(stderr);
        return TRAM_EXIT_USAGE;
    }
    tram_tokenizer *t;
    tram_error err;
    int32_t *ids;
    int n;
    if (tram_tokenizer_load(&t, model, &err)) {
        fprintf(stderr, "tram tokenize: %s\n", err.msg);
        return 1;
    }
    if (tram_tokenizer_encode(t, text, strlen(text), bos, special, &ids, &n, &err)) {
        fprintf(stderr, "tram tokenize: %s\n", err.msg);
        tram_tokenizer_free(t);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *bytes = tram_tokenizer_token_bytes(t, ids[i], &len);
        printf("%6d  %-20s \"", ids[i], tram_tokenizer_piece(t, ids[i]));
        print_escaped(bytes, len);
        printf("\"\n");
    }
    printf("%d tokens\n", n);
    free(ids);
    tram_tokenizer_free(t);
    return 0;
}
