/* jinja_lex.c — see jinja_lex.h.  Whitespace control follows jinja2's lexer
 * with trim_blocks and lstrip_blocks on: a block or comment tag removes the
 * spaces and tabs before it on its line (when nothing else precedes it
 * there) and the one newline after it. */
#include "chat/jinja_lex.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jj_pool *p;
    const char *src;
    size_t pos;
    int line;
    jj_tok *toks;
    int n, cap;
} lexer;

static jj_tok *emit(lexer *lx, jj_tok_kind kind)
{
    if (lx->n == lx->cap) {
        lx->cap = lx->cap ? lx->cap * 2 : 256;
        lx->toks = jj_realloc(lx->p, lx->toks, (size_t)lx->cap * sizeof(jj_tok));
    }
    jj_tok *t = &lx->toks[lx->n++];
    *t = (jj_tok){.kind = kind, .line = lx->line};
    return t;
}

static void count_lines(lexer *lx, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        lx->line += lx->src[i] == '\n';
}

/* The text from lx->pos up to the tag at `tag`, its edge whitespace removed
 * as the tag asks. */
static void emit_text(lexer *lx, size_t tag)
{
    const char *s = lx->src;
    size_t start = lx->pos, end = tag;
    char kind = s[tag + 1], mod = s[tag + 2];
    if (mod == '-') {
        while (end > start && isspace((unsigned char)s[end - 1]))
            end--;
    } else if ((kind == '%' || kind == '#') && mod != '+') {
        size_t line = end;
        while (line > start && (s[line - 1] == ' ' || s[line - 1] == '\t'))
            line--;
        if ((line > start && s[line - 1] == '\n') || (line == start && (start == 0 || s[start - 1] == '\n')))
            end = line;
    }
    if (end > start) {
        jj_tok *t = emit(lx, JT_TEXT);
        t->s = jj_strndup(lx->p, s + start, end - start);
        t->n = end - start;
    }
    count_lines(lx, start, tag);
}

/* After a tag's closing delimiter at lx->pos: `-` strips all whitespace,
 * else trim_blocks removes one newline after block and comment tags. */
static void after_tag(lexer *lx, int strip, int block)
{
    const char *s = lx->src;
    size_t from = lx->pos;
    if (strip)
        while (isspace((unsigned char)s[lx->pos]))
            lx->pos++;
    else if (block && s[lx->pos] == '\n')
        lx->pos++;
    else if (block && s[lx->pos] == '\r' && s[lx->pos + 1] == '\n')
        lx->pos += 2;
    count_lines(lx, from, lx->pos);
}

static void skip_comment(lexer *lx)
{
    const char *end = strstr(lx->src + lx->pos + 2, "#}");
    if (!end)
        jj_fail(lx->p, "chat template: line %d: unclosed comment", lx->line);
    size_t close = (size_t)(end - lx->src);
    count_lines(lx, lx->pos, close);
    lx->pos = close + 2;
    after_tag(lx, lx->src[close - 1] == '-', lx->src[close - 1] != '+');
}

static int hex_value(const char *s, int digits, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < digits; i++) {
        if (!isxdigit((unsigned char)s[i]))
            return -1;
        v = v * 16 + (unsigned)(isdigit((unsigned char)s[i]) ? s[i] - '0' : (tolower((unsigned char)s[i]) - 'a' + 10));
    }
    *out = v;
    return 0;
}

static void put_utf8(jj_pool *p, jj_buf *b, unsigned c)
{
    char u[4];
    size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (n == 1) {
        u[0] = (char)c;
    } else {
        for (size_t i = n - 1; i > 0; i--, c >>= 6)
            u[i] = (char)(0x80 | (c & 0x3f));
        u[0] = (char)((n == 2 ? 0xc0 : n == 3 ? 0xe0 : 0xf0) | c);
    }
    jj_buf_add(p, b, u, n);
}

/* A string literal at s (its quote first), with Python's escapes undone;
 * returns the length of the literal in the source. */
static size_t lex_string(lexer *lx, const char *s, jj_tok *t)
{
    char q = s[0];
    jj_buf b = {0};
    size_t i = 1;
    for (; s[i] && s[i] != q; i++) {
        if (s[i] != '\\') {
            jj_buf_add(lx->p, &b, &s[i], 1);
            continue;
        }
        char c = s[++i];
        static const char from[] = "ntr\\'\"0abfv\n", to[] = "\n\t\r\\'\"\0\a\b\f\v";
        const char *k = c ? strchr(from, c) : NULL;
        unsigned code;
        int width = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (c == '\n')
            lx->line++;
        if (k && c != '\n')
            jj_buf_add(lx->p, &b, &to[k - from], 1);
        else if (width && !hex_value(s + i + 1, width, &code) && code <= 0x10ffff)
            put_utf8(lx->p, &b, code), i += (size_t)width;
        else if (c != '\n')
            jj_buf_add(lx->p, &b, s + i - 1, c ? 2 : 1);
        if (!c)
            break;
    }
    if (s[i] != q)
        jj_fail(lx->p, "chat template: line %d: unterminated string", lx->line);
    t->s = b.s ? b.s : "";
    t->n = b.n;
    return i + 1;
}

