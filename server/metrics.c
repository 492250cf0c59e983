#include "server/metrics.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base.h"

/* vLLM's bucket boundaries (vllm/v1/metrics/loggers.py). */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                     0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                     20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                    0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                    7.5,  10.0,  20.0, 40.0,  80.0};
static const double latency_bounds[] = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,
                                        5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
                                        60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

static const char *const reason_names[TRAM_NUM_REASONS] = {"stop", "length", "abort"};
static const char *const refused_names[TRAM_NUM_REFUSED] = {"queue_full", "draining", "loading"};

/* Where a series' value sits in tram_metrics. */
#define FIELD(f) offsetof(tram_metrics, f)

/* One row per series, with vLLM's help text where vLLM has the series. */
typedef struct {
    const char *name, *type;
    size_t offset;
    const char *help;
} scalar;

static const scalar scalars[] = {
    {"num_requests_running", "gauge", FIELD(running), "Number of requests in model execution batches."},
    {"num_requests_waiting", "gauge", FIELD(waiting), "Number of requests waiting to be processed."},
    {"num_requests_preparing", "gauge", FIELD(preparing), "Requests being parsed, rendered, tokenized or compiled on a preparation thread."},
    {"num_requests_preparation_waiting", "gauge", FIELD(prep_waiting), "Requests waiting for a preparation thread (at most --max-queue)."},
    {"kv_cache_usage_perc", "gauge", FIELD(kv_usage), "KV-cache usage. 1 means 100 percent usage."},
    {"prefix_cache_queries_total", "counter", FIELD(prefix_queries), "Prefix cache queries, in terms of number of queried tokens."},
    {"prefix_cache_hits_total", "counter", FIELD(prefix_hits), "Prefix cache hits, in terms of number of cached tokens."},
    {"num_preemptions_total", "counter", FIELD(preemptions), "Cumulative number of preemption from the engine."},
    {"prompt_tokens_total", "counter", FIELD(prompt_tokens), "Number of prefill tokens processed."},
    {"generation_tokens_total", "counter", FIELD(generation_tokens), "Number of generation tokens processed."},
    {"engine_busy_seconds_total", "counter", FIELD(engine_busy_seconds), "Seconds the engine spent running steps (its utilization is the rate)."},
    {"served_tokens_total", "counter", FIELD(served_tokens), "Completion tokens returned to clients, response-cache hits included."},
    {"structured_output_invalid_total", "counter", FIELD(schema_invalid), "Outputs that matched their grammar but failed their JSON Schema (finish_reason error)."},
};

static const scalar response_cache_scalars[] = {
    {"response_cache_hits_total", "counter", FIELD(rc_hits), "Requests answered from a ready response-cache entry."},
    {"response_cache_misses_total", "counter", FIELD(rc_misses), "Cacheable requests that found no entry and were computed."},
    {"response_cache_coalesced_total", "counter", FIELD(rc_coalesced), "Requests that joined an identical request in flight (single-flight)."},
    {"response_cache_bytes", "gauge", FIELD(rc_bytes), "Bytes held by ready response-cache entries."},
    {"response_cache_entries", "gauge", FIELD(rc_entries), "Ready response-cache entries."},
};

static const scalar cost_scalars[] = {
    {"cost_per_hour_dollars", "gauge", FIELD(cost_per_hour), "The replica's cost per hour (--cost-per-hour)."},
    {"cost_dollars_total", "counter", FIELD(cost_total), "Dollars this replica has cost since it started."},
    {"cost_per_1k_tokens_dollars", "gauge", FIELD(cost_per_1k_tokens), "Dollars per 1000 completion tokens served over the sliding window."},
    {"cost_per_1k_requests_dollars", "gauge", FIELD(cost_per_1k_requests), "Dollars per 1000 requests served over the sliding window."},
};

