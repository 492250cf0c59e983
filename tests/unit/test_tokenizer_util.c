#include "tests/unit/test_tokenizer_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
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

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

void tok_load_conversation(const json_t *jm, int null_as_empty, tok_conversation *c)
{
    c->n = (int)json_array_size(jm);
    c->tool_parts = 0;
    cr_assert_leq(c->n, TOK_MAX_MSGS);
    for (int k = 0; k < c->n; k++) {
        const json_t *m = json_array_get(jm, (size_t)k), *calls = json_object_get(m, "tool_calls");
        cr_assert_leq(json_array_size(calls), TOK_MAX_CALLS);
        for (size_t j = 0; j < json_array_size(calls); j++) {
            const json_t *cl = json_array_get(calls, j), *f = json_object_get(cl, "function");
            c->calls[k][j] = (tram_chat_tool_call){
                .id = str(cl, "id"), .name = str(f, "name"), .arguments = json_object_get(f, "arguments")};
        }
        const char *content = str(m, "content");
        c->msgs[k] = (tram_chat_msg){.role = str(m, "role"),
                                     .content = content || !null_as_empty ? content : "",
                                     .tool_calls = c->calls[k],
                                     .num_tool_calls = (int)json_array_size(calls),
                                     .tool_call_id = str(m, "tool_call_id")};
        c->tool_parts |= c->msgs[k].num_tool_calls || !strcmp(c->msgs[k].role, "tool");
    }
}
