/* vocab_trie.h — the vocabulary's token strings (their decoded bytes,
 * byte-fallback tokens included) sorted and laid out as a byte trie, the
 * structure the token mask walks (internal to grammar/).
 *
 * Control tokens are not in the trie: they are not text.  The
 * end-of-generation ids are kept aside; the mask allows them only where
 * the grammar can end.  A trie is immutable and reference-counted; one is
 * built per tokenizer and shared by every grammar compiled against it. */
#ifndef TRAM_GRAMMAR_VOCAB_TRIE_H
#define TRAM_GRAMMAR_VOCAB_TRIE_H

#include <stdatomic.h>
#include <stdint.h>

#include "kernels/base.h"

struct tram_tokenizer;

typedef struct {
    int32_t child0, num_children;  /* children are nodes[child0 ..] */
    int32_t lo, mid, hi;           /* sorted tokens: [lo, mid) end here, [mid, hi) below */
    uint8_t byte;                  /* the byte that leads here from the parent */
} tram_trie_node;

typedef struct {
    atomic_int refs;
    uint64_t fingerprint;          /* of the vocabulary it was built from */
    int vocab;                     /* ids [0, vocab) */
    int num_tokens;                /* in the trie */
    int32_t *sorted_ids;           /* [num_tokens] by bytes */
    uint32_t *tok_off, *tok_len;   /* [vocab] into bytes (len 0: not in the trie) */
    uint8_t *bytes;
    int max_len;
    int32_t *eog;                  /* end-of-generation ids */
    int num_eog;
    tram_trie_node *nodes;         /* nodes[0] is the root */
    int num_nodes;
} tram_vocab_trie;

/* The trie of tok's vocabulary: the shared one when tok's vocabulary has
 * been seen before, else a new one.  Returns a reference. */
tram_vocab_trie *tram_vocab_trie_get(const struct tram_tokenizer *tok, tram_error *err);
void tram_vocab_trie_release(tram_vocab_trie *t);

static inline const uint8_t *tram_trie_token(const tram_vocab_trie *t, int32_t id, int *len)
{
    *len = (int)t->tok_len[id];
    return t->bytes + t->tok_off[id];
}

#endif