static const struct {
    const char *name;
    size_t offset;
    const char *help;
} histograms[] = {
    {"time_to_first_token_seconds", FIELD(ttft), "Histogram of time to first token in seconds."},
    {"inter_token_latency_seconds", FIELD(itl), "Histogram of inter-token latency in seconds."},
    {"e2e_request_latency_seconds", FIELD(e2e), "Histogram of e2e request latency in seconds."},
    {"request_queue_time_seconds", FIELD(queue), "Histogram of time spent in WAITING phase for request."},
};

static void histogram_init(tram_histogram *h, const double *bounds, int n)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->n_bounds = n;
}

void tram_metrics_init(tram_metrics *m)
{
    memset(m, 0, sizeof(*m));
    histogram_init(&m->ttft, ttft_bounds, (int)TRAM_ARRAY_LEN(ttft_bounds));
    histogram_init(&m->itl, itl_bounds, (int)TRAM_ARRAY_LEN(itl_bounds));
    histogram_init(&m->e2e, latency_bounds, (int)TRAM_ARRAY_LEN(latency_bounds));
    histogram_init(&m->queue, latency_bounds, (int)TRAM_ARRAY_LEN(latency_bounds));
}

void tram_histogram_observe(tram_histogram *h, double value)
{
    int i = 0;
    while (i < h->n_bounds && value > h->bounds[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum += value;
}

int tram_metrics_count_finish(tram_metrics *m, const char *reason)
{
    for (int i = 0; i < TRAM_NUM_REASONS; i++) {
        if (reason && !strcmp(reason, reason_names[i])) {
            m->success[i]++;
            return 0;
        }
    }
    return -1;
}

/* The tenant's row, made when new; "other" when the table is full. */
static tram_tenant_counts *tenant_row(tram_metrics *m, const char *tenant)
{
    for (int pass = 0; pass < 2; pass++, tenant = "other") {
        for (int i = 0; i < m->num_tenants; i++)
            if (!strcmp(m->tenants[i].name, tenant))
                return &m->tenants[i];
        if (m->num_tenants < TRAM_MAX_TENANT_SERIES - 1 || (pass && m->num_tenants < TRAM_MAX_TENANT_SERIES)) {
            tram_tenant_counts *t = &m->tenants[m->num_tenants++];
            snprintf(t->name, sizeof(t->name), "%s", tenant);
            return t;
        }
    }
    return &m->tenants[TRAM_MAX_TENANT_SERIES - 1];
}

void tram_metrics_count_tenant(tram_metrics *m, const char *tenant, long long prompt_tokens,
                               long long completion_tokens)
{
    if (!tenant[0])
        return;
    tram_tenant_counts *t = tenant_row(m, tenant);
    t->requests++;
    t->prompt_tokens += (double)prompt_tokens;
    t->completion_tokens += (double)completion_tokens;
}

double tram_metrics_requests(const tram_metrics *m)
{
    double n = 0;
    for (int i = 0; i < TRAM_NUM_REASONS; i++)
        n += m->success[i];
    return n;
}

/* Label values are escaped as the text format requires. */
static void put_label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void put_header(FILE *f, const char *prefix, const char *name, const char *type,
                       const char *help)
{
    fprintf(f, "# HELP %s:%s %s\n# TYPE %s:%s %s\n", prefix, name, help, prefix, name, type);
}

/* Starts a sample line, name+suffix{model_name="...": the caller adds any
 * further labels and closes the braces. */
static void put_series(FILE *f, const char *prefix, const char *name, const char *suffix,
                       const char *model)
{
    fprintf(f, "%s:%s%s{model_name=\"", prefix, name, suffix);
    put_label_value(f, model);
    fputc('"', f);
}

static void put_histogram(FILE *f, const tram_metrics_info *in, const char *name,
                          const tram_histogram *h)
{
    uint64_t cumulative = 0;
    for (int i = 0; i <= h->n_bounds; i++) {
        cumulative += h->counts[i];
        put_series(f, in->prefix, name, "_bucket", in->model_name);
        if (i < h->n_bounds)
            fprintf(f, ",le=\"%g\"} %llu\n", h->bounds[i], (unsigned long long)cumulative);
        else
            fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)cumulative);
    }
    put_series(f, in->prefix, name, "_sum", in->model_name);
    fprintf(f, "} %.17g\n", h->sum);
    put_series(f, in->prefix, name, "_count", in->model_name);
    fprintf(f, "} %llu\n", (unsigned long long)h->count);
}

