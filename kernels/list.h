/* list.h — the one intrusive doubly-linked list.
 *
 * An element carries its own links, so putting it on a list allocates
 * nothing and taking it off is O(1) from the element alone.  The links'
 * names are arguments, so one element can sit on two lists at once (the
 * response store keeps each entry on a recency list and an age list).
 *
 * A list is a TRAM_LIST_OF(type): its head and tail, both NULL when empty,
 * and how many elements it holds.
 * The macros evaluate their arguments more than once: pass plain lvalues. */
#ifndef TRAM_LIST_H
#define TRAM_LIST_H

#include <stddef.h>

/* The struct of `type` whose member `member` is at ptr: from an intrusive
 * link (or task) back to the element that embeds it. */
#define TRAM_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* The ends and the length of a list of `type` elements. */
#define TRAM_LIST_OF(type) \
    struct {               \
        type *head, *tail; \
        int count;         \
    }

/* Puts e, on no list through these links, at the `first` end of the list
 * at l, whose other end is `last`; `before` and `after` are e's links
 * toward them.  Pushing at the tail is pushing at the head of the list
 * read backwards. */
#define TRAM_LIST_PUSH_END_(l, e, first, last, before, after) \
    do {                                                      \
        (e)->before = NULL;                                   \
        (e)->after = (l)->first;                              \
        if ((l)->first)                                       \
            (l)->first->before = (e);                         \
        else                                                  \
            (l)->last = (e);                                  \
        (l)->first = (e);                                     \
        (l)->count++;                                         \
    } while (0)

/* Puts e, on no list through these links, first (last) on the list at l. */
#define TRAM_LIST_PUSH_HEAD(l, e, prev, next) TRAM_LIST_PUSH_END_(l, e, head, tail, prev, next)
#define TRAM_LIST_PUSH_TAIL(l, e, prev, next) TRAM_LIST_PUSH_END_(l, e, tail, head, next, prev)

/* Takes e off the list at l; its links are NULL after. */
#define TRAM_LIST_REMOVE(l, e, prev, next) \
    do {                                   \
        if ((e)->prev)                     \
            (e)->prev->next = (e)->next;   \
        else                               \
            (l)->head = (e)->next;         \
        if ((e)->next)                     \
            (e)->next->prev = (e)->prev;   \
        else                               \
            (l)->tail = (e)->prev;         \
        (e)->prev = (e)->next = NULL;      \
        (l)->count--;                      \
    } while (0)

/* Reverses the singly linked chain that starts at the lvalue head, through
 * each element's `next`: a lock-free stack taken whole (atomic_exchange)
 * holds its pushes newest first, and its taker wants them oldest first. */
#define TRAM_CHAIN_REVERSE(type, head, next)      \
    do {                                          \
        type *reversed_ = NULL, *rest_ = (head);  \
        while (rest_) {                           \
            type *after_ = rest_->next;           \
            rest_->next = reversed_;              \
            reversed_ = rest_;                    \
            rest_ = after_;                       \
        }                                         \
        (head) = reversed_;                       \
    } while (0)

#endif
