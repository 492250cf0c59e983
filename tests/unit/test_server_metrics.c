/* The Prometheus registry (server/metrics.c), checked by parsing its text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"

/* The value of the sample whose line starts with `series ` (exact match). */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (!strncmp(line, series, n) && line[n] == ' ')
            return strtod(line + n + 1, NULL);
    }
    cr_assert_fail("no sample %s", series);
    return 0;
}

Test(server_metrics, histogram_buckets_are_cumulative)
{
    tram_metrics m;
    tram_metrics_init(&m);
    const double values[] = {0.0005, 0.003, 0.003, 0.07, 1.0, 3000.0};
    double sum = 0;
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        tram_histogram_observe(&m.ttft, values[i]);
        sum += values[i];
    }
    tram_metrics_info info = {.prefix = "tram", .model_name = "smol", .version = "1.2",
                              .backend = "cpu", .start_time = 1700000000.0};
    char *text = tram_metrics_render(&m, &info);
    const double bounds[] = {0.001, 0.005, 0.1, 1.0, 2560.0};
    const char *les[] = {"0.001", "0.005", "0.1", "1", "2560"};
    for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++) {
        double expect = 0;
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
            expect += values[i] <= bounds[b];
        char series[160];
        snprintf(series, sizeof(series),
                 "tram:time_to_first_token_seconds_bucket{model_name=\"smol\",le=\"%s\"}", les[b]);
        cr_assert_eq(sample(text, series), expect, "%s", series);
    }
    cr_assert_eq(sample(text, "tram:time_to_first_token_seconds_bucket{model_name=\"smol\",le=\"+Inf\"}"), 6);
    cr_assert_eq(sample(text, "tram:time_to_first_token_seconds_count{model_name=\"smol\"}"), 6);
    cr_assert_float_eq(sample(text, "tram:time_to_first_token_seconds_sum{model_name=\"smol\"}"), sum, 1e-9);
    cr_assert(strstr(text, "# TYPE tram:time_to_first_token_seconds histogram\n"));
    free(text);
}

