/* gbnf_text.c — writing GBNF text (see gbnf_text.h). */
#include "grammar/gbnf_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"

void tram_gbnf_literal(tram_strbuf *b, const char *s, size_t n)
{
    tram_strbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            tram_strbuf_addf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            tram_strbuf_addf(b, "\\x%02X", c);
        else
            tram_strbuf_add(b, (const char *)&s[i], 1);
    }
    tram_strbuf_add(b, "\"", 1);
}

int tram_choice_to_gbnf(const char *const *choices, int n, const char *rule, char **gbnf_out,
                        tram_error *err)
{
    *gbnf_out = NULL;
    if (n < 1)
        return tram_fail(err, "choice: the list is empty");
    tram_strbuf b = {0};
    tram_strbuf_addf(&b, "%s ::= ", rule);
    for (int i = 0; i < n; i++) {
        if (!choices[i])
            return tram_strbuf_free(&b), tram_fail(err, "choice: entry %d is not a string", i);
        if (i)
            tram_strbuf_add(&b, " | ", 3);
        tram_gbnf_literal(&b, choices[i], strlen(choices[i]));
        if (b.len > TRAM_GBNF_MAX_TEXT)  /* the parser's bound, checked as it grows */
            return tram_strbuf_free(&b), tram_fail(err, "choice: its grammar is over %d MiB (at entry %d), the most "
                                                        "tram compiles", TRAM_GBNF_MAX_TEXT >> 20, i);
    }
    tram_strbuf_add(&b, "\n", 1);
    if (!(*gbnf_out = tram_strbuf_take(&b)))
        return tram_fail(err, "choice: out of memory");
    return 0;
}
