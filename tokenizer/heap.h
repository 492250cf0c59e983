/* heap.h — the binary heap both merge loops (bpe.c, spm.c) take their next
 * pair from: items of `size` bytes in caller-owned memory, ordered by
 * `before`, ties included, which is what makes the merge order exactly that
 * of HF `tokenizers` and sentencepiece.  Inline, so that each caller's item
 * size and comparison are compiled into its merge loop, the encoders' hot
 * path. */
#ifndef TRAM_TOK_HEAP_H
#define TRAM_TOK_HEAP_H

#include <stddef.h>
#include <string.h>

typedef int (*tram_heap_before)(const void *a, const void *b);   /* a is popped before b */

static inline void *tram_heap_at(void *items, size_t size, int i)
{
    return (char *)items + (size_t)i * size;
}

/* Adds item to the n items of the heap (room for one more is the caller's). */
static inline void tram_heap_push(void *items, int *n, size_t size, const void *item, tram_heap_before before)
{
    int i = (*n)++;
    while (i > 0 && before(item, tram_heap_at(items, size, (i - 1) / 2))) {
        memcpy(tram_heap_at(items, size, i), tram_heap_at(items, size, (i - 1) / 2), size);
        i = (i - 1) / 2;
    }
    memcpy(tram_heap_at(items, size, i), item, size);
}

/* Moves the first of the n items (n > 0) into *top. */
static inline void tram_heap_pop(void *items, int *n, size_t size, void *top, tram_heap_before before)
{
    memcpy(top, items, size);
    /* The last item stays in its slot, past the new end, while the hole at
     * the root moves down to where it belongs. */
    const void *last = tram_heap_at(items, size, --*n);
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(tram_heap_at(items, size, c + 1), tram_heap_at(items, size, c)))
            c++;
        if (!before(tram_heap_at(items, size, c), last))
            break;
        memcpy(tram_heap_at(items, size, i), tram_heap_at(items, size, c), size);
        i = c;
    }
    memmove(tram_heap_at(items, size, i), last, size);   /* i == n when the heap is now empty */
}

#endif
