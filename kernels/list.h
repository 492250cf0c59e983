/* list.h — the one intrusive doubly-linked list.
 *
 * An element carries its own links, so putting it on a list allocates
 * nothing and taking it off is O(1) from the element alone.  The links'
 * names are arguments, so one element can sit on two lists at once (the
 * response store keeps each entry on a recency list and an age list).
 *
 * A list is a TRAM_LIST_OF(type): its head and tail, both NULL when empty.
 * The macros evaluate their arguments more than once: pass plain lvalues. */
#ifndef TRAM_LIST_H
#define TRAM_LIST_H

/* The head and tail of a list of `type` elements. */
#define TRAM_LIST_OF(type) \
    struct {               \
        type *head, *tail; \
    }

/* Puts e, on no list through these links, first on the list at l. */
#define TRAM_LIST_PUSH_HEAD(l, e, prev, next) \
    do {                                      \
        (e)->prev = NULL;                     \
        (e)->next = (l)->head;                \
        if ((l)->head)                        \
            (l)->head->prev = (e);            \
        else                                  \
            (l)->tail = (e);                  \
        (l)->head = (e);                      \
    } while (0)

/* Puts e, on no list through these links, last on the list at l. */
#define TRAM_LIST_PUSH_TAIL(l, e, prev, next) \
    do {                                      \
        (e)->next = NULL;                     \
        (e)->prev = (l)->tail;                \
        if ((l)->tail)                        \
            (l)->tail->next = (e);            \
        else                                  \
            (l)->head = (e);                  \
        (l)->tail = (e);                      \
    } while (0)

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
    } while (0)

#endif
