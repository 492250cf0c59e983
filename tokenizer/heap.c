/* heap.c — see heap.h.  Sift-up on push, sift-down of the last item on pop. */
#include <string.h>

#include "tokenizer/heap.h"

static void *at(const tram_heap *h, int i)
{
    return (char *)h->items + (size_t)i * h->size;
}

void tram_heap_push(tram_heap *h, const void *item)
{
    int i = h->n++;
    while (i > 0 && h->before(item, at(h, (i - 1) / 2))) {
        memcpy(at(h, i), at(h, (i - 1) / 2), h->size);
        i = (i - 1) / 2;
    }
    memcpy(at(h, i), item, h->size);
}

void tram_heap_pop(tram_heap *h, void *top)
{
    memcpy(top, h->items, h->size);
    /* The last item stays in its slot, past the new end, while the hole at
     * the root moves down to where it belongs. */
    const void *last = at(h, --h->n);
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->before(at(h, c + 1), at(h, c)))
            c++;
        if (!h->before(at(h, c), last))
            break;
        memcpy(at(h, i), at(h, c), h->size);
        i = c;
    }
    memmove(at(h, i), last, h->size);   /* i == n when the heap is now empty */
}
