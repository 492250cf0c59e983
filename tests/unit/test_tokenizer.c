/* Byte-level BPE of the default model against Hugging Face `tokenizers`
 * (tests/fixtures/make_tokenizer_fixtures.py), decoding, streaming. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test_tokenizer_util.h"
#include "kernels/utf8.h"
#include "tokenizer/vocab.h"

static tram_tokenizer *tok;
static json_t *corpus;

static void setup(void)
{
    tok = tok_default();
    corpus = tok_load_jsonl(TOK_FIXTURES "smollm_corpus.jsonl");
}

static void teardown(void)
{
    tram_tokenizer_free(tok);
    json_decref(corpus);
}

static int32_t *encode(const char *s, size_t len, int parse_special, int *n)
{
    tram_error err = {{0}};
    int32_t *ids;
    cr_assert_eq(tram_tokenizer_encode(tok, s, len, 1, parse_special, &ids, n, &err), 0, "%s", err.msg);
    return ids;
}

TestSuite(tokenizer, .init = setup, .fini = teardown);

Test(tokenizer, corpus_matches_hf)
{
    cr_assert_geq(json_array_size(corpus), 2000);
    size_t i;
    json_t *row;
    json_array_foreach(corpus, i, row) {
        const char *s = json_string_value(json_object_get(row, "text"));
        size_t len = json_string_length(json_object_get(row, "text"));
        int n;
        int32_t *ids = encode(s, len, 1, &n);
        tok_assert_ids(ids, n, json_object_get(row, "ids"), "specials parsed", s);
        free(ids);
        /* As user content: special tokens are plain text (HF encode_special_tokens). */
        json_t *as_text = json_object_get(row, "ids_text");
        ids = encode(s, len, 0, &n);
        tok_assert_ids(ids, n, as_text ? as_text : json_object_get(row, "ids"), "specials as text", s);
        free(ids);
    }
}

Test(tokenizer, decode_inverts_encode)
{
    size_t i;
    json_t *row;
    json_array_foreach(corpus, i, row) {
        const char *s = json_string_value(json_object_get(row, "text"));
        size_t len = json_string_length(json_object_get(row, "text")), out_len;
        int n;
        int32_t *ids = encode(s, len, 1, &n);
        char *text;
        tram_error err;
        cr_assert_eq(tram_tokenizer_decode(tok, ids, n, 0, &text, &out_len, &err), 0, "%s", err.msg);
        /* HF drops bytes that have no token (SmolLM2 lacks 0x04, 0xF1, ...);
         * "decoded" holds HF's decode where it then differs from the text. */
        json_t *hf = json_object_get(row, "decoded");
        if (hf) {
            s = json_string_value(hf);
            len = json_string_length(hf);
        }
        cr_assert(out_len == len && !memcmp(text, s, len), "round trip of \"%.60s\" gave \"%.60s\"", s, text);
        free(text);
        free(ids);
    }
}

/* Streams ids through a detokenizer; returns the concatenated text. */
static char *stream(const int32_t *ids, int n, int skip_special, const char *const *stops, int n_stops,
                    int *stopped_at)
{
    tram_detok *d;
    tram_error err;
    cr_assert_eq(tram_detok_create(&d, tok, skip_special, stops, n_stops, &err), 0, "%s", err.msg);
    size_t total = 0, cap = 64;
    char *all = malloc(cap);
    *stopped_at = -1;
    for (int i = 0; i <= n; i++) {
        const char *piece;
        size_t len;
        int which = -1, rc = 0;
        if (i < n)
            rc = tram_detok_push(d, ids[i], &piece, &len, &which, &err);
        else
            tram_detok_finish(d, &piece, &len);
        cr_assert_geq(rc, 0, "%s", err.msg);
        cr_assert_eq(tram_utf8_validate(piece, len), len, "a partial UTF-8 sequence was emitted");
        if (total + len + 1 > cap)
            all = realloc(all, cap = 2 * (total + len + 1));
        memcpy(all + total, piece, len);
        total += len;
        if (rc == 1 && *stopped_at < 0)
            *stopped_at = i;
    }
    all[total] = 0;
    tram_detok_free(d);
    return all;
}

Test(tokenizer, detokenizer_equals_decode)
{
    size_t i;
    json_t *row;
    json_array_foreach(corpus, i, row) {
        int n, stopped;
        int32_t *ids = tok_json_ids(json_object_get(row, "ids"), &n);
        for (int skip = 0; skip < 2; skip++) {
            char *whole, *streamed = stream(ids, n, skip, NULL, 0, &stopped);
            size_t len;
            tram_error err;
            cr_assert_eq(tram_tokenizer_decode(tok, ids, n, skip, &whole, &len, &err), 0, "%s", err.msg);
            cr_assert_str_eq(streamed, whole);
            free(whole);
            free(streamed);
        }
        free(ids);
    }
}

