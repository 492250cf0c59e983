/* jinja_value.c — the interpreter's memory pool and its values: Python's
 * equality, truth, str() and repr() of them, and json.dumps. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"
#include "chat/pyjson.h"

/* ---- the pool ---- */

struct jj_block {
    jj_block *prev, *next;
    size_t size;
    max_align_t data[];
};

void jj_fail(jj_pool *p, const char *fmt, ...)
{
    if (p->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
        va_end(ap);
    }
    longjmp(*p->on_error, 1);
}

/* What malloc really takes for a block of n bytes: glibc's chunk holds the
 * block's header and malloc's 8 bytes of size, rounded up to 16 (at least
 * 32).  Counting only n let a render of many small values hold twice its
 * limit. */
static size_t block_cost(size_t n)
{
    size_t c = (sizeof(jj_block) + n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

static void unlink_block(jj_pool *p, jj_block *b)
{
    TRAM_LIST_REMOVE(&p->blocks, b, prev, next);
    p->total -= block_cost(b->size);
}

static void *link_block(jj_pool *p, jj_block *b, size_t n)
{
    b->size = n;
    TRAM_LIST_PUSH_HEAD(&p->blocks, b, prev, next);
    p->total += block_cost(n);
    return b->data;
}

void *jj_realloc(jj_pool *p, void *old, size_t n)
{
    jj_block *b = old ? TRAM_CONTAINER_OF(old, jj_block, data) : NULL;
    size_t had = b ? b->size : 0;
    if (n > p->limit || p->total - (b ? block_cost(had) : 0) + block_cost(n) > p->limit)
        jj_fail(p, "chat template: the render needs more than %zu MiB of memory", p->limit >> 20);
    if (b)
        unlink_block(p, b);
    jj_block *nb = realloc(b, sizeof(jj_block) + n);
    if (!nb) {
        if (b)
            link_block(p, b, had);
        jj_fail(p, "chat template: out of memory");
    }
    if (n > had)
        memset((char *)nb->data + had, 0, n - had);
    return link_block(p, nb, n);
}

void *jj_alloc(jj_pool *p, size_t n)
{
    return jj_realloc(p, NULL, n);
}

void jj_pool_free(jj_pool *p)
{
    for (jj_block *b = p->blocks.head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    memset(&p->blocks, 0, sizeof(p->blocks));
    p->total = 0;
}

void jj_work(jj_pool *p, size_t units)
{
    p->work += units;
    if (p->work_limit && p->work > p->work_limit)
        jj_fail(p, "chat template: the render does more than %zu million steps of work", p->work_limit / 1000000);
}

void jj_enter(jj_pool *p, int line)
{
    if (++p->depth > JJ_MAX_DEPTH)
        jj_fail_at(p, line, "the template nests or recurses deeper than %d levels", JJ_MAX_DEPTH);
}

char *jj_strndup(jj_pool *p, const char *s, size_t n)
{
    char *d = jj_alloc(p, n + 1);
    memcpy(d, s, n);
    return d;
}

void jj_buf_add(jj_pool *p, jj_buf *b, const char *s, size_t n)
{
    jj_work(p, n + 1);
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = jj_realloc(p, b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void jj_buf_str(jj_pool *p, jj_buf *b, const char *s)
{
    jj_buf_add(p, b, s, strlen(s));
}

jv jj_buf_value(jj_buf *b)
{
    return jv_strn(b->s ? b->s : "", b->n);
}

char *jj_buf_detach(jj_pool *p, jj_buf *b)
{
    if (!b->s)
        jj_buf_add(p, b, "", 0);
    jj_block *blk = TRAM_CONTAINER_OF(b->s, jj_block, data);
    unlink_block(p, blk);
    memmove(blk, b->s, b->n + 1);
    char *s = realloc(blk, b->n + 1);   /* smaller: it fails only to leave the block as it is */
    return s ? s : (char *)blk;
}

/* ---- values ---- */

jv jv_str(const char *s)
{
    return jv_strn(s, strlen(s));
}

jv jv_list(jj_pool *p, jv_type t)
{
    return (jv){.t = t, .list = jj_alloc(p, sizeof(jj_list))};
}

void jv_push(jj_pool *p, jv list, jv item)
{
    jj_work(p, 1);
    jj_list *l = list.list;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4;
        l->v = jj_realloc(p, l->v, l->cap * sizeof(jv));
    }
    l->v[l->n++] = item;
}

jv jv_dict(jj_pool *p, jv_type t)
{
    return (jv){.t = t, .dict = jj_alloc(p, sizeof(jj_dict))};
}

jv *jv_get(jv dict, jv key)
{
    jj_dict *d = dict.dict;
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key))
            return &d->vals[i];
    return NULL;
}

jv *jv_get_str(jv dict, const char *key)
{
    return jv_get(dict, jv_str(key));
}

/* Appends key: val to a dict that does not hold key. */
static void append_entry(jj_pool *p, jv dict, jv key, jv val)
{
    jj_dict *d = dict.dict;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 4;
        d->keys = jj_realloc(p, d->keys, d->cap * sizeof(jv));
        d->vals = jj_realloc(p, d->vals, d->cap * sizeof(jv));
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = val;
}

void jv_set(jj_pool *p, jv dict, jv key, jv val)
{
    jj_work(p, dict.dict->n);
    jv *have = jv_get(dict, key);
    if (have)
        *have = val;
    else
        append_entry(p, dict, key, val);
}

int jv_is_number(jv v)
{
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}

double jv_num(jv v)
{
    return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : v.t == JV_BOOL ? v.b : 0;
}

int64_t jv_int_of(jv v)
{
    return v.t == JV_INT ? v.i : v.t == JV_BOOL ? v.b : 0;
}

jv jv_float_to_int(double f, jv otherwise)
{
    return f > -9.2e18 && f < 9.2e18 ? jv_int((int64_t)f) : otherwise;
}

int jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.str.n != 0;
    case JV_LIST:
    case JV_TUPLE: return v.list->n != 0;
    case JV_GEN: return 1;
    case JV_DICT: return v.dict->n != 0;
    default: return 1;
    }
}

