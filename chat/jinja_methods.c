/* jinja_methods.c — the methods templates call on values: Python's str
 * methods (strip, split, startswith, format, ...), dict.items/keys/values/get
 * and list.index/count.  Methods that would change a value (list.append,
 * dict.update, ...) are refused, as jinja2's ImmutableSandboxedEnvironment
 * refuses them. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"
#include "tokenizer/text_buf.h"

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower", "replace", "find",
    "rfind", "index", "count", "title", "capitalize", "join", "splitlines", "format", "isdigit", "isalpha",
    "isalnum", "isspace", "isupper", "islower", NULL,
};
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const list_methods[] = {"index", "count", "copy", NULL};
static const char *const unsafe_methods[] = {
    "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", "update", "setdefault", "popitem",
    "add", "discard", NULL,
};

static int listed(const char *const *names, const char *name)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

int jj_has_method(jv v, const char *name)
{
    if (v.t == JV_STR)
        return listed(str_methods, name);
    if (v.t == JV_DICT)
        return listed(dict_methods, name) || listed(unsafe_methods, name);
    if (v.t == JV_LIST)
        return listed(list_methods, name) || listed(unsafe_methods, name);
    if (v.t == JV_TUPLE)
        return !strcmp(name, "index") || !strcmp(name, "count");
    return 0;
}

/* ---- strings ---- */

static size_t char_len(const char *s, size_t n, size_t i)
{
    size_t k = 1;
    while (i + k < n && ((unsigned char)s[i + k] & 0xc0) == 0x80)
        k++;
    return k;
}

/* The length of the character at s[i] when it is to be stripped: one of
 * chars, or (chars NULL) Python whitespace; else 0. */
static size_t strippable(const char *s, size_t n, size_t i, const jv *chars)
{
    if (!chars)
        return (size_t)tram_text_py_space((const unsigned char *)s + i);
    size_t k = char_len(s, n, i);
    for (size_t j = 0; j < chars->str.n; j += char_len(chars->str.s, chars->str.n, j))
        if (char_len(chars->str.s, chars->str.n, j) == k && !memcmp(chars->str.s + j, s + i, k))
            return k;
    return 0;
}

static jv strip(jv v, const jv *chars, int left, int right)
{
    const char *s = v.str.s;
    size_t a = 0, b = v.str.n, k;
    while (left && a < b && (k = strippable(s, b, a, chars)))
        a += k;
    while (right && b > a) {
        size_t start = b - 1;
        while (start > a && ((unsigned char)s[start] & 0xc0) == 0x80)
            start--;
        if (!strippable(s, b, start, chars))
            break;
        b = start;
    }
    return jv_strn(s + a, b - a);
}

/* The start of the character before byte i of s. */
static size_t char_before(const char *s, size_t i)
{
    do
        i--;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80);
    return i;
}

static int space_at(const char *s, size_t i)
{
    return tram_text_py_space((const unsigned char *)s + i);
}

static jv reversed(jj_pool *p, jv l)
{
    jv out = jv_list(p, JV_LIST);
    for (size_t i = l.list->n; i-- > 0;)
        jv_push(p, out, l.list->v[i]);
    return out;
}

/* str.split(sep, maxsplit) from the left, or str.rsplit from the right. */
static jv split_sep(jj_pool *p, jv v, jv sep, int64_t maxsplit, int from_right)
{
    const char *s = v.str.s;
    size_t n = v.str.n, k = sep.str.n, i = 0, e = n;
    jv parts = jv_list(p, JV_LIST);
    for (int64_t done = 0; maxsplit < 0 || done < maxsplit; done++) {
        size_t j = from_right ? e : i;
        if (from_right) {
            while (j >= i + k && memcmp(s + j - k, sep.str.s, k))
                j--;
            if (j < i + k)
                break;
            jv_push(p, parts, jv_strn(s + j, e - j));
            e = j - k;
        } else {
            while (j + k <= e && memcmp(s + j, sep.str.s, k))
                j++;
            if (j + k > e)
                break;
            jv_push(p, parts, jv_strn(s + i, j - i));
            i = j + k;
        }
    }
    jv_push(p, parts, jv_strn(s + i, e - i));
    return from_right ? reversed(p, parts) : parts;
}

