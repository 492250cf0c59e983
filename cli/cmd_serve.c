/* cmd_serve.c — `tram serve`: the OpenAI-compatible HTTP server. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/engine_flags.h"
#include "cli/text_file.h"
#include "server/auth.h"
#include "server/log.h"
#include "server/server.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram serve [-m MODEL] [options] [engine flags]\n\n"
            "  -m, --model PATH               GGUF file or HF directory (%s)\n"
            "  --host ADDR                    address to listen on (127.0.0.1)\n"
            "  --port N                       port (8000)\n"
            "  --lora-modules NAME=PATH[,...]  LoRA adapters (PEFT dirs, GGUF files) as models NAME, repeatable\n"
            "  --enable-lora-runtime-updates  POST /v1/load_lora_adapter, /v1/unload_lora_adapter (off)\n"
            "  --served-model-name NAME[,NAME...]  the model's names in the API, repeatable; the\n"
            "                                 first is the one responses carry (the file's name)\n"
            "  --api-key KEY                  require 'Authorization: Bearer KEY' (or 'X-Api-Key:\n"
            "                                 KEY'), repeatable: each key is a tenant key1, key2,\n"
            "                                 ... (or TRAM_API_KEY)\n"
            "  --api-key-file FILE            keys, one a line: KEY [TENANT] ('#' comments);\n"
            "                                 read again on SIGHUP\n"
            "  --metrics-api-key KEY          require this key for /metrics (open without it)\n"
            "  --chat-template FILE           a Jinja chat template to use instead of the model's\n"
            "  --max-queue N                  waiting requests before 503 (256), for the engine\n"
            "                                 and for the preparation threads each\n"
            "  --prep-threads N               threads that parse, render, tokenize and compile\n"
            "                                 requests off the event loop (2)\n"
            "  --max-body-size SIZE           largest request body (4MiB)\n"
            "  --drain-timeout S              on SIGTERM, seconds running requests get (30)\n"
            "  --read-timeout S               seconds a client may take to send a request (30)\n"
            "  --metrics-prefix tram|vllm     prefix of the /metrics names (tram; vllm for the\n"
            "                                 Gateway API Inference Extension's endpoint picker)\n"
            "  --response-cache off|deterministic|all\n"
            "                                 cache and coalesce identical requests: those with\n"
            "                                 temperature 0 or a seed, or all of them (off)\n"
            "  --response-cache-size SIZE     memory for cached responses, LRU beyond (256MiB)\n"
            "  --response-cache-ttl S         seconds a cached response lives; 0: no limit (600)\n"
            "  --response-cache-preload FILE  JSONL requests (OpenAI batch lines) computed into\n"
            "                                 the cache before the server reports ready\n"
            "  --responses-store-size SIZE    memory for stored /v1/responses, per server, least\n"
            "                                 recently used out beyond; 0: none stored (64MiB)\n"
            "  --responses-store-count N      stored responses at most (10000)\n"
            "  --responses-store-ttl S        seconds a stored response is kept; 0: until\n"
            "                                 evicted (3600)\n"
            "  --cost-per-hour USD            the replica's price: cost counter and gauges per 1k\n"
            "                                 tokens and per 1k requests (off)\n"
            "  --cost-window S                the cost gauges' sliding window (300)\n"
            "  --log-level debug|info|warning|error   (info)\n\n",
            TRAM_DEFAULT_MODEL);
    tram_engine_print_flags(out);
}

static int log_level_flag(const char *flag, const char *value, void *field)
{
    tram_log_level level;
    (void)field;  /* the level is the log's own, not the config's */
    if (tram_log_parse_level(value, &level))
        return tram_flag_invalid(flag, value, "debug, info, warning or error");
    tram_log_set_level(level);
    return 0;
}

#define MAX_FLAG_KEYS 64   /* more go in --api-key-file */
static const char *flag_keys[MAX_FLAG_KEYS];
static int num_flag_keys;

/* Each --api-key adds one key (the config points at them after parsing). */
static int api_key_flag(const char *flag, const char *value, void *field)
{
    (void)field;
    if (num_flag_keys == MAX_FLAG_KEYS)
        return tram_flag_invalid(flag, value, "at most 64 keys on the command line (more in --api-key-file)");
    flag_keys[num_flag_keys++] = value;
    return 0;
}

/* The keys as the server will load them, checked now: a bad key or key
 * file stops the command (exit 2), with the file's line. */
static int check_keys(tram_server_config *c)
{
    const char *env = getenv("TRAM_API_KEY");
    if (!num_flag_keys && env && env[0])
        flag_keys[num_flag_keys++] = env;
    c->api_keys = flag_keys;
    c->num_api_keys = num_flag_keys;
    tram_api_keys *keys;
    tram_error err = {{0}};
    if (tram_api_keys_load(&keys, c->api_keys, c->num_api_keys, c->api_key_file, &err)) {
        fprintf(stderr, "tram: %s%s\n", c->api_key_file && !strstr(err.msg, "--api-key") ? "--api-key-file: " : "",
                err.msg);
        return -1;
    }
    int tenants = tram_api_keys_tenants(keys);
    tram_api_keys_free(keys);
    if (tenants > 1 && c->response_cache_preload) {
        fprintf(stderr, "tram: --response-cache-preload cannot be used with keys of %d tenants: cached "
                        "replies are kept per tenant, and preloaded ones belong to the one tenant there is\n",
                tenants);
        return -1;
    }
    return 0;
}

