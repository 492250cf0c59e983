/* cmd_serve.c — `tram serve`: the OpenAI-compatible HTTP server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/cli.h"
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

static int int_value(const char *flag, const char *v, long lo, long hi, int *out)
{
    long x;
    if (tram_cli_int(flag, v, lo, hi, &x))
        return -1;
    *out = (int)x;
    return 0;
}

/* One server flag and its value; -1 after printing why it is wrong. */
static int parse_server_flag(tram_server_config *c, const char *f, const char *v)
{
    double d;
    tram_log_level level;
    if (!strcmp(f, "-m") || !strcmp(f, "--model"))
        c->model_path = v;
    else if (!strcmp(f, "--host"))
        c->host = v;
    else if (!strcmp(f, "--port"))
        return int_value(f, v, 0, 65535, &c->port);
    else if (!strcmp(f, "--served-model-name"))
        c->served_model_name = v;
    else if (!strcmp(f, "--api-key"))
        c->api_key = v;
    else if (!strcmp(f, "--max-queue"))
        return int_value(f, v, 0, 1 << 20, &c->max_queue);
    else if (!strcmp(f, "--read-timeout"))
        return int_value(f, v, 1, 86400, &c->read_timeout);
    else if (!strcmp(f, "--drain-timeout")) {
        if (tram_cli_float(f, v, 0, 86400, &d))
            return -1;
        c->drain_timeout = d;
    } else if (!strcmp(f, "--max-body-size")) {
        if (tram_parse_size(v, &c->max_body_size) || c->max_body_size == 0 ||
            c->max_body_size > (1u << 30)) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected a size up to 1GiB)\n", f, v);
            return -1;
        }
    } else if (!strcmp(f, "--metrics-prefix")) {
        if (strcmp(v, "tram") && strcmp(v, "vllm")) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected tram or vllm)\n", f, v);
            return -1;
        }
        c->metrics_prefix = v;
    } else if (!strcmp(f, "--log-level")) {
        if (tram_log_parse_level(v, &level)) {
            fprintf(stderr, "tram: invalid value for %s: '%s' (expected debug, info, warning or "
                            "error)\n", f, v);
            return -1;
        }
        tram_log_set_level(level);
    } else {
        fprintf(stderr, "tram: unknown option '%s'\n", f);
        return -1;
    }
    return 0;
}

static int parse_args(tram_server_config *c, int argc, char **argv)
{
    for (int i = 1; i < argc;) {
        int r = tram_engine_parse_flag(&c->engine, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (i + 1 >= argc || argv[i][0] != '-') {
            fprintf(stderr, "tram: %s '%s'\n",
                    argv[i][0] == '-' ? "unknown option or missing value:" : "unexpected argument:",
                    argv[i]);
            return -1;
        }
        if (parse_server_flag(c, argv[i], argv[i + 1]))
            return -1;
        i += 2;
    }
    return 0;
}

int tram_cmd_serve(int argc, char **argv)
{
    if (tram_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    tram_server_config c;
    tram_server_config_init(&c);
    c.model_path = TRAM_DEFAULT_MODEL;
    c.api_key = getenv("TRAM_API_KEY");
    if (parse_args(&c, argc, argv)) {
        usage(stderr);
        return TRAM_EXIT_USAGE;
    }
    return tram_server_run(&c);
}
