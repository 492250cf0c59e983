#include "tests/unit/test_tokenizer_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/cli/defaults.h"
#include "models/gguf.h"

json_t *tok_load_jsonl(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    json_t *all = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *row = json_loadb(line, (size_t)n, JSON_ALLOW_NUL, &je);
        cr_assert(row, "%s: %s", path, je.text);
        json_array_append_new(all, row);
    }
    free(line);
    fclose(f);
    return all;
}

int32_t *tok_json_ids(const json_t *arr, int *n)
{
    *n = (int)json_array_size(arr);
    int32_t *ids = malloc((size_t)(*n + 1) * sizeof(int32_t));
    for (int i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, (size_t)i));
    return ids;
}

tram_tokenizer *tok_from_gguf_path(const char *path)
{
    tram_error err = {{0}};
    tram_gguf *g;
    cr_assert_eq(tram_gguf_open(&g, path, &err), 0, "%s", err.msg);
    tram_tokenizer *t;
    cr_assert_eq(tram_tokenizer_from_gguf(&t, g, &err), 0, "%s", err.msg);
    tram_gguf_close(g);
    return t;
}

tram_tokenizer *tok_default(void)
{
    return tok_from_gguf_path(TRAM_DEFAULT_MODEL);
}

void tok_assert_ids(const int32_t *ids, int n, const json_t *golden, const char *what, const char *text)
{
    int gn;
    int32_t *g = tok_json_ids(golden, &gn);
    int first = -1;
    for (int i = 0; i < TRAM_MIN(n, gn) && first < 0; i++)
        if (ids[i] != g[i])
            first = i;
    if (first < 0 && n != gn)
        first = TRAM_MIN(n, gn);
    cr_assert(first < 0, "%s: ids differ at %d (ours %d of %d, HF %d of %d) for text \"%.80s\"", what, first,
              first < n ? ids[first] : -1, n, first < gn ? g[first] : -1, gn, text);
    free(g);
}
