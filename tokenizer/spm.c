/* spm.c — SentencePiece-style vocabularies stored in GGUF (model "llama"):
 * spaces become U+2581, a dummy prefix goes before the text, characters
 * merge pairwise by the score of the merged piece (highest first, leftmost
 * on ties) as sentencepiece's BPE model does, and characters left without a
 * piece fall back to <0xXX> byte tokens (or <unk>). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/heap.h"
#include "tokenizer/ids.h"
#include "tokenizer/maps.h"
#include "tokenizer/spm.h"
#include "tokenizer/spm_lib.h"
#include "kernels/utf8.h"
#include "tokenizer/vocab.h"

#define SPACE_MARK "\xe2\x96\x81"   /* U+2581 */

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size;
} bigram;

typedef struct {
    uint32_t off, len;
    int32_t prev, next;
} symbol;

typedef struct {
    const tram_tokenizer *t;
    const char *text;
    symbol *sym;
    bigram *heap;
    int n_heap;
} spm_state;

/* Highest score first, leftmost first on ties. */
static int bigram_before(const void *a, const void *b)
{
    const bigram *x = a, *y = b;
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

/* Queues the pair (left, its right neighbour) when their concatenation is a
 * piece merges may produce (normal or user-defined, as in sentencepiece). */
static void try_pair(spm_state *s, int32_t left)
{
    if (left < 0 || s->sym[left].next < 0)
        return;
    int32_t right = s->sym[left].next;
    uint32_t size = s->sym[left].len + s->sym[right].len;
    int32_t id = tram_strmap_get(&s->t->vocab, s->text + s->sym[left].off, size);
    if (id < 0 || (s->t->attr[id] != TRAM_ATTR_NORMAL && s->t->attr[id] != TRAM_ATTR_USER))
        return;
    bigram g = {.score = s->t->scores[id], .left = left, .right = right, .size = size};
    tram_heap_push(s->heap, &s->n_heap, sizeof(g), &g, bigram_before);
}

static int emit_symbol(spm_state *s, const symbol *sy, tram_ids *out)
{
    const tram_tokenizer *t = s->t;
    int32_t id = tram_strmap_get(&t->vocab, s->text + sy->off, sy->len);
    if (id >= 0 && t->attr[id] != TRAM_ATTR_UNKNOWN)
        return tram_ids_push(out, id);
    if (t->byte_tok[(uint8_t)s->text[sy->off]] < 0)
        return tram_ids_push(out, t->unk_id >= 0 ? t->unk_id : 0);
    for (uint32_t i = 0; i < sy->len; i++)
        if (tram_ids_push(out, t->byte_tok[(uint8_t)s->text[sy->off + i]]))
            return -1;
    return 0;
}

/* Replaces spaces by U+2581, with one more in front for the dummy prefix. */
static size_t normalize(const tram_tokenizer *t, const char *text, size_t len, int at_start, char *out)
{
    size_t o = 0;
    if (at_start && t->add_space_prefix) {
        memcpy(out, SPACE_MARK, 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(out + o, SPACE_MARK, 3);
            o += 3;
        } else {
            out[o++] = text[i];
        }
    }
    return o;
}

static int merge_all(spm_state *s, int n, tram_ids *out)
{
    for (int i = 0; i + 1 < n; i++)
        try_pair(s, i);
    while (s->n_heap) {
        bigram g;
        tram_heap_pop(s->heap, &s->n_heap, sizeof(g), &g, bigram_before);
        symbol *l = &s->sym[g.left], *r = &s->sym[g.right];
        /* Stale: one side was merged away or grew since the pair was queued. */
        if (!l->len || !r->len || l->next != g.right || l->len + r->len != g.size)
            continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            s->sym[r->next].prev = g.left;
        try_pair(s, l->prev);
        try_pair(s, g.left);
    }
    for (int i = 0; i >= 0; i = s->sym[i].next)
        if (emit_symbol(s, &s->sym[i], out))
            return -1;
    return 0;
}

int tram_spm_encode_text(const tram_tokenizer *t, const char *text, size_t len, int at_start, tram_ids *out,
                         tram_error *err)
{
    if (t->kind == TRAM_TOK_SPM_LIB) {
        int32_t *ids;
        int n = tram_spm_lib_encode(t->lib, text, len, &ids);
        for (int i = 0; i < n; i++)
            if (tram_ids_push(out, ids[i]))
                n = -1;
        free(ids);
        return n < 0 ? tram_fail(err, "encode: sentencepiece failed") : 0;
    }
    size_t cap = 3 * len + 3;
    char *norm = malloc(cap);
    /* The heap holds the n - 1 first pairs and 2 more per merge. */
    spm_state s = {
        .t = t,
        .text = norm,
        .sym = malloc(cap * sizeof(symbol)),
        .heap = malloc(3 * cap * sizeof(bigram)),
    };
    int rc = norm && s.sym && s.heap ? 0 : -1;
    if (!rc) {
        size_t n = normalize(t, text, len, at_start, norm);
        int k = 0;
        for (size_t i = 0; i < n; k++) {
            uint32_t cl = (uint32_t)tram_utf8_seq_len((const unsigned char *)norm + i, n - i);
            s.sym[k] = (symbol){.off = (uint32_t)i, .len = cl, .prev = k - 1, .next = k + 1};
            i += cl;
        }
        if (k) {
            s.sym[k - 1].next = -1;
            rc = merge_all(&s, k, out);
        }
    }
    TRAM_FREE_ALL(norm, s.sym, s.heap);
    return rc ? tram_fail(err, "encode: out of memory") : 0;
}

size_t tram_spm_piece_bytes(const tram_tokenizer *t, int32_t id, char *out)
{
    const char *p = t->pieces + t->piece_off[id];
    uint32_t len = t->piece_len[id];
    if (t->attr[id] == TRAM_ATTR_BYTE && len == 6 && !memcmp(p, "<0x", 3)) {
        out[0] = (char)strtol(p + 3, NULL, 16);
        return 1;
    }
    size_t o = 0;
    for (uint32_t i = 0; i < len;) {
        if (i + 3 <= len && !memcmp(p + i, SPACE_MARK, 3)) {
            out[o++] = ' ';
            i += 3;
        } else {
            out[o++] = p[i++];
        }
    }
    return o;
}
