/* cmd_serve.c — `tram serve`: the OpenAI-compatible HTTP server. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/cli/commands.h"
#include "server/cli/defaults.h"
#include "server/cli/engine_flags.h"
#include "server/log.h"
#include "server/server.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tram serve [-m MODEL] [options] [engine flags]\n\n"
            "  -m, --model PATH               GGUF file or HF directory (%s)\n"
            "  --host ADDR                    address to listen on (127.0.0.1)\n"
            "  --port N                       port (8000)\n"
            "  --served-model-name NAME       the model's name in the API (the file's name)\n"
            "  --api-key KEY                  require 'Authorization: Bearer KEY' (or TRAM_API_KEY)\n"
            "  --max-queue N                  waiting requests before 503 (256)\n"
            "  --max-body-size SIZE           largest request body (4MiB)\n"
            "  --drain-timeout S              on SIGTERM, seconds running requests get (30)\n"
            "  --read-timeout S               seconds a client may take to send a request (30)\n"
            "  --metrics-prefix tram|vllm     prefix of the /metrics names (tram)\n"
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

#define FIELD(name) offsetof(tram_server_config, name)

static const tram_flag serve_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model_path)},
    {.name = "--host", .kind = TRAM_FLAG_STRING, .field = FIELD(host)},
    {.name = "--port", .kind = TRAM_FLAG_INT, .field = FIELD(port), .lo = 0, .hi = 65535},
    {.name = "--served-model-name", .kind = TRAM_FLAG_STRING, .field = FIELD(served_model_name)},
    {.name = "--api-key", .kind = TRAM_FLAG_STRING, .field = FIELD(api_key)},
    {.name = "--max-queue", .kind = TRAM_FLAG_INT, .field = FIELD(max_queue), .lo = 0, .hi = 1 << 20},
    {.name = "--read-timeout", .kind = TRAM_FLAG_INT, .field = FIELD(read_timeout), .lo = 1, .hi = 86400},
    {.name = "--drain-timeout", .kind = TRAM_FLAG_DOUBLE, .field = FIELD(drain_timeout), .lo = 0, .hi = 86400},
    {.name = "--max-body-size", .kind = TRAM_FLAG_SIZE, .field = FIELD(max_body_size), .hi = 1u << 30,
     .expected = "a size up to 1GiB"},
    {.name = "--metrics-prefix", .kind = TRAM_FLAG_STRING, .field = FIELD(metrics_prefix),
     .choices = (const char *const[]){"tram", "vllm", NULL}},
    {.name = "--log-level", .kind = TRAM_FLAG_CUSTOM, .parse = log_level_flag},
};

static int serve(int argc, char **argv)
{
    tram_server_config c;
    tram_server_config_init(&c);
    c.model_path = TRAM_DEFAULT_MODEL;
    c.api_key = getenv("TRAM_API_KEY");
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(serve_flags, &c), tram_engine_flags(&c.engine)};
    if (tram_flags_parse(tables, 2, argc, argv, NULL, 0) < 0 || tram_engine_flags_check(&c.engine, c.model_path))
        return TRAM_EXIT_USAGE;
    return tram_server_run(&c);
}

const tram_command tram_cmd_serve = {
    .name = "serve", .run = serve, .usage = usage,
    .summary = "serve the OpenAI-compatible HTTP API"};