/* str.split() and str.rsplit() without a separator: runs of whitespace. */
static jv split_space(jj_pool *p, jv v, int64_t maxsplit, int from_right)
{
    const char *s = v.str.s;
    size_t n = v.str.n;
    jv parts = jv_list(p, JV_LIST);
    int64_t done = 0;
    if (!from_right) {
        for (size_t i = 0;;) {
            while (i < n && space_at(s, i))
                i += (size_t)space_at(s, i);
            if (i >= n)
                break;
            size_t j = i;
            if (maxsplit >= 0 && done >= maxsplit)
                j = n;
            while (j < n && !space_at(s, j))
                j += char_len(s, n, j);
            jv_push(p, parts, jv_strn(s + i, j - i));
            done++;
            i = j;
        }
        return parts;
    }
    for (size_t e = n;;) {
        while (e > 0 && space_at(s, char_before(s, e)))
            e = char_before(s, e);
        if (e == 0)
            break;
        size_t j = e;
        if (maxsplit >= 0 && done >= maxsplit)
            j = 0;
        while (j > 0 && !space_at(s, char_before(s, j)))
            j = char_before(s, j);
        jv_push(p, parts, jv_strn(s + j, e - j));
        done++;
        e = j;
    }
    return reversed(p, parts);
}

static jv split(jj_pool *p, jv v, const jv *sep, int64_t maxsplit, int from_right, int line)
{
    if (sep && sep->str.n == 0)
        jj_fail_at(p, line, "empty separator");
    return sep ? split_sep(p, v, *sep, maxsplit, from_right)
               : split_space(p, v, maxsplit, from_right);
}

static jv replace(jj_pool *p, jv v, jv old, jv new_, int64_t count)
{
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    int64_t done = 0;
    for (size_t i = 0; i <= v.str.n;) {
        if ((count < 0 || done < count) && i + old.str.n <= v.str.n && !memcmp(v.str.s + i, old.str.s, old.str.n)) {
            jj_buf_add(p, &b, new_.str.s, new_.str.n);
            done++;
            if (old.str.n == 0) {   /* an empty needle goes between every character */
                if (i == v.str.n)
                    break;
                size_t k = char_len(v.str.s, v.str.n, i);
                jj_buf_add(p, &b, v.str.s + i, k);
                i += k;
            }
            i += old.str.n;
        } else {
            if (i == v.str.n)
                break;
            jj_buf_add(p, &b, v.str.s + i, 1);
            i++;
        }
    }
    return jj_buf_value(&b);
}

jv jj_str_replace(jj_pool *p, jv v, jv old, jv new_, int64_t count)
{
    return replace(p, v, old, new_, count);
}

static int64_t find(jv v, jv sub, int from_right)
{
    if (sub.str.n > v.str.n)
        return -1;
    for (size_t k = 0; k + sub.str.n <= v.str.n; k++) {
        size_t i = from_right ? v.str.n - sub.str.n - k : k;
        if (!memcmp(v.str.s + i, sub.str.s, sub.str.n))
            return (int64_t)jj_utf8_len(v.str.s, i);
    }
    return -1;
}

/* The other case of code point c (upper: to upper case), for ASCII,
 * Latin-1, Latin Extended-A, Greek and Cyrillic; other characters stay. */
static unsigned other_case(unsigned c, int upper)
{
    int is_lower = (c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) ||
                   (c >= 0x430 && c <= 0x45f) || (c >= 0x100 && c <= 0x17f && c % 2 == 1 && c != 0x131 && c != 0x149);
    int is_upper = (c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) ||
                   (c >= 0x400 && c <= 0x42f) || (c >= 0x100 && c <= 0x17f && c % 2 == 0 && c != 0x130 && c != 0x138);
    if (upper && is_lower)
        return c < 0x100 || (c >= 0x3b1 && c <= 0x3c9) ? c - 0x20 : c >= 0x450 ? c - 0x50 : c >= 0x430 ? c - 0x20 : c - 1;
    if (!upper && is_upper)
        return c < 0x100 || (c >= 0x391 && c <= 0x3a9) ? c + 0x20 : c < 0x410 && c >= 0x400 ? c + 0x50 : c >= 0x410 ? c + 0x20 : c + 1;
    return c;
}