static int equal_at(jv a, jv b, int depth);

/* Values nested deeper than JJ_VALUE_DEPTH compare unequal (Python would
 * raise RecursionError; jansson reads no JSON that deep). */
int jv_equal(jv a, jv b)
{
    return equal_at(a, b, 0);
}

static int equal_at(jv a, jv b, int depth)
{
    if ((a.t == JV_LIST || a.t == JV_TUPLE || a.t == JV_DICT) && a.t == b.t && a.list == b.list)
        return 1;   /* the same object, as Python's containers check first */
    if (depth > JJ_VALUE_DEPTH)
        return 0;
    if (jv_is_number(a) && jv_is_number(b))
        return a.t == JV_FLOAT || b.t == JV_FLOAT ? jv_num(a) == jv_num(b) : jv_int_of(a) == jv_int_of(b);
    int la = a.t == JV_LIST || a.t == JV_TUPLE, lb = b.t == JV_LIST || b.t == JV_TUPLE;
    if (la && lb) {
        if (a.t != b.t || a.list->n != b.list->n)
            return 0;
        for (size_t i = 0; i < a.list->n; i++)
            if (!equal_at(a.list->v[i], b.list->v[i], depth + 1))
                return 0;
        return 1;
    }
    if (a.t != b.t)
        return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.str.n == b.str.n && !memcmp(a.str.s, b.str.s, a.str.n);
    case JV_DICT:
        if (a.dict->n != b.dict->n)
            return 0;
        for (size_t i = 0; i < a.dict->n; i++) {
            jv *other = jv_get(b, a.dict->keys[i]);
            if (!other || !equal_at(a.dict->vals[i], *other, depth + 1))
                return 0;
        }
        return 1;
    case JV_NS: return a.dict == b.dict;
    case JV_GEN: return a.list == b.list;
    case JV_MACRO: return a.macro.node == b.macro.node;
    default: return a.str.s == b.str.s && a.self == b.self;
    }
}

