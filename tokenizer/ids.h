/* ids.h — the growable array of token ids an encoder appends to.  Inline, so
 * that every encoder (tokenizer.c, bpe.c, spm.c) can push without a call
 * into another file. */
#ifndef TRAM_TOK_IDS_H
#define TRAM_TOK_IDS_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int32_t *v;
    int n, cap;
} tram_ids;

/* Returns -1 when out of memory (the array is left as it was). */
static inline int tram_ids_push(tram_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        int32_t *v = realloc(a->v, (size_t)cap * sizeof(*v));
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

#endif