static size_t decode(const unsigned char *s, size_t n, unsigned *c)
{
    size_t k = n > 1 && (s[0] & 0xe0) == 0xc0 ? 2 : n > 2 && (s[0] & 0xf0) == 0xe0 ? 3 : 1;
    *c = k == 1 ? s[0] : k == 2 ? ((s[0] & 0x1fu) << 6) | (s[1] & 0x3f) : ((s[0] & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3f);
    return k;
}

static void encode(jj_pool *p, jj_buf *b, unsigned c, const unsigned char *orig, size_t k)
{
    char u[3];
    if (c < 0x80 && k == 1) {
        u[0] = (char)c;
    } else if (c < 0x800 && k == 2) {
        u[0] = (char)(0xc0 | (c >> 6));
        u[1] = (char)(0x80 | (c & 0x3f));
    } else {
        jj_buf_add(p, b, (const char *)orig, k);   /* case pairs here keep their length */
        return;
    }
    jj_buf_add(p, b, u, k);
}

/* upper, lower, title, capitalize */
jv jj_str_case(jj_pool *p, jv v, const char *how)
{
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    const unsigned char *s = (const unsigned char *)v.str.s;
    int word_start = 1;
    for (size_t i = 0, k; i < v.str.n; i += k) {
        unsigned c;
        k = decode(s + i, v.str.n - i, &c);
        int up = !strcmp(how, "upper") || (!strcmp(how, "capitalize") && i == 0) || (!strcmp(how, "title") && word_start);
        unsigned d = other_case(c, up);
        int letter = d != c || other_case(c, !up) != c;
        encode(p, &b, d, s + i, k);
        word_start = !letter;
    }
    return jj_buf_value(&b);
}

static int has_affix(jv v, jv affix, int end)
{
    if (affix.str.n > v.str.n)
        return 0;
    return !memcmp(v.str.s + (end ? v.str.n - affix.str.n : 0), affix.str.s, affix.str.n);
}

/* str.startswith / endswith: a str, or a tuple of str (one level, as Python). */
static int starts_or_ends(jj_pool *p, jv v, jv affix, int end, int line)
{
    const char *which = end ? "ends" : "starts";
    if (affix.t == JV_STR)
        return has_affix(v, affix, end);
    if (affix.t != JV_TUPLE)
        jj_fail_at(p, line, "%swith first arg must be str or a tuple of str, not %s", which, jv_type_name(affix));
    for (size_t i = 0; i < affix.list->n; i++) {
        if (affix.list->v[i].t != JV_STR)
            jj_fail_at(p, line, "tuple for %swith must only contain str, not %s", which, jv_type_name(affix.list->v[i]));
        if (has_affix(v, affix.list->v[i], end))
            return 1;
    }
    return 0;
}

/* str.format with {} / {0} / {name} fields and {{ }} escapes. */
static jv format(jj_pool *p, jv v, const jj_args *a, int line)
{
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    int next = 0;
    for (size_t i = 0; i < v.str.n; i++) {
        char c = v.str.s[i];
        if ((c == '{' || c == '}') && i + 1 < v.str.n && v.str.s[i + 1] == c) {
            jj_buf_add(p, &b, &c, 1);
            i++;
            continue;
        }
        if (c != '{') {
            jj_buf_add(p, &b, &c, 1);
            continue;
        }
        const char *close = memchr(v.str.s + i, '}', v.str.n - i);
        if (!close)
            jj_fail_at(p, line, "Single '{' encountered in format string");
        size_t len = (size_t)(close - (v.str.s + i)) - 1;
        char *field = jj_strndup(p, v.str.s + i + 1, len);
        const jv *val = NULL;
        if (!len)
            val = jj_arg(a, next++, NULL);
        else if (isdigit((unsigned char)field[0]))
            val = jj_arg(a, atoi(field), NULL);
        else
            val = jj_arg(a, -1, field);
        if (!val || strchr(field, ':') || strchr(field, '!') || strchr(field, '.') || strchr(field, '['))
            jj_fail_at(p, line, "str.format: field '{%s}' is not supported or has no argument", field);
        jv_put_str(p, &b, *val);
        i += len + 1;
    }
    return jj_buf_value(&b);
}

static int all_chars(jv v, const char *kind)
{
    if (!v.str.n)
        return 0;
    int cased = 0;
    for (size_t i = 0; i < v.str.n; i++) {
        unsigned char c = (unsigned char)v.str.s[i];
        int ok = !strcmp(kind, "isdigit")   ? isdigit(c)
                 : !strcmp(kind, "isalpha") ? isalpha(c)
                 : !strcmp(kind, "isalnum") ? isalnum(c)
                 : !strcmp(kind, "isspace") ? isspace(c)
                 : !strcmp(kind, "isupper") ? !islower(c)
                                            : !isupper(c);
        cased |= isalpha(c);
        if (!ok)
            return 0;
    }
    return strcmp(kind, "isupper") && strcmp(kind, "islower") ? 1 : cased;
}

static const jv *str_arg(jj_pool *p, const jj_args *a, int pos, const char *name, int line)
{
    const jv *v = jj_arg(a, pos, name);
    if (v && v->t == JV_NONE)
        return NULL;
    if (v && v->t != JV_STR)
        jj_fail_at(p, line, "str.%s: argument must be str, not %s", name, jv_type_name(*v));
    return v;
}

static int64_t int_arg(const jj_args *a, int pos, const char *name, int64_t otherwise)
{
    const jv *v = jj_arg(a, pos, name);
    return v && v->t == JV_INT ? v->i : otherwise;
}

static jv str_method(jj_pool *p, jv v, const char *name, const jj_args *a, int line)
{
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip"))
        return strip(v, str_arg(p, a, 0, "chars", line), name[0] != 'r', name[0] != 'l');
    if (!strcmp(name, "split") || !strcmp(name, "rsplit"))
        return split(p, v, str_arg(p, a, 0, "sep", line), int_arg(a, 1, "maxsplit", -1), name[0] == 'r', line);
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        if (a->nargs < 1)
            jj_fail_at(p, line, "str.%s takes an argument", name);
        return jv_bool(starts_or_ends(p, v, a->args[0], name[0] == 'e', line));
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize"))
        return jj_str_case(p, v, name);
    if (!strcmp(name, "format"))
        return format(p, v, a, line);
    if (!strcmp(name, "splitlines")) {
        jv out = jv_list(p, JV_LIST);
        for (size_t i = 0; i < v.str.n;) {
            size_t j = i;
            while (j < v.str.n && v.str.s[j] != '\n' && v.str.s[j] != '\r')
                j++;
            jv_push(p, out, jv_strn(v.str.s + i, j - i));
            i = j + (j + 1 < v.str.n && v.str.s[j] == '\r' && v.str.s[j + 1] == '\n' ? 2 : 1);
        }
        return out;
    }
    if (!strcmp(name, "join")) {
        if (a->nargs != 1)
            jj_fail_at(p, line, "str.join takes one argument");
        jv items = jj_iterable(p, a->args[0], line);
        jj_buf b = {0};
        jj_buf_add(p, &b, "", 0);
        for (size_t i = 0; i < items.list->n; i++) {
            if (items.list->v[i].t != JV_STR)
                jj_fail_at(p, line, "sequence item %zu: expected str instance, %s found", i,
                         jv_type_name(items.list->v[i]));
            if (i)
                jj_buf_add(p, &b, v.str.s, v.str.n);
            jj_buf_add(p, &b, items.list->v[i].str.s, items.list->v[i].str.n);
        }
        return jj_buf_value(&b);
    }
    if (!strncmp(name, "is", 2))
        return jv_bool(all_chars(v, name));
    const jv *sub = str_arg(p, a, 0, "sub", line);
    if (!sub)
        jj_fail_at(p, line, "str.%s takes a string argument", name);
    if (!strcmp(name, "replace")) {
        const jv *new_ = str_arg(p, a, 1, "new", line);
        if (!new_)
            jj_fail_at(p, line, "str.replace takes two string arguments");
        return replace(p, v, *sub, *new_, int_arg(a, 2, "count", -1));
    }
    if (!strcmp(name, "count")) {
        int64_t k = 0;
        for (size_t i = 0; i + sub->str.n <= v.str.n;)
            if (!memcmp(v.str.s + i, sub->str.s, sub->str.n))
                k++, i += sub->str.n ? sub->str.n : 1;
            else
                i++;
        return jv_int(k);
    }
    int64_t at = find(v, *sub, !strcmp(name, "rfind"));
    if (!strcmp(name, "index") && at < 0)
        jj_fail_at(p, line, "substring not found");
    return jv_int(at);
}

static jv container_method(jj_pool *p, jv v, const char *name, const jj_args *a, int line)
{
    if (listed(unsafe_methods, name))
        jj_fail_at(p, line, "access to attribute '%s' of '%s' object is unsafe.", name, jv_type_name(v));
    if (!strcmp(name, "copy"))
        return v;   /* values do not change, so a copy is the value itself */
    if (v.t == JV_DICT) {
        if (!strcmp(name, "get")) {
            if (a->nargs < 1)
                jj_fail_at(p, line, "dict.get takes a key");
            jv *got = jv_get(v, a->args[0]);
            return got ? *got : a->nargs > 1 ? a->args[1] : jv_none();
        }
        jv out = jv_list(p, JV_LIST);
        for (size_t i = 0; i < v.dict->n; i++) {
            if (!strcmp(name, "items")) {
                jv pair = jv_list(p, JV_TUPLE);
                jv_push(p, pair, v.dict->keys[i]);
                jv_push(p, pair, v.dict->vals[i]);
                jv_push(p, out, pair);
            } else {
                jv_push(p, out, name[0] == 'k' ? v.dict->keys[i] : v.dict->vals[i]);
            }
        }
        return out;
    }
    if (a->nargs != 1)
        jj_fail_at(p, line, "list.%s takes one argument", name);
    int64_t k = 0;
    for (size_t i = 0; i < v.list->n; i++)
        if (jv_equal(v.list->v[i], a->args[0])) {
            if (!strcmp(name, "index"))
                return jv_int((int64_t)i);
            k++;
        }
    if (!strcmp(name, "index"))
        jj_fail_at(p, line, "value is not in list");
    return jv_int(k);
}

jv jj_method(jj_pool *p, jv self, const char *name, const jj_args *a, int line)
{
    jj_work(p, self.t == JV_STR ? self.str.n : self.t == JV_DICT ? self.dict->n : self.list->n);
    return self.t == JV_STR ? str_method(p, self, name, a, line) : container_method(p, self, name, a, line);
}
