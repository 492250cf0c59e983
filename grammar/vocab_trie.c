/* vocab_trie.c — the vocabulary as a byte trie, one per vocabulary (see
 * vocab_trie.h).  Building one sorts every token, which costs more than a
 * small grammar's compile, so the last one built is kept for the next. */
#include "grammar/vocab_trie.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static tram_vocab_trie *cached;

static uint64_t fingerprint(const struct tram_tokenizer *tok, int vocab)
{
    uint64_t h = tram_mix64((uint64_t)vocab);
    for (int32_t id = 0; id < vocab; id++) {
        size_t len;
        const char *b = tram_tokenizer_token_bytes(tok, id, &len);
        h = tram_mix64(h ^ len ^ (uint64_t)tram_tokenizer_is_special(tok, id) << 40);
        h = tram_fnv1a_more(h, b, len);
    }
    return h;
}

static int cmp_tokens(const void *a, const void *b, void *trie)
{
    const tram_vocab_trie *t = trie;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->tok_len[x], ly = t->tok_len[y];
    int c = memcmp(t->bytes + t->tok_off[x], t->bytes + t->tok_off[y], TRAM_MIN(lx, ly));
    return c ? c : lx != ly ? (lx < ly ? -1 : 1) : (x < y ? -1 : 1);
}

static uint8_t byte_at(const tram_vocab_trie *t, int sorted, int depth)
{
    return t->bytes[t->tok_off[t->sorted_ids[sorted]] + depth];
}

/* Fills node n for the sorted tokens [lo, hi), which share `depth` bytes;
 * its children go into one block at the end of the node array. */
static void build_node(tram_vocab_trie *t, int n, int lo, int hi, int depth)
{
    int mid = lo;
    while (mid < hi && (int)t->tok_len[t->sorted_ids[mid]] == depth)
        mid++;
    int kids = 0;
    for (int i = mid; i < hi; i++)
        kids += i == mid || byte_at(t, i, depth) != byte_at(t, i - 1, depth);
    tram_trie_node *node = &t->nodes[n];
    node->lo = lo;
    node->mid = mid;
    node->hi = hi;
    node->child0 = t->num_nodes;
    node->num_children = kids;
    t->num_nodes += kids;
    int child = node->child0;
    for (int i = mid; i < hi; child++) {
        int j = i + 1;
        while (j < hi && byte_at(t, j, depth) == byte_at(t, i, depth))
            j++;
        t->nodes[child].byte = byte_at(t, i, depth);
        build_node(t, child, i, j, depth + 1);
        i = j;
    }
}

static int copy_tokens(tram_vocab_trie *t, const struct tram_tokenizer *tok, tram_error *err)
{
    size_t total = 0;
    for (int32_t id = 0; id < t->vocab; id++) {
        size_t len;
        tram_tokenizer_token_bytes(tok, id, &len);
        total += tram_tokenizer_is_special(tok, id) ? 0 : len;
    }
    t->bytes = tram_calloc(total + 1, 1, err);
    t->tok_off = tram_calloc((size_t)t->vocab, sizeof(uint32_t), err);
    t->tok_len = tram_calloc((size_t)t->vocab, sizeof(uint32_t), err);
    t->sorted_ids = tram_calloc((size_t)t->vocab + 1, sizeof(int32_t), err);
    if (!t->bytes || !t->tok_off || !t->tok_len || !t->sorted_ids)
        return -1;
    size_t at = 0;
    for (int32_t id = 0; id < t->vocab; id++) {
        size_t len;
        const char *b = tram_tokenizer_token_bytes(tok, id, &len);
        if (tram_tokenizer_is_special(tok, id) || len == 0)
            continue;
        memcpy(t->bytes + at, b, len);
        t->tok_off[id] = (uint32_t)at;
        t->tok_len[id] = (uint32_t)len;
        t->max_len = TRAM_MAX(t->max_len, (int)len);
        t->sorted_ids[t->num_tokens++] = id;
        at += len;
    }
    return 0;
}

static int copy_eog(tram_vocab_trie *t, const struct tram_tokenizer *tok, tram_error *err)
{
    const int32_t *eog = tram_tokenizer_eog_ids(tok, &t->num_eog);
    t->eog = tram_calloc((size_t)t->num_eog + 1, sizeof(int32_t), err);
    if (!t->eog)
        return -1;
    memcpy(t->eog, eog, (size_t)t->num_eog * sizeof(int32_t));
    return 0;
}

static tram_vocab_trie *build(const struct tram_tokenizer *tok, uint64_t fp, tram_error *err)
{
    tram_vocab_trie *t = tram_calloc(1, sizeof(*t), err);
    if (!t)
        return NULL;
    atomic_init(&t->refs, 1);
    t->fingerprint = fp;
    t->vocab = tram_tokenizer_vocab_size(tok);
    if (copy_tokens(t, tok, err) || copy_eog(t, tok, err))
        goto fail;
    qsort_r(t->sorted_ids, (size_t)t->num_tokens, sizeof(int32_t), cmp_tokens, t);
    /* every node but the root ends or branches a token: at most one per byte */
    size_t max_nodes = 1;
    for (int i = 0; i < t->num_tokens; i++)
        max_nodes += t->tok_len[t->sorted_ids[i]];
    t->nodes = tram_calloc(max_nodes, sizeof(tram_trie_node), err);
    if (!t->nodes)
        goto fail;
    t->num_nodes = 1;
    build_node(t, 0, 0, t->num_tokens, 0);
    return t;
fail:
    tram_vocab_trie_release(t);
    return NULL;
}

tram_vocab_trie *tram_vocab_trie_get(const struct tram_tokenizer *tok, tram_error *err)
{
    uint64_t fp = fingerprint(tok, tram_tokenizer_vocab_size(tok));
    pthread_mutex_lock(&cache_lock);
    tram_vocab_trie *t = cached;
    if (t && t->fingerprint == fp) {
        atomic_fetch_add(&t->refs, 1);
    } else if ((t = build(tok, fp, err))) {
        tram_vocab_trie_release(cached);
        cached = t;
        atomic_fetch_add(&t->refs, 1);
    }
    pthread_mutex_unlock(&cache_lock);
    return t;
}

void tram_vocab_trie_release(tram_vocab_trie *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    TRAM_FREE_ALL(t->sorted_ids, t->tok_off, t->tok_len, t->bytes, t->eog, t->nodes, t);
}
