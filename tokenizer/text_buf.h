/* text_buf.h — the few Python string operations the chat-template
 * renderers' Jinja templates call, on a kernels/strbuf.h string. */
#ifndef TRAM_TEXT_BUF_H
#define TRAM_TEXT_BUF_H

#include <stddef.h>

#include "kernels/strbuf.h"

/* Appends s without leading and trailing whitespace: Python's str.strip(),
 * which Jinja's trim filter and .strip() call. */
void tram_text_put_stripped(tram_strbuf *b, const char *s);
/* The number of characters (not bytes) of UTF-8 s: Python's len(). */
size_t tram_text_py_len(const char *s);

#endif