static void put_scalars(FILE *f, const tram_metrics *m, const tram_metrics_info *in,
                        const scalar *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        put_header(f, in->prefix, rows[i].name, rows[i].type, rows[i].help);
        double v = *(const double *)((const char *)m + rows[i].offset);
        put_series(f, in->prefix, rows[i].name, "", in->model_name);
        if (isnan(v))
            fputs("} NaN\n", f);  /* the text format's spelling; printf writes "nan" */
        else
            fprintf(f, "} %.17g\n", v);
    }
}

/* A counter with one series per value of one label. */
static void put_labelled(FILE *f, const tram_metrics_info *in, const char *name, const char *help,
                         const char *label, const char *const *values, const double *counts,
                         int n)
{
    put_header(f, in->prefix, name, "counter", help);
    for (int i = 0; i < n; i++) {
        put_series(f, in->prefix, name, "", in->model_name);
        fprintf(f, ",%s=\"%s\"} %.17g\n", label, values[i], counts[i]);
    }
}

/* vLLM's info gauge of the KV cache's shape, which the Inference Extension's
 * endpoint picker reads (block_size, num_gpu_blocks: the pool, whatever the
 * device). */
static void put_cache_config(FILE *f, const tram_metrics *m, const tram_metrics_info *in)
{
    put_header(f, in->prefix, "cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    put_series(f, in->prefix, "cache_config_info", "", in->model_name);
    fprintf(f, ",block_size=\"%d\",num_gpu_blocks=\"%d\",enable_prefix_caching=\"%s\","
               "cache_dtype=\"auto\"} 1\n",
            m->block_size, m->num_blocks, m->prefix_caching ? "True" : "False");
}

/* vLLM's info gauge of the adapters in use, which the Inference Extension's
 * endpoint picker reads for LoRA affinity: the labels carry the lists (names
 * joined by commas), the value the time of the scrape, as vLLM writes it. */
static void put_lora_info(FILE *f, const tram_metrics *m, const tram_metrics_info *in)
{
    if (!m->max_lora)
        return;
    put_header(f, in->prefix, "lora_requests_info", "gauge", "Running stats on lora requests.");
    fprintf(f, "%s:lora_requests_info{max_lora=\"%d\",waiting_lora_adapters=\"", in->prefix, m->max_lora);
    put_label_value(f, m->waiting_loras);
    fputs("\",running_lora_adapters=\"", f);
    put_label_value(f, m->running_loras);
    fprintf(f, "\"} %lld\n", (long long)time(NULL));
}

/* The per-tenant counters: one series per tenant name. */
static void put_tenants(FILE *f, const tram_metrics *m, const tram_metrics_info *in)
{
    static const struct {
        const char *name, *help;
        size_t offset;
    } rows[] = {
        {"tenant_requests_total", "Requests finished, per tenant (the name its API key carries).",
         offsetof(tram_tenant_counts, requests)},
        {"tenant_prompt_tokens_total", "Prompt tokens of finished requests, per tenant.",
         offsetof(tram_tenant_counts, prompt_tokens)},
        {"tenant_generation_tokens_total", "Completion tokens returned, per tenant (response-cache hits included).",
         offsetof(tram_tenant_counts, completion_tokens)},
    };
    for (size_t r = 0; m->num_tenants && r < TRAM_ARRAY_LEN(rows); r++) {
        put_header(f, in->prefix, rows[r].name, "counter", rows[r].help);
        for (int i = 0; i < m->num_tenants; i++) {
            put_series(f, in->prefix, rows[r].name, "", in->model_name);
            fputs(",tenant=\"", f);
            put_label_value(f, m->tenants[i].name);
            fprintf(f, "\"} %.17g\n", *(const double *)((const char *)&m->tenants[i] + rows[r].offset));
        }
    }
}

static const scalar spec_scalars[] = {
    {"spec_decode_num_drafts_total", "counter", FIELD(spec_drafts), "Number of spec decoding drafts."},
    {"spec_decode_num_draft_tokens_total", "counter", FIELD(spec_draft_tokens), "Number of draft tokens."},
    {"spec_decode_num_accepted_tokens_total", "counter", FIELD(spec_accepted), "Number of accepted tokens."},
};

/* Speculative decoding's counters, the accepted ones per draft position too. */
static void put_spec(FILE *f, const tram_metrics *m, const tram_metrics_info *in)
{
    static const char *const positions[TRAM_SPEC_MAX_TOKENS] = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7",
                                                                "8", "9", "10", "11", "12", "13", "14", "15"};
    put_scalars(f, m, in, spec_scalars, TRAM_ARRAY_LEN(spec_scalars));
    put_labelled(f, in, "spec_decode_num_accepted_tokens_per_pos_total", "Accepted tokens per draft position.",
                 "position", positions, m->spec_accepted_per_pos, m->spec_positions);
}

