/* fuzz_grammar.c — libFuzzer on the grammar front ends: the first byte picks
 * what the rest is, a JSON Schema (grammar/json_schema.c), a regex
 * (grammar/regex.c), GBNF text (grammar/gbnf.c), or a GBNF rule template
 * expanded into a long chain: "N|TEMPLATE" writes N rules (N up to
 * 200,000), rule i being TEMPLATE with each '@' replaced by i and each '#'
 * by i + 1, rule 0 named root, so a few bytes reach the shapes that need
 * megabytes (a 60,000-rule chain of references, a list of 100,000
 * literals).  Inputs up to TRAM_GBNF_MAX_TEXT + 1 bytes are taken whole
 * (make's -max_len is smaller, to keep mutation quick).  A schema or regex either
 * fails with a message or yields GBNF that the parser must accept; GBNF
 * either fails with a message or parses into a grammar the pushdown matcher
 * (grammar/stacks.c) then runs over the input's own bytes.  (One refusal is
 * left to the parser: a regex that repeats what can match empty, like
 * (a*)* or (a?){3}, is refused as something repeated that can be empty.)  Never a crash,
 * a leak, a hang or undefined behaviour.  `make fuzz-grammar`
 * (FUZZ_SECONDS=600). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/stacks.h"
#include "kernels/strbuf.h"

static int32_t buf[TRAM_MAX_STACK_DEPTH + 1];

static void run_matcher(const tram_gbnf *g, const uint8_t *bytes, size_t n)
{
    tram_stackset a = {0}, b = {0};
    tram_stacks_start(g, g->root, &a, buf);
    for (size_t i = 0; i < n && i < 64 && a.n > 0; i++) {
        tram_stacks_advance(g, &a, -1, bytes[i], &b, buf);
        tram_stackset t = a;
        a = b;
        b = t;
    }
    tram_stackset_free(&a);
    tram_stackset_free(&b);
}

/* GBNF text that must parse (made by a compiler; `allowed`: the one
 * failure it may have) or may fail (the input, allowed NULL). */
static void parse(const char *gbnf, int must, const char *allowed, const uint8_t *bytes, size_t n)
{
    tram_gbnf g;
    tram_error err = {{0}};
    if (tram_gbnf_parse(gbnf, "root", 8, &g, &err)) {
        if (!err.msg[0] || (must && !(allowed && strstr(err.msg, allowed))))
            abort();
        return;
    }
    run_matcher(&g, bytes, n);
    tram_gbnf_free(&g);
}

/* The chain "N|TEMPLATE" (text past the '|') describes, or NULL. */
static char *expand_chain(const char *text)
{
    char *end;
    long n = strtol(text, &end, 10);
    if (*end != '|' || n < 1 || n > 200000 || strlen(end + 1) > 200)
        return NULL;
    tram_strbuf b = {0};
    for (long i = 0; i < n && b.len <= TRAM_GBNF_MAX_TEXT; i++) {  /* (past the bound the parser stops) */
        tram_strbuf_addf(&b, i ? "r%ld ::= " : "root ::= ", i);
        for (const char *t = end + 1; *t; t++)
            if (*t == '@' || *t == '#')
                tram_strbuf_addf(&b, "r%ld", *t == '@' ? i : i + 1);
            else
                tram_strbuf_add(&b, t, 1);
        tram_strbuf_addf(&b, "\n");
    }
    tram_strbuf_addf(&b, "r%ld ::= \"y\"\n", n);
    return tram_strbuf_take(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > TRAM_GBNF_MAX_TEXT + 1)
        return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    char *gbnf = NULL;
    tram_error err = {{0}};
    switch (data[0] % 4) {
    case 0:
        if (!tram_json_schema_to_gbnf(text, "root", &gbnf, &err))
            parse(gbnf, 1, NULL, data, size);
        else if (!err.msg[0])
            abort();
        break;
    case 1:
        if (!tram_regex_to_gbnf(text, "root", &gbnf, &err))
            parse(gbnf, 1, "can be empty", data, size);
        else if (!err.msg[0])
            abort();
        break;
    case 2:
        parse(text, 0, NULL, data, size);
        break;
    default:
        if ((gbnf = expand_chain(text)))
            parse(gbnf, 0, NULL, data, size);
    }
    free(gbnf);
    free(text);
    return 0;
}
