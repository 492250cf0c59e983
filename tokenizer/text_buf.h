/* text_buf.h — a growing string for the chat-template renderers, with the
 * few Python string operations their Jinja templates call. */
#ifndef TRAM_TEXT_BUF_H
#define TRAM_TEXT_BUF_H

#include <stddef.h>

typedef struct {
    char *s;     /* NUL-terminated once anything was put */
    size_t n, cap;
    int oom;     /* an append failed: the text is incomplete */
} tram_text_buf;

void tram_text_put(tram_text_buf *b, const char *s, size_t n);
/* Appends each string argument in turn (NULL ends the list). */
void tram_text_cat(tram_text_buf *b, ...);
/* Appends s without leading and trailing whitespace: Python's str.strip(),
 * which Jinja's trim filter and .strip() call. */
void tram_text_put_stripped(tram_text_buf *b, const char *s);
/* The number of characters (not bytes) of UTF-8 s: Python's len(). */
size_t tram_text_py_len(const char *s);

#endif