Test(server_metrics, vllm_names_and_prefix)
{
    tram_metrics m;
    tram_metrics_init(&m);
    /* each series is set through its field (NULL: left as initialized) and read back by name */
    const struct { const char *name; double *field; double value; } want[] = {
        {"num_requests_running", &m.running, 3},
        {"num_requests_waiting", &m.waiting, 2},
        {"kv_cache_usage_perc", &m.kv_usage, 0.25},
        {"prefix_cache_queries_total", &m.prefix_queries, 100},
        {"prefix_cache_hits_total", &m.prefix_hits, 40},
        {"generation_tokens_total", &m.generation_tokens, 77},
        {"num_preemptions_total", NULL, 0},
        {"prompt_tokens_total", NULL, 0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (want[i].field)
            *want[i].field = want[i].value;
    cr_assert_eq(tram_metrics_count_finish(&m, "stop"), 0);
    cr_assert_eq(tram_metrics_count_finish(&m, "stop"), 0);
    cr_assert_eq(tram_metrics_count_finish(&m, "abort"), 0);
    cr_assert_eq(tram_metrics_count_finish(&m, "weird"), -1);
    tram_metrics_info info = {.prefix = "vllm", .model_name = "a\"b\\c\nd", .version = "1.2",
                              .backend = "cpu", .start_time = 1700000000.5};
    char *text = tram_metrics_render(&m, &info);
    const char *label = "{model_name=\"a\\\"b\\\\c\\nd\"}";
    char series[200];
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        snprintf(series, sizeof(series), "vllm:%s%s", want[i].name, label);
        cr_assert_eq(sample(text, series), want[i].value, "%s", series);
    }
    cr_assert_eq(sample(text, "vllm:request_success_total{model_name=\"a\\\"b\\\\c\\nd\",finished_reason=\"stop\"}"), 2);
    cr_assert_eq(sample(text, "vllm:request_success_total{model_name=\"a\\\"b\\\\c\\nd\",finished_reason=\"abort\"}"), 1);
    cr_assert_eq(sample(text, "vllm:request_success_total{model_name=\"a\\\"b\\\\c\\nd\",finished_reason=\"length\"}"), 0);
    cr_assert_float_eq(sample(text, "process_start_time_seconds"), 1700000000.5, 1e-3);
    cr_assert(strstr(text, "vllm:build_info{"));
    cr_assert(strstr(text, "vllm:e2e_request_latency_seconds_bucket"));
    cr_assert(strstr(text, "vllm:request_queue_time_seconds_count"));
    cr_assert(strstr(text, "vllm:inter_token_latency_seconds_sum"));
    cr_assert_null(strstr(text, "tram:"), "the prefix applies to every name");
    free(text);
}

Test(server_metrics, gateway_cache_and_cost_series)
{
    tram_metrics m;
    tram_metrics_init(&m);
    m.block_size = 16;
    m.num_blocks = 2912;
    m.prefix_caching = 1;
    m.refused[TRAM_REFUSED_QUEUE_FULL] = 3;
    m.has_response_cache = 1;
    m.rc_hits = 5;
    m.rc_evicted_ttl = 2;
    m.has_cost = 1;
    m.cost_per_hour = 2.5;
    m.cost_per_1k_tokens = NAN;  /* nothing served in the window */
    tram_metrics_info info = {.prefix = "vllm", .model_name = "m", .version = "1",
                              .backend = "cpu", .start_time = 1};
    char *text = tram_metrics_render(&m, &info);
    cr_assert(strstr(text, "vllm:cache_config_info{model_name=\"m\",block_size=\"16\","
                           "num_gpu_blocks=\"2912\",enable_prefix_caching=\"True\","
                           "cache_dtype=\"auto\"} 1\n"), "%s", text);
    cr_assert_eq(sample(text, "vllm:request_refused_total{model_name=\"m\",reason=\"queue_full\"}"), 3);
    cr_assert_eq(sample(text, "vllm:response_cache_hits_total{model_name=\"m\"}"), 5);
    cr_assert_eq(sample(text, "vllm:response_cache_evictions_total{model_name=\"m\",reason=\"ttl\"}"), 2);
    cr_assert_eq(sample(text, "vllm:cost_per_hour_dollars{model_name=\"m\"}"), 2.5);
    cr_assert(strstr(text, "vllm:cost_per_1k_tokens_dollars{model_name=\"m\"} NaN\n"));
    free(text);
    /* without the cache and the cost, none of their series */
    m.has_response_cache = m.has_cost = 0;
    text = tram_metrics_render(&m, &info);
    cr_assert_null(strstr(text, "response_cache_"));
    cr_assert_null(strstr(text, "cost_"));
    free(text);
}

/* Requests are counted per tenant (by name), none without API keys, and
 * past TRAM_MAX_TENANT_SERIES tenants the rest share tenant="other". */
Test(server_metrics, tenant_series)
{
    tram_metrics m;
    tram_metrics_init(&m);
    tram_metrics_info info = {.prefix = "tram", .model_name = "m", .version = "1", .backend = "cpu"};
    tram_metrics_count_tenant(&m, "", 5, 5);
    char *text = tram_metrics_render(&m, &info);
    cr_assert_null(strstr(text, "tenant"), "no keys, no tenant series");
    free(text);
    tram_metrics_count_tenant(&m, "alice", 10, 3);
    tram_metrics_count_tenant(&m, "alice", 2, 1);
    tram_metrics_count_tenant(&m, "key2", 7, 4);
    text = tram_metrics_render(&m, &info);
    cr_assert_eq(sample(text, "tram:tenant_requests_total{model_name=\"m\",tenant=\"alice\"}"), 2);
    cr_assert_eq(sample(text, "tram:tenant_prompt_tokens_total{model_name=\"m\",tenant=\"alice\"}"), 12);
    cr_assert_eq(sample(text, "tram:tenant_generation_tokens_total{model_name=\"m\",tenant=\"alice\"}"), 4);
    cr_assert_eq(sample(text, "tram:tenant_requests_total{model_name=\"m\",tenant=\"key2\"}"), 1);
    free(text);
    for (int i = 0; i < 2 * TRAM_MAX_TENANT_SERIES; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        tram_metrics_count_tenant(&m, name, 1, 1);
    }
    cr_assert_eq(m.num_tenants, TRAM_MAX_TENANT_SERIES);
    text = tram_metrics_render(&m, &info);
    cr_assert_eq(sample(text, "tram:tenant_requests_total{model_name=\"m\",tenant=\"other\"}"),
                 2 * TRAM_MAX_TENANT_SERIES - (TRAM_MAX_TENANT_SERIES - 3));
    cr_assert_eq(sample(text, "tram:tenant_requests_total{model_name=\"m\",tenant=\"alice\"}"), 2);
    free(text);
}

Test(server_metrics, spec_decode_series_when_speculating)
{
    tram_metrics m;
    tram_metrics_init(&m);
    tram_metrics_info info = {.prefix = "vllm", .model_name = "m", .version = "1", .backend = "cpu"};
    char *text = tram_metrics_render(&m, &info);
    cr_assert_null(strstr(text, "spec_decode"), "no speculation, no series");
    free(text);
    m.spec_positions = 2;
    m.spec_drafts = 5;
    m.spec_draft_tokens = 10;
    m.spec_accepted = 7;
    m.spec_accepted_per_pos[0] = 4;
    m.spec_accepted_per_pos[1] = 3;
    text = tram_metrics_render(&m, &info);
    cr_assert_eq(sample(text, "vllm:spec_decode_num_drafts_total{model_name=\"m\"}"), 5);
    cr_assert_eq(sample(text, "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"}"), 10);
    cr_assert_eq(sample(text, "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"}"), 7);
    cr_assert_eq(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"}"), 3);
    cr_assert_null(strstr(text, "position=\"2\""), "one series per draft position");
    free(text);
}
