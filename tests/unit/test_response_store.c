/* The stored responses (server/response_store.c): a tenant reads only its
 * own, and the bounds (bytes, count, TTL) evict the least recently used
 * or the oldest. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server/response_store.h"

static tram_rstore *store(size_t bytes, size_t count, double ttl)
{
    tram_rstore_config c = {.max_bytes = bytes, .max_count = count, .ttl = ttl};
    tram_rstore *s = tram_rstore_new(&c);
    cr_assert_not_null(s);
    return s;
}

/* 1 when (tenant, id) is there, its response text equal to want. */
static int holds(tram_rstore *s, const char *tenant, const char *id, const char *want, double now)
{
    char *text;
    if (tram_rstore_get(s, tenant, id, TRAM_RSTORE_RESPONSE, &text, now))
        return 0;
    int same = !strcmp(text, want);
    free(text);
    cr_assert(same, "%s/%s holds another text", tenant, id);
    return 1;
}

Test(response_store, a_tenant_reads_and_deletes_only_its_own)
{
    tram_rstore *s = store(1 << 20, 100, 0);
    cr_assert_eq(tram_rstore_put(s, "key1", "resp_a", "{\"a\":1}", "[1]", 0), 0);
    cr_assert(holds(s, "key1", "resp_a", "{\"a\":1}", 0));
    cr_assert_not(holds(s, "key2", "resp_a", "", 0));
    cr_assert_not(holds(s, "", "resp_a", "", 0));
    cr_assert_eq(tram_rstore_delete(s, "key2", "resp_a", 0), -1);
    char *conv;
    cr_assert_eq(tram_rstore_get(s, "key1", "resp_a", TRAM_RSTORE_CONVERSATION, &conv, 0), 0);
    cr_assert_str_eq(conv, "[1]");
    free(conv);
    cr_assert_eq(tram_rstore_delete(s, "key1", "resp_a", 0), 0);
    cr_assert_not(holds(s, "key1", "resp_a", "", 0));
    cr_assert_eq(tram_rstore_count(s), 0);
    tram_rstore_free(s);
}

Test(response_store, the_count_bound_evicts_the_least_recently_used)
{
    tram_rstore *s = store(1 << 20, 2, 0);
    tram_rstore_put(s, "", "r1", "1", "[]", 0);
    tram_rstore_put(s, "", "r2", "2", "[]", 0);
    cr_assert(holds(s, "", "r1", "1", 0));          /* r1 is now the most recent */
    tram_rstore_put(s, "", "r3", "3", "[]", 0);
    cr_assert_not(holds(s, "", "r2", "", 0));
    cr_assert(holds(s, "", "r1", "1", 0));
    cr_assert(holds(s, "", "r3", "3", 0));
    cr_assert_eq(tram_rstore_count(s), 2);
    tram_rstore_free(s);
}

Test(response_store, the_byte_bound_evicts_and_refuses_what_cannot_fit)
{
    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    tram_rstore *s = store(500, 100, 0);
    cr_assert_eq(tram_rstore_put(s, "", "r1", big, "[]", 0), 0);
    cr_assert_eq(tram_rstore_put(s, "", "r2", big, "[]", 0), 0);
    cr_assert_eq(tram_rstore_put(s, "", "r3", big, "[]", 0), 0);
    cr_assert_leq(tram_rstore_bytes(s), 500);
    cr_assert_not(holds(s, "", "r1", "", 0));
    cr_assert(holds(s, "", "r3", big, 0));
    char huge[600];
    memset(huge, 'y', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = 0;
    cr_assert_eq(tram_rstore_put(s, "", "r4", huge, "[]", 0), -1);
    cr_assert(holds(s, "", "r3", big, 0));            /* a refused entry evicts nothing */
    tram_rstore_free(s);
}

Test(response_store, entries_expire_after_the_ttl_however_recently_used)
{
    tram_rstore *s = store(1 << 20, 100, 10);
    tram_rstore_put(s, "", "old", "1", "[]", 0);
    tram_rstore_put(s, "", "new", "2", "[]", 5);
    cr_assert(holds(s, "", "old", "1", 9));
    cr_assert_not(holds(s, "", "old", "", 10));
    cr_assert(holds(s, "", "new", "2", 14));
    cr_assert_not(holds(s, "", "new", "", 15.5));
    cr_assert_eq(tram_rstore_count(s), 0);
    tram_rstore_free(s);
}

Test(response_store, storing_an_id_again_replaces_it)
{
    tram_rstore *s = store(1 << 20, 100, 0);
    tram_rstore_put(s, "", "r", "1", "[]", 0);
    tram_rstore_put(s, "", "r", "2", "[]", 0);
    cr_assert(holds(s, "", "r", "2", 0));
    cr_assert_eq(tram_rstore_count(s), 1);
    tram_rstore_free(s);
}