static void put_optional(FILE *f, const tram_metrics *m, const tram_metrics_info *in)
{
    if (m->spec_positions)
        put_spec(f, m, in);
    put_tenants(f, m, in);
    put_lora_info(f, m, in);
    static const char *const eviction_names[] = {"size", "ttl"};
    if (m->has_response_cache) {
        put_scalars(f, m, in, response_cache_scalars, TRAM_ARRAY_LEN(response_cache_scalars));
        double evicted[] = {m->rc_evicted_size, m->rc_evicted_ttl};
        put_labelled(f, in, "response_cache_evictions_total",
                     "Ready response-cache entries dropped: for room (size) or by age (ttl).",
                     "reason", eviction_names, evicted, 2);
    }
    if (m->has_cost)
        put_scalars(f, m, in, cost_scalars, TRAM_ARRAY_LEN(cost_scalars));
}

static void render_body(FILE *f, const tram_metrics *m, const tram_metrics_info *in)
{
    put_scalars(f, m, in, scalars, TRAM_ARRAY_LEN(scalars));
    put_labelled(f, in, "request_success_total", "Count of successfully processed requests.",
                 "finished_reason", reason_names, m->success, TRAM_NUM_REASONS);
    put_labelled(f, in, "request_refused_total",
                 "Requests answered 503: the queue was full, the server draining or loading.",
                 "reason", refused_names, m->refused, TRAM_NUM_REFUSED);
    put_cache_config(f, m, in);
    put_optional(f, m, in);
    for (size_t i = 0; i < TRAM_ARRAY_LEN(histograms); i++) {
        const tram_histogram *h =
            (const tram_histogram *)((const char *)m + histograms[i].offset);
        put_header(f, in->prefix, histograms[i].name, "histogram", histograms[i].help);
        put_histogram(f, in, histograms[i].name, h);
    }
    put_header(f, in->prefix, "build_info", "gauge", "Build information of the server.");
    put_series(f, in->prefix, "build_info", "", in->model_name);
    fputs(",version=\"", f);
    put_label_value(f, in->version);
    fputs("\",backend=\"", f);
    put_label_value(f, in->backend);
    fputs("\"} 1\n", f);
    fputs("# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
          "# TYPE process_start_time_seconds gauge\n", f);
    fprintf(f, "process_start_time_seconds %.3f\n", in->start_time);
}

char *tram_metrics_render(const tram_metrics *m, const tram_metrics_info *info)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    render_body(f, m, info);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
