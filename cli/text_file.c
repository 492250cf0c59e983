#include "cli/text_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/flags.h"
#include "chat/jinja.h"

int tram_read_text_file(const char *path, char **text_out, size_t *len_out, tram_error *err)
{
    *text_out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return tram_fail(err, "%s: cannot open the file", path);
    size_t cap = 1 << 16, len = 0, got;
    char *text = malloc(cap);
    while (text && (got = fread(text + len, 1, cap - len - 1, fp)) > 0) {
        len += got;
        char *bigger = len == cap - 1 ? realloc(text, cap *= 2) : text;
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
    text[len] = 0;
    *text_out = text;
    *len_out = len;
    return 0;
}

int tram_tokenize_file(const tram_tokenizer *t, const char *path, int32_t **ids, int *n, tram_error *err)
{
    char *text;
    size_t len;
    if (tram_read_text_file(path, &text, &len, err))
        return -1;
    int rc = tram_tokenizer_encode(t, text, len, 1, 0, ids, n, err);
    free(text);
    return rc;
}

int tram_chat_template_flag(const char *flag, const char *value, void *field)
{
    char *text;
    size_t len;
    tram_error err = {{0}};
    tram_jinja *parsed = NULL;
    if (tram_read_text_file(value, &text, &len, &err))
        return tram_flag_invalid(flag, value, "a readable file of Jinja");
    if (strlen(text) != len || tram_jinja_parse(&parsed, text, &err)) {
        char why[sizeof(err.msg) + 64];
        snprintf(why, sizeof(why), "a chat template that parses (%s)",
                 strlen(text) != len ? "the file holds a NUL byte" : err.msg);
        free(text);
        return tram_flag_invalid(flag, value, why);
    }
    tram_jinja_free(parsed);
    *(const char **)field = text;  /* lives as long as the process */
    return 0;
}

int tram_calibrate_file(tram_model_file *f, const char *path, int max_tokens, int ctx, int threads, int samples,
                        int hessians, const char *who, tram_calib_stats *st, tram_error *err)
{
    tram_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int n = 0;
    int rc = tram_tokenizer_from_gguf(&tok, tram_model_file_gguf(f), err) || tram_tokenize_file(tok, path, &ids, &n, err);
    if (!rc) {
        n = TRAM_MIN(n, max_tokens);
        fprintf(stderr, "%s: calibrating on %d tokens of %s\n", who, n, path);
        rc = tram_calibrate(f, ids, n, ctx, threads, samples, hessians, st, err);
    }
    free(ids);
    tram_tokenizer_free(tok);
    return rc;
}
