/* json_schema_string.c — string schemas: lengths, patterns and formats
 * (see json_schema_gen.h).  A format's grammar is a subset of the strings
 * valid for it (RFC 3339 dates, RFC 3986 URIs with unreserved characters,
 * letter-led hostnames, ...); a format tram does not know is an
 * annotation, as 2019-09 and later say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema_gen.h"
#include "grammar/regex.h"

#define DATE "[1-9] [0-9]{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )" \
             " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )" \
             " | \"02\" \"-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )"
#define TIME "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )?" \
             " ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"
#define LABEL "[a-z] ( [a-z0-9-]{0,40} [a-z0-9] )?"
#define HOSTNAME LABEL " ( \".\" " LABEL " ){0,3}"
#define URI "( \"http\" \"s\"? | \"urn\" | [a-z]{3,8} ) \"://\" " HOSTNAME \
            " ( \"/\" [a-zA-Z0-9._~-]{0,40} ){0,8} ( \"?\" [a-zA-Z0-9._~=&-]{1,40} )?"
#define OCTET "( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9] )"
#define DUR_SECOND "[0-9]{1,4} \"S\""
#define DUR_MINUTE "[0-9]{1,4} \"M\" ( " DUR_SECOND " )?"
#define DUR_TIME "\"T\" ( [0-9]{1,4} \"H\" ( " DUR_MINUTE " )? | " DUR_MINUTE " | " DUR_SECOND " )"
#define DUR_DAY "[0-9]{1,4} \"D\""
#define DUR_MONTH "[0-9]{1,4} \"M\" ( " DUR_DAY " )?"
#define DUR_DATE "( [0-9]{1,4} \"Y\" ( " DUR_MONTH " )? | " DUR_MONTH " | " DUR_DAY " )"
#define POINTER "( \"/\" ( [a-zA-Z0-9_.-] | \"~\" [01] ){0,20} ){0,8}"

static const struct {
    const char *name, *gbnf;
} formats[] = {
    {"date", DATE},
    {"time", TIME},
    {"date-time", DATE " \"T\" " TIME},
    {"email", "[a-zA-Z0-9] [a-zA-Z0-9._+-]{0,30} \"@\" " HOSTNAME " \".\" [a-z]{2,10}"},
    {"idn-email", "[a-zA-Z0-9] [a-zA-Z0-9._+-]{0,30} \"@\" " HOSTNAME " \".\" [a-z]{2,10}"},
    {"uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [1-5] [0-9a-f]{3} \"-\" [89ab] [0-9a-f]{3} \"-\" [0-9a-f]{12}"},
    {"uri", URI},
    {"uri-reference", URI},
    {"iri", URI},
    {"iri-reference", URI},
    {"uri-template", "[a-zA-Z0-9/._-]{0,80}"},
    {"hostname", HOSTNAME},
    {"idn-hostname", HOSTNAME},
    {"ipv4", OCTET " ( \".\" " OCTET " ){3}"},
    {"ipv6", "[0-9a-f]{1,4} ( \":\" [0-9a-f]{1,4} ){7}"},
    {"duration", "\"P\" ( " DUR_DATE " ( " DUR_TIME " )? | " DUR_TIME " | [0-9]{1,4} \"W\" )"},
    {"json-pointer", POINTER},
    {"relative-json-pointer", "( \"0\" | [1-9] [0-9]{0,5} ) ( \"#\" | " POINTER " )"},
    {"regex", "[a-zA-Z0-9 _-]{0,40}"}, /* each such string is a regex matching itself */
};

static const char *format_gbnf(json_t *fmt)
{
    for (size_t i = 0; json_is_string(fmt) && i < TRAM_ARRAY_LEN(formats); i++)
        if (!strcmp(formats[i].name, json_string_value(fmt)))
            return formats[i].gbnf;
    return NULL;
}

/* A pattern that is one atom repeated, ^X*$, ^X+$, ^X{m,n}$ (X a class,
 * an escape or '.'), with the lengths folded into its count: every string
 * of the result matches the pattern and the lengths exactly.  NULL for any
 * other pattern; *empty when the counts leave no length. */
static char *pattern_with_length(const char *pat, long long min, long long max, int *empty)
{
    const char *p = pat + (pat[0] == '^');
    const char *atom = p;
    if (*p == '[') {
        p++;
        if (*p == '^')
            p++;
        if (*p == ']')
            p++;
        while (*p && *p != ']')
            p += p[0] == '\\' && p[1] ? 2 : 1;
        if (*p++ != ']')
            return NULL;
    } else if (*p == '\\' && p[1]) {
        p += 2;
    } else if (*p == '.') {
        p++;
    } else {
        return NULL;
    }
    int alen = (int)(p - atom);
    long long lo, hi;
    if (*p == '*' || *p == '+') {
        lo = *p == '+';
        hi = -1;
        p++;
    } else if (*p == '{') {
        char *end, *e2;
        lo = strtoll(p + 1, &end, 10);
        if (end == p + 1)
            return NULL;
        if (*end == '}') {
            hi = lo;
        } else if (end[0] == ',' && end[1] == '}') {
            hi = -1;
            end++;
        } else if (*end == ',' && (hi = strtoll(end + 1, &e2, 10), e2 > end + 1 && *e2 == '}')) {
            end = e2;
        } else {
            return NULL;
        }
        p = end + 1;
    } else {
        return NULL;
    }
    if (strcmp(p, "$") && *p)
        return NULL;
    lo = TRAM_MAX(lo, min);
    hi = hi < 0 ? max : max < 0 ? hi : TRAM_MIN(hi, max);
    if ((*empty = hi >= 0 && lo > hi))
        return NULL;
    char *out = malloc((size_t)alen + 64);
    if (out && hi >= 0)
        snprintf(out, (size_t)alen + 64, "^%.*s{%lld,%lld}$", alen, atom, lo, hi);
    else if (out)
        snprintf(out, (size_t)alen + 64, "^%.*s{%lld,}$", alen, atom, lo);
    return out;
}

