/* The ground floor's small helpers: the intrusive list and the chain
 * reversal (kernels/list.h), FNV-1a, tram_resize and tram_alloc_stream
 * (kernels/base.h). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"
#include "kernels/list.h"

typedef struct item item;
struct item {
    int id;
    item *prev, *next;           /* the first list */
    item *age_prev, *age_next;   /* the second */
};

typedef TRAM_LIST_OF(item) item_list;

/* Checks that l holds the ids in want, both ways round. */
static void expect_order(const item_list *l, const int *want, int n)
{
    int i = 0;
    for (const item *e = l->head; e; e = e->next, i++)
        cr_assert(i < n && e->id == want[i], "forward: position %d holds %d", i, e->id);
    cr_assert_eq(i, n);
    for (const item *e = l->tail; e; e = e->prev)
        cr_assert_eq(e->id, want[--i], "backward: position %d holds %d", i, e->id);
    cr_assert_eq(i, 0);
    cr_assert_eq(l->count, n, "the list counts %d elements, holds %d", l->count, n);
}

Test(base, list_pushes_at_both_ends_and_removes_anywhere)
{
    item it[4] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}};
    item_list l = {0};
    TRAM_LIST_PUSH_HEAD(&l, &it[1], prev, next);
    TRAM_LIST_PUSH_HEAD(&l, &it[0], prev, next);
    TRAM_LIST_PUSH_TAIL(&l, &it[2], prev, next);
    TRAM_LIST_PUSH_TAIL(&l, &it[3], prev, next);
    expect_order(&l, (int[]){0, 1, 2, 3}, 4);
    TRAM_LIST_REMOVE(&l, &it[1], prev, next);
    expect_order(&l, (int[]){0, 2, 3}, 3);
    cr_assert(!it[1].prev && !it[1].next, "a removed element keeps its links");
    TRAM_LIST_REMOVE(&l, &it[0], prev, next);
    TRAM_LIST_REMOVE(&l, &it[3], prev, next);
    expect_order(&l, (int[]){2}, 1);
    TRAM_LIST_REMOVE(&l, &it[2], prev, next);
    cr_assert(!l.head && !l.tail && !l.count);
}

Test(base, one_element_sits_on_two_lists)
{
    item it[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    item_list used = {0}, age = {0};
    for (int i = 0; i < 3; i++) {
        TRAM_LIST_PUSH_HEAD(&used, &it[i], prev, next);
        TRAM_LIST_PUSH_TAIL(&age, &it[i], age_prev, age_next);
    }
    TRAM_LIST_REMOVE(&used, &it[0], prev, next);
    TRAM_LIST_PUSH_HEAD(&used, &it[0], prev, next);
    expect_order(&used, (int[]){0, 2, 1}, 3);
    int i = 0;
    for (const item *e = age.head; e; e = e->age_next, i++)
        cr_assert_eq(e->id, i, "the age list moved with the use list");
    cr_assert_eq(i, 3);
}

/* The FNV-1a reference vectors. */
Test(base, fnv1a_gives_the_reference_values)
{
    cr_assert_eq(tram_fnv1a("", 0), 0xcbf29ce484222325ULL);
    cr_assert_eq(tram_fnv1a("a", 1), 0xaf63dc4c8601ec8cULL);
    cr_assert_eq(tram_fnv1a("foobar", 6), 0x85944171f73967e8ULL);
    cr_assert_eq(tram_fnv1a_more(tram_fnv1a("foo", 3), "bar", 3), tram_fnv1a("foobar", 6),
                 "a hash continued over two runs differs from one over both");
}

Test(base, resize_keeps_the_items_and_leaves_the_array_on_failure)
{
    int *v = NULL;
    cr_assert_eq(tram_resize((void **)&v, 4, sizeof(*v)), 0);
    for (int i = 0; i < 4; i++)
        v[i] = i * 7;
    cr_assert_eq(tram_resize((void **)&v, 1000, sizeof(*v)), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(v[i], i * 7);
    int *before = v;
    cr_assert_eq(tram_resize((void **)&v, SIZE_MAX / 2, 1), -1);
    cr_assert_eq(v, before, "a failed resize moved the array");
    cr_assert_eq(v[3], 21);
    free(v);
}

typedef struct pushed pushed;
struct pushed {
    int id;
    pushed *next;
};

Test(base, chain_reverse_turns_a_stack_oldest_first)
{
    pushed p[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    pushed *stack = NULL;
    for (int i = 0; i < 3; i++) {   /* pushed as a lock-free stack is: newest on top */
        p[i].next = stack;
        stack = &p[i];
    }
    TRAM_CHAIN_REVERSE(pushed, stack, next);
    int i = 0;
    for (const pushed *e = stack; e; e = e->next, i++)
        cr_assert_eq(e->id, i, "position %d holds %d", i, e->id);
    cr_assert_eq(i, 3);
    pushed *empty = NULL;
    TRAM_CHAIN_REVERSE(pushed, empty, next);
    cr_assert_null(empty);
}

/* Small buffers on a cache line, large ones on a 2 MiB boundary (where a
 * huge page can back them), all of the size asked and writable. */
Test(base, stream_memory_is_aligned_for_its_size)
{
    static const size_t sizes[] = {0, 1, 100, (size_t)2 << 20, ((size_t)5 << 20) + 3};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(sizes); i++) {
        tram_error err = {{0}};
        unsigned char *p = tram_alloc_stream(sizes[i], &err);
        cr_assert(p, "%zu bytes: %s", sizes[i], err.msg);
        size_t align = sizes[i] >= ((size_t)2 << 20) ? (size_t)2 << 20 : 64;
        cr_assert_eq((uintptr_t)p % align, 0, "%zu bytes at %p", sizes[i], (void *)p);
        memset(p, 0xa5, sizes[i]);
        cr_assert(!sizes[i] || p[sizes[i] - 1] == 0xa5);
        free(p);
    }
    tram_error err = {{0}};
    cr_assert_null(tram_alloc_stream(SIZE_MAX - 4096, &err), "an impossible size fails");
    cr_assert_null(tram_alloc_stream(SIZE_MAX - 8, &err), "and does not wrap to a small one");
    cr_assert(strstr(err.msg, "out of memory"), "%s", err.msg);
}