static int served_name_flag(const char *flag, const char *value, void *field)
{
    return tram_flag_append_list(flag, value, field, TRAM_MAX_SERVED_NAMES, "one or more names separated by commas",
                                 NULL);
}

#define FIELD(name) offsetof(tram_server_config, name)

static const tram_flag serve_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model_path)},
    {.name = "--host", .kind = TRAM_FLAG_STRING, .field = FIELD(host)},
    {.name = "--port", .kind = TRAM_FLAG_INT, .field = FIELD(port), .lo = 0, .hi = 65535},
    {.name = "--served-model-name", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(served_model_names),
     .parse = served_name_flag},
    {.name = "--lora-modules", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(lora_modules), .parse = tram_lora_modules_flag},
    {.name = "--enable-lora-runtime-updates", .kind = TRAM_FLAG_SET, .field = FIELD(enable_lora_runtime_updates)},
    {.name = "--api-key", .kind = TRAM_FLAG_CUSTOM, .parse = api_key_flag},
    {.name = "--api-key-file", .kind = TRAM_FLAG_STRING, .field = FIELD(api_key_file)},
    {.name = "--metrics-api-key", .kind = TRAM_FLAG_STRING, .field = FIELD(metrics_api_key)},
    {.name = "--chat-template", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(chat_template),
     .parse = tram_chat_template_flag},
    {.name = "--max-queue", .kind = TRAM_FLAG_INT, .field = FIELD(max_queue), .lo = 0, .hi = 1 << 20},
    {.name = "--prep-threads", .kind = TRAM_FLAG_INT, .field = FIELD(prep_threads), .lo = 1, .hi = 64},
    {.name = "--read-timeout", .kind = TRAM_FLAG_INT, .field = FIELD(read_timeout), .lo = 1, .hi = 86400},
    {.name = "--drain-timeout", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(drain_timeout), .lo = 0, .hi = 86400},
    {.name = "--max-body-size", .kind = TRAM_FLAG_SIZE, .field = FIELD(max_body_size), .hi = 1u << 30,
     .expected = "a size up to 1GiB"},
    {.name = "--metrics-prefix", .kind = TRAM_FLAG_STRING, .field = FIELD(metrics_prefix),
     .choices = (const char *const[]){"tram", "vllm", NULL}},
    {.name = "--log-level", .kind = TRAM_FLAG_CUSTOM, .parse = log_level_flag},
    {.name = "--response-cache", .kind = TRAM_FLAG_CHOICE, .field = FIELD(response_cache),
     .choices = (const char *const[]){"off", "deterministic", "all", NULL}},
    {.name = "--response-cache-size", .kind = TRAM_FLAG_SIZE, .field = FIELD(response_cache_size),
     .expected = "a size like 256MiB"},
    {.name = "--response-cache-ttl", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(response_cache_ttl), .lo = 0,
     .hi = 1e9},
    {.name = "--response-cache-preload", .kind = TRAM_FLAG_STRING, .field = FIELD(response_cache_preload)},
    {.name = "--responses-store-size", .kind = TRAM_FLAG_SIZE, .field = FIELD(responses_store_size),
     .expected = "a size like 64MiB"},
    {.name = "--responses-store-count", .kind = TRAM_FLAG_INT, .field = FIELD(responses_store_count), .lo = 0,
     .hi = 1 << 24},
    {.name = "--responses-store-ttl", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(responses_store_ttl), .lo = 0,
     .hi = 1e9},
    {.name = "--cost-per-hour", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(cost_per_hour), .lo = 0, .hi = 1e6},
    {.name = "--cost-window", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(cost_window), .lo = 1, .hi = 86400},
};

static int serve(int argc, char **argv)
{
    tram_server_config c;
    tram_server_config_init(&c);
    c.model_path = TRAM_DEFAULT_MODEL;
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(serve_flags, &c), tram_engine_flags(&c.engine)};
    if (tram_flags_parse(tables, 2, argc, argv, NULL, 0) < 0 || tram_engine_flags_check(&c.engine, c.model_path))
        return TRAM_EXIT_USAGE;
    while (c.num_served_model_names < TRAM_MAX_SERVED_NAMES &&
           c.served_model_names[c.num_served_model_names])
        c.num_served_model_names++;
    while (c.num_lora_modules < TRAM_MAX_LORA_MODULES && c.lora_modules[c.num_lora_modules])
        c.num_lora_modules++;
    if ((c.num_lora_modules || c.enable_lora_runtime_updates) && !c.engine.max_loras)
        c.engine.max_loras = 1;  /* vLLM's default once LoRA is on */
    if (c.response_cache_preload && c.response_cache == TRAM_RCACHE_OFF) {
        fprintf(stderr, "tram: --response-cache-preload needs --response-cache deterministic or all\n");
        return TRAM_EXIT_USAGE;
    }
    if (check_keys(&c))
        return TRAM_EXIT_USAGE;
    return tram_server_run(&c);
}

const tram_command tram_cmd_serve = {
    .name = "serve", .run = serve, .usage = usage,
    .summary = "serve the OpenAI-compatible HTTP API"};
