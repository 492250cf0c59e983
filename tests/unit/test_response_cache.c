/* The response cache (server/response_cache.c): single-flight, LRU by bytes,
 * TTL; the keys and who may be cached (server/cache_key.c); the cost window
 * (server/cost.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/cache_key.h"
#include "server/cost.h"
#include "server/response_cache.h"

static tram_event output_event(const char *text, tram_finish_reason reason)
{
    return (tram_event){.kind = TRAM_EV_OUTPUT,
                        .out = {.text = text, .text_len = strlen(text), .finish_reason = reason}};
}

/* A ready entry under key whose one record carries `text`. */
static void put(tram_rcache *c, const char *key, const char *text, double now)
{
    tram_rcache_entry *e;
    cr_assert_eq(tram_rcache_lookup(c, key, strlen(key), now, &e), TRAM_RCACHE_MISS);
    tram_event ev = output_event(text, TRAM_FINISH_STOP);
    cr_assert_eq(tram_rcache_append(c, e, &ev, 0), 0);
    tram_rcache_complete(c, e, 1, now);
}

/* A text of n - 1 bytes, so an entry holding it is about n bytes. */
static void fill(char *text, size_t n)
{
    memset(text, 'x', n - 1);
    text[n - 1] = 0;
}

static tram_rcache_result look(tram_rcache *c, const char *key, double now, tram_rcache_entry **e)
{
    return tram_rcache_lookup(c, key, strlen(key), now, e);
}

Test(response_cache, identical_requests_share_one_flight_and_its_records)
{
    tram_rcache *c = tram_rcache_new(&(tram_rcache_config){.max_bytes = 1 << 20});
    tram_rcache_entry *leader, *joined;
    cr_assert_eq(look(c, "k", 0, &leader), TRAM_RCACHE_MISS);
    tram_event accepted = {.kind = TRAM_EV_ACCEPTED};
    tram_event first = output_event("Hel", TRAM_FINISH_NONE);
    tram_rcache_append(c, leader, &accepted, 0);
    tram_rcache_append(c, leader, &first, 0);
    cr_assert_eq(look(c, "k", 1, &joined), TRAM_RCACHE_JOIN);
    cr_assert_eq(joined, leader);
    int f1, f2;
    tram_rcache_follow(c, joined, &f1);
    tram_rcache_follow(c, joined, &f2);
    /* a late follower sees what was recorded before it came */
    cr_assert_eq(tram_rcache_num_records(joined), 2);
    cr_assert_str_eq(tram_rcache_record_at(joined, 1)->out.text, "Hel");
    tram_rcache_unfollow(joined, &f1);
    cr_assert_eq(tram_rcache_num_followers(joined), 1);
    cr_assert_eq(tram_rcache_follower(joined, 0), &f2);
    tram_rcache_unfollow(joined, &f2);
    tram_event last = output_event("lo", TRAM_FINISH_STOP);
    tram_rcache_append(c, leader, &last, 0);
    tram_rcache_complete(c, leader, 1, 2);
    tram_rcache_entry *hit;
    cr_assert_eq(look(c, "k", 3, &hit), TRAM_RCACHE_HIT);
    cr_assert_eq(tram_rcache_num_records(hit), 3);
    cr_assert_str_eq(tram_rcache_record_at(hit, 2)->out.text, "lo");
    tram_rcache_stats st;
    tram_rcache_stats_get(c, &st);
    cr_assert_eq(st.misses, 1);
    cr_assert_eq(st.coalesced, 2);
    cr_assert_eq(st.hits, 1);
    cr_assert_eq(st.entries, 1);
    cr_assert_eq(st.in_flight, 0);
    tram_rcache_free(c);
}

