#include "server/cli/text_file.h"

#include <stdio.h>
#include <stdlib.h>

int tram_tokenize_file(const tram_tokenizer *t, const char *path, int32_t **ids, int *n, tram_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return tram_fail(err, "%s: cannot open the file", path);
    size_t cap = 1 << 16, len = 0, got;
    char *text = malloc(cap);
    while (text && (got = fread(text + len, 1, cap - len, fp)) > 0) {
        len += got;
        char *bigger = len == cap ? realloc(text, cap *= 2) : text;
        if (!bigger)
            free(text);
        text = bigger;
    }
    int read_error = ferror(fp);
    fclose(fp);
    if (!text || read_error) {
        free(text);
        return tram_fail(err, "%s: %s", path, read_error ? "read error" : "out of memory");
    }
    int rc = tram_tokenizer_encode(t, text, len, 1, 0, ids, n, err);
    free(text);
    return rc;
}
