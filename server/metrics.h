/* metrics.h — the Prometheus registry behind GET /metrics.
 *
 * Names, meanings and histogram buckets follow vLLM's V1 metrics so existing
 * dashboards and autoscalers work unchanged; only the prefix differs ("tram",
 * or "vllm" for gateways that expect it).  Every series carries a model_name
 * label.  The registry is plain data owned by the event-loop thread: it is
 * updated and rendered there, so it needs no lock. */
#ifndef TRAM_METRICS_H
#define TRAM_METRICS_H

#include <stdint.h>

#include "engine/tram.h"
#include "server/auth.h"

#define TRAM_HIST_MAX_BUCKETS 24
/* Tenants with series of their own; the requests of any further one are
 * counted under tenant="other", so /metrics stays bounded. */
#define TRAM_MAX_TENANT_SERIES 64

typedef struct {
    const double *bounds;   /* ascending upper bounds; +Inf is implied */
    int n_bounds;
    uint64_t counts[TRAM_HIST_MAX_BUCKETS];  /* per bucket, the last is +Inf */
    uint64_t count;
    double sum;
} tram_histogram;

/* finished_reason label values of request_success_total */
enum { TRAM_REASON_STOP, TRAM_REASON_LENGTH, TRAM_REASON_ABORT, TRAM_NUM_REASONS };
/* reason label values of request_refused_total (the 503 answers) */
enum { TRAM_REFUSED_QUEUE_FULL, TRAM_REFUSED_DRAINING, TRAM_REFUSED_LOADING, TRAM_NUM_REFUSED };

/* One tenant's requests (auth.h: the name its API keys carry, never a key). */
typedef struct {
    char name[TRAM_TENANT_MAX + 1];
    double requests, prompt_tokens, completion_tokens;
} tram_tenant_counts;

typedef struct {
    /* copied from the engine's counters after each step */
    double running, waiting;
    /* the preparation pool's, at scrape time */
    double preparing, prep_waiting;
    double kv_usage;                       /* fraction in [0, 1] */
    double prefix_queries, prefix_hits;    /* in tokens */
    double preemptions, prompt_tokens, generation_tokens;
    double engine_busy_seconds;            /* the engine thread's time in steps */
    /* counted by the server as requests finish */
    double success[TRAM_NUM_REASONS];
    double refused[TRAM_NUM_REFUSED];
    double served_tokens;                  /* completion tokens returned, cache hits included */
    double schema_invalid;                 /* choices whose finished output failed its JSON Schema */
    /* the response cache's, copied at scrape time (has_response_cache: it is on) */
    int has_response_cache;
    double rc_hits, rc_misses, rc_coalesced, rc_evicted_size, rc_evicted_ttl, rc_bytes, rc_entries;
    /* --cost-per-hour (has_cost: given); the window gauges may be NaN */
    int has_cost;
    double cost_per_hour, cost_total, cost_per_1k_tokens, cost_per_1k_requests;
    /* per tenant, with API keys (none without them) */
    tram_tenant_counts tenants[TRAM_MAX_TENANT_SERIES];
    int num_tenants;
    /* speculative decoding's, vLLM's series (spec_positions > 0: it is on, with
     * that many draft positions) */
    int spec_positions;
    double spec_drafts, spec_draft_tokens, spec_accepted, spec_accepted_per_pos[TRAM_SPEC_MAX_TOKENS];
    /* the KV cache's shape, for cache_config_info */
    int block_size, num_blocks, prefix_caching;
    /* LoRA adapters, for lora_requests_info (max_lora 0: no adapters, no series) */
    int max_lora;
    char running_loras[512], waiting_loras[512];
    tram_histogram ttft, itl, e2e, queue;
} tram_metrics;

typedef struct {
    const char *prefix;        /* "tram" or "vllm" */
    const char *model_name;
    const char *version;
    const char *backend;       /* "cpu", "cuda" */
    double start_time;         /* Unix time the process started */
} tram_metrics_info;

void tram_metrics_init(tram_metrics *m);
void tram_histogram_observe(tram_histogram *h, double value);
/* Counts a finished request under its finish reason ("stop", "length",
 * "abort"); returns -1 for any other reason. */
int tram_metrics_count_finish(tram_metrics *m, const char *reason);
/* Counts a finished request of tenant (nothing for "": no API keys). */
void tram_metrics_count_tenant(tram_metrics *m, const char *tenant, long long prompt_tokens,
                               long long completion_tokens);
/* Requests served so far: every finish reason of request_success_total. */
double tram_metrics_requests(const tram_metrics *m);
/* The exposition text (Prometheus text format 0.0.4), malloc'd; NULL when
 * out of memory. */
char *tram_metrics_render(const tram_metrics *m, const tram_metrics_info *info);

#endif