Test(response_cache, failures_are_never_cached)
{
    tram_rcache *c = tram_rcache_new(&(tram_rcache_config){.max_bytes = 1 << 20});
    tram_rcache_entry *e;
    look(c, "k", 0, &e);
    tram_event rejected = {.kind = TRAM_EV_REJECTED, .error = {.status = 503, .message = "full"}};
    tram_rcache_append(c, e, &rejected, 0);
    /* a follower joining now learns of the rejection */
    const tram_rcache_record *r = tram_rcache_record_at(e, 0);
    cr_assert_eq(r->kind, TRAM_EV_REJECTED);
    cr_assert_eq(r->error->status, 503);
    cr_assert_str_eq(r->error->message, "full");
    tram_rcache_complete(c, e, 0, 1);
    cr_assert_eq(look(c, "k", 2, &e), TRAM_RCACHE_MISS, "a failed flight left an entry");
    tram_rcache_complete(c, e, 0, 2);
    tram_rcache_stats st;
    tram_rcache_stats_get(c, &st);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.bytes, 0);
    tram_rcache_free(c);
}

Test(response_cache, the_least_recently_used_entry_is_evicted_for_room)
{
    char big[2000];
    fill(big, sizeof(big));
    /* room for two entries of ~2.4 kB, not three */
    tram_rcache *c = tram_rcache_new(&(tram_rcache_config){.max_bytes = 6000});
    put(c, "a", big, 0);
    put(c, "b", big, 0);
    tram_rcache_entry *e;
    cr_assert_eq(look(c, "a", 1, &e), TRAM_RCACHE_HIT);  /* a is now the most recent */
    put(c, "c", big, 2);
    cr_assert_eq(look(c, "a", 3, &e), TRAM_RCACHE_HIT);
    cr_assert_eq(look(c, "c", 3, &e), TRAM_RCACHE_HIT);
    cr_assert_eq(look(c, "b", 3, &e), TRAM_RCACHE_MISS, "b was the least recently used");
    tram_rcache_complete(c, e, 0, 3);
    tram_rcache_stats st;
    tram_rcache_stats_get(c, &st);
    cr_assert_eq(st.evicted_size, 1);
    cr_assert_leq(st.bytes, 6000);
    cr_assert_eq(st.entries, 2);
    tram_rcache_free(c);
}

Test(response_cache, an_entry_larger_than_the_cache_is_not_kept)
{
    char big[2000];
    fill(big, sizeof(big));
    tram_rcache *c = tram_rcache_new(&(tram_rcache_config){.max_bytes = 1000});
    put(c, "a", big, 0);
    tram_rcache_entry *e;
    cr_assert_eq(look(c, "a", 1, &e), TRAM_RCACHE_MISS);
    tram_rcache_complete(c, e, 0, 1);
    tram_rcache_free(c);
}

Test(response_cache, entries_expire_after_the_ttl)
{
    tram_rcache *c = tram_rcache_new(&(tram_rcache_config){.max_bytes = 1 << 20, .ttl = 10});
    put(c, "a", "old", 0);
    put(c, "b", "newer", 5);
    tram_rcache_entry *e;
    cr_assert_eq(look(c, "a", 9.9, &e), TRAM_RCACHE_HIT);
    tram_rcache_expire(c, 10.5);
    tram_rcache_stats st;
    tram_rcache_stats_get(c, &st);
    cr_assert_eq(st.evicted_ttl, 1, "a hit does not extend the TTL");
    cr_assert_eq(st.entries, 1);
    cr_assert_eq(look(c, "b", 14, &e), TRAM_RCACHE_HIT);
    cr_assert_eq(look(c, "b", 15, &e), TRAM_RCACHE_MISS);
    tram_rcache_complete(c, e, 0, 15);
    tram_rcache_free(c);
}

Test(response_cache, keys_differ_by_bytes_not_only_by_hash)
{
    tram_rcache *c = tram_rcache_new(&(tram_rcache_config){.max_bytes = 1 << 20});
    for (int i = 0; i < 500; i++) {  /* past the first bucket growth */
        char key[16];
        snprintf(key, sizeof(key), "key%d", i);
        put(c, key, key, 0);
    }
    for (int i = 0; i < 500; i++) {
        char key[16];
        tram_rcache_entry *e;
        snprintf(key, sizeof(key), "key%d", i);
        cr_assert_eq(look(c, key, 1, &e), TRAM_RCACHE_HIT);
        cr_assert_str_eq(tram_rcache_record_at(e, 0)->out.text, key);
    }
    tram_rcache_free(c);
}

