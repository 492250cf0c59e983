/* jinja_filters.c — jinja2's filters and tests as chat templates use them,
 * with jinja2's defaults (unique and sort ignore case; round rounds to a
 * float), and tojson as transformers defines it (json.dumps with
 * ensure_ascii=False). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"

static jj_args no_args(void)
{
    return (jj_args){0};
}

/* The arguments from index `from` on, as positional arguments. */
static jj_args rest(const jj_args *a, int from)
{
    jj_args out = *a;
    out.args += from < a->nargs ? from : a->nargs;
    out.nargs = from < a->nargs ? a->nargs - from : 0;
    return out;
}

static const char *name_arg(jj_pool *p, const jj_args *a, int pos, const char *kw, const char *filter, int line)
{
    const jv *v = jj_arg(a, pos, kw);
    if (!v)
        return NULL;
    if (v->t != JV_STR)
        jj_fail_at(p, line, "%s: %s must be a string", filter, kw ? kw : "the argument");
    return jj_strndup(p, v->str.s, v->str.n);
}

static int flag_arg(const jj_args *a, int pos, const char *kw)
{
    const jv *v = jj_arg(a, pos, kw);
    return v && jv_truthy(*v);
}

/* x.attr.sub, as selectattr and map read it: jinja2's getattr, then item. */
static jv attribute(jj_pool *p, jv v, const char *path)
{
    for (const char *part = path; v.t != JV_UNDEF;) {
        const char *dot = strchr(part, '.');
        size_t n = dot ? (size_t)(dot - part) : strlen(part);
        jv key = jv_strn(jj_strndup(p, part, n), n);
        jv *got = v.t == JV_DICT || v.t == JV_NS ? jv_get(v, key) : NULL;
        if (!got && (v.t == JV_LIST || v.t == JV_TUPLE) && n && strspn(key.str.s, "0123456789") == n &&
            (size_t)atoll(key.str.s) < v.list->n)
            got = &v.list->v[atoll(key.str.s)];
        v = got ? *got : jv_undef("no such attribute");
        if (!dot)
            break;
        part = dot + 1;
    }
    return v;
}

static size_t length(jj_pool *p, jv v, int line)
{
    switch (v.t) {
    case JV_STR: return jj_utf8_len(v.str.s, v.str.n);
    case JV_LIST:
    case JV_TUPLE: return v.list->n;
    case JV_DICT:
    case JV_NS: return v.dict->n;
    case JV_UNDEF: return 0;
    default: jj_fail_at(p, line, "object of type '%s' has no len()", jv_type_name(v));
    }
}

static jv join(jj_pool *p, jv v, const jj_args *a, int line)
{
    jv items = jj_iterable(p, v, line);
    const jv *sep = jj_arg(a, 0, "d");
    const char *attr = name_arg(p, a, 1, "attribute", "join", line);
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    for (size_t i = 0; i < items.list->n; i++) {
        if (i && sep)
            jv_put_str(p, &b, *sep);
        jv_put_str(p, &b, attr ? attribute(p, items.list->v[i], attr) : items.list->v[i]);
    }
    return jj_buf_value(&b);
}

static jv items(jj_pool *p, jv v, int line)
{
    if (v.t == JV_UNDEF)
        return jv_list(p, JV_LIST);
    if (v.t != JV_DICT && v.t != JV_NS)
        jj_fail_at(p, line, "items: can only get item pairs from a mapping");
    jj_args none = no_args();
    jv as_dict = v;
    as_dict.t = JV_DICT;
    jv pairs = jj_method(p, as_dict, "items", &none, line);
    pairs.t = JV_GEN;   /* jinja2's items filter yields the pairs */
    return pairs;
}

