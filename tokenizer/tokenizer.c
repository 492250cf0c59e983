/* tokenizer.c — encoding and decoding, for every kind of tokenizer: added and
 * special tokens are split out of the text before the model sees it, and what
 * lies between them goes to the kind's encoder (bpe.c or spm.c). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/ids.h"
#include "tokenizer/spm.h"
#include "kernels/utf8.h"
#include "tokenizer/vocab.h"

/* ---- encode ---- */

static int encode_segment(const tram_tokenizer *t, const char *text, size_t len, int at_start, tram_ids *out,
                          tram_error *err)
{
    if (!len)
        return 0;
    if (t->kind == TRAM_TOK_BPE)
        return tram_bpe_encode_text(t, text, len, out, err);
    return tram_spm_encode_text(t, text, len, at_start, out, err);
}

/* The added token starting at text (longest first, as HF's leftmost-longest
 * matcher), or -1.  Control tokens only count when parse_special. */
static int32_t added_at(const tram_tokenizer *t, const char *text, size_t len, int parse_special)
{
    for (int k = 0; k < t->n_added; k++) {
        int32_t id = t->added[k];
        uint32_t n = t->piece_len[id];
        if (n <= len && !memcmp(text, t->pieces + t->piece_off[id], n) &&
            (parse_special || t->attr[id] != TRAM_ATTR_CONTROL))
            return id;
    }
    return -1;
}

static int encode_all(const tram_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                      tram_ids *out, tram_error *err)
{
    if ((add_bos && t->add_bos && t->bos >= 0 && tram_ids_push(out, t->bos)))
        return tram_fail(err, "encode: out of memory");
    size_t seg = 0;
    for (size_t i = 0; i < len; i++) {
        if (!t->added_first[(uint8_t)text[i]])
            continue;
        int32_t id = added_at(t, text + i, len - i, parse_special);
        if (id < 0)
            continue;
        if (encode_segment(t, text + seg, i - seg, seg == 0, out, err))
            return -1;
        if (tram_ids_push(out, id))
            return tram_fail(err, "encode: out of memory");
        seg = i + t->piece_len[id];
        i = seg - 1;
    }
    if (encode_segment(t, text + seg, len - seg, seg == 0, out, err))
        return -1;
    if (add_bos && t->add_eos && t->eos >= 0 && tram_ids_push(out, t->eos))
        return tram_fail(err, "encode: out of memory");
    if (add_bos && t->add_post && tram_ids_push(out, t->post_id))
        return tram_fail(err, "encode: out of memory");
    return 0;
}

int tram_tokenizer_encode(const tram_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                          int32_t **ids, int *n, tram_error *err)
{
    *ids = NULL;
    *n = 0;
    size_t bad = tram_utf8_validate(text, len);
    if (bad < len)
        return tram_fail(err, "encode: input is not valid UTF-8 (byte 0x%02x at offset %zu)",
                         (unsigned char)text[bad], bad);
    if (len > INT32_MAX / 2)
        return tram_fail(err, "encode: input of %zu bytes is too long", len);
    tram_ids out = {0};
    if (encode_all(t, text, len, add_bos, parse_special, &out, err)) {
        free(out.v);
        return -1;
    }
    *ids = out.v;
    *n = out.n;
    return 0;
}

/* ---- decode ---- */

int tram_tokenizer_decode(const tram_tokenizer *t, const int32_t *ids, int n, int skip_special, char **text,
                          size_t *len, tram_error *err)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return tram_fail(err, "decode: token id %d outside the vocabulary of %d", ids[i], t->n_vocab);
        total += t->dec_len[ids[i]];
    }
    char *raw = malloc(total + 1), *out = malloc(3 * total + 1);
    if (!raw || !out) {
        free(raw);
        free(out);
        return tram_fail(err, "decode: out of memory");
    }
    size_t r = 0, used;
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (skip_special && t->attr[ids[i]] == TRAM_ATTR_CONTROL)
            continue;
        size_t k;
        const char *p = tram_tok_token_text(t, ids[i], first, &k);
        memcpy(raw + r, p, k);
        r += k;
        first = 0;
    }
    *len = tram_utf8_lossy(raw, r, 1, out, &used);
    out[*len] = 0;
    free(raw);
    *text = out;
    return 0;
}