/* ------------------------------------------------------------ keys */

static char *key_of_tenant(const char *body, const char *model, const char *tenant, const int32_t *ids, int n)
{
    tram_api_request r;
    tram_api_error e = {0};
    tram_sampling_params d;
    tram_sampling_params_init(&d);
    cr_assert_eq(tram_api_request_parse(&r, TRAM_API_COMPLETION, &d, body, strlen(body), &e), 0,
                 "%s", e.message);
    tram_cache_prompts p = {.ids = &ids, .num_ids = &n, .num_prompts = 1};
    char *key;
    size_t len;
    cr_assert_eq(tram_cache_key(&r, model, tenant, &p, &key, &len), 0);
    tram_api_request_free(&r);
    /* as text, for comparing: the ids are what the test varies last */
    char *hex = malloc(2 * len + 1);
    for (size_t i = 0; i < len; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)key[i]);
    free(key);
    return hex;
}

static char *key_of(const char *body, const char *model, const int32_t *ids, int n)
{
    return key_of_tenant(body, model, "", ids, n);
}

static int same_key(const char *a, const char *b)
{
    static const int32_t ids[] = {1, 2, 3};
    char *ka = key_of(a, "m", ids, 3), *kb = key_of(b, "m", ids, 3);
    int same = !strcmp(ka, kb);
    free(ka);
    free(kb);
    return same;
}

Test(cache_key, delivery_fields_and_the_model_alias_stay_out_of_the_key)
{
    const char *base = "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5}";
    cr_assert(same_key(base, "{\"max_tokens\": 5, \"temperature\": 0, \"prompt\": \"hi\"}"));
    cr_assert(same_key(base, "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, "
                             "\"stream\": true, \"stream_options\": {\"include_usage\": true}, "
                             "\"user\": \"u1\", \"model\": \"alias\", \"priority\": 3}"));
}

Test(cache_key, every_other_field_is_in_the_key_even_one_added_later)
{
    const char *base = "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5}";
    const char *changed[] = {
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 6}",
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, \"stop\": [\"x\"]}",
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, \"seed\": 1}",
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, \"logprobs\": 2}",
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, \"echo\": true}",
        /* fields the cache code never names (the constraints) change the key all the same */
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, \"response_format\": "
        "{\"type\": \"json_object\"}}",
        "{\"prompt\": \"hi\", \"temperature\": 0, \"max_tokens\": 5, \"guided_regex\": \"a+\"}",
    };
    for (size_t i = 0; i < sizeof(changed) / sizeof(changed[0]); i++)
        cr_assert_not(same_key(base, changed[i]), "%s", changed[i]);
}

Test(cache_key, the_served_model_and_the_token_ids_are_in_the_key)
{
    const char *body = "{\"prompt\": \"hi\", \"temperature\": 0}";
    static const int32_t a[] = {1, 2, 3}, b[] = {1, 2, 4};
    char *k1 = key_of(body, "m", a, 3), *k2 = key_of(body, "m", b, 3),
         *k3 = key_of(body, "other", a, 3), *k4 = key_of(body, "m", a, 2);
    cr_assert_str_neq(k1, k2);
    cr_assert_str_neq(k1, k3);
    cr_assert_str_neq(k1, k4);
    free(k1), free(k2), free(k3), free(k4);
}

/* Tenants never share an entry; "ab" + "c" is not "a" + "bc" either. */
Test(cache_key, the_tenant_is_in_the_key)
{
    const char *body = "{\"prompt\": \"hi\", \"temperature\": 0}";
    static const int32_t a[] = {1, 2, 3};
    char *k1 = key_of_tenant(body, "m", "alice", a, 3), *k2 = key_of_tenant(body, "m", "bob", a, 3),
         *k3 = key_of_tenant(body, "m", "", a, 3), *k4 = key_of_tenant(body, "m", "alice", a, 3),
         *k5 = key_of_tenant(body, "ma", "lice", a, 3);
    cr_assert_str_neq(k1, k2);
    cr_assert_str_neq(k1, k3);
    cr_assert_str_eq(k1, k4);
    cr_assert_str_neq(k1, k5);
    free(k1), free(k2), free(k3), free(k4), free(k5);
}