static jv to_int(jj_pool *p, jv v, const jj_args *a)
{
    const jv *dflt = jj_arg(a, 0, "default");
    jv otherwise = dflt ? *dflt : jv_int(0);
    if (v.t == JV_INT)
        return v;
    if (v.t == JV_BOOL)
        return jv_int(v.b);
    if (v.t == JV_FLOAT)
        return jv_float_to_int(v.f, otherwise);
    if (v.t != JV_STR)
        return otherwise;
    char *s = jj_strndup(p, v.str.s, v.str.n), *end;
    long long i = strtoll(s, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    if (end != s && !*end)
        return jv_int(i);
    double f = strtod(s, &end);   /* jinja2: int(float(value)) when int(value) fails */
    return end != s && !*end ? jv_float_to_int(f, otherwise) : otherwise;
}

static jv to_float(jj_pool *p, jv v, const jj_args *a)
{
    const jv *dflt = jj_arg(a, 0, "default");
    jv otherwise = dflt ? *dflt : jv_float(0);
    if (jv_is_number(v))
        return jv_float(jv_num(v));
    if (v.t != JV_STR)
        return otherwise;
    char *s = jj_strndup(p, v.str.s, v.str.n), *end;
    double f = strtod(s, &end);
    return end != s && !*end ? jv_float(f) : otherwise;
}

static jv round_filter(jj_pool *p, jv v, const jj_args *a, int line)
{
    if (!jv_is_number(v))
        jj_fail_at(p, line, "round: '%s' is not a number", jv_type_name(v));
    const jv *prec = jj_arg(a, 0, "precision");
    const char *method = name_arg(p, a, 1, "method", "round", line);
    if ((!method || !strcmp(method, "common")) && v.t != JV_FLOAT && (!prec || jv_int_of(*prec) >= 0))
        return jv_int(jv_int_of(v));   /* Python's round() of an int is that int */
    double scale = pow(10, prec && prec->t == JV_INT ? (double)prec->i : 0), x = jv_num(v) * scale;
    if (!method || !strcmp(method, "common")) {
        double f = floor(x), d = x - f;   /* Python's round: halves to even */
        x = d > 0.5 || (d == 0.5 && fmod(f, 2) != 0) ? f + 1 : f;
    } else if (!strcmp(method, "floor")) {
        x = floor(x);
    } else if (!strcmp(method, "ceil")) {
        x = ceil(x);
    } else {
        jj_fail_at(p, line, "round: method must be common, ceil or floor");
    }
    return jv_float(x / scale);
}

/* select / reject / selectattr / rejectattr */
static jv select_items(jj_pool *p, jv v, const jj_args *a, int by_attr, int keep, int line)
{
    jv all = jj_iterable(p, jv_truthy(v) ? v : jv_undef(NULL), line), out = jv_list(p, JV_GEN);
    const char *attr = by_attr ? name_arg(p, a, 0, NULL, "selectattr", line) : NULL;
    if (by_attr && !attr)
        jj_fail_at(p, line, "selectattr: missing the attribute");
    const char *test = name_arg(p, a, by_attr, NULL, "select", line);
    jj_args targs = rest(a, by_attr + 1);
    targs.nkw = 0;
    for (size_t i = 0; i < all.list->n; i++) {
        jv x = attr ? attribute(p, all.list->v[i], attr) : all.list->v[i];
        int t = test ? jj_test(p, test, x, &targs, line) : jv_truthy(x);
        if (t < 0)
            jj_fail_at(p, line, "no test named '%s'", test);
        if (t == keep)
            jv_push(p, out, all.list->v[i]);
    }
    return out;
}

static jv map_items(jj_pool *p, jv v, const jj_args *a, int line)
{
    jv all = jj_iterable(p, jv_truthy(v) ? v : jv_undef(NULL), line), out = jv_list(p, JV_GEN);
    const char *attr = name_arg(p, a, -1, "attribute", "map", line);
    const jv *dflt = jj_arg(a, -1, "default");
    const char *filter = attr ? NULL : name_arg(p, a, 0, NULL, "map", line);
    if (!attr && !filter)
        jj_fail_at(p, line, "map: needs a filter name or attribute=");
    jj_args fargs = rest(a, 1);
    fargs.nkw = 0;
    for (size_t i = 0; i < all.list->n; i++) {
        jv x;
        if (attr) {
            x = attribute(p, all.list->v[i], attr);
            if (x.t == JV_UNDEF && dflt)
                x = *dflt;
        } else {
            jj_enter(p, line);   /* map('map', 'map', ...) recurses once an argument */
            if (!jj_filter(p, filter, all.list->v[i], &fargs, line, &x))
                jj_fail_at(p, line, "no filter named '%s'", filter);
            jj_leave(p);
        }
        jv_push(p, out, x);
    }
    return out;
}

/* For sort and unique: strings compare lowercased unless case_sensitive. */
static jv sort_key(jj_pool *p, jv x, const char *attr, int case_sensitive)
{
    if (attr)
        x = attribute(p, x, attr);
    return x.t == JV_STR && !case_sensitive ? jj_str_case(p, x, "lower") : x;
}

static int less(jj_pool *p, jv a, jv b, int line)
{
    if (jv_is_number(a) && jv_is_number(b))
        return jv_num(a) < jv_num(b);
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t m = a.str.n < b.str.n ? a.str.n : b.str.n;
        int c = memcmp(a.str.s, b.str.s, m);
        return c < 0 || (c == 0 && a.str.n < b.str.n);
    }
    jj_fail_at(p, line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

/* Merges the sorted runs [lo, mid) and [mid, hi) of idx by keys. */
static void merge(jj_pool *p, const jv *keys, size_t *idx, size_t *tmp, size_t lo, size_t mid, size_t hi, int reverse,
                  int line)
{
    size_t i = lo, j = mid, k = lo;
    jj_work(p, hi - lo);
    while (i < mid && j < hi) {
        /* stable: the right run goes first only when strictly before */
        int right_first = reverse ? less(p, keys[idx[i]], keys[idx[j]], line) : less(p, keys[idx[j]], keys[idx[i]], line);
        tmp[k++] = right_first ? idx[j++] : idx[i++];
    }
    while (i < mid)
        tmp[k++] = idx[i++];
    while (j < hi)
        tmp[k++] = idx[j++];
    memcpy(idx + lo, tmp + lo, (hi - lo) * sizeof(*idx));
}

/* items sorted stably by keys (Python's sorted, reverse included). */
static jv sorted(jj_pool *p, jv items, jv *keys, int reverse, int line)
{
    size_t n = items.list->n, *idx = jj_alloc(p, (n + 1) * sizeof(size_t)), *tmp = jj_alloc(p, (n + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (size_t width = 1; width < n; width *= 2)
        for (size_t lo = 0; lo + width < n; lo += 2 * width)
            merge(p, keys, idx, tmp, lo, lo + width, lo + 2 * width < n ? lo + 2 * width : n, reverse, line);
    jv out = jv_list(p, JV_LIST);
    for (size_t i = 0; i < n; i++)
        jv_push(p, out, items.list->v[idx[i]]);
    return out;
}

static jv sort_filter(jj_pool *p, jv v, const jj_args *a, int line)
{
    jv all = jj_iterable(p, v, line);
    const char *attr = name_arg(p, a, 2, "attribute", "sort", line);
    int cs = flag_arg(a, 1, "case_sensitive");
    jv *keys = jj_alloc(p, (all.list->n + 1) * sizeof(jv));
    for (size_t i = 0; i < all.list->n; i++)
        keys[i] = sort_key(p, all.list->v[i], attr, cs);
    return sorted(p, all, keys, flag_arg(a, 0, "reverse"), line);
}

static jv dictsort(jj_pool *p, jv v, const jj_args *a, int line)
{
    jv pairs = items(p, v, line);
    const char *by = name_arg(p, a, 1, "by", "dictsort", line);
    int cs = flag_arg(a, 0, "case_sensitive"), by_value = by && !strcmp(by, "value");
    jv *keys = jj_alloc(p, (pairs.list->n + 1) * sizeof(jv));
    for (size_t i = 0; i < pairs.list->n; i++)
        keys[i] = sort_key(p, pairs.list->v[i].list->v[by_value], NULL, cs);
    return sorted(p, pairs, keys, flag_arg(a, 2, "reverse"), line);
}

static jv unique(jj_pool *p, jv v, const jj_args *a, int line)
{
    jv all = jj_iterable(p, v, line), out = jv_list(p, JV_GEN), seen = jv_list(p, JV_LIST);
    const char *attr = name_arg(p, a, 1, "attribute", "unique", line);
    int cs = flag_arg(a, 0, "case_sensitive");
    for (size_t i = 0; i < all.list->n; i++) {
        jv key = sort_key(p, all.list->v[i], attr, cs);
        jj_work(p, seen.list->n);
        size_t k = 0;
        while (k < seen.list->n && !jv_equal(seen.list->v[k], key))
            k++;
        if (k == seen.list->n) {
            jv_push(p, seen, key);
            jv_push(p, out, all.list->v[i]);
        }
    }
    return out;
}

static jv copy_list(jj_pool *p, jv v, int line)
{
    jv all = jj_iterable(p, v, line), out = jv_list(p, JV_LIST);
    for (size_t i = 0; i < all.list->n; i++)
        jv_push(p, out, all.list->v[i]);
    return out;
}

static jv reverse(jj_pool *p, jv v, int line)
{
    if (v.t == JV_STR) {
        jj_buf b = {0};
        jj_buf_add(p, &b, "", 0);
        for (size_t e = v.str.n; e > 0;) {
            size_t s = e - 1;
            while (s > 0 && ((unsigned char)v.str.s[s] & 0xc0) == 0x80)
                s--;
            jj_buf_add(p, &b, v.str.s + s, e - s);
            e = s;
        }
        return jj_buf_value(&b);
    }
    /* reversed() of a list is an iterator; of anything else, a list */
    jv all = jj_iterable(p, v, line), out = jv_list(p, v.t == JV_LIST || v.t == JV_TUPLE ? JV_GEN : JV_LIST);
    for (size_t i = all.list->n; i-- > 0;)
        jv_push(p, out, all.list->v[i]);
    return out;
}

static jv indent(jj_pool *p, jv v, const jj_args *a, int line)
{
    const jv *w = jj_arg(a, 0, "width");
    jj_buf pad = {0};
    jj_buf_add(p, &pad, "", 0);
    if (w && w->t == JV_STR)
        jj_buf_add(p, &pad, w->str.s, w->str.n);
    else
        for (int64_t i = 0; i < (w ? (w->t == JV_INT ? w->i : -1) : 4); i++)
            jj_buf_add(p, &pad, " ", 1);
    if (w && w->t != JV_STR && w->t != JV_INT)
        jj_fail_at(p, line, "indent: width must be an integer or a string");
    int first = flag_arg(a, 1, "first"), blank = flag_arg(a, 2, "blank");
    jv s = jv_to_str(p, v);
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    for (size_t i = 0, line_no = 0; i <= s.str.n; line_no++) {
        const char *nl = memchr(s.str.s + i, '\n', s.str.n - i);
        size_t end = nl ? (size_t)(nl - s.str.s) : s.str.n;
        if ((line_no > 0 || first) && (blank || end > i))
            jj_buf_add(p, &b, pad.s, pad.n);
        jj_buf_add(p, &b, s.str.s + i, end - i + (nl != NULL));
        if (!nl)
            break;
        i = end + 1;
    }
    return jj_buf_value(&b);
}

static jv tojson(jj_pool *p, jv v, const jj_args *a, int line)
{
    const jv *ind = jj_arg(a, 0, "indent");
    if (ind && ind->t != JV_INT && ind->t != JV_NONE)
        jj_fail_at(p, line, "tojson: indent must be an integer");
    const jv *seps = jj_arg(a, -1, "separators");
    if (seps && seps->t != JV_NONE)
        jj_fail_at(p, line, "tojson: separators= is not supported");
    return jv_tojson(p, v, ind && ind->t == JV_INT ? (int)ind->i : -1, flag_arg(a, -1, "sort_keys"),
                     flag_arg(a, -1, "ensure_ascii"));
}

static jv first_or_last(jj_pool *p, jv v, int last, int line)
{
    if (last && v.t == JV_GEN)
        jj_fail_at(p, line, "last: a generator cannot be reversed; add |list");
    jv all = jj_iterable(p, v, line);
    if (!all.list->n)
        return jv_undef("the sequence is empty");
    return all.list->v[last ? all.list->n - 1 : 0];
}

static jv sum_min_max(jj_pool *p, const char *name, jv v, const jj_args *a, int line)
{
    jv all = jj_iterable(p, v, line);
    const char *attr = name_arg(p, a, -1, "attribute", name, line);
    if (!strcmp(name, "sum")) {
        const jv *start = jj_arg(a, 1, "start");
        double total = start ? jv_num(*start) : 0;
        int floats = start && start->t == JV_FLOAT;
        for (size_t i = 0; i < all.list->n; i++) {
            jv x = attr ? attribute(p, all.list->v[i], attr) : all.list->v[i];
            if (!jv_is_number(x))
                jj_fail_at(p, line, "sum: '%s' is not a number", jv_type_name(x));
            floats |= x.t == JV_FLOAT;
            total += jv_num(x);
        }
        return floats ? jv_float(total) : jv_float_to_int(total, jv_float(total));
    }
    if (!all.list->n)
        return jv_undef("the sequence is empty");
    int cs = flag_arg(a, 0, "case_sensitive");
    size_t best = 0;
    for (size_t i = 1; i < all.list->n; i++) {
        int lt = less(p, sort_key(p, all.list->v[i], attr, cs), sort_key(p, all.list->v[best], attr, cs), line);
        if (name[1] == 'i' ? lt : !lt && !jv_equal(all.list->v[i], all.list->v[best]))
            best = i;
    }
    return all.list->v[best];
}

/* Python's printf-style `format % args`, for %s, %d and %%. */
static jv printf_format(jj_pool *p, jv v, const jj_args *a, int line)
{
    jv fmt = jv_to_str(p, v);
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    int next = 0;
    for (size_t i = 0; i < fmt.str.n; i++) {
        if (fmt.str.s[i] != '%') {
            jj_buf_add(p, &b, fmt.str.s + i, 1);
            continue;
        }
        char c = ++i < fmt.str.n ? fmt.str.s[i] : 0;
        if (c == '%') {
            jj_buf_add(p, &b, "%", 1);
        } else if ((c == 's' || c == 'd') && next < a->nargs) {
            jv x = a->args[next++];
            jv_put_str(p, &b, c == 'd' && jv_is_number(x) ? jv_float_to_int(jv_num(x), x) : x);
        } else {
            jj_fail_at(p, line, "format: only %%s, %%d and %%%% with enough arguments are supported");
        }
    }
    return jj_buf_value(&b);
}

/* jinja2's title filter (not str.title): each word capitalized, words
 * starting after whitespace or one of - ( { [ <. */
static jv title(jj_pool *p, jv v)
{
    jj_buf b = {0};
    jj_buf_add(p, &b, "", 0);
    for (size_t i = 0, j; i < v.str.n; i = j) {
        int delim = strchr("-({[< \t\n\r\f\v", v.str.s[i]) != NULL;
        for (j = i; j < v.str.n && (strchr("-({[< \t\n\r\f\v", v.str.s[j]) != NULL) == delim; j++) {
        }
        jv part = jv_strn(v.str.s + i, j - i);
        jv_put_str(p, &b, delim ? part : jj_str_case(p, part, "capitalize"));
    }
    return jj_buf_value(&b);
}

static int string_filter(jj_pool *p, const char *name, jv v, const jj_args *a, int line, jv *out)
{
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize"))
        *out = jj_str_case(p, jv_to_str(p, v), name);
    else if (!strcmp(name, "title"))
        *out = title(p, jv_to_str(p, v));
    else if (!strcmp(name, "trim"))
        *out = jj_method(p, jv_to_str(p, v), "strip", a, line);
    else if (!strcmp(name, "replace")) {
        const jv *old = jj_arg(a, 0, "old"), *new_ = jj_arg(a, 1, "new"), *count = jj_arg(a, 2, "count");
        if (!old || !new_)
            jj_fail_at(p, line, "replace: needs the old and new strings");
        *out = jj_str_replace(p, jv_to_str(p, v), jv_to_str(p, *old), jv_to_str(p, *new_),
                              count && count->t == JV_INT ? count->i : -1);
    } else if (!strcmp(name, "string")) {
        *out = jv_to_str(p, v);
    } else if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) {
        *out = jv_escape(p, v);
    } else if (!strcmp(name, "indent")) {
        *out = indent(p, v, a, line);
    } else if (!strcmp(name, "format")) {
        *out = printf_format(p, v, a, line);
    } else if (!strcmp(name, "wordcount")) {
        jj_args none = no_args();
        *out = jv_int((int64_t)jj_method(p, jv_to_str(p, v), "split", &none, line).list->n);
    } else {
        return 0;
    }
    return 1;
}

static int sequence_filter(jj_pool *p, const char *name, jv v, const jj_args *a, int line, jv *out)
{
    if (!strcmp(name, "length") || !strcmp(name, "count"))
        *out = jv_int((int64_t)length(p, v, line));
    else if (!strcmp(name, "join"))
        *out = join(p, v, a, line);
    else if (!strcmp(name, "items"))
        *out = items(p, v, line);
    else if (!strcmp(name, "dictsort"))
        *out = dictsort(p, v, a, line);
    else if (!strcmp(name, "list"))
        *out = copy_list(p, v, line);
    else if (!strcmp(name, "first") || !strcmp(name, "last"))
        *out = first_or_last(p, v, name[0] == 'l', line);
    else if (!strcmp(name, "select") || !strcmp(name, "reject"))
        *out = select_items(p, v, a, 0, name[0] == 's', line);
    else if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        *out = select_items(p, v, a, 1, name[0] == 's', line);
    else if (!strcmp(name, "map"))
        *out = map_items(p, v, a, line);
    else if (!strcmp(name, "unique"))
        *out = unique(p, v, a, line);
    else if (!strcmp(name, "sort"))
        *out = sort_filter(p, v, a, line);
    else if (!strcmp(name, "reverse"))
        *out = reverse(p, v, line);
    else if (!strcmp(name, "sum") || !strcmp(name, "min") || !strcmp(name, "max"))
        *out = sum_min_max(p, name, v, a, line);
    else
        return 0;
    return 1;
}

int jj_filter(jj_pool *p, const char *name, jv v, const jj_args *a, int line, jv *out)
{
    if (!strcmp(name, "tojson"))
        *out = tojson(p, v, a, line);
    else if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const jv *dflt = jj_arg(a, 0, "default_value");
        int use = v.t == JV_UNDEF || (flag_arg(a, 1, "boolean") && !jv_truthy(v));
        *out = use ? (dflt ? *dflt : jv_str("")) : v;
    } else if (!strcmp(name, "safe")) {
        *out = jv_to_str(p, v);
        out->markup = 1;
    } else if (!strcmp(name, "int"))
        *out = to_int(p, v, a);
    else if (!strcmp(name, "float"))
        *out = to_float(p, v, a);
    else if (!strcmp(name, "abs")) {
        if (!jv_is_number(v))
            jj_fail_at(p, line, "bad operand type for abs(): '%s'", jv_type_name(v));
        int64_t i = jv_int_of(v);
        *out = v.t == JV_FLOAT || i == INT64_MIN ? jv_float(fabs(jv_num(v))) : jv_int(i < 0 ? -i : i);
    } else if (!strcmp(name, "round"))
        *out = round_filter(p, v, a, line);
    else if (!strcmp(name, "bool"))
        *out = jv_bool(jv_truthy(v));
    else
        return string_filter(p, name, v, a, line, out) || sequence_filter(p, name, v, a, line, out);
    return 1;
}

/* ---- tests ---- */

static int compare_test(jj_pool *p, const char *name, jv v, const jj_args *a, int line, int *out)
{
    static const char *const names[][3] = {{"equalto", "eq", "=="}, {"ne", "!=", ""}, {"lt", "lessthan", "<"},
                                           {"le", "<=", ""},         {"gt", "greaterthan", ">"}, {"ge", ">=", ""},
                                           {"sameas", "", ""},       {"in", "", ""}};
    int k = 0;
    while (k < 8 && strcmp(names[k][0], name) && strcmp(names[k][1], name) && strcmp(names[k][2], name))
        k++;
    if (k == 8)
        return 0;
    if (a->nargs < 1)
        jj_fail_at(p, line, "test '%s' takes an argument", name);
    jv b = a->args[0];
    if (k == 7) {
        *out = jj_contains(p, b, v, line);
        return 1;
    }
    if (k <= 1 || k == 6) {
        *out = jv_equal(v, b) == (k != 1);
        return 1;
    }
    int lt = jv_is_number(v) && jv_is_number(b) ? jv_num(v) < jv_num(b) : -1;
    if (lt < 0 && v.t == JV_STR && b.t == JV_STR) {
        size_t m = v.str.n < b.str.n ? v.str.n : b.str.n;
        int c = memcmp(v.str.s, b.str.s, m);
        lt = c < 0 || (c == 0 && v.str.n < b.str.n);
    }
    if (lt < 0)
        jj_fail_at(p, line, "'%s' not supported between '%s' and '%s'", name, jv_type_name(v), jv_type_name(b));
    int eq = jv_equal(v, b);
    *out = k == 2 ? lt : k == 3 ? lt || eq : k == 4 ? !lt && !eq : !lt;
    return 1;
}

int jj_test(jj_pool *p, const char *name, jv v, const jj_args *a, int line)
{
    int t = v.t;
    if (!strcmp(name, "defined"))
        return t != JV_UNDEF;
    if (!strcmp(name, "undefined"))
        return t == JV_UNDEF;
    if (!strcmp(name, "none"))
        return t == JV_NONE;
    if (!strcmp(name, "string"))
        return t == JV_STR;
    if (!strcmp(name, "number"))
        return t == JV_INT || t == JV_FLOAT || t == JV_BOOL;
    if (!strcmp(name, "integer"))
        return t == JV_INT;
    if (!strcmp(name, "float"))
        return t == JV_FLOAT;
    if (!strcmp(name, "boolean"))
        return t == JV_BOOL;
    if (!strcmp(name, "true") || !strcmp(name, "false"))
        return t == JV_BOOL && v.b == (name[0] == 't');
    if (!strcmp(name, "mapping"))
        return t == JV_DICT;
    if (!strcmp(name, "iterable"))
        return t == JV_STR || t == JV_LIST || t == JV_TUPLE || t == JV_DICT || t == JV_UNDEF || t == JV_GEN;
    if (!strcmp(name, "sequence"))
        return t == JV_STR || t == JV_LIST || t == JV_TUPLE || t == JV_DICT || t == JV_UNDEF;
    if (!strcmp(name, "callable"))
        return t == JV_MACRO || t == JV_BUILTIN || t == JV_METHOD;
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        const jv *by = jj_arg(a, 0, "num");
        int64_t d = name[0] == 'd' ? (by && by->t == JV_INT ? by->i : 0) : 2;
        if ((t != JV_INT && t != JV_BOOL) || d == 0)
            jj_fail_at(p, line, "test '%s' needs integers", name);
        int64_t m = (t == JV_INT ? v.i : v.b) % d;
        return name[0] == 'o' ? m != 0 : m == 0;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (t != JV_STR)
            return 0;
        jj_args none = no_args();
        return jv_truthy(jj_method(p, v, name[0] == 'l' ? "islower" : "isupper", &none, line));
    }
    int out;
    return compare_test(p, name, v, a, line, &out) ? out : -1;
}
