/* pyjson.c — see pyjson.h. */
#include "chat/pyjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tram_pyjson_put_chars(tram_strbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        char u[8];
        if (!esc && c < 0x20) {
            snprintf(u, sizeof(u), "\\u%04x", c);
            esc = u;
        }
        if (esc)
            tram_strbuf_add(b, esc, strlen(esc));
        else
            tram_strbuf_add(b, (const char *)&c, 1);
    }
}

void tram_pyjson_put_string(tram_strbuf *b, const char *s, size_t n)
{
    tram_strbuf_add(b, "\"", 1);
    tram_pyjson_put_chars(b, s, n);
    tram_strbuf_add(b, "\"", 1);
}

/* Python's float repr: the shortest digits that read back as x, in fixed
 * notation when the decimal exponent is in [-4, 16), else as d.ddde+XX. */
void tram_pyjson_float(char out[40], double x)
{
    char sci[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(sci, sizeof(sci), "%.*e", p - 1, x);
        if (strtod(sci, NULL) == x)
            break;
    }
    char digits[24] = {0};
    int nd = 0, neg = sci[0] == '-';
    const char *e = strchr(sci, 'e');
    for (const char *p = sci + neg; p < e; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = 0;
    int exp = atoi(e + 1), o = 0;
    if (neg)
        out[o++] = '-';
    if (exp < -4 || exp >= 16) {
        out[o++] = digits[0];
        if (nd > 1)
            o += snprintf(out + o, (size_t)40 - (size_t)o, ".%s", digits + 1);
        snprintf(out + o, (size_t)40 - (size_t)o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    } else if (exp < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            out[o++] = '0';
        snprintf(out + o, (size_t)40 - (size_t)o, "%s", digits);
    } else {
        for (int i = 0; i <= exp; i++)
            out[o++] = i < nd ? digits[i] : '0';
        out[o++] = '.';
        if (nd > exp + 1)
            o += snprintf(out + o, (size_t)40 - (size_t)o, "%s", digits + exp + 1);
        else
            out[o++] = '0';
        out[o] = 0;
    }
}

static void newline(tram_strbuf *b, int indent, int depth)
{
    tram_strbuf_add(b, "\n", 1);
    for (int i = 0; i < indent * depth; i++)
        tram_strbuf_add(b, " ", 1);
}

static void put_value(tram_strbuf *b, const json_t *v, int indent, int depth);

static void put_container(tram_strbuf *b, const json_t *v, int indent, int depth)
{
    int obj = json_is_object(v);
    size_t n = obj ? json_object_size(v) : json_array_size(v);
    tram_strbuf_add(b, obj ? "{" : "[", 1);
    size_t i = 0;
    const char *key;
    json_t *item;
    void *it = obj ? json_object_iter((json_t *)v) : NULL;
    for (; i < n; i++) {
        if (i)
            tram_strbuf_add(b, indent < 0 ? ", " : ",", indent < 0 ? 2 : 1);
        if (indent >= 0)
            newline(b, indent, depth + 1);
        if (obj) {
            key = json_object_iter_key(it);
            item = json_object_iter_value(it);
            it = json_object_iter_next((json_t *)v, it);
            tram_pyjson_put_string(b, key, strlen(key));
            tram_strbuf_add(b, ": ", 2);
        } else {
            item = json_array_get(v, i);
        }
        put_value(b, item, indent, depth + 1);
    }
    if (indent >= 0 && n)
        newline(b, indent, depth);
    tram_strbuf_add(b, obj ? "}" : "]", 1);
}

static void put_value(tram_strbuf *b, const json_t *v, int indent, int depth)
{
    char num[40];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY: put_container(b, v, indent, depth); break;
    case JSON_STRING: tram_pyjson_put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        tram_strbuf_add(b, num, strlen(num));
        break;
    case JSON_REAL:
        tram_pyjson_float(num, json_real_value(v));
        tram_strbuf_add(b, num, strlen(num));
        break;
    case JSON_TRUE: tram_strbuf_add(b, "true", 4); break;
    case JSON_FALSE: tram_strbuf_add(b, "false", 5); break;
    default: tram_strbuf_add(b, "null", 4); break;
    }
}

void tram_pyjson_put(tram_strbuf *b, const json_t *v, int indent)
{
    put_value(b, v, indent, 0);
}