const char *jv_type_name(jv v)
{
    static const char *const names[] = {
        [JV_UNDEF] = "Undefined", [JV_NONE] = "NoneType", [JV_BOOL] = "bool", [JV_INT] = "int",
        [JV_FLOAT] = "float", [JV_STR] = "str", [JV_LIST] = "list", [JV_TUPLE] = "tuple", [JV_DICT] = "dict", [JV_GEN] = "generator",
        [JV_NS] = "Namespace", [JV_MACRO] = "Macro", [JV_BUILTIN] = "function", [JV_METHOD] = "method", [JV_LOOP] = "LoopContext",
    };
    return names[v.t];
}

size_t jj_utf8_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

size_t jj_utf8_offset(const char *s, size_t n, size_t i)
{
    size_t o = 0;
    for (size_t k = 0; o < n; o++)
        if (((unsigned char)s[o] & 0xc0) != 0x80 && k++ == i)
            return o;
    return n;
}

/* ---- what the evaluator and the filters share ---- */

void jj_fail_at(jj_pool *p, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    jj_fail(p, "chat template: line %d: %s", line, msg);
}

const jv *jj_arg(const jj_args *a, int pos, const char *name)
{
    for (int i = 0; name && i < a->nkw; i++)
        if (!strcmp(a->kwnames[i], name))
            return &a->kwargs[i];
    return pos >= 0 && pos < a->nargs ? &a->args[pos] : NULL;
}