static tram_api_request parsed(const char *body)
{
    tram_api_request r;
    tram_api_error e = {0};
    tram_sampling_params d;
    tram_sampling_params_init(&d);
    cr_assert_eq(tram_api_request_parse(&r, TRAM_API_COMPLETION, &d, body, strlen(body), &e), 0);
    return r;
}

Test(cache_key, deterministic_mode_takes_greedy_or_seeded_requests_only)
{
    tram_api_request greedy = parsed("{\"prompt\": \"a\", \"temperature\": 0}");
    tram_api_request seeded = parsed("{\"prompt\": \"a\", \"temperature\": 0.8, \"seed\": 7}");
    tram_api_request sampled = parsed("{\"prompt\": \"a\", \"temperature\": 0.8}");
    cr_assert(tram_cache_eligible(&greedy, TRAM_RCACHE_DETERMINISTIC));
    cr_assert(tram_cache_eligible(&seeded, TRAM_RCACHE_DETERMINISTIC));
    cr_assert_not(tram_cache_eligible(&sampled, TRAM_RCACHE_DETERMINISTIC));
    cr_assert(tram_cache_eligible(&sampled, TRAM_RCACHE_ALL));
    cr_assert_not(tram_cache_eligible(&greedy, TRAM_RCACHE_OFF));
    tram_api_request_free(&greedy);
    tram_api_request_free(&seeded);
    tram_api_request_free(&sampled);
}

Test(cache_key, opting_out_by_body_field_or_header)
{
    tram_api_request off = parsed("{\"prompt\": \"a\", \"response_cache\": false}");
    tram_api_request on = parsed("{\"prompt\": \"a\", \"response_cache\": true}");
    tram_api_request absent = parsed("{\"prompt\": \"a\"}");
    cr_assert_eq(off.response_cache, 0);
    cr_assert_eq(on.response_cache, 1);
    cr_assert_eq(absent.response_cache, 1);
    tram_api_request bad;
    tram_api_error e = {0};
    tram_sampling_params d;
    tram_sampling_params_init(&d);
    const char *body = "{\"prompt\": \"a\", \"response_cache\": \"no\"}";
    cr_assert_eq(tram_api_request_parse(&bad, TRAM_API_COMPLETION, &d, body, strlen(body), &e), -1);
    cr_assert_eq(e.status, 400);
    cr_assert_str_eq(e.param, "response_cache");
    cr_assert(tram_cache_control_bypasses("no-cache"));
    cr_assert(tram_cache_control_bypasses("max-age=0, No-Store"));
    cr_assert_not(tram_cache_control_bypasses("max-age=60"));
    cr_assert_not(tram_cache_control_bypasses("no-cache-please"));
    cr_assert_not(tram_cache_control_bypasses(NULL));
    tram_api_request_free(&off);
    tram_api_request_free(&on);
    tram_api_request_free(&absent);
}

/* ------------------------------------------------------------ cost */

Test(cost, the_window_divides_its_cost_by_what_it_served)
{
    tram_cost c;
    tram_cost_init(&c, 36.0, 100, 0);  /* a cent a second */
    double per_tok, per_req;
    tram_cost_window(&c, 0, 0, 0, &per_tok, &per_req);
    cr_assert(isnan(per_tok) && isnan(per_req), "no sample yet");
    for (int t = 0; t <= 200; t++)  /* 10 tokens and 1 request a second */
        tram_cost_observe(&c, t, 10.0 * t, t);
    tram_cost_window(&c, 200, 2000, 200, &per_tok, &per_req);
    /* a window of ~100 s: $1 for ~1000 tokens and ~100 requests */
    cr_assert_float_eq(per_tok, 1.0, 0.03);
    cr_assert_float_eq(per_req, 10.0, 0.3);
    cr_assert_float_eq(tram_cost_total(&c, 200), 2.0, 1e-9);
    /* nothing served for a whole window: no figure, not zero */
    tram_cost_observe(&c, 400, 2000, 200);
    tram_cost_window(&c, 400, 2000, 200, &per_tok, &per_req);
    cr_assert(isnan(per_tok));
}
