/* log.h — the server's log: one line per event on stderr, with a level. */
#ifndef TRAM_SERVER_LOG_H
#define TRAM_SERVER_LOG_H

typedef enum {
    TRAM_LOG_DEBUG,
    TRAM_LOG_INFO,
    TRAM_LOG_WARNING,
    TRAM_LOG_ERROR,
} tram_log_level;

/* "debug", "info", "warning", "error"; -1 for anything else. */
int tram_log_parse_level(const char *s, tram_log_level *out);
void tram_log_set_level(tram_log_level level);
void tram_log(tram_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
