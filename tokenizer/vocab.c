/* vocab.c — the tables every kind of tokenizer shares: pieces, their decoded
 * bytes, attributes, byte tokens, added tokens, BOS/EOS and end-of-generation
 * ids; building them once at load, and the lookups the engine and server
 * use.  The per-kind spelling of bytes in pieces comes from bpe.c / spm.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/spm_lib.h"
#include "kernels/utf8.h"
#include "tokenizer/vocab.h"

int tram_tok_alloc(tram_tokenizer **out, int n_vocab, tram_error *err)
{
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return tram_fail(err, "tokenizer: vocabulary size %d out of range", n_vocab);
    tram_tokenizer *t = tram_calloc(1, sizeof(*t), err);
    if (!t)
        return -1;
    *t = (tram_tokenizer){
        .n_vocab = n_vocab,
        .piece_off = tram_calloc((size_t)n_vocab, sizeof(uint32_t), err),
        .piece_len = tram_calloc((size_t)n_vocab, sizeof(uint32_t), err),
        .attr = tram_calloc((size_t)n_vocab, 1, err),
        .unk_id = -1,
        .bos = -1,
        .eos = -1,
    };
    for (int b = 0; b < 256; b++) {
        t->byte_id[b] = t->byte_tok[b] = -1;
        t->byte_cp[b] = (uint16_t)tram_bpe_byte_to_cp((uint8_t)b);
    }
    *out = t;
    if (!t->piece_off || !t->piece_len || !t->attr)
        return -1;
    memset(t->attr, TRAM_ATTR_NORMAL, (size_t)n_vocab);
    return 0;
}

int tram_tok_set_pieces(tram_tokenizer *t, const char *const *pieces, const uint32_t *len, tram_error *err)
{
    size_t total = 0;
    for (int i = 0; i < t->n_vocab; i++)
        total += len[i] + 1;
    if (total > UINT32_MAX)
        return tram_fail(err, "tokenizer: vocabulary strings too large");
    if (!(t->pieces = tram_calloc(total, 1, err)) || tram_strmap_init(&t->vocab, (uint32_t)t->n_vocab, err))
        return -1;
    uint32_t off = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        memcpy(t->pieces + off, pieces[i], len[i]);
        t->piece_off[i] = off;
        t->piece_len[i] = len[i];
        tram_strmap_put(&t->vocab, t->pieces + off, len[i], i);
        off += len[i] + 1;
    }
    return 0;
}

static int is_added(const tram_tokenizer *t, int32_t id)
{
    return (t->attr[id] == TRAM_ATTR_CONTROL || t->attr[id] == TRAM_ATTR_USER) && t->piece_len[id] > 0;
}

static int build_decoded(tram_tokenizer *t, tram_error *err)
{
    size_t total = 0;
    for (int i = 0; i < t->n_vocab; i++)
        total += t->piece_len[i];
    t->dec = tram_calloc(total + 1, 1, err);
    t->dec_off = tram_calloc((size_t)t->n_vocab, sizeof(uint32_t), err);
    t->dec_len = tram_calloc((size_t)t->n_vocab, sizeof(uint32_t), err);
    if (!t->dec || !t->dec_off || !t->dec_len)
        return -1;
    uint32_t off = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        const char *p = t->pieces + t->piece_off[i];
        size_t n;
        if (is_added(t, i)) {   /* added tokens decode to their own text */
            memcpy(t->dec + off, p, t->piece_len[i]);
            n = t->piece_len[i];
        } else if (t->kind == TRAM_TOK_BPE) {
            n = tram_bpe_piece_bytes(p, t->piece_len[i], t->dec + off);
        } else {
            n = tram_spm_piece_bytes(t, i, t->dec + off);
        }
        t->dec_off[i] = off;
        t->dec_len[i] = (uint32_t)n;
        off += (uint32_t)n;
    }
    return 0;
}

static int by_length_desc(const void *a, const void *b, void *ctx)
{
    const tram_tokenizer *t = ctx;
    uint32_t la = t->piece_len[*(const int32_t *)a], lb = t->piece_len[*(const int32_t *)b];
    return la < lb ? 1 : la > lb ? -1 : *(const int32_t *)a - *(const int32_t *)b;
}

