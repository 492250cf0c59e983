/* heap.h — the binary heap both merge loops (bpe.c, spm.c) take their next
 * pair from.  Items are fixed-size structs in caller-owned memory; `before`
 * orders them, ties included, which is what makes the merge order exactly
 * that of HF `tokenizers` and sentencepiece. */
#ifndef TRAM_TOK_HEAP_H
#define TRAM_TOK_HEAP_H

#include <stddef.h>

typedef struct {
    void *items;   /* room for every item that will be pushed */
    size_t size;   /* bytes per item */
    int n;
    int (*before)(const void *a, const void *b);   /* a is popped before b */
} tram_heap;

void tram_heap_push(tram_heap *h, const void *item);
/* Moves the first item into *top; h->n must be above 0. */
void tram_heap_pop(tram_heap *h, void *top);

#endif
