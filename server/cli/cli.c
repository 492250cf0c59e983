#include "server/cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tram_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}

int tram_cli_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "tram: invalid value for %s: '%s' (expected an integer in [%ld, %ld])\n", flag,
                s ? s : "", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int tram_cli_float(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "tram: invalid value for %s: '%s' (expected a number in [%g, %g])\n", flag,
                s ? s : "", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}
