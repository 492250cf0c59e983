/* commands.c — finding a command in its group, and the help and usage
 * convention of cli/commands.h, in one place for every command. */
#include "cli/commands.h"

#include <string.h>

static int is_help(const char *arg)
{
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

/* Checked before parsing, so that help wins over errors in the other flags. */
static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (is_help(argv[i]))
            return 1;
    return 0;
}

static void group_usage(const tram_command_group *g, FILE *out)
{
    fprintf(out, "usage: %s <%s> [options]    (%s <%s> --help for its options)\n\n%ss:\n", g->name, g->noun,
            g->name, g->noun, g->noun);
    for (int i = 0; i < g->n_commands; i++)
        fprintf(out, "  %-14s %s\n", g->commands[i]->name, g->commands[i]->summary);
}

static int run_command(const tram_command *c, int argc, char **argv)
{
    if (c->group)
        return tram_command_dispatch(c->group, argc, argv);
    if (c->usage && wants_help(argc, argv)) {
        c->usage(stdout);
        return 0;
    }
    int rc = c->run(argc, argv);
    if (rc == TRAM_EXIT_USAGE && c->usage)
        c->usage(stderr);
    return rc == TRAM_EXIT_INPUT ? TRAM_EXIT_USAGE : rc;
}

int tram_command_dispatch(const tram_command_group *g, int argc, char **argv)
{
    if (argc < 2) {
        group_usage(g, stderr);
        return TRAM_EXIT_USAGE;
    }
    if (is_help(argv[1]) || !strcmp(argv[1], "help")) {
        group_usage(g, stdout);
        return 0;
    }
    for (int i = 0; i < g->n_commands; i++)
        if (!strcmp(argv[1], g->commands[i]->name))
            return run_command(g->commands[i], argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown %s '%s'\n\n", g->name, g->noun, argv[1]);
    group_usage(g, stderr);
    return TRAM_EXIT_USAGE;
}

int tram_exit_status(const char *who, int failed, const tram_error *err)
{
    if (!failed)
        return 0;
    fprintf(stderr, "%s: %s\n", who, err->msg);
    return 1;
}