int jj_contains(jj_pool *p, jv hay, jv needle, int line)
{
    jj_work(p, hay.t == JV_STR ? hay.str.n : hay.t == JV_DICT || hay.t == JV_NS ? hay.dict->n
             : hay.t == JV_LIST || hay.t == JV_TUPLE || hay.t == JV_GEN ? hay.list->n : 1);
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            jj_fail_at(p, line, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (!needle.str.n)
            return 1;
        for (size_t i = 0; i + needle.str.n <= hay.str.n; i++)
            if (!memcmp(hay.str.s + i, needle.str.s, needle.str.n))
                return 1;
        return 0;
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN:
        for (size_t i = 0; i < hay.list->n; i++)
            if (jv_equal(hay.list->v[i], needle))
                return 1;
        return 0;
    case JV_DICT:
    case JV_NS: return jv_get(hay, needle) != NULL;
    case JV_UNDEF: return 0;
    default: jj_fail_at(p, line, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

jv jj_iterable(jj_pool *p, jv v, int line)
{
    if (v.t == JV_LIST || v.t == JV_TUPLE)
        return v;
    if (v.t == JV_GEN)
        return (jv){.t = JV_LIST, .list = v.list};
    jv out = jv_list(p, JV_LIST);
    if (v.t == JV_DICT) {
        for (size_t i = 0; i < v.dict->n; i++)
            jv_push(p, out, v.dict->keys[i]);
    } else if (v.t == JV_STR) {
        for (size_t at = 0, next; at < v.str.n; at = next) {
            for (next = at + 1; next < v.str.n && ((unsigned char)v.str.s[next] & 0xc0) == 0x80; next++) {
            }
            jv_push(p, out, jv_strn(v.str.s + at, next - at));
        }
    } else if (v.t != JV_UNDEF) {
        jj_fail_at(p, line, "'%s' object is not iterable", jv_type_name(v));
    }
    return out;
}


/* ---- str() and repr() ---- */

static void put_float(jj_pool *p, jj_buf *b, double x)
{
    if (isnan(x) || isinf(x)) {
        jj_buf_str(p, b, isnan(x) ? "nan" : x < 0 ? "-inf" : "inf");
        return;
    }
    char s[40];
    tram_pyjson_float(s, x);
    jj_buf_str(p, b, s);
}

/* Python's repr of a string: single quotes unless it holds ' and no ". */
static void put_str_repr(jj_pool *p, jj_buf *b, const char *s, size_t n)
{
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    jj_buf_add(p, b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '\\' || c == (unsigned char)q)
            snprintf(esc, sizeof(esc), "\\%c", c);
        else if (c == '\n' || c == '\r' || c == '\t')
            snprintf(esc, sizeof(esc), "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof(esc), "\\x%02x", c);
        else
            esc[0] = (char)c, esc[1] = 0;
        jj_buf_str(p, b, esc);
    }
    jj_buf_add(p, b, &q, 1);
}

static void put_value(jj_pool *p, jj_buf *b, jv v, int repr, int depth);

static void put_container(jj_pool *p, jj_buf *b, jv v, int depth)
{
    if (depth > JJ_VALUE_DEPTH)
        jj_fail(p, "chat template: a value nested deeper than %d levels is printed", JJ_VALUE_DEPTH);
    if (v.t == JV_DICT || v.t == JV_NS) {
        jj_buf_str(p, b, v.t == JV_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.dict->n; i++) {
            jj_buf_str(p, b, i ? ", " : "");
            put_value(p, b, v.dict->keys[i], 1, depth + 1);
            jj_buf_str(p, b, ": ");
            put_value(p, b, v.dict->vals[i], 1, depth + 1);
        }
        jj_buf_str(p, b, v.t == JV_NS ? "}>" : "}");
        return;
    }
    jj_buf_str(p, b, v.t == JV_TUPLE ? "(" : "[");
    for (size_t i = 0; i < v.list->n; i++) {
        jj_buf_str(p, b, i ? ", " : "");
        put_value(p, b, v.list->v[i], 1, depth + 1);
    }
    jj_buf_str(p, b, v.t == JV_TUPLE ? (v.list->n == 1 ? ",)" : ")") : "]");
}

/* str(v), or repr(v) for a string when repr (inside containers, as Python prints them). */
static void put_value(jj_pool *p, jj_buf *b, jv v, int repr, int depth)
{
    if (repr && v.t == JV_STR) {
        put_str_repr(p, b, v.str.s, v.str.n);
        return;
    }
    char num[32];
    switch (v.t) {
    case JV_UNDEF: break;
    case JV_NONE: jj_buf_str(p, b, "None"); break;
    case JV_BOOL: jj_buf_str(p, b, v.b ? "True" : "False"); break;
    case JV_INT:
        snprintf(num, sizeof(num), "%lld", (long long)v.i);
        jj_buf_str(p, b, num);
        break;
    case JV_FLOAT: put_float(p, b, v.f); break;
    case JV_STR: jj_buf_add(p, b, v.str.s, v.str.n); break;
    case JV_MACRO: jj_buf_str(p, b, "<Macro>"); break;
    case JV_BUILTIN:
    case JV_METHOD: jj_buf_str(p, b, "<built-in method>"); break;
    case JV_GEN: jj_fail(p, "chat template: a generator (from map, select, ...) is printed; add |list");
    case JV_LOOP: jj_buf_str(p, b, "<LoopContext>"); break;
    default: put_container(p, b, v, depth); break;
    }
}

void jv_put_str(jj_pool *p, jj_buf *b, jv v)
{
    put_value(p, b, v, 0, 0);
}

void jv_put_repr(jj_pool *p, jj_buf *b, jv v)
{
    put_value(p, b, v, 1, 0);
}

jv jv_to_str(jj_pool *p, jv v)
{
    if (v.t == JV_STR)
        return v;
    jj_buf b = {0};
    jv_put_str(p, &b, v);
    return jj_buf_value(&b);
}

/* ---- json ---- */

static void json_newline(jj_pool *p, jj_buf *b, int indent, int depth)
{
    jj_buf_str(p, b, "\n");
    for (int i = 0; i < indent * depth; i++)
        jj_buf_str(p, b, " ");
}

typedef struct {
    int indent, sort_keys, ensure_ascii;
} json_style;

static void put_json(jj_pool *p, jj_buf *b, jv v, const json_style *st, int depth);

/* A JSON string with every non-ASCII character as \\uXXXX (surrogate pairs
 * above U+FFFF), as json.dumps(ensure_ascii=True) writes it. */
static void put_ascii_string(jj_pool *p, jj_buf *b, jv v)
{
    const unsigned char *s = (const unsigned char *)v.str.s;
    size_t n = v.str.n, start = 0;
    jj_buf_str(p, b, "\"");
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] < 0x80)
            continue;
        if (i > start) {   /* the ASCII run before, escaped as usual */
            tram_strbuf sb = {0};
            tram_pyjson_put_string(&sb, (const char *)s + start, i - start);
            if (sb.oom)
                jj_fail(p, "chat template: out of memory");
            jj_buf_add(p, b, sb.s + 1, sb.len - 2);
            tram_strbuf_free(&sb);
        }
        if (i == n)
            break;
        unsigned c = s[i];
        int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
        c &= 0x3f >> extra;
        for (int k = 0; k < extra && i + 1 < n; k++)
            c = (c << 6) | (s[++i] & 0x3f);
        char esc[16];
        if (c >= 0x10000)
            snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
        else
            snprintf(esc, sizeof(esc), "\\u%04x", c);
        jj_buf_str(p, b, esc);
        start = i + 1;
    }
    jj_buf_str(p, b, "\"");
}

