/* json_scan.c — see json_scan.h. */
#include "server/json_scan.h"

#include <jansson.h>
#include <string.h>

#include "chat/pyjson.h"

enum {
    S_START,          /* the object's '{' */
    S_KEY_OR_CLOSE,   /* after '{' */
    S_KEY,            /* after ',' in an object */
    S_COLON,
    S_VALUE,          /* after ':' or ',' in an array */
    S_VALUE_OR_CLOSE, /* after '[' */
    S_AFTER,          /* after a value: ',' or the container's close */
    S_STRING,
    S_ESCAPE,
    S_HEX,            /* the digits of \uXXXX */
    S_LOW_SLASH,      /* the '\' of a low surrogate's \uXXXX */
    S_LOW_U,          /* its 'u' */
    S_UTF8,           /* the continuation bytes of a character */
    S_NUMBER,
    S_LITERAL,
    S_DONE,
    S_ERROR,
};

/* The number grammar's places: after '-', after a leading 0, in the
 * integer digits, after '.', in the fraction, after 'e', after its sign,
 * in the exponent. */
enum { N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void tram_json_scan_init(tram_json_scan *s)
{
    tram_strbuf_free(&s->num);
    *s = (tram_json_scan){.state = S_START};
}

void tram_json_scan_free(tram_json_scan *s)
{
    tram_strbuf_free(&s->num);
}

static int fail(tram_json_scan *s)
{
    s->state = S_ERROR;
    return TRAM_JSCAN_ERROR;
}

static int in_object(const tram_json_scan *s)
{
    return s->objects[(s->depth - 1) / 8] >> ((s->depth - 1) % 8) & 1;
}

static int open_container(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    if (s->depth == TRAM_JSCAN_MAX_DEPTH)
        return fail(s);
    s->depth++;
    unsigned char bit = (unsigned char)(1u << ((s->depth - 1) % 8));
    if (c == '{')
        s->objects[(s->depth - 1) / 8] |= bit;
    else
        s->objects[(s->depth - 1) / 8] &= (unsigned char)~bit;
    s->state = c == '{' ? S_KEY_OR_CLOSE : S_VALUE_OR_CLOSE;
    tram_strbuf_add(out, (const char *)&c, 1);
    return 0;
}

/* A value ended (a container's, after its close): the outer object's
 * member, when it was one of them. */
static int value_done(tram_json_scan *s, tram_strbuf *out)
{
    s->state = s->depth ? S_AFTER : S_DONE;
    if (s->depth == 0)
        return TRAM_JSCAN_DONE;
    if (s->depth != 1)
        return 0;
    s->value_end = out->len;
    return TRAM_JSCAN_END;
}

static int close_container(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    if ((c == '}') != in_object(s))
        return fail(s);
    tram_strbuf_add(out, (const char *)&c, 1);
    s->depth--;
    return value_done(s, out);
}

static int begin_value(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    int ev = 0;
    if (s->depth == 1) {
        s->value_at = out->len;
        ev = TRAM_JSCAN_BEGIN;
    }
    if (c == '{' || c == '[')
        return ev | open_container(s, c, out);
    if (c == '"') {
        s->state = S_STRING;
        s->in_key = 0;
        tram_strbuf_add(out, "\"", 1);
        return ev;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        s->state = S_NUMBER;
        s->num_state = c == '-' ? N_SIGN : c == '0' ? N_ZERO : N_INT;
        s->num.len = 0;
        tram_strbuf_add(&s->num, (const char *)&c, 1);
        return ev;
    }
    s->literal = c == 't' ? "true" : c == 'f' ? "false" : c == 'n' ? "null" : NULL;
    if (!s->literal)
        return fail(s);
    s->state = S_LITERAL;
    s->literal_pos = 1;
    tram_strbuf_add(out, (const char *)&c, 1);
    return ev;
}

static int begin_key(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    if (c != '"')
        return fail(s);
    s->key_at = out->len;
    s->state = S_STRING;
    s->in_key = 1;
    tram_strbuf_add(out, "\"", 1);
    return 0;
}

static int structure(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    if (is_space(c) && s->state != S_START)
        return 0;
    switch (s->state) {
    case S_START: return c == '{' ? open_container(s, c, out) : fail(s);
    case S_KEY_OR_CLOSE: return c == '}' ? close_container(s, c, out) : begin_key(s, c, out);
    case S_KEY: return begin_key(s, c, out);
    case S_COLON:
        if (c != ':')
            return fail(s);
        tram_strbuf_add(out, ": ", 2);
        s->state = S_VALUE;
        return 0;
    case S_VALUE_OR_CLOSE: return c == ']' ? close_container(s, c, out) : begin_value(s, c, out);
    case S_VALUE: return begin_value(s, c, out);
    default: /* S_AFTER */
        if (c == '}' || c == ']')
            return close_container(s, c, out);
        if (c != ',')
            return fail(s);
        tram_strbuf_add(out, ", ", 2);
        s->state = in_object(s) ? S_KEY : S_VALUE;
        return 0;
    }
}

/* A character of a string's value, as UTF-8 bytes. */
static void put_char(tram_json_scan *s, const char *bytes, size_t n, tram_strbuf *out)
{
    tram_pyjson_put_chars(out, bytes, n);
    s->state = S_STRING;
}

static void put_code_point(tram_json_scan *s, unsigned cp, tram_strbuf *out)
{
    char u[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t i = n - 1; i > 0; i--, cp >>= 6)
        u[i] = (char)(0x80 | (cp & 0x3F));
    u[0] = (char)(n == 1 ? cp : lead[n] | cp);
    put_char(s, u, n, out);
}

static int string_end(tram_json_scan *s, tram_strbuf *out)
{
    tram_strbuf_add(out, "\"", 1);
    if (!s->in_key)
        return value_done(s, out);
    s->state = S_COLON;
    return s->depth == 1 ? TRAM_JSCAN_KEY : 0;
}

/* The first byte of a multi-byte character: how many follow. */
static int utf8_start(tram_json_scan *s, unsigned char c)
{
    s->utf8_need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
    if (!s->utf8_need)
        return fail(s);
    s->utf8[0] = c;
    s->utf8_len = 1;
    s->state = S_UTF8;
    return 0;
}

/* A continuation byte; the second one's range rules out overlong forms,
 * surrogates and code points past U+10FFFF, as UTF-8 does. */
static int utf8_more(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    unsigned char lo = 0x80, hi = 0xBF, lead = s->utf8[0];
    if (s->utf8_len == 1) {
        lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
        hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    }
    if (c < lo || c > hi)
        return fail(s);
    s->utf8[s->utf8_len++] = c;
    if (s->utf8_len == s->utf8_need + 1)
        put_char(s, (const char *)s->utf8, (size_t)s->utf8_len, out);
    return 0;
}

static int escape(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *at = c ? strchr(from, c) : NULL;
    if (c == 'u') {
        s->state = S_HEX;
        s->code = 0;
        s->hex_digits = 0;
        return 0;
    }
    if (!at)
        return fail(s);
    put_char(s, &to[at - from], 1, out);
    return 0;
}

/* A \uXXXX is complete: a character, or the first half of a surrogate pair. */
static int hex_done(tram_json_scan *s, tram_strbuf *out)
{
    unsigned cp = s->code;
    if (s->high) {
        if (cp < 0xDC00 || cp > 0xDFFF)
            return fail(s);
        cp = 0x10000 + ((s->high - 0xD800) << 10) + (cp - 0xDC00);
        s->high = 0;
    } else if (cp >= 0xD800 && cp <= 0xDBFF) {
        s->high = cp;
        s->state = S_LOW_SLASH;
        return 0;
    } else if ((cp >= 0xDC00 && cp <= 0xDFFF) || cp == 0) {
        return fail(s);  /* jansson refuses a lone low half and \u0000 */
    }
    put_code_point(s, cp, out);
    return 0;
}

static int hex(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0)
        return fail(s);
    s->code = s->code << 4 | (unsigned)v;
    return ++s->hex_digits == 4 ? hex_done(s, out) : 0;
}

