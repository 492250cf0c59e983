/* regex.c — regular expressions to GBNF (see regex.h): a recursive-descent
 * reader that writes the equivalent GBNF expression as it goes. */
#include "grammar/regex.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/regex_nfa.h"
#include "grammar/utf8_ranges.h"

#define MAX_NESTING 64
#define MAX_BACKREF 9                 /* \1 .. \9 */
#define MAX_REPLAYED (1 << 20)        /* bytes of groups read again for backreferences */

typedef struct {
    const char *p, *end;
    int json;
    int nesting;
    int at_start;              /* nothing can have been matched yet: a '^' here means nothing */
    int *approx;               /* NULL: lookaround is an error; else set when one is left out */
    int skipping;              /* inside a lookaround left out: its anchors are left out too */
    tram_strbuf *out;
    tram_regex_nfa *nfa;       /* NULL: no NFA is built (nor inside a lookaround left out) */
    int repeats_empty;         /* something that can match empty is repeated: (a*)*, (x|$)+ */
    const char *group_at[MAX_BACKREF + 1]; /* each capturing group's '(', by number */
    const char *group_end[MAX_BACKREF + 1]; /* just past its ')', once it is closed */
    int num_groups;
    int replaying;             /* reading a group again for a backreference: numbers nothing */
    long replayed;
    tram_error *err;
    int failed;
} rx;

#define RX_FAIL(r, ...) ((r)->failed ? -1 : ((r)->failed = 1, tram_fail((r)->err, __VA_ARGS__)))

/* What JSON text may not hold raw inside a string. */
static const char json_excluded[] = "\"\\\\\\x00-\\x1F";