static size_t *sorted_keys(jj_pool *p, jv v, int sort_keys)
{
    size_t n = v.dict->n, *order = jj_alloc(p, (n + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; sort_keys && i < n; i++)   /* insertion sort: stable, and dicts are small */
        for (size_t k = i; k > 0; k--) {
            jv x = v.dict->keys[order[k - 1]], y = v.dict->keys[order[k]];
            if (x.t != JV_STR || y.t != JV_STR)
                jj_fail(p, "chat template: tojson: sort_keys needs string keys");
            size_t m = x.str.n < y.str.n ? x.str.n : y.str.n;
            int c = memcmp(x.str.s, y.str.s, m);
            if (c < 0 || (c == 0 && x.str.n <= y.str.n))
                break;
            size_t t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    return order;
}

static void put_json_key(jj_pool *p, jj_buf *b, jv k, const json_style *st)
{
    if (k.t == JV_STR) {
        put_json(p, b, k, st, 0);
    } else if (k.t == JV_INT || k.t == JV_FLOAT || k.t == JV_BOOL || k.t == JV_NONE) {
        jj_buf_str(p, b, "\"");   /* json.dumps writes such keys as strings */
        jj_buf v = {0};
        put_json(p, &v, k, &(json_style){.indent = -1}, 0);
        jj_buf_add(p, b, v.s, v.n);
        jj_buf_str(p, b, "\"");
    } else {
        jj_fail(p, "chat template: tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
}

static void put_json_container(jj_pool *p, jj_buf *b, jv v, const json_style *st, int depth)
{
    int obj = v.t == JV_DICT;
    size_t n = obj ? v.dict->n : v.list->n, *order = obj ? sorted_keys(p, v, st->sort_keys) : NULL;
    int indent = st->indent;
    jj_buf_str(p, b, obj ? "{" : "[");
    for (size_t i = 0; i < n; i++) {
        jj_buf_str(p, b, i ? (indent < 0 ? ", " : ",") : "");
        if (indent >= 0)
            json_newline(p, b, indent, depth + 1);
        if (obj) {
            put_json_key(p, b, v.dict->keys[order[i]], st);
            jj_buf_str(p, b, ": ");
        }
        put_json(p, b, obj ? v.dict->vals[order[i]] : v.list->v[i], st, depth + 1);
    }
    if (indent >= 0 && n)
        json_newline(p, b, indent, depth);
    jj_buf_str(p, b, obj ? "}" : "]");
}

static void put_json(jj_pool *p, jj_buf *b, jv v, const json_style *st, int depth)
{
    char s[40];
    if (depth > JJ_VALUE_DEPTH)
        jj_fail(p, "chat template: tojson: the value nests deeper than %d levels", JJ_VALUE_DEPTH);
    switch (v.t) {
    case JV_NONE: jj_buf_str(p, b, "null"); break;
    case JV_BOOL: jj_buf_str(p, b, v.b ? "true" : "false"); break;
    case JV_INT: jv_put_str(p, b, v); break;
    case JV_FLOAT:
        if (isnan(v.f) || isinf(v.f))
            jj_buf_str(p, b, isnan(v.f) ? "NaN" : v.f < 0 ? "-Infinity" : "Infinity");
        else
            jj_buf_str(p, b, (tram_pyjson_float(s, v.f), s));
        break;
    case JV_STR: {
        if (st->ensure_ascii) {
            put_ascii_string(p, b, v);
            break;
        }
        tram_strbuf sb = {0};
        tram_pyjson_put_string(&sb, v.str.s, v.str.n);
        if (sb.oom) {
            tram_strbuf_free(&sb);
            jj_fail(p, "chat template: out of memory");
        }
        jj_buf_add(p, b, sb.s, sb.len);
        tram_strbuf_free(&sb);
        break;
    }
    case JV_LIST:
    case JV_TUPLE:
    case JV_DICT: put_json_container(p, b, v, st, depth); break;
    default: jj_fail(p, "chat template: tojson: Object of type %s is not JSON serializable", jv_type_name(v));
    }
}

jv jv_tojson(jj_pool *p, jv v, int indent, int sort_keys, int ensure_ascii)
{
    jj_buf b = {0};
    put_json(p, &b, v, &(json_style){.indent = indent, .sort_keys = sort_keys, .ensure_ascii = ensure_ascii}, 0);
    return jj_buf_value(&b);
}

jv jv_escape(jj_pool *p, jv v)
{
    if (v.t == JV_STR && v.markup)
        return v;
    jv s = jv_to_str(p, v);
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    for (size_t i = 0; i < s.str.n; i++) {
        char c = s.str.s[i];
        const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;"
                      : c == '\'' ? "&#39;" : NULL;
        if (e)
            jj_buf_str(p, &b, e);
        else
            jj_buf_add(p, &b, &c, 1);
    }
    jv out = jj_buf_value(&b);
    out.markup = 1;
    return out;
}

static jv from_json(jj_pool *p, const json_t *j, int depth)
{
    if (depth > JJ_VALUE_DEPTH)
        jj_fail(p, "chat template: a variable nests deeper than %d levels", JJ_VALUE_DEPTH);
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = jv_dict(p, JV_DICT);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x)   /* a JSON object's keys are unique */
            append_entry(p, d, jv_str(jj_strndup(p, k, strlen(k))), from_json(p, x, depth + 1));
        return d;
    }
    case JSON_ARRAY: {
        jv l = jv_list(p, JV_LIST);
        size_t i;
        json_t *x;
        json_array_foreach(j, i, x)
            jv_push(p, l, from_json(p, x, depth + 1));
        return l;
    }
    case JSON_STRING: return jv_strn(jj_strndup(p, json_string_value(j), json_string_length(j)), json_string_length(j));
    case JSON_INTEGER: return jv_int(json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(1);
    case JSON_FALSE: return jv_bool(0);
    default: return jv_none();
    }
}

jv jv_from_json(jj_pool *p, const json_t *j)
{
    return from_json(p, j, 0);
}
