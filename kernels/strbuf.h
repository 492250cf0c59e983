/* strbuf.h — a growing NUL-terminated string: the one the chat-template
 * renderers, the grammar compilers and the tool-call writers all build their
 * text in.  An append that cannot allocate sets oom and leaves the text as it
 * was; the caller checks oom once at the end. */
#ifndef TRAM_STRBUF_H
#define TRAM_STRBUF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char *s;     /* NUL-terminated once anything was added; NULL before */
    size_t len, cap;
    int oom;     /* an append failed: the text is incomplete */
} tram_strbuf;

void tram_strbuf_add(tram_strbuf *b, const char *s, size_t n);
void tram_strbuf_addf(tram_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends each string argument in turn (NULL ends the list). */
void tram_strbuf_cat(tram_strbuf *b, ...);
/* Hands the text over (NUL-terminated, "" when empty) and empties b; NULL
 * when out of memory. */
char *tram_strbuf_take(tram_strbuf *b);
void tram_strbuf_free(tram_strbuf *b);

#ifdef __cplusplus
}
#endif

#endif