/* One character as GBNF class-member text (escaped when needed). */
static void class_char(tram_strbuf *b, unsigned cp)
{
    if (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-' || cp == '"')
        tram_strbuf_addf(b, "\\%c", (char)cp);
    else if (cp < 0x20 || cp == 0x7F)
        tram_strbuf_addf(b, "\\x%02X", cp);
    else if (cp < 0x80)
        tram_strbuf_addf(b, "%c", (char)cp);
    else
        tram_strbuf_addf(b, "\\U%08X", cp);
}

/* One UTF-8 character of the pattern. */
static long next_cp(rx *r)
{
    uint32_t cp;
    int n = tram_utf8_decode(r->p, (size_t)(r->end - r->p), &cp);
    if (!n)
        return RX_FAIL(r, "regex: invalid UTF-8");
    r->p += n;
    return cp;
}

typedef struct {
    long lo, hi;
} cprange;

#define MAX_RANGES 2048

#define MAX_CP 0x10FFFF

/* The complement of n sorted, disjoint ranges; returns how many. */
static int complement(const cprange *in, int n, cprange *out)
{
    int k = 0;
    long next = 0;
    for (int i = 0; i < n; next = in[i++].hi + 1)
        if (in[i].lo > next)
            out[k++] = (cprange){next, in[i].lo - 1};
    if (next <= MAX_CP)
        out[k++] = (cprange){next, MAX_CP};
    return k;
}

/* Shorthand classes as code point ranges; returns how many. */
static int shorthand(char c, cprange *out)
{
    static const cprange d[] = {{'0', '9'}}, w[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
                         sp[] = {{'\t', '\r'}, {' ', ' '}};
    const cprange *src = c == 'd' || c == 'D' ? d : c == 'w' || c == 'W' ? w : c == 's' || c == 'S' ? sp : NULL;
    int n = src == d ? 1 : src == w ? 4 : src == sp ? 2 : 0;
    if (out)
        memcpy(out, src, (size_t)n * sizeof(*out));
    return n;
}

static long parse_hex(rx *r, char c)
{
    int digits = c == 'u' ? 4 : 2;
    long cp = 0;
    for (int i = 0; i < digits; i++) {
        int h = r->p < r->end ? tram_hex_digit(*r->p) : -1;
        if (h < 0)
            return RX_FAIL(r, "regex: '\\%c' needs %d hex digits", c, digits);
        cp = cp << 4 | h;
        r->p++;
    }
    return cp;
}

/* \xHH or \uHHHH (after the letter).  A UTF-16 pair \uD83D\uDE00 is the one
 * character it encodes, as in JavaScript; a lone surrogate is no
 * character (UTF-8 text cannot hold one), so it is an error, not a
 * pattern that matches nothing. */
static long parse_hex_char(rx *r, char c)
{
    long cp = parse_hex(r, c);
    if (cp < 0xD800 || cp > 0xDFFF)
        return cp;
    if (cp <= 0xDBFF && r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u') {
        const char *save = r->p;
        r->p += 2;
        long lo = parse_hex(r, 'u');
        if (lo >= 0xDC00 && lo <= 0xDFFF)
            return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        if (lo < 0)
            return lo;
        r->p = save;
    }
    return RX_FAIL(r, "regex: '\\u%04lX' is a lone surrogate, not a character (UTF-8 text has none); "
                      "write the character itself or its pair \\uD8xx\\uDCxx", cp);
}

/* An escape after '\': a character (>= 0), or -2 for a shorthand class
 * whose letter is left in *cls. */
static long parse_escape(rx *r, char *cls)
{
    if (r->p >= r->end)
        return RX_FAIL(r, "regex: a trailing '\\'");
    char c = *r->p++;
    if (shorthand(c, NULL)) {
        *cls = c;
        return -2;
    }
    static const char simple[] = "n\nt\tr\rf\fv\v";
    for (const char *s = simple; *s; s += 2)
        if (c == s[0])
            return (unsigned char)s[1];
    if (c == 'u' || c == 'x')
        return parse_hex_char(r, c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return RX_FAIL(r, "regex: '\\%c' is not supported (backreferences, \\b and the like "
                          "are not)", c);
    return (unsigned char)c;
}

/* A literal character as a GBNF expression; inside a JSON string, a quote
 * or backslash is written escaped and a control character as \u00XX. */
static void emit_char(rx *r, long cp)
{
    if (r->json && (cp == '"' || cp == '\\')) {
        tram_strbuf_addf(r->out, cp == '"' ? "\"\\\\\\\"\"" : "\"\\\\\\\\\"");
    } else if (r->json && cp < 0x20) {
        tram_strbuf_addf(r->out, "\"\\\\u%04lX\"", cp);
    } else {
        tram_strbuf_add(r->out, "[", 1);
        class_char(r->out, (unsigned)cp);
        tram_strbuf_add(r->out, "]", 1);
    }
}

static int has_cp(const cprange *c, int n, long cp)
{
    for (int i = 0; i < n; i++)
        if (c[i].lo <= cp && cp <= c[i].hi)
            return 1;
    return 0;
}

/* A class of ranges as GBNF.  Negated, it also excludes what JSON must
 * escape; positive, it loses the control characters (a subset of its
 * language, so every output still matches) and takes a quote or backslash
 * in escaped form. */
static void emit_class(rx *r, const cprange *c, int n, int neg)
{
    int quote = r->json && !neg && has_cp(c, n, '"'), bslash = r->json && !neg && has_cp(c, n, '\\');
    if (quote || bslash)
        tram_strbuf_add(r->out, "(", 1);
    int any = neg;
    for (int i = 0; i < n && !any; i++)
        for (long cp = r->json ? TRAM_MAX(c[i].lo, 0x20) : c[i].lo; cp <= c[i].hi && !any; cp++)
            any = !r->json || (cp != '"' && cp != '\\');
    /* an empty class matches nothing: everything, negated */
    tram_strbuf_addf(r->out, "[%s", neg || !any ? "^" : "");
    if (!any)
        tram_strbuf_addf(r->out, "\\x00-\\U0010FFFF");
    for (int i = 0; i < n; i++) {
        long lo = c[i].lo, hi = c[i].hi;
        if (r->json && !neg && lo < 0x20)
            lo = 0x20;
        /* split around the quote and the backslash, which go in escaped */
        for (long a = lo; r->json && !neg && a <= hi;) {
            long b = a;
            while (b <= hi && b != '"' && b != '\\')
                b++;
            if (b > a) {
                class_char(r->out, (unsigned)a);
                if (b - 1 > a) {
                    tram_strbuf_add(r->out, "-", 1);
                    class_char(r->out, (unsigned)(b - 1));
                }
            }
            a = b + 1;
        }
        if (!r->json || neg) {
            class_char(r->out, (unsigned)lo);
            if (hi > lo) {
                tram_strbuf_add(r->out, "-", 1);
                class_char(r->out, (unsigned)hi);
            }
        }
    }
    if (neg && r->json)
        tram_strbuf_addf(r->out, "%s", json_excluded);
    tram_strbuf_add(r->out, "]", 1);
    if (quote)
        tram_strbuf_addf(r->out, " | \"\\\\\\\"\"");
    if (bslash)
        tram_strbuf_addf(r->out, " | \"\\\\\\\\\"");
    if (quote || bslash)
        tram_strbuf_add(r->out, ")", 1);
}

static int parse_class(rx *r)
{
    cprange c[MAX_RANGES];
    int n = 0, neg = 0;
    r->p++;
    if (r->p < r->end && *r->p == '^') {
        neg = 1;
        r->p++;
    }
    for (int first = 1; r->p < r->end && (*r->p != ']' || first); first = 0) {
        if (n + 6 > MAX_RANGES)
            return RX_FAIL(r, "regex: more than %d ranges in a class", MAX_RANGES);
        char cls = 0;
        long lo = *r->p == '\\' ? (r->p++, parse_escape(r, &cls)) : next_cp(r), hi = lo;
        if (lo == -2 && cls >= 'A' && cls <= 'Z') {  /* \D, \W, \S: what the shorthand leaves out */
            cprange sh[4];
            n += complement(sh, shorthand(cls, sh), c + n);
            continue;
        }
        if (lo == -2) {
            n += shorthand(cls, c + n);
            continue;
        }
        if (lo >= 0 && r->p + 1 < r->end && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            hi = *r->p == '\\' ? (r->p++, parse_escape(r, &cls)) : next_cp(r);
            if (hi == -2)
                return RX_FAIL(r, "regex: a class range cannot end in a shorthand");
        }
        if (lo < 0 || hi < 0)
            return -1;
        if (hi < lo)
            return RX_FAIL(r, "regex: class range runs backwards");
        c[n++] = (cprange){lo, hi};
    }
    if (r->p >= r->end)
        return RX_FAIL(r, "regex: unterminated class '['");
    r->p++;
    emit_class(r, c, n, neg);
    return 0;
}

static int parse_alt(rx *r, tram_nfa_frag *f);

static int is_lookaround(const rx *r)
{
    const char *q = r->p + 1;
    if (r->end - q < 3 || q[0] != '?')
        return 0;
    return q[1] == '=' || q[1] == '!' || (q[1] == '<' && (q[2] == '=' || q[2] == '!'));
}

/* A lookaround, (?=...) (?!...) (?<=...) (?<!...), read and left out: the
 * rule then matches more than the regex (*approx says so; the caller
 * validates what it generates with a full regex engine). */
static int skip_lookaround(rx *r, tram_nfa_frag *f)
{
    if (!r->approx)
        return RX_FAIL(r, "regex: lookaround '(?%c' is not supported", r->p[2]);
    r->p += r->p[2] == '<' ? 4 : 3;
    tram_strbuf scratch = {0}, *out = r->out;
    tram_regex_nfa *nfa = r->nfa;
    int skipping = r->skipping, at_start = r->at_start;
    r->out = &scratch;
    r->nfa = NULL;
    r->skipping = 1;
    tram_nfa_frag inner;
    int rc = ++r->nesting > MAX_NESTING ? RX_FAIL(r, "regex: groups nested more than %d deep", MAX_NESTING)
                                        : parse_alt(r, &inner);
    tram_strbuf_free(&scratch);
    r->out = out;
    r->nfa = nfa;
    r->skipping = skipping;
    r->at_start = at_start;
    r->nesting--;
    *f = tram_nfa_empty(r->nfa);
    if (rc)
        return -1;
    if (r->p >= r->end || *r->p != ')')
        return RX_FAIL(r, "regex: missing ')'");
    r->p++;
    *r->approx = 1;
    return 0;
}

static int parse_group(rx *r, tram_nfa_frag *f)
{
    if (is_lookaround(r))
        return skip_lookaround(r, f);
    const char *open = r->p++;
    int number = 0;
    if (r->p < r->end && *r->p == '?' && r->p + 1 < r->end && r->p[1] == ':')
        r->p += 2;
    else if (!r->replaying && ++r->num_groups <= MAX_BACKREF)
        r->group_at[number = r->num_groups] = open;
    if (r->p < r->end && *r->p == '?') {
        if (r->p + 2 < r->end && (r->p[1] == '<' || (r->p[1] == 'P' && r->p[2] == '<')) &&
            r->p[r->p[1] == 'P' ? 3 : 2] != '=' && r->p[r->p[1] == 'P' ? 3 : 2] != '!') {
            const char *close = memchr(r->p, '>', (size_t)(r->end - r->p));
            if (!close)
                return RX_FAIL(r, "regex: unterminated group name");
            r->p = close + 1;
        } else {
            return RX_FAIL(r, "regex: '(?%c' is not supported (lookaround, flags and conditionals "
                              "are not)", r->p + 1 < r->end ? r->p[1] : ' ');
        }
    }
    if (++r->nesting > MAX_NESTING)
        return RX_FAIL(r, "regex: groups nested more than %d deep", MAX_NESTING);
    tram_strbuf_add(r->out, "(", 1);
    if (parse_alt(r, f))
        return -1;
    if (r->p >= r->end || *r->p != ')')
        return RX_FAIL(r, "regex: missing ')'");
    r->p++;
    r->nesting--;
    tram_strbuf_add(r->out, ")", 1);
    if (number)
        r->group_end[number] = r->p;
    return 0;
}

/* A backreference \N, where the caller validates: group N's pattern read
 * again, so that the rule matches any match of the group there, not only
 * the same one (more than the regex: *approx says so). */
static int parse_backref(rx *r, tram_nfa_frag *f)
{
    int n = r->p[1] - '0';
    if (!r->approx || n > r->num_groups || !r->group_end[n])
        return RX_FAIL(r, "regex: '\\%d' is not supported (backreferences are only where the output is "
                          "validated, to a group closed before them)", n);
    if ((r->replayed += r->group_end[n] - r->group_at[n]) > MAX_REPLAYED)
        return RX_FAIL(r, "regex: backreferences repeat more than %d bytes of groups", MAX_REPLAYED);
    const char *resume = r->p + 2;
    int at_start = r->at_start, replaying = r->replaying;
    r->p = r->group_at[n];
    r->replaying = 1;
    int rc = parse_group(r, f);
    r->p = resume;
    r->replaying = replaying;
    r->at_start = at_start;
    *r->approx = 1;
    return rc;
}

/* p just past a class's '[': just past its ']', or NULL (unterminated). */
static const char *class_end(const char *p, const char *end)
{
    if (p < end && *p == '^')
        p++;
    if (p < end && *p == ']')
        p++;  /* a ']' first is a member */
    for (; p < end && *p != ']'; p++)
        if (*p == '\\')
            p++;
    return p < end ? p + 1 : NULL;
}

/* p at a '|' or ')' of a group's body: the ')' that closes the group
 * (escapes, classes and inner groups skipped), or NULL. */
static const char *group_close(const char *p, const char *end)
{
    for (int depth = 0; p < end; p++) {
        if (*p == '\\') {
            p++;
        } else if (*p == '[') {
            if (!(p = class_end(p + 1, end)))
                return NULL;  /* unterminated */
            p--;              /* at its ']', for the loop's step */
        } else if (*p == '(') {
            depth++;
        } else if (*p == ')' && depth-- == 0) {
            return p;
        }
    }
    return NULL;
}

int tram_regex_alternates_at_top(const char *regex)
{
    const char *p = regex, *end = regex + strlen(regex), *close;
    while (p && p < end && *p != '|') {
        if (*p == '(')
            p = (close = group_close(p + 1, end)) ? close + 1 : NULL;
        else
            p = *p == '[' ? class_end(p + 1, end) : p + (*p == '\\' && p + 1 < end ? 2 : 1);
    }
    return p && p < end;
}

/* A '$' after which nothing can be matched: it ends its alternative, and
 * each group around it ends the alternative it stands in (a '?' after the
 * group, or another '$', changes nothing): there the rule's end is the
 * match's, and the anchor means nothing more. */
static int at_match_end(const rx *r)
{
    const char *p = r->p + 1, *end = r->end;
    for (int level = r->nesting;; level--) {
        while (p < end && *p == '$')
            p++;
        if (p == end || level == 0)
            return p == end || *p == '|';
        if ((*p != '|' && *p != ')') || !(p = group_close(p, end)))
            return 0;
        p++;
        for (int q = 0; q < 2 && p < end && *p == '?'; q++)
            p++;  /* (...)? and its lazy (...)?? */
    }
}

/* An atom that matches one character: a class, '.', an escape, a literal. */
static int parse_char_atom(rx *r)
{
    char c = *r->p;
    if (c == '[')
        return parse_class(r);
    if (c == '.') {
        r->p++;
        tram_strbuf_addf(r->out, "[^\\n%s]", r->json ? json_excluded : "");
        return 0;
    }
    if (c == '\\') {
        r->p++;
        char cls = 0;
        long cp = parse_escape(r, &cls);
        if (cp == -2) {
            cprange c[4];
            emit_class(r, c, shorthand(cls, c), cls >= 'A' && cls <= 'Z');
            return 0;
        }
        if (cp < 0)
            return -1;
        emit_char(r, cp);
        return 0;
    }
    long cp = next_cp(r);
    if (cp < 0)
        return -1;
    emit_char(r, cp);
    return 0;
}

static int parse_atom(rx *r, tram_nfa_frag *f)
{
    char c = *r->p;
    if (c == '(')
        return parse_group(r, f);
    if (c == '\\' && r->p + 1 < r->end && r->p[1] >= '1' && r->p[1] <= '9')
        return parse_backref(r, f);
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return RX_FAIL(r, "regex: '%c' has nothing to repeat", c);
    if ((c == '^' && (r->at_start || r->skipping)) || (c == '$' && (r->skipping || at_match_end(r)))) {
        r->p++;  /* an anchor where it means nothing more (the rule matches whole strings) */
        *f = tram_nfa_empty(r->nfa);
        return 0;
    }
    if ((c == '^' || c == '$') && r->approx) {
        *r->approx = 1;  /* left out: the grammar allows more, and the validator decides */
        r->p++;
        *f = tram_nfa_empty(r->nfa);
        return 0;
    }
    if (c == '^' || c == '$')
        return RX_FAIL(r, "regex: '%c' is supported only where nothing can be matched %s it (the %s of the "
                          "pattern, or of an alternative or group at its %s)", c, c == '^' ? "before" : "after",
                       c == '^' ? "start" : "end", c == '^' ? "start" : "end");
    size_t at = r->out->len;
    if (parse_char_atom(r))
        return -1;
    if (r->out->oom)
        return RX_FAIL(r, "regex: out of memory");
    *f = tram_nfa_char(r->nfa, r->out->s + at, r->out->len - at);
    return 0;
}

/* Reads a quantifier into *min and *max (-1: no bound). */
static int parse_quantifier(rx *r, long *min, long *max)
{
    char c = *r->p;
    if (c == '*' || c == '+' || c == '?') {
        r->p++;
        tram_strbuf_add(r->out, &c, 1);
        *min = c == '+';
        *max = c == '?' ? 1 : -1;
    } else {
        const char *close = memchr(r->p, '}', (size_t)(r->end - r->p));
        if (!close)
            return RX_FAIL(r, "regex: unterminated '{'");
        long counts[2] = {-1, -1};
        int k = 0;
        for (const char *s = r->p + 1; s < close; s++) {
            if (*s == ',' && k == 0)
                k = 1;
            else if (*s >= '0' && *s <= '9' && (counts[k] = (counts[k] < 0 ? 0 : counts[k]) * 10 + *s - '0') > TRAM_GBNF_MAX_REPEAT)
                return RX_FAIL(r, "regex: repetition count over %d, the largest tram supports", TRAM_GBNF_MAX_REPEAT);
            else if (!(*s >= '0' && *s <= '9'))
                return RX_FAIL(r, "regex: bad repetition '%.*s'", (int)(close - r->p + 1), r->p);
        }
        if ((counts[0] < 0 && counts[1] < 0) || (k == 0 && counts[0] < 0) ||
            (k == 1 && counts[1] >= 0 && counts[1] < counts[0]))
            return RX_FAIL(r, "regex: bad repetition '%.*s'", (int)(close - r->p + 1), r->p);
        tram_strbuf_add(r->out, r->p, (size_t)(close - r->p + 1));
        r->p = close + 1;
        *min = counts[0] < 0 ? 0 : counts[0];
        *max = k == 0 ? *min : counts[1];
    }
    if (r->p < r->end && *r->p == '?')
        r->p++;  /* lazy: the same language */
    else if (r->p < r->end && *r->p == '+')
        return RX_FAIL(r, "regex: possessive quantifiers are not supported");
    return 0;
}

static int is_quantifier(const rx *r)
{
    char c = *r->p;
    return c == '*' || c == '+' || c == '?' ||
           (c == '{' && r->p + 1 < r->end && ((r->p[1] >= '0' && r->p[1] <= '9') || r->p[1] == ','));
}

static int at_end_anchor(const rx *r) { return r->p + 1 == r->end && *r->p == '$'; }

/* at_start: the sequence begins where nothing can have been matched yet
 * (so does a group that opens it, and a '^' after a '^'). */
static int parse_seq(rx *r, int at_start, tram_nfa_frag *f)
{
    tram_strbuf_add(r->out, "(", 1);
    r->at_start = at_start;
    *f = tram_nfa_empty(r->nfa);
    while (r->p < r->end && *r->p != '|' && *r->p != ')' && !at_end_anchor(r)) {
        tram_strbuf_add(r->out, " ", 1);
        int nothing = *r->p == '^' || *r->p == '$' || is_lookaround(r);  /* atoms that match no character */
        tram_nfa_frag atom;
        if (parse_atom(r, &atom))
            return -1;
        r->at_start = r->at_start && nothing;
        if (nothing && r->p < r->end && is_quantifier(r))
            return RX_FAIL(r, "regex: '%c' has nothing to repeat", *r->p);
        if (r->p < r->end && is_quantifier(r)) {
            long min = 1, max = 1;
            if (parse_quantifier(r, &min, &max))
                return -1;
            if (r->p < r->end && is_quantifier(r))
                return RX_FAIL(r, "regex: multiple repeat at '%c'", *r->p);
            r->repeats_empty |= atom.min_len == 0 && (max < 0 || max > 1);
            atom = tram_nfa_repeat(r->nfa, atom, min, max);
        }
        *f = tram_nfa_concat(r->nfa, *f, atom);
    }
    tram_strbuf_add(r->out, " )", 2);
    return 0;
}

static int parse_alt(rx *r, tram_nfa_frag *f)
{
    int at_start = r->at_start;
    if (parse_seq(r, at_start, f))
        return -1;
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        tram_strbuf_add(r->out, " | ", 3);
        tram_nfa_frag g;
        if (parse_seq(r, at_start, &g))
            return -1;
        *f = tram_nfa_alt(r->nfa, *f, g);
    }
    return 0;
}

/* The whole regex: its GBNF expression to r->out, its NFA to r->nfa. */
static int parse_regex(rx *r, tram_nfa_frag *f)
{
    if (parse_alt(r, f))
        return -1;
    if (at_end_anchor(r))
        r->p++;
    if (r->p < r->end)
        return RX_FAIL(r, "regex: unbalanced ')'");
    return r->out->oom ? tram_fail(r->err, "regex: out of memory") : 0;
}

/* The rules of regex's NFA in place of the text from `at` on, where the
 * NFA fits: GBNF refuses a repetition of something that can be empty (its
 * ways through would be exponential), which right-linear rules avoid. */
static void rules_from_nfa(const char *regex, const char *rule, int json_string, size_t at, tram_strbuf *out)
{
    tram_regex_nfa nfa;
    tram_strbuf rules = {0};
    tram_error ignored;
    int approx = 0, budget = TRAM_NFA_MAX_STATES;
    if (!tram_regex_nfa_build(regex, json_string, &approx, &nfa, &ignored) && !nfa.full &&
        !tram_regex_nfa_rules(&nfa, rule, 0, -1, &budget, &rules, &ignored) && !rules.oom) {
        out->len = at;
        tram_strbuf_add(out, rules.s, rules.len);
    }
    tram_regex_nfa_free(&nfa);
    tram_strbuf_free(&rules);
}

int tram_regex_rule(const char *regex, const char *rule, int json_string, int *approx, tram_strbuf *out,
                    tram_error *err)
{
    rx r = {.p = regex, .end = regex + strlen(regex), .json = json_string, .at_start = 1, .approx = approx,
            .out = out, .err = err};
    size_t at = out->len;
    tram_strbuf_addf(out, "%s ::= ", rule);
    tram_nfa_frag f;
    if (parse_regex(&r, &f))
        return -1;
    tram_strbuf_add(out, "\n", 1);
    if (r.repeats_empty && !out->oom)
        rules_from_nfa(regex, rule, json_string, at, out);
    return out->oom ? tram_fail(err, "regex: out of memory") : 0;
}

int tram_regex_nfa_build(const char *regex, int json_string, int *approx, tram_regex_nfa *nfa, tram_error *err)
{
    memset(nfa, 0, sizeof(*nfa));
    tram_strbuf text = {0};
    rx r = {.p = regex, .end = regex + strlen(regex), .json = json_string, .at_start = 1, .approx = approx,
            .out = &text, .nfa = nfa, .err = err};
    tram_nfa_frag f;
    int rc = parse_regex(&r, &f);
    tram_strbuf_free(&text);
    if (rc)
        return -1;
    nfa->start = f.start;
    nfa->accept = f.end;
    nfa->min_len = f.min_len;
    nfa->max_len = f.max_len;
    return 0;
}

int tram_regex_to_gbnf(const char *regex, const char *rule, char **gbnf_out, tram_error *err)
{
    tram_strbuf b = {0};
    *gbnf_out = NULL;
    if (tram_regex_rule(regex, rule, 0, NULL, &b, err)) {
        tram_strbuf_free(&b);
        return -1;
    }
    *gbnf_out = tram_strbuf_take(&b);
    return *gbnf_out ? 0 : tram_fail(err, "regex: out of memory");
}

/* Whether the regex's own lengths already lie within [min, max], or
 * outside it altogether: then no product is needed. */
static int lengths_inside(const tram_regex_nfa *nfa, long long min, long long max)
{
    return nfa->min_len >= min && (max < 0 || (nfa->max_len >= 0 && nfa->max_len <= max));
}

static int lengths_outside(const tram_regex_nfa *nfa, long long min, long long max)
{
    return (max >= 0 && nfa->min_len > max) || (nfa->max_len >= 0 && nfa->max_len < min);
}

int tram_regex_rule_lengths(const char *regex, const char *rule, int json_string, long long min, long long max,
                            int *approx, int *pairs_left, tram_strbuf *out, tram_error *err)
{
    tram_regex_nfa nfa;
    if (tram_regex_nfa_build(regex, json_string, approx, &nfa, err)) {
        tram_regex_nfa_free(&nfa);
        return -1;
    }
    int rc = lengths_outside(&nfa, min, max)  ? TRAM_REGEX_NO_LENGTH
             : lengths_inside(&nfa, min, max) ? tram_regex_rule(regex, rule, json_string, approx, out, err)
             : nfa.full                       ? TRAM_REGEX_TOO_LARGE
                                              : tram_regex_nfa_rules(&nfa, rule, min, max, pairs_left, out, err);
    tram_regex_nfa_free(&nfa);
    if (!rc && out->oom)
        return tram_fail(err, "regex: out of memory");
    return rc;
}
