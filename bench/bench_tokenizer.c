/* bench_tokenizer — encode throughput of the default model's tokenizer on a
 * file of documents separated by form feeds (made by bench_tokenizer.sh),
 * single thread.  Prints MB/s and the total token count (the script checks it
 * against HF `tokenizers` on the same file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "models/gguf.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_tokenizer TEXTFILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size)
        return 1;
    fclose(f);
    text[size] = 0;
    tram_tokenizer *t;
    tram_error err;
    if (tram_tokenizer_load(&t, TRAM_DEFAULT_MODEL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    long tokens = 0, docs = 0;
    double t0 = tram_now();
    for (char *doc = text; doc < text + size; docs++) {
        char *end = memchr(doc, '\f', (size_t)(text + size - doc));
        size_t len = end ? (size_t)(end - doc) : (size_t)(text + size - doc);
        int32_t *ids;
        int n;
        if (tram_tokenizer_encode(t, doc, len, 0, 0, &ids, &n, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        tokens += n;
        free(ids);
        doc += len + 1;
    }
    double secs = tram_now() - t0;
    printf("tram %.2f MB/s %ld tokens %ld docs %.3f s\n", size / 1e6 / secs, tokens, docs, secs);
    tram_tokenizer_free(t);
    free(text);
    return 0;
}
