/* gbnf_text.c — writing GBNF text (see gbnf_text.h). */
#include "grammar/gbnf_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(tram_gbuf *b, size_t n)
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

void tram_gbuf_add(tram_gbuf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void tram_gbuf_addf(tram_gbuf *b, const char *fmt, ...)
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

void tram_gbuf_literal(tram_gbuf *b, const char *s, size_t n)
{
    tram_gbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            tram_gbuf_addf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            tram_gbuf_addf(b, "\\x%02X", c);
        else
            tram_gbuf_add(b, (const char *)&s[i], 1);
    }
    tram_gbuf_add(b, "\"", 1);
}

char *tram_gbuf_take(tram_gbuf *b)
{
    char *s = b->oom ? NULL : b->s ? b->s : strdup("");
    if (b->oom)
        free(b->s);
    *b = (tram_gbuf){0};
    return s;
}

void tram_gbuf_free(tram_gbuf *b)
{
    free(b->s);
    *b = (tram_gbuf){0};
}

int tram_choice_to_gbnf(const char *const *choices, int n, const char *rule, char **gbnf_out,
                        tram_error *err)
{
    *gbnf_out = NULL;
    if (n < 1)
        return tram_fail(err, "choice: the list is empty");
    tram_gbuf b = {0};
    tram_gbuf_addf(&b, "%s ::= ", rule);
    for (int i = 0; i < n; i++) {
        if (!choices[i])
            return tram_gbuf_free(&b), tram_fail(err, "choice: entry %d is not a string", i);
        if (i)
            tram_gbuf_add(&b, " | ", 3);
        tram_gbuf_literal(&b, choices[i], strlen(choices[i]));
    }
    tram_gbuf_add(&b, "\n", 1);
    if (!(*gbnf_out = tram_gbuf_take(&b)))
        return tram_fail(err, "choice: out of memory");
    return 0;
}
