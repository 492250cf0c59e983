#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static const char *const level_names[] = {"debug", "info", "warning", "error"};
static const char *const level_tags[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
static tram_log_level min_level = TRAM_LOG_INFO;

int tram_log_parse_level(const char *s, tram_log_level *out)
{
    for (int i = 0; i <= TRAM_LOG_ERROR; i++) {
        if (s && !strcmp(s, level_names[i])) {
            *out = (tram_log_level)i;
            return 0;
        }
    }
    return -1;
}

void tram_log_set_level(tram_log_level level)
{
    min_level = level;
}

void tram_log(tram_log_level level, const char *fmt, ...)
{
    if (level < min_level)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
    /* one write per line, so lines from several threads never interleave */
    char line[2048];
    int n = snprintf(line, sizeof(line), "%s.%03d %-7s ", stamp, (int)(tv.tv_usec / 1000),
                     level_tags[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
