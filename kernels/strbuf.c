/* strbuf.c — see strbuf.h. */
#include "kernels/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base.h"

static int reserve(tram_strbuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = TRAM_MAX(2 * b->cap, b->len + n + 256);
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return -1;
    }
    b->s = s;
    b->cap = cap;
    return 0;
}

void tram_strbuf_add(tram_strbuf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void tram_strbuf_addf(tram_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tram_strbuf_cat(tram_strbuf *b, ...)
{
    va_list ap;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *));)
        tram_strbuf_add(b, s, strlen(s));
    va_end(ap);
}

char *tram_strbuf_take(tram_strbuf *b)
{
    char *s = b->oom ? NULL : b->s ? b->s : strdup("");
    if (b->oom)
        free(b->s);
    *b = (tram_strbuf){0};
    return s;
}

void tram_strbuf_free(tram_strbuf *b)
{
    free(b->s);
    *b = (tram_strbuf){0};
}