/* The pattern's rule, crossed with the lengths when there are any; a
 * product over its bounds keeps the pattern alone, the lengths then left
 * to the validator.  Returns 0, TRAM_REGEX_NO_LENGTH or -1 with inner set. */
static int pattern_rule(jsc *c, const char *regex, const char *rule, long long min, long long max,
                        const char *path, int *approx, tram_error *inner)
{
    if (min > 0 || max >= 0) {
        int rc = tram_regex_rule_lengths(regex, rule, 1, min, max, approx, &c->pattern_pairs, &c->out, inner);
        if (rc != TRAM_REGEX_TOO_LARGE)
            return rc;
        js_approximate(c, "minLength/maxLength beside pattern", path);
    }
    return tram_regex_rule(regex, rule, 1, approx, &c->out, inner);
}

/* What the rule generates for a pattern, which matches where it finds a
 * match (not the whole string): one anchored at its start only, ^P, is
 * ^(?:P).* so that the strings it begins are generated too; one anchored
 * at both ends is itself; any other is generated as whole strings
 * matching it, a subset -- or, when none of those has an allowed length,
 * as .*(?:P).*, every string holding a match: only when that has none
 * either is the schema empty. */
static int pattern_form(const char *pat, int searched, tram_strbuf *out)
{
    size_t n = strlen(pat);
    int anchored = pat[0] == '^' && !tram_regex_alternates_at_top(pat);
    if (searched && !anchored)
        tram_strbuf_addf(out, ".*(?:%s).*", pat);
    else if (pat[0] == '^' && !(n >= 2 && pat[n - 1] == '$' && pat[n - 2] != '\\'))
        tram_strbuf_addf(out, "^(?:%s).*", pat + 1);
    else
        tram_strbuf_addf(out, "%s", pat);
    return anchored;
}

/* The rule for a pattern, of strings whose length lies in [min, max] (max
 * < 0: no bound). */
static int gen_pattern(jsc *c, const char *pat, long long min, long long max, const char *path, const char *name,
                       tram_strbuf *b)
{
    char rule[JS_NAME_MAX + 8];
    snprintf(rule, sizeof(rule), "%s-re", name);
    tram_error inner;
    int approx = 0, rc = TRAM_REGEX_NO_LENGTH, exact_form = 0;
    for (int searched = 0; searched < 2 && rc == TRAM_REGEX_NO_LENGTH && !exact_form; searched++) {
        tram_strbuf form = {0};
        exact_form = pattern_form(pat, searched, &form);
        rc = form.oom ? tram_fail(&inner, "regex: out of memory")
                      : pattern_rule(c, form.s, rule, min, max, path, &approx, &inner);
        tram_strbuf_free(&form);
    }
    if (rc == TRAM_REGEX_NO_LENGTH)
        return js_empty(c, path, "no string the pattern matches has a length within minLength/maxLength");
    if (rc)
        return JS_FAIL(c, "'pattern' at %s: %s", path, inner.msg);
    if (approx)
        js_approximate(c, "pattern (its lookaround, backreferences or inner anchors)", path);
    tram_strbuf_addf(b, "\"\\\"\" %s \"\\\"\"", rule);
    return 0;
}

static int gen_lengths(jsc *c, long long min, long long max, const char *path, tram_strbuf *b)
{
    if (max >= 0 && max < min)
        return js_empty(c, path, "maxLength is below minLength");
    if (max >= 0)
        tram_strbuf_addf(b, "\"\\\"\" " JS_JSON_CHAR "{%lld,%lld} \"\\\"\"", min, max);
    else
        tram_strbuf_addf(b, "\"\\\"\" " JS_JSON_CHAR "{%lld,} \"\\\"\"", min);
    return 0;
}

int js_gen_string(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b)
{
    json_t *pat = json_object_get(s, "pattern");
    const char *fmt = format_gbnf(json_object_get(s, "format"));
    long long min = 0, max = -1;
    int has_min = js_read_count(c, s, "minLength", path, &min);
    int has_max = js_read_count(c, s, "maxLength", path, &max);
    if (has_min < 0 || has_max < 0)
        return -1;
    if (pat && !json_is_string(pat))
        return JS_FAIL(c, "'pattern' at %s must be a string", path);
    if (pat && fmt)
        js_approximate(c, "format beside pattern", path);
    if (pat && (has_min || has_max)) {
        int empty = 0;
        char *folded = pattern_with_length(json_string_value(pat), min, max, &empty);
        if (empty)
            return js_empty(c, path, "pattern's counts and minLength/maxLength leave no length");
        int rc = folded ? gen_pattern(c, folded, 0, -1, path, name, b)
                        : gen_pattern(c, json_string_value(pat), min, max, path, name, b);
        free(folded);
        return rc;
    }
    if (pat)
        return gen_pattern(c, json_string_value(pat), 0, -1, path, name, b);
    if (fmt) {
        if (has_min || has_max)
            js_approximate(c, "minLength/maxLength beside format", path);
        tram_strbuf_addf(b, "\"\\\"\" %s \"\\\"\"", fmt);
        return 0;
    }
    if (has_min || has_max)
        return gen_lengths(c, min, max, path, b);
    char n[JS_NAME_MAX];
    js_shared(c, JS_USE_STRING, n, "string");
    tram_strbuf_addf(b, "%s", n);
    return 0;
}