static int build_added(tram_tokenizer *t, tram_error *err)
{
    if (!(t->added = tram_calloc((size_t)t->n_vocab, sizeof(int32_t), err)))
        return -1;
    for (int i = 0; i < t->n_vocab; i++)
        if (is_added(t, i)) {
            t->added[t->n_added++] = i;
            t->added_first[(uint8_t)t->pieces[t->piece_off[i]]] = 1;
        }
    qsort_r(t->added, (size_t)t->n_added, sizeof(int32_t), by_length_desc, t);
    return 0;
}

/* End-of-turn markers of the chat formats tram knows; a model that has one
 * of them as a special token stops generating on it, as on EOS. */
static const char *const eog_pieces[] = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "<|end_of_text|>",
};

static int build_eog(tram_tokenizer *t, tram_error *err)
{
    if (!(t->eog = tram_calloc(TRAM_ARRAY_LEN(eog_pieces) + 1, sizeof(int32_t), err)))
        return -1;
    if (t->eos >= 0)
        t->eog[t->n_eog++] = t->eos;
    for (size_t i = 0; i < TRAM_ARRAY_LEN(eog_pieces); i++) {
        int32_t id = tram_tokenizer_find(t, eog_pieces[i]);
        if (id >= 0 && id != t->eos && is_added(t, id))
            t->eog[t->n_eog++] = id;
    }
    return 0;
}

int tram_tok_finish(tram_tokenizer *t, tram_error *err)
{
    for (int b = 0; b < 256 && t->kind == TRAM_TOK_BPE; b++) {
        char buf[4];
        int n = tram_utf8_put(t->byte_cp[b], buf);
        t->byte_id[b] = tram_strmap_get(&t->vocab, buf, (uint32_t)n);
    }
    for (int b = 0; b < 256 && t->kind != TRAM_TOK_BPE; b++) {
        char buf[8];
        snprintf(buf, sizeof(buf), "<0x%02X>", b);
        t->byte_tok[b] = tram_strmap_get(&t->vocab, buf, 6);
    }
    if ((t->bos >= t->n_vocab) || (t->eos >= t->n_vocab))
        return tram_fail(err, "tokenizer: BOS %d / EOS %d outside the vocabulary of %d", t->bos, t->eos,
                         t->n_vocab);
    return build_decoded(t, err) || build_added(t, err) || build_eog(t, err) ? -1 : 0;
}

void tram_tokenizer_free(tram_tokenizer *t)
{
    if (!t)
        return;
    tram_strmap_free(&t->vocab);
    tram_pairmap_free(&t->merges);
    tram_pretok_free(&t->pretok);
    if (t->lib)
        tram_spm_lib_free(t->lib);
    TRAM_FREE_ALL(t->pieces, t->piece_off, t->piece_len, t->dec, t->dec_off, t->dec_len, t->attr, t->scores,
                  t->added, t->eog, t->chat_template, t);
}

const char *tram_tok_token_text(const tram_tokenizer *t, int32_t id, int first, size_t *len)
{
    const char *p = t->dec + t->dec_off[id];
    *len = t->dec_len[id];
    /* SentencePiece's dummy prefix: the space it put before the text goes. */
    if (first && t->kind != TRAM_TOK_BPE && t->add_space_prefix && *len && p[0] == ' ') {
        p++;
        (*len)--;
    }
    return p;
}

/* ---- lookups ---- */

int tram_tokenizer_vocab_size(const tram_tokenizer *t)
{
    return t->n_vocab;
}

const char *tram_tokenizer_piece(const tram_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->pieces + t->piece_off[id] : NULL;
}

const char *tram_tokenizer_token_bytes(const tram_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = t->dec_len[id];
    return t->dec + t->dec_off[id];
}

int tram_tokenizer_is_special(const tram_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->attr[id] == TRAM_ATTR_CONTROL;
}

int32_t tram_tokenizer_find(const tram_tokenizer *t, const char *piece)
{
    return tram_strmap_get(&t->vocab, piece, (uint32_t)strlen(piece));
}

int32_t tram_tokenizer_bos(const tram_tokenizer *t)
{
    return t->bos;
}

int32_t tram_tokenizer_eos(const tram_tokenizer *t)
{
    return t->eos;
}

int tram_tokenizer_adds_bos(const tram_tokenizer *t)
{
    return t->add_bos && t->bos >= 0;
}

const int32_t *tram_tokenizer_eog_ids(const tram_tokenizer *t, int *n)
{
    *n = t->n_eog;
    return t->eog;
}

int tram_tokenizer_is_eog(const tram_tokenizer *t, int32_t id)
{
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return 1;
    return 0;
}

const char *tram_tokenizer_chat_template(const tram_tokenizer *t)
{
    return t->chat_template;
}