/* Byte tokens that split a multi-byte character, and bytes that never form
 * UTF-8: both streamed and whole decoding give U+FFFD at the same places. */
Test(tokenizer, detokenizer_partial_and_invalid_utf8)
{
    int32_t e4 = tok->byte_id[0xe4], b8 = tok->byte_id[0xb8], ad = tok->byte_id[0xad], x80 = tok->byte_id[0x80];
    int32_t a = tok->byte_id['a'];
    int32_t ids[] = {e4, b8, ad, a, e4, b8, a, x80, e4};
    int stopped;
    char *s = stream(ids, 9, 0, NULL, 0, &stopped);
    cr_assert_str_eq(s, "\xe4\xb8\xad" "a" "\xef\xbf\xbd" "a" "\xef\xbf\xbd" "\xef\xbf\xbd");
    char *whole;
    size_t len;
    tram_error err;
    cr_assert_eq(tram_tokenizer_decode(tok, ids, 9, 0, &whole, &len, &err), 0);
    cr_assert_str_eq(whole, s);
    free(whole);
    free(s);
}

Test(tokenizer, stop_strings_across_tokens)
{
    const char *text = "Hello world!\nUser: next question";
    int n, stopped;
    int32_t *ids = encode(text, strlen(text), 0, &n);
    const char *stops[] = {"\nUser:", "never"};
    char *s = stream(ids, n, 0, stops, 2, &stopped);
    cr_assert_str_eq(s, "Hello world!");
    cr_assert_geq(stopped, 0);
    free(s);
    /* A partial match that never completes is released at the end. */
    const char *stops2[] = {"world!\nUser: next questionnaire"};
    s = stream(ids, n, 0, stops2, 1, &stopped);
    cr_assert_str_eq(s, text);
    cr_assert_eq(stopped, -1);
    free(s);
    free(ids);
}

Test(tokenizer, stop_string_inside_one_token)
{
    int32_t id = tram_tokenizer_find(tok, "Ġworld");
    cr_assert_geq(id, 0);
    int32_t ids[] = {tram_tokenizer_find(tok, "Hello"), id, tram_tokenizer_find(tok, "!")};
    const char *stops[] = {"orl"};
    int stopped, which = -1;
    char *s = stream(ids, 3, 0, stops, 1, &stopped);
    cr_assert_str_eq(s, "Hello w");
    cr_assert_eq(stopped, 1);
    (void)which;
    free(s);
}

Test(tokenizer, invalid_utf8_is_rejected)
{
    const char *bad[] = {"abc\xff", "\xc3", "\xe4\xb8", "\xed\xa0\x80", "\xc0\xaf", "ok\x80ok", "\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int32_t *ids = (int32_t *)1;
        int n = 7;
        tram_error err = {{0}};
        cr_assert_eq(tram_tokenizer_encode(tok, bad[i], strlen(bad[i]), 0, 0, &ids, &n, &err), -1);
        cr_assert(strstr(err.msg, "not valid UTF-8"), "%s", err.msg);
        cr_assert_null(ids);
        cr_assert_eq(n, 0);
    }
}

Test(tokenizer, special_ids_and_lookups)
{
    cr_assert_eq(tram_tokenizer_vocab_size(tok), 49152);
    cr_assert_str_eq(tram_tokenizer_piece(tok, 2), "<|im_end|>");
    cr_assert_eq(tram_tokenizer_eos(tok), 2);
    cr_assert_eq(tram_tokenizer_adds_bos(tok), 0);
    cr_assert(tram_tokenizer_is_eog(tok, 2));
    cr_assert(tram_tokenizer_is_eog(tok, 0));
    cr_assert(!tram_tokenizer_is_eog(tok, 1));
    cr_assert(tram_tokenizer_is_special(tok, 1));
    cr_assert_null(tram_tokenizer_piece(tok, 49152));
    int32_t ids[] = {1, tram_tokenizer_find(tok, "?"), 2};
    char *s;
    size_t len;
    tram_error err;
    cr_assert_eq(tram_tokenizer_decode(tok, ids, 3, 1, &s, &len, &err), 0);
    cr_assert_str_eq(s, "?");
    free(s);
    int32_t bad[] = {49152};
    cr_assert_eq(tram_tokenizer_decode(tok, bad, 1, 0, &s, &len, &err), -1);
    cr_assert_not_null(tram_tokenizer_chat_template(tok));
}