static int string_byte(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    switch (s->state) {
    case S_ESCAPE: return escape(s, c, out);
    case S_HEX: return hex(s, c, out);
    case S_LOW_SLASH:
        s->state = S_LOW_U;
        return c == '\\' ? 0 : fail(s);
    case S_LOW_U:
        s->state = S_HEX;
        s->code = 0;
        s->hex_digits = 0;
        return c == 'u' ? 0 : fail(s);
    case S_UTF8: return utf8_more(s, c, out);
    default: /* S_STRING */
        if (c == '"')
            return string_end(s, out);
        if (c == '\\') {
            s->state = S_ESCAPE;
            return 0;
        }
        if (c < 0x20)
            return fail(s);
        if (c >= 0x80)
            return utf8_start(s, c);
        put_char(s, (const char *)&c, 1, out);
        return 0;
    }
}

/* The next place in the number grammar after c, or -1 when c ends the
 * number (or cannot follow). */
static int number_step(int at, unsigned char c)
{
    int digit = c >= '0' && c <= '9', e = c == 'e' || c == 'E';
    switch (at) {
    case N_SIGN: return c == '0' ? N_ZERO : digit ? N_INT : -1;
    case N_ZERO: return c == '.' ? N_DOT : e ? N_E : -1;
    case N_INT: return digit ? N_INT : c == '.' ? N_DOT : e ? N_E : -1;
    case N_DOT: return digit ? N_FRAC : -1;
    case N_FRAC: return digit ? N_FRAC : e ? N_E : -1;
    case N_E: return c == '+' || c == '-' ? N_ESIGN : digit ? N_EXP : -1;
    default: return digit ? N_EXP : -1;  /* N_ESIGN, N_EXP */
    }
}

/* The number ended before c: its value, written as json.dumps writes it;
 * then c is read as what follows a value. */
static int number_end(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    int complete = s->num_state == N_ZERO || s->num_state == N_INT || s->num_state == N_FRAC ||
                   s->num_state == N_EXP;
    json_t *v = complete && !s->num.oom ? json_loadb(s->num.s, s->num.len, JSON_DECODE_ANY, NULL) : NULL;
    if (!v)
        return fail(s);
    tram_pyjson_put(out, v, -1);
    json_decref(v);
    int ev = value_done(s, out);
    return ev | structure(s, c, out);
}

static int number_byte(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    int next = number_step(s->num_state, c);
    if (next < 0)
        return number_end(s, c, out);
    s->num_state = next;
    tram_strbuf_add(&s->num, (const char *)&c, 1);
    return 0;
}

static int literal_byte(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    if (c != (unsigned char)s->literal[s->literal_pos])
        return fail(s);
    tram_strbuf_add(out, (const char *)&c, 1);
    return s->literal[++s->literal_pos] ? 0 : value_done(s, out);
}

int tram_json_scan_byte(tram_json_scan *s, unsigned char c, tram_strbuf *out)
{
    switch (s->state) {
    case S_DONE:
    case S_ERROR: return fail(s);
    case S_STRING:
    case S_ESCAPE:
    case S_HEX:
    case S_LOW_SLASH:
    case S_LOW_U:
    case S_UTF8: return string_byte(s, c, out);
    case S_NUMBER: return number_byte(s, c, out);
    case S_LITERAL: return literal_byte(s, c, out);
    default: return structure(s, c, out);
    }
}