static size_t lex_number(const char *s, jj_tok *t)
{
    char *end;
    size_t n = strspn(s, "0123456789_");
    int is_float = (s[n] == '.' && isdigit((unsigned char)s[n + 1])) || s[n] == 'e' || s[n] == 'E';
    char digits[64];
    size_t k = 0;
    if (is_float)
        t->f = strtod(s, &end), n = (size_t)(end - s);
    for (size_t i = 0; i < n && k < sizeof(digits) - 1; i++)
        if (s[i] != '_')
            digits[k++] = s[i];
    digits[k] = 0;
    t->kind = is_float ? JT_FLOAT : JT_INT;
    if (!is_float) {
        errno = 0;
        t->i = strtoll(digits, NULL, 10);
        if (errno == ERANGE) {   /* past int64: Python's int would be exact; a float is the nearest tram has */
            t->kind = JT_FLOAT;
            t->f = strtod(digits, NULL);
        }
    }
    return n;
}

static const char *const operators[] = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", ".", ",", ":", "|", "(", ")",
    "[", "]", "{", "}", NULL,
};

/* The end of the tag at s, or 0: its delimiter's length, with *strip set
 * for a `-` before it. */
static size_t tag_end(const char *s, char close, int *strip, int *plus)
{
    *strip = s[0] == '-';
    *plus = s[0] == '+';
    const char *d = s + (*strip || *plus);
    return d[0] == close && d[1] == '}' ? (size_t)(d + 2 - s) : 0;
}

/* The tokens inside a {{ }} or {% %} tag opened at lx->pos. */
static void lex_tag(lexer *lx)
{
    const char *s = lx->src;
    char close = s[lx->pos + 1] == '{' ? '}' : '%';
    emit(lx, close == '}' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN);
    lx->pos += 2 + (s[lx->pos + 2] == '-' || s[lx->pos + 2] == '+');
    int depth = 0, strip, plus;
    for (;;) {
        while (isspace((unsigned char)s[lx->pos]))
            lx->line += s[lx->pos++] == '\n';
        const char *c = s + lx->pos;
        size_t n;
        if (!*c)
            jj_fail(lx->p, "chat template: line %d: unclosed tag", lx->line);
        if (depth == 0 && (n = tag_end(c, close, &strip, &plus))) {
            emit(lx, close == '}' ? JT_VAR_END : JT_BLOCK_END);
            lx->pos += n;
            after_tag(lx, strip, close == '%' && !plus);
            return;
        }
        jj_tok *t = emit(lx, JT_NAME);
        if (isalpha((unsigned char)*c) || *c == '_') {
            n = 1;
            while (isalnum((unsigned char)c[n]) || c[n] == '_')
                n++;
            t->s = jj_strndup(lx->p, c, n);
            t->n = n;
        } else if (isdigit((unsigned char)*c)) {
            n = lex_number(c, t);
        } else if (*c == '\'' || *c == '"') {
            t->kind = JT_STRING;
            n = lex_string(lx, c, t);
        } else {
            int k = 0;
            while (operators[k] && strncmp(c, operators[k], strlen(operators[k])))
                k++;
            if (!operators[k])
                jj_fail(lx->p, "chat template: line %d: unexpected character '%c'", lx->line, *c);
            t->kind = JT_OP;
            t->s = operators[k];
            n = t->n = strlen(operators[k]);
            depth += strchr("([{", *c) ? 1 : strchr(")]}", *c) ? -1 : 0;
            if (depth < 0)
                depth = 0;
        }
        lx->pos += n;
    }
}

jj_tok *jj_lex(jj_pool *p, const char *src, int *count)
{
    lexer lx = {.p = p, .src = src, .line = 1};
    for (;;) {
        const char *tag = src + lx.pos;
        while ((tag = strchr(tag, '{')) && tag[1] != '{' && tag[1] != '%' && tag[1] != '#')
            tag++;
        if (!tag) {
            size_t len = strlen(src + lx.pos);
            if (len) {
                jj_tok *t = emit(&lx, JT_TEXT);
                t->s = src + lx.pos;
                t->n = len;
            }
            break;
        }
        emit_text(&lx, (size_t)(tag - src));
        lx.pos = (size_t)(tag - src);
        if (tag[1] == '#')
            skip_comment(&lx);
        else
            lex_tag(&lx);
    }
    emit(&lx, JT_EOF);
    *count = lx.n;
    return lx.toks;
}
