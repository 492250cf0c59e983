/* bpe.c — byte-level BPE (GPT-2 family).  Text is cut into words by the
 * pre-tokenizer; each word starts as one symbol per byte (the byte's
 * single-character token) and adjacent pairs merge by rank, lowest rank
 * first and leftmost first on ties, through a binary heap with lazy
 * invalidation: the same order as HF `tokenizers`' BPE::merge_word. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/heap.h"
#include "tokenizer/ids.h"
#include "tokenizer/maps.h"
#include "tokenizer/pretok.h"
#include "kernels/utf8.h"
#include "tokenizer/vocab.h"

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the other 68 are moved to U+0100 and up, in byte order. */
static int is_printable_byte(int b)
{
    return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t tram_bpe_byte_to_cp(uint8_t b)
{
    if (is_printable_byte(b))
        return b;
    uint32_t n = 0;
    for (int i = 0; i < b; i++)
        n += !is_printable_byte(i);
    return 256 + n;
}

/* The byte code point cp stands for, or -1 when it is not a byte char. */
static int cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return is_printable_byte((int)cp) ? (int)cp : -1;
    uint32_t n = 256;
    for (int b = 0; b < 256; b++)
        if (!is_printable_byte(b) && n++ == cp)
            return b;
    return -1;
}

size_t tram_bpe_piece_bytes(const char *piece, size_t len, char *out)
{
    const unsigned char *u = (const unsigned char *)piece;
    size_t i = 0, o = 0;
    while (i < len) {
        int k = tram_utf8_seq_len(u + i, len - i);
        if (!k) {   /* not UTF-8: keep the byte as it is */
            out[o++] = piece[i++];
            continue;
        }
        uint32_t cp = k == 1 ? u[i] : k == 2 ? (u[i] & 0x1fu) << 6 | (u[i + 1] & 0x3fu)
                                              : (uint32_t)-1;
        int b = cp_to_byte(cp);
        if (b >= 0) {
            out[o++] = (char)b;
        } else {   /* a character outside the byte alphabet stands for itself */
            memcpy(out + o, piece + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    return o;
}

int tram_bpe_add_merge(tram_tokenizer *t, const char *merge, size_t len, int32_t rank, tram_error *err)
{
    const char *sp = memchr(merge, ' ', len);
    if (!sp || sp == merge || sp == merge + len - 1)
        return tram_fail(err, "merge %d '%.*s': expected 'left right'", rank, (int)len, merge);
    size_t ll = (size_t)(sp - merge), rl = len - ll - 1;
    int32_t left = tram_strmap_get(&t->vocab, merge, (uint32_t)ll);
    int32_t right = tram_strmap_get(&t->vocab, sp + 1, (uint32_t)rl);
    char buf[512];
    if (ll + rl > sizeof(buf))
        return tram_fail(err, "merge %d: pieces longer than %zu bytes", rank, sizeof(buf));
    memcpy(buf, merge, ll);
    memcpy(buf + ll, sp + 1, rl);
    int32_t merged = tram_strmap_get(&t->vocab, buf, (uint32_t)(ll + rl));
    /* HF refuses merges whose parts or result are not in the vocabulary. */
    if (left < 0 || right < 0 || merged < 0)
        return tram_fail(err, "merge %d '%.*s': piece not in the vocabulary", rank, (int)len, merge);
    tram_pairmap_put(&t->merges, left, right, rank, merged);
    return 0;
}

/* ---- merging one word ---- */

typedef struct {
    int32_t rank, pos;
} heap_item;

/* Lowest rank first, leftmost first on ties. */
static int item_before(const void *a, const void *b)
{
    const heap_item *x = a, *y = b;
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

typedef struct {
    const tram_tokenizer *t;
    tram_ids *out;
    tram_error *err;
    int cap;            /* symbols the arrays below hold */
    int32_t *id, *prev, *next;
    heap_item *heap;
    int n_heap;
    char *word_chars;   /* byte-level form of a word, for ignore_merges */
} bpe_state;

static void push_pair(bpe_state *s, int32_t pos)
{
    if (pos < 0 || s->next[pos] < 0)
        return;
    int32_t merged, nx = s->next[pos];
    int32_t rank = tram_pairmap_get(&s->t->merges, s->id[pos], s->id[nx], &merged);
    if (rank >= 0)
        tram_heap_push(s->heap, &s->n_heap, sizeof(heap_item), &(heap_item){.rank = rank, .pos = pos}, item_before);
}

static int reserve(bpe_state *s, int n)
{
    if (n <= s->cap)
        return 0;
    int cap = TRAM_MAX(n, 2 * s->cap);
    if (tram_resize((void **)&s->id, (size_t)cap, sizeof(*s->id)) ||
        tram_resize((void **)&s->prev, (size_t)cap, sizeof(*s->prev)) ||
        tram_resize((void **)&s->next, (size_t)cap, sizeof(*s->next)) ||
        tram_resize((void **)&s->heap, 3 * (size_t)cap, sizeof(*s->heap)) ||   /* n - 1 pairs + 2 per merge */
        tram_resize((void **)&s->word_chars, 2 * (size_t)cap, 1))
        return tram_fail(s->err, "encode: out of memory for a %d-byte word", n);
    s->cap = cap;
    return 0;
}

/* Llama-3's tokenizer.json sets ignore_merges: a word that is a whole
 * vocabulary entry is that entry, whatever the merges would make of it. */
static int32_t whole_word(bpe_state *s, const char *word, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += (size_t)tram_utf8_put(s->t->byte_cp[(uint8_t)word[i]], s->word_chars + n);
    return tram_strmap_get(&s->t->vocab, s->word_chars, (uint32_t)n);
}

static int bpe_word(void *ctx, const char *word, size_t len)
{
    bpe_state *s = ctx;
    const tram_tokenizer *t = s->t;
    if (reserve(s, (int)len))
        return -1;
    if (t->ignore_merges) {
        int32_t id = whole_word(s, word, len);
        if (id >= 0)
            return tram_ids_push(s->out, id) ? tram_fail(s->err, "encode: out of memory") : 0;
    }
    /* Bytes without a token in the vocabulary are dropped, as HF's BPE does
     * when the model has no unknown token. */
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_id[(uint8_t)word[i]];
        if (id < 0)
            continue;
        s->id[n] = id;
        s->prev[n] = n - 1;
        s->next[n] = n + 1;
        n++;
    }
    if (!n)
        return 0;
    s->next[n - 1] = -1;
    s->n_heap = 0;
    for (int i = 0; i + 1 < n; i++)
        push_pair(s, i);
    while (s->n_heap) {
        heap_item top;
        tram_heap_pop(s->heap, &s->n_heap, sizeof(top), &top, item_before);
        int32_t p = top.pos, nx = s->next[p], merged;
        /* Stale entries: the symbol was absorbed (id -1), or its right
         * neighbour changed since the pair was queued. */
        if (s->id[p] < 0 || nx < 0 || tram_pairmap_get(&t->merges, s->id[p], s->id[nx], &merged) != top.rank)
            continue;
        s->id[p] = merged;
        s->id[nx] = -1;
        s->next[p] = s->next[nx];
        if (s->next[p] >= 0)
            s->prev[s->next[p]] = p;
        push_pair(s, s->prev[p]);
        push_pair(s, p);
    }
    for (int i = 0; i >= 0; i = s->next[i])
        if (tram_ids_push(s->out, s->id[i]))
            return tram_fail(s->err, "encode: out of memory");
    return 0;
}

int tram_bpe_encode_text(const tram_tokenizer *t, const char *text, size_t len, tram_ids *out,
                         tram_error *err)
{
    bpe_state s = {.t = t, .out = out, .err = err};
    tram_pretok_scratch sc;
    int rc = tram_pretok_scratch_init(&sc, &t->pretok, err);
    if (!rc)
        rc = tram_pretok_split(&t->pretok, &sc, text, len, bpe_word, &s, err);
    tram_pretok_scratch_free(&sc);
    TRAM_FREE_ALL(s.id, s.prev, s.next, s.heap, s.word_chars);
    return rc ? -1 : 0;
}
