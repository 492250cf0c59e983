/* The other tokenizer kinds against their reference libraries
 * (tests/fixtures/make_tokenizer_fixtures.py): byte-level BPE from
 * tokenizer.json with the llama3 and qwen2 pre-tokenizers (HF `tokenizers`),
 * and SentencePiece, both as tokenizer.model through libsentencepiece and as
 * a GGUF-stored vocabulary (the `sentencepiece` package's ids). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/test_tokenizer_util.h"

static tram_tokenizer *from_dir(const char *dir)
{
    tram_tokenizer *t;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_from_dir(&t, dir, &err), 0, "%s", err.msg);
    return t;
}

/* Every row's text encodes to its ids (add_bos, parse_special as given) and
 * the ids after BOS decode back to "decoded" (or the text).  SentencePiece
 * never parses special tokens in text.  Returns the rows checked. */
static size_t check_golden(tram_tokenizer *t, const char *jsonl, int add_bos, int parse_special)
{
    json_t *rows = tok_load_jsonl(jsonl);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        json_t *jt = json_object_get(row, "text");
        const char *s = json_string_value(jt);
        tram_error err = {{0}};
        int32_t *ids;
        int n;
        cr_assert_eq(tram_tokenizer_encode(t, s, json_string_length(jt), add_bos, parse_special, &ids, &n, &err), 0, "%s", err.msg);
        tok_assert_ids(ids, n, json_object_get(row, "ids"), jsonl, s);
        char *text;
        size_t len;
        int skip = add_bos && tram_tokenizer_adds_bos(t);
        cr_assert_eq(tram_tokenizer_decode(t, ids + skip, n - skip, 0, &text, &len, &err), 0, "%s", err.msg);
        json_t *dec = json_object_get(row, "decoded");
        cr_assert_str_eq(text, dec ? json_string_value(dec) : s, "%s", jsonl);
        free(text);
        free(ids);
    }
    size_t n = json_array_size(rows);
    json_decref(rows);
    return n;
}

Test(tokenizer_models, llama3_pretokenizer_and_bos)
{
    tram_tokenizer *t = from_dir(TOK_FIXTURES "llama3");
    cr_assert_eq(tram_tokenizer_bos(t), 0);
    cr_assert(tram_tokenizer_adds_bos(t));
    cr_assert(tram_tokenizer_is_eog(t, tram_tokenizer_find(t, "<|eot_id|>")));
    cr_assert_geq(check_golden(t, TOK_FIXTURES "llama3/ids.jsonl", 1, 1), 500);
    tram_tokenizer_free(t);
}

Test(tokenizer_models, qwen2_pretokenizer)
{
    tram_tokenizer *t = from_dir(TOK_FIXTURES "qwen2");
    cr_assert(!tram_tokenizer_adds_bos(t));
    cr_assert_geq(check_golden(t, TOK_FIXTURES "qwen2/ids.jsonl", 1, 1), 500);
    tram_tokenizer_free(t);
}

Test(tokenizer_models, sentencepiece_library)
{
    tram_tokenizer *t = from_dir(TOK_FIXTURES "spm");
    cr_assert_geq(check_golden(t, TOK_FIXTURES "spm/ids.jsonl", 0, 0), 500);
    tram_tokenizer_free(t);
}

Test(tokenizer_models, sentencepiece_in_gguf)
{
    tram_tokenizer *t = tok_from_gguf_path(TOK_FIXTURES "spm/spm.gguf");
    cr_assert(tram_tokenizer_adds_bos(t));
    cr_assert_geq(check_golden(t, TOK_FIXTURES "spm/ids.jsonl", 0, 0), 500);
    int32_t *ids;
    int n;
    cr_assert_eq(tram_tokenizer_encode(t, "hi", 2, 1, 0, &ids, &n, NULL), 0);
    cr_assert_eq(ids[0], tram_tokenizer_bos(t));
    free(ids);
    tram_tokenizer_free(t);
}

/* A model trained here by libsentencepiece's own trainer round-trips text. */
Test(tokenizer_models, sentencepiece_trained_in_test)
{
    char dir[] = "/tmp/tram-spm-XXXXXX", corpus[4200], prefix[4200], model[4200];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(corpus, sizeof(corpus), "%s/corpus.txt", dir);
    snprintf(prefix, sizeof(prefix), "%s/tokenizer", dir);
    snprintf(model, sizeof(model), "%s/tokenizer.model", dir);
    json_t *rows = tok_load_jsonl(TOK_FIXTURES "smollm_corpus.jsonl");
    FILE *f = fopen(corpus, "w");
    for (size_t i = 0; i < 600; i++) {
        const char *s = json_string_value(json_object_get(json_array_get(rows, i), "text"));
        for (; *s; s++)
            fputc(*s == '\n' ? ' ' : *s, f);
        fputc('\n', f);
    }
    fclose(f);
    tram_error err = {{0}};
    cr_assert_eq(tram_spm_train(corpus, prefix, 400, &err), 0, "%s", err.msg);
    tram_tokenizer *t = from_dir(dir);
    cr_assert_eq(tram_tokenizer_vocab_size(t), 400);
    for (size_t i = 0; i < 600; i += 7) {
        const char *s = json_string_value(json_object_get(json_array_get(rows, i), "text"));
        int32_t *ids;
        int n;
        char *back;
        size_t len;
        cr_assert_eq(tram_tokenizer_encode(t, s, strlen(s), 0, 0, &ids, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(tram_tokenizer_decode(t, ids, n, 1, &back, &len, &err), 0);
        cr_assert_str_eq(back, s);
        free(back);
        free(ids);
    }
    tram_tokenizer_free(t);
    json_decref(rows);
    unlink(corpus);
    unlink(model);
    snprintf(model, sizeof(model), "%s/tokenizer.vocab", dir);
    unlink(model);
    rmdir(dir);
}

Test(tokenizer_models, bad_directories)
{
    tram_tokenizer *t;
    tram_error err = {{0}};
    cr_assert_eq(tram_tokenizer_from_dir(&t, "/nonexistent-dir", &err), -1);
    cr_assert(strstr(err.msg, "neither tokenizer.json nor tokenizer.model"), "%s", err.msg);
    cr_assert_null(t);
}
