/* jinja_eval.c — rendering a parsed template: statements write into the
 * output, expressions evaluate with Python's semantics (jinja2's getattr and
 * getitem, Undefined for what is missing), and every render is bounded:
 * nesting depth, loop iterations and macro calls, output and memory. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_impl.h"

#define MAX_STEPS 2000000         /* loop iterations and macro calls of one render */
#define MAX_OUTPUT (16u << 20)    /* bytes of output, and of any one string */
#define MAX_MEMORY (256u << 20)   /* bytes held by one render */
#define MAX_WORK 50000000         /* units of work of one render (jj_work); a real template uses 25,000 */

typedef struct jj_scope {
    jv vars;   /* a dict */
    struct jj_scope *parent;
    int captured;   /* a macro defined here keeps it: a loop may not reuse it */
} jj_scope;

typedef struct jj_render {
    jj_pool pool;
    jj_buf *out;      /* where output goes now (a macro or block set swaps it) */
    long steps;
    long long now;
} jj_render;

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static void step(jj_render *r, int line)
{
    if (++r->steps > MAX_STEPS)
        jj_fail_at(&r->pool, line, "the template runs more than %d loop iterations and macro calls", MAX_STEPS);
}

static void emit(jj_render *r, jv s, int line)
{
    if (r->out->n + s.str.n > MAX_OUTPUT)
        jj_fail_at(&r->pool, line, "the template writes more than %u MiB", MAX_OUTPUT >> 20);
    jj_buf_add(&r->pool, r->out, s.str.s, s.str.n);
}

/* ---- scopes ---- */

static jj_scope *new_scope(jj_render *r, jj_scope *parent)
{
    jj_scope *s = jj_alloc(&r->pool, sizeof(*s));
    s->vars = jv_dict(&r->pool, JV_DICT);
    s->parent = parent;
    return s;
}

static jv lookup(jj_render *r, jj_scope *s, const char *name)
{
    for (; s; s = s->parent) {
        jv *v = jv_get_str(s->vars, name);
        if (v)
            return *v;
    }
    char *why = jj_alloc(&r->pool, strlen(name) + 16);
    sprintf(why, "'%s' is undefined", name);
    return jv_undef(why);
}

static void assign(jj_render *r, jj_scope *s, const char *name, jv v)
{
    jv_set(&r->pool, s->vars, jv_str(name), v);
}

/* ---- expressions ---- */

static jv eval(jj_render *r, jj_scope *s, const jj_node *n);
static jv call_value(jj_render *r, jv fn, const jj_args *a, int line);

static _Noreturn void undefined_error(jj_render *r, jv v, int line)
{
    jj_fail_at(&r->pool, line, "%s", v.undef ? v.undef : "undefined value");
}

/* What is missing, in jinja2's words: "'dict object' has no attribute 'x'",
 * "None has no element 0". */
static jv missing(jj_render *r, jv obj, const char *what, jv key)
{
    jj_buf b = {0};
    int attr = !strcmp(what, "attribute");
    jj_buf_str(&r->pool, &b, attr ? "'" : "");
    jj_buf_str(&r->pool, &b, obj.t == JV_NONE ? "None" : jv_type_name(obj));
    jj_buf_str(&r->pool, &b, obj.t == JV_NONE ? "" : " object");
    jj_buf_str(&r->pool, &b, attr ? "' has no " : " has no ");
    jj_buf_str(&r->pool, &b, what);
    jj_buf_str(&r->pool, &b, " ");
    jv_put_repr(&r->pool, &b, key);
    return jv_undef(b.s);
}

/* self.name, bound: a value to call. */
static jv method(jj_render *r, jv self, const char *name)
{
    jv *boxed = jj_alloc(&r->pool, sizeof(jv));
    *boxed = self;
    jv m = jv_str(name);
    m.t = JV_METHOD;
    m.self = boxed;
    return m;
}

static jv loop_attr(jj_render *r, const jj_loop *l, const char *name)
{
    size_t n = l->items.list->n, i = l->i;
    static const char *const ints[] = {"index0", "index", "revindex0", "revindex", "length", "depth0", "depth", NULL};
    const int64_t vals[] = {(int64_t)i, (int64_t)i + 1, (int64_t)(n - i - 1), (int64_t)(n - i), (int64_t)n, 0, 1};
    for (int k = 0; ints[k]; k++)
        if (!strcmp(name, ints[k]))
            return jv_int(vals[k]);
    if (!strcmp(name, "first") || !strcmp(name, "last"))
        return jv_bool(name[0] == 'f' ? i == 0 : i + 1 == n);
    if (!strcmp(name, "previtem") && i > 0)
        return l->items.list->v[i - 1];
    if (!strcmp(name, "nextitem") && i + 1 < n)
        return l->items.list->v[i + 1];
    return missing(r, (jv){.t = JV_LOOP, .loop = l}, "attribute", jv_str(name));
}

/* jinja2's getattr: a method of that name first, then an item. */
static jv get_attr(jj_render *r, jv obj, const char *name, int line)
{
    if (obj.t == JV_UNDEF)
        undefined_error(r, obj, line);
    if (obj.t == JV_LOOP)
        return loop_attr(r, obj.loop, name);
    if (jj_has_method(obj, name))
        return method(r, obj, name);
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        jj_work(&r->pool, obj.dict->n);
        jv *v = jv_get_str(obj, name);
        return v ? *v : missing(r, obj, "attribute", jv_str(name));
    }
    return missing(r, obj, "attribute", jv_str(name));
}

/* Python's index: negative counts from the end. */
static int64_t list_index(int64_t i, size_t len)
{
    return i < 0 ? i + (int64_t)len : i;
}

/* jinja2's getitem: an item first, then (for a string key) a method. */
static jv get_item(jj_render *r, jv obj, jv key, int line)
{
    if (obj.t == JV_UNDEF)
        undefined_error(r, obj, line);
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        jj_work(&r->pool, obj.dict->n);
        jv *v = jv_get(obj, key);
        if (v)
            return *v;
    } else if ((obj.t == JV_LIST || obj.t == JV_TUPLE) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = list_index(key.t == JV_INT ? key.i : key.b, obj.list->n);
        if (i >= 0 && (size_t)i < obj.list->n)
            return obj.list->v[i];
    } else if (obj.t == JV_STR && key.t == JV_INT) {
        size_t len = jj_utf8_len(obj.str.s, obj.str.n);
        int64_t i = list_index(key.i, len);
        if (i >= 0 && (size_t)i < len) {
            size_t a = jj_utf8_offset(obj.str.s, obj.str.n, (size_t)i);
            size_t b = jj_utf8_offset(obj.str.s, obj.str.n, (size_t)i + 1);
            return jv_strn(obj.str.s + a, b - a);
        }
    }
    if (key.t == JV_STR) {
        char *name = jj_strndup(&r->pool, key.str.s, key.str.n);
        if (jj_has_method(obj, name))
            return method(r, obj, name);
    }
    return missing(r, obj, key.t == JV_STR ? "attribute" : "element", key);
}

/* Python's slice bounds for a sequence of len items. */
static void slice_bounds(jj_render *r, const jj_node *n, jj_scope *s, size_t len, int64_t *start, int64_t *stop,
                         int64_t *stepv)
{
    jv st = n->d ? eval(r, s, n->d) : jv_none();
    *stepv = st.t == JV_NONE ? 1 : st.t == JV_INT ? st.i : 0;
    if (*stepv == 0)
        jj_fail_at(&r->pool, n->line, "slice step must be a non-zero integer");
    int64_t L = (int64_t)len, def_start = *stepv > 0 ? 0 : L - 1, def_stop = *stepv > 0 ? L : -1;
    const jj_node *ends[2] = {n->b, n->c};
    int64_t *out[2] = {start, stop}, defs[2] = {def_start, def_stop};
    for (int k = 0; k < 2; k++) {
        jv v = ends[k] ? eval(r, s, ends[k]) : jv_none();
        if (v.t == JV_NONE) {
            *out[k] = defs[k];
            continue;
        }
        if (v.t != JV_INT)
            jj_fail_at(&r->pool, n->line, "slice indices must be integers or None");
        int64_t i = v.i < 0 ? v.i + L : v.i;
        if (*stepv > 0)
            i = i < 0 ? 0 : i > L ? L : i;
        else
            i = i < -1 ? -1 : i > L - 1 ? L - 1 : i;
        *out[k] = i;
    }
}

static jv slice(jj_render *r, jj_scope *s, const jj_node *n)
{
    jv obj = eval(r, s, n->a);
    if (obj.t == JV_UNDEF)
        undefined_error(r, obj, n->line);
    int is_str = obj.t == JV_STR;
    if (!is_str && obj.t != JV_LIST && obj.t != JV_TUPLE)
        jj_fail_at(&r->pool, n->line, "'%s' object is not subscriptable", jv_type_name(obj));
    size_t len = is_str ? jj_utf8_len(obj.str.s, obj.str.n) : obj.list->n;
    int64_t a, b, st;
    slice_bounds(r, n, s, len, &a, &b, &st);
    if (is_str) {
        jj_buf out = {0};
        jj_buf_add(&r->pool, &out, "", 0);
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
            size_t x = jj_utf8_offset(obj.str.s, obj.str.n, (size_t)i);
            size_t y = jj_utf8_offset(obj.str.s, obj.str.n, (size_t)i + 1);
            jj_buf_add(&r->pool, &out, obj.str.s + x, y - x);
        }
        return jj_buf_value(&out);
    }
    jv out = jv_list(&r->pool, obj.t);
    for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
        jv_push(&r->pool, out, obj.list->v[i]);
    return out;
}

static jj_args eval_args(jj_render *r, jj_scope *s, const jj_node *n)
{
    jj_args a = {.nargs = n->nargs, .nkw = n->nkw, .kwnames = n->kwnames};
    a.args = jj_alloc(&r->pool, (size_t)(n->nargs + 1) * sizeof(jv));
    a.kwargs = jj_alloc(&r->pool, (size_t)(n->nkw + 1) * sizeof(jv));
    for (int i = 0; i < n->nargs; i++)
        a.args[i] = eval(r, s, n->args[i]);
    for (int i = 0; i < n->nkw; i++)
        a.kwargs[i] = eval(r, s, n->kwargs[i]);
    return a;
}

static int compare(jj_render *r, jv a, jv b, int line)
{
    if (jv_is_number(a) && jv_is_number(b)) {
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t m = a.str.n < b.str.n ? a.str.n : b.str.n;
        int c = memcmp(a.str.s, b.str.s, m);
        return c ? c : a.str.n < b.str.n ? -1 : a.str.n > b.str.n;
    }
    if ((a.t == JV_LIST || a.t == JV_TUPLE) && a.t == b.t) {
        for (size_t i = 0; i < a.list->n && i < b.list->n; i++)
            if (!jv_equal(a.list->v[i], b.list->v[i])) {
                jj_enter(&r->pool, line);
                int c = compare(r, a.list->v[i], b.list->v[i], line);
                jj_leave(&r->pool);
                return c;
            }
        return a.list->n < b.list->n ? -1 : a.list->n > b.list->n;
    }
    jj_fail_at(&r->pool, line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

static jv concat2(jj_render *r, jv a, jv b)
{
    jv x = jv_to_str(&r->pool, a), y = jv_to_str(&r->pool, b);
    if (x.str.n + y.str.n > MAX_OUTPUT)
        jj_fail(&r->pool, "chat template: a string grows past %u MiB", MAX_OUTPUT >> 20);
    char *s = jj_alloc(&r->pool, x.str.n + y.str.n + 1);
    memcpy(s, x.str.s, x.str.n);
    memcpy(s + x.str.n, y.str.s, y.str.n);
    return jv_strn(s, x.str.n + y.str.n);
}

static jv repeat(jj_render *r, jv seq, int64_t times)
{
    size_t n = seq.t == JV_STR ? seq.str.n : seq.list->n;
    if (n == 0 || times <= 0)
        times = 0;
    else if ((uint64_t)times > (seq.t == JV_STR ? MAX_OUTPUT : MAX_STEPS) / n)
        jj_fail(&r->pool, "chat template: a %s repeated past %u %s", seq.t == JV_STR ? "string" : "list",
                seq.t == JV_STR ? MAX_OUTPUT >> 20 : (unsigned)MAX_STEPS, seq.t == JV_STR ? "MiB" : "items");
    if (seq.t == JV_STR) {
        jj_buf out = {0};
        jj_buf_add(&r->pool, &out, "", 0);
        for (int64_t i = 0; i < times; i++)
            jj_buf_add(&r->pool, &out, seq.str.s, seq.str.n);
        return jj_buf_value(&out);
    }
    jv out = jv_list(&r->pool, seq.t);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.list->n; k++)
            jv_push(&r->pool, out, seq.list->v[k]);
    return out;
}

static _Noreturn void bad_operands(jj_render *r, const char *op, jv a, jv b, int line)
{
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        undefined_error(r, a.t == JV_UNDEF ? a : b, line);
    if (!strcmp(op, "+") && (a.t == JV_STR || a.t == JV_LIST))
        jj_fail_at(&r->pool, line, "can only concatenate %s (not \"%s\") to %s", jv_type_name(a), jv_type_name(b),
                 jv_type_name(a));
    jj_fail_at(&r->pool, line, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_type_name(a), jv_type_name(b));
}

static jv add(jj_render *r, jv a, jv b, int line)
{
    if (a.t == JV_STR && b.t == JV_STR) {
        if (!a.markup && !b.markup)
            return concat2(r, a, b);
        jv out = concat2(r, jv_escape(&r->pool, a), jv_escape(&r->pool, b));   /* Markup escapes the other side */
        out.markup = 1;
        return out;
    }
    int la = a.t == JV_LIST || a.t == JV_TUPLE;
    if (la && a.t == b.t) {
        jv out = jv_list(&r->pool, a.t);
        for (size_t i = 0; i < a.list->n; i++)
            jv_push(&r->pool, out, a.list->v[i]);
        for (size_t i = 0; i < b.list->n; i++)
            jv_push(&r->pool, out, b.list->v[i]);
        return out;
    }
    bad_operands(r, "+", a, b, line);
}

static double py_floor_mod(double x, double y)
{
    double m = fmod(x, y);
    return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
}

static jv arithmetic(jj_render *r, jj_op op, jv a, jv b, int line)
{
    static const char *const names[] = {[JOP_ADD] = "+", [JOP_SUB] = "-", [JOP_MUL] = "*", [JOP_DIV] = "/",
                                        [JOP_FLOORDIV] = "//", [JOP_MOD] = "%", [JOP_POW] = "**"};
    if (op == JOP_MUL && (a.t == JV_STR || a.t == JV_LIST || a.t == JV_TUPLE) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(r, a, b.t == JV_INT ? b.i : b.b);
    if (op == JOP_MUL && (b.t == JV_STR || b.t == JV_LIST || b.t == JV_TUPLE) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(r, b, a.t == JV_INT ? a.i : a.b);
    if (op == JOP_ADD && !(jv_is_number(a) && jv_is_number(b)))
        return add(r, a, b, line);
    if (!jv_is_number(a) || !jv_is_number(b))
        bad_operands(r, names[op], a, b, line);
    int ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
    double x = jv_num(a), y = jv_num(b);
    int64_t i = ints ? jv_int_of(a) : 0, k = ints ? jv_int_of(b) : 0, res;
    if ((op == JOP_DIV || op == JOP_FLOORDIV || op == JOP_MOD) && y == 0)
        jj_fail_at(&r->pool, line, "division by zero");
    if (ints && i == INT64_MIN && k == -1)
        ints = 0;   /* the one quotient past int64 */
    switch (op) {
    case JOP_ADD:
        if (ints && !__builtin_add_overflow(i, k, &res))
            return jv_int(res);
        return jv_float(x + y);
    case JOP_SUB:
        if (ints && !__builtin_sub_overflow(i, k, &res))
            return jv_int(res);
        return jv_float(x - y);
    case JOP_MUL:
        if (ints && !__builtin_mul_overflow(i, k, &res))
            return jv_int(res);
        return jv_float(x * y);
    case JOP_DIV: return jv_float(x / y);
    case JOP_FLOORDIV:
        if (ints)
            return jv_int(i / k - ((i % k != 0) && ((i < 0) != (k < 0))));
        return jv_float(floor(x / y));
    case JOP_MOD:
        if (ints)
            return jv_int(i % k != 0 && ((i % k < 0) != (k < 0)) ? i % k + k : i % k);
        return jv_float(py_floor_mod(x, y));
    default:
        if (ints && k >= 0 && k < 64) {
            int64_t p = 1;
            int over = 0;
            for (int64_t e = 0; e < k && !over; e++)
                over = __builtin_mul_overflow(p, i, &p);
            if (!over)
                return jv_int(p);
        }
        return jv_float(pow(x, y));
    }
}

static jv binop(jj_render *r, jj_scope *s, const jj_node *n)
{
    jv a = eval(r, s, n->a), b = eval(r, s, n->b);
    return n->op == JOP_CONCAT ? concat2(r, a, b) : arithmetic(r, n->op, a, b, n->line);
}

static int compare_op(jj_render *r, jj_op op, jv a, jv b, int line)
{
    switch (op) {
    case JOP_EQ: return jv_equal(a, b);
    case JOP_NE: return !jv_equal(a, b);
    case JOP_LT: return compare(r, a, b, line) < 0;
    case JOP_LE: return compare(r, a, b, line) <= 0;
    case JOP_GT: return compare(r, a, b, line) > 0;
    case JOP_GE: return compare(r, a, b, line) >= 0;
    case JOP_IN: return jj_contains(&r->pool, b, a, line);
    default: return !jj_contains(&r->pool, b, a, line);   /* JOP_NOT_IN */
    }
}

/* a < b < c: each operand evaluated once, as Python's (a < b) and (b < c). */
static jv comparison(jj_render *r, jj_scope *s, const jj_node *n)
{
    jv left = eval(r, s, n->args[0]);
    for (int i = 1; i < n->nargs; i++) {
        jv right = eval(r, s, n->args[i]);
        if (!compare_op(r, n->ops[i - 1], left, right, n->line))
            return jv_bool(0);
        left = right;
    }
    return jv_bool(1);
}

static jv literal_container(jj_render *r, jj_scope *s, const jj_node *n)
{
    if (n->kind == JN_DICT) {
        jv d = jv_dict(&r->pool, JV_DICT);
        for (int i = 0; i < n->nargs; i++)
            jv_set(&r->pool, d, eval(r, s, n->args[i]), eval(r, s, n->kwargs[i]));
        return d;
    }
    jv l = jv_list(&r->pool, n->kind == JN_LIST ? JV_LIST : JV_TUPLE);
    for (int i = 0; i < n->nargs; i++)
        jv_push(&r->pool, l, eval(r, s, n->args[i]));
    return l;
}

static jv eval_filter(jj_render *r, jj_scope *s, const jj_node *n, jv v)
{
    jj_args a = eval_args(r, s, n);
    jv out;
    if (!jj_filter(&r->pool, n->name, v, &a, n->line, &out))
        jj_fail_at(&r->pool, n->line, "no filter named '%s'", n->name);
    return out;
}

static jv eval_test(jj_render *r, jj_scope *s, const jj_node *n)
{
    jv v = eval(r, s, n->a);
    jj_args a = eval_args(r, s, n);
    int t = jj_test(&r->pool, n->name, v, &a, n->line);
    if (t < 0)
        jj_fail_at(&r->pool, n->line, "no test named '%s'", n->name);
    return jv_bool(n->negated ? !t : t);
}

static jv eval_inner(jj_render *r, jj_scope *s, const jj_node *n)
{
    switch (n->kind) {
    case JN_LIT: return n->lit;
    case JN_NAME: return lookup(r, s, n->name);
    case JN_ATTR: return get_attr(r, eval(r, s, n->a), n->name, n->line);
    case JN_ITEM: return get_item(r, eval(r, s, n->a), eval(r, s, n->b), n->line);
    case JN_SLICE: return slice(r, s, n);
    case JN_CALL: {
        jv fn = eval(r, s, n->a);
        jj_args a = eval_args(r, s, n);
        return call_value(r, fn, &a, n->line);
    }
    case JN_FILTER: return eval_filter(r, s, n, eval(r, s, n->a));
    case JN_TEST: return eval_test(r, s, n);
    case JN_BINOP: return binop(r, s, n);
    case JN_COMPARE: return comparison(r, s, n);
    case JN_NEG:
    case JN_POS: {
        jv v = eval(r, s, n->a);
        if (!jv_is_number(v))
            jj_fail_at(&r->pool, n->line, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+', jv_type_name(v));
        if (n->kind == JN_POS)
            return v.t == JV_BOOL ? jv_int(v.b) : v;
        if (v.t == JV_FLOAT || jv_int_of(v) == INT64_MIN)
            return jv_float(-jv_num(v));
        return jv_int(-jv_int_of(v));
    }
    case JN_NOT: return jv_bool(!jv_truthy(eval(r, s, n->a)));
    case JN_AND: {
        jv a = eval(r, s, n->a);
        return jv_truthy(a) ? eval(r, s, n->b) : a;
    }
    case JN_OR: {
        jv a = eval(r, s, n->a);
        return jv_truthy(a) ? a : eval(r, s, n->b);
    }
    case JN_COND:
        if (jv_truthy(eval(r, s, n->a)))
            return eval(r, s, n->b);
        return n->c ? eval(r, s, n->c) : jv_undef("the inline if has no else and its test is false");
    default: return literal_container(r, s, n);
    }
}

/* Each node evaluated is a unit of work: a render's time is bounded even
 * where its loops are short and its expressions long. */
static jv eval(jj_render *r, jj_scope *s, const jj_node *n)
{
    jj_enter(&r->pool, n->line);
    jj_work(&r->pool, 1);
    jv v = eval_inner(r, s, n);
    jj_leave(&r->pool);
    return v;
}

/* ---- statements ---- */

static int exec(jj_render *r, jj_scope *s, const jj_node *n);

/* The body's output as a string, written aside. */
static jv capture(jj_render *r, jj_scope *s, const jj_node *body)
{
    jj_buf buf = {0}, *saved = r->out;
    jj_buf_add(&r->pool, &buf, "", 0);
    r->out = &buf;
    exec(r, s, body);
    r->out = saved;
    return jj_buf_value(&buf);
}

static jv call_macro(jj_render *r, jv fn, const jj_args *a, int line)
{
    const jj_node *m = fn.macro.node;
    step(r, line);
    if (a->nargs > m->nkw)
        jj_fail_at(&r->pool, line, "macro '%s' takes not more than %d argument(s)", m->name, m->nkw);
    jj_scope *s = new_scope(r, fn.macro.scope);
    for (int i = 0; i < m->nkw; i++) {
        const jv *v = jj_arg(a, i < a->nargs ? i : -1, m->kwnames[i]);
        jv val = v ? *v : m->kwargs[i] ? eval(r, s, m->kwargs[i]) : lookup(r, NULL, m->kwnames[i]);
        assign(r, s, m->kwnames[i], val);
    }
    for (int i = 0; i < a->nkw; i++) {
        int k = 0;
        while (k < m->nkw && strcmp(m->kwnames[k], a->kwnames[i]))
            k++;
        if (k == m->nkw)
            jj_fail_at(&r->pool, line, "macro '%s' takes no keyword argument '%s'", m->name, a->kwnames[i]);
    }
    return capture(r, s, m->b);
}

static jv builtin(jj_render *r, const char *name, const jj_args *a, int line);

static jv call_value(jj_render *r, jv fn, const jj_args *a, int line)
{
    switch (fn.t) {
    case JV_MACRO: return call_macro(r, fn, a, line);
    case JV_BUILTIN: return builtin(r, fn.str.s, a, line);
    case JV_METHOD: return jj_method(&r->pool, *fn.self, fn.str.s, a, line);
    case JV_UNDEF: undefined_error(r, fn, line);
    default: jj_fail_at(&r->pool, line, "'%s' object is not callable", jv_type_name(fn));
    }
}

static void bind_targets(jj_render *r, jj_scope *s, const jj_node *n, jv item)
{
    if (n->nkw == 1) {
        assign(r, s, n->kwnames[0], item);
        return;
    }
    jv parts = jj_iterable(&r->pool, item, n->line);
    if ((int)parts.list->n != n->nkw)
        jj_fail_at(&r->pool, n->line, "cannot unpack %zu values into %d names", parts.list->n, n->nkw);
    for (int i = 0; i < n->nkw; i++)
        assign(r, s, n->kwnames[i], parts.list->v[i]);
}

/* A fresh scope for the next iteration: the last one's, emptied, unless a
 * macro defined there keeps it. */
static jj_scope *iteration_scope(jj_render *r, jj_scope *outer, jj_scope *last)
{
    if (!last || last->captured)
        return new_scope(r, outer);
    last->vars.dict->n = 0;
    return last;
}

/* Each iteration gets a scope of its own: what the body sets is gone by the
 * next one, as in jinja2 (namespace() is how templates carry values on). */
static int exec_for(jj_render *r, jj_scope *outer, const jj_node *n)
{
    jv all = jj_iterable(&r->pool, eval(r, outer, n->a), n->line);
    jv items = all;
    jj_scope *s = NULL;
    if (n->d) {   /* the `if` filter runs first: loop.length counts what it keeps */
        items = jv_list(&r->pool, JV_LIST);
        for (size_t i = 0; i < all.list->n; i++) {
            step(r, n->line);
            s = iteration_scope(r, outer, s);
            bind_targets(r, s, n, all.list->v[i]);
            if (jv_truthy(eval(r, s, n->d)))
                jv_push(&r->pool, items, all.list->v[i]);
        }
    }
    /* one `loop` for the whole loop, as jinja2's LoopContext: it moves on */
    jj_loop *loop = jj_alloc(&r->pool, sizeof(*loop));
    loop->items = items;
    for (size_t i = 0; i < items.list->n; i++) {
        step(r, n->line);
        s = iteration_scope(r, outer, s);
        bind_targets(r, s, n, items.list->v[i]);
        loop->i = i;
        assign(r, s, "loop", (jv){.t = JV_LOOP, .loop = loop});
        if (exec(r, s, n->b) == FLOW_BREAK)
            break;
    }
    if (!items.list->n && n->c)
        return exec(r, new_scope(r, outer), n->c);
    return FLOW_NEXT;
}

/* A block's output through the filters of `chain` (the last one first,
 * down to the hole the parser left for the output). */
static jv filtered(jj_render *r, jj_scope *s, const jj_node *chain, jv v)
{
    if (chain->kind != JN_FILTER)
        return v;
    return eval_filter(r, s, chain, filtered(r, s, chain->a, v));
}

static void exec_set(jj_render *r, jj_scope *s, const jj_node *n)
{
    if (n->kind == JN_SET_BLOCK) {
        assign(r, s, n->name, filtered(r, s, n->d, capture(r, s, n->b)));
        return;
    }
    jv v = eval(r, s, n->a);
    if (n->d) {
        jv ns = eval(r, s, n->d);
        if (ns.t != JV_NS)
            jj_fail_at(&r->pool, n->line, "cannot assign attribute on non-namespace object");
        jv_set(&r->pool, ns, jv_str(n->name), v);
        return;
    }
    bind_targets(r, s, n, v);
}

static int exec_inner(jj_render *r, jj_scope *s, const jj_node *n)
{
    switch (n->kind) {
    case JN_BODY:
        for (int i = 0; i < n->nargs; i++) {
            int flow = exec(r, s, n->args[i]);
            if (flow != FLOW_NEXT)
                return flow;
        }
        return FLOW_NEXT;
    case JN_TEXT: emit(r, n->lit, n->line); return FLOW_NEXT;
    case JN_OUTPUT: emit(r, jv_to_str(&r->pool, eval(r, s, n->a)), n->line); return FLOW_NEXT;
    case JN_IF:
        if (jv_truthy(eval(r, s, n->a)))
            return exec(r, s, n->b);
        return n->c ? exec(r, s, n->c) : FLOW_NEXT;
    case JN_FOR: return exec_for(r, s, n);
    case JN_SET:
    case JN_SET_BLOCK: exec_set(r, s, n); return FLOW_NEXT;
    case JN_MACRO: {
        jv m = {.t = JV_MACRO, .macro = {n, s}};
        assign(r, s, n->name, m);
        s->captured = 1;
        return FLOW_NEXT;
    }
    case JN_FILTER_BLOCK: emit(r, jv_to_str(&r->pool, filtered(r, s, n->d, capture(r, s, n->b))), n->line); return FLOW_NEXT;
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    default: jj_fail_at(&r->pool, n->line, "not a statement");
    }
}

static int exec(jj_render *r, jj_scope *s, const jj_node *n)
{
    jj_enter(&r->pool, n->line);
    int flow = exec_inner(r, s, n);
    jj_leave(&r->pool);
    return flow;
}

/* ---- the globals ---- */

static jv range(jj_render *r, const jj_args *a, int line)
{
    int64_t v[3] = {0, 0, 1};
    if (a->nargs < 1 || a->nargs > 3)
        jj_fail_at(&r->pool, line, "range expected 1 to 3 arguments, got %d", a->nargs);
    for (int i = 0; i < a->nargs; i++) {
        if (a->args[i].t != JV_INT && a->args[i].t != JV_BOOL)
            jj_fail_at(&r->pool, line, "'%s' object cannot be interpreted as an integer", jv_type_name(a->args[i]));
        v[a->nargs == 1 ? 1 : i] = a->args[i].t == JV_INT ? a->args[i].i : a->args[i].b;
    }
    if (v[2] == 0)
        jj_fail_at(&r->pool, line, "range() arg 3 must not be zero");
    jv out = jv_list(&r->pool, JV_LIST);
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
        step(r, line);
        jv_push(&r->pool, out, jv_int(i));
    }
    return out;
}

static jv strftime_now(jj_render *r, const jj_args *a, int line)
{
    if (a->nargs != 1 || a->args[0].t != JV_STR)
        jj_fail_at(&r->pool, line, "strftime_now takes one format string");
    time_t t = (time_t)r->now;
    struct tm tm;
    char buf[256];
    if (!localtime_r(&t, &tm))
        jj_fail_at(&r->pool, line, "strftime_now: no local time");
    char *fmt = jj_strndup(&r->pool, a->args[0].str.s, a->args[0].str.n);
    size_t n = strftime(buf, sizeof(buf), fmt, &tm);
    return jv_strn(jj_strndup(&r->pool, buf, n), n);
}

static jv builtin(jj_render *r, const char *name, const jj_args *a, int line)
{
    if (!strcmp(name, "range"))
        return range(r, a, line);
    if (!strcmp(name, "strftime_now"))
        return strftime_now(r, a, line);
    if (!strcmp(name, "raise_exception")) {
        jv msg = a->nargs ? jv_to_str(&r->pool, a->args[0]) : jv_str("");
        jj_fail(&r->pool, "chat template: %.*s", (int)msg.str.n, msg.str.s);
    }
    /* namespace() and dict(): keyword arguments, and a dict to start from */
    jv d = jv_dict(&r->pool, !strcmp(name, "namespace") ? JV_NS : JV_DICT);
    for (int i = 0; i < a->nargs; i++) {
        if (a->args[i].t != JV_DICT && a->args[i].t != JV_NS)
            jj_fail_at(&r->pool, line, "%s() takes a mapping, not '%s'", name, jv_type_name(a->args[i]));
        for (size_t k = 0; k < a->args[i].dict->n; k++)
            jv_set(&r->pool, d, a->args[i].dict->keys[k], a->args[i].dict->vals[k]);
    }
    for (int i = 0; i < a->nkw; i++)
        jv_set(&r->pool, d, jv_str(a->kwnames[i]), a->kwargs[i]);
    return d;
}

static jj_scope *globals(jj_render *r, const json_t *vars)
{
    static const char *const names[] = {"range", "strftime_now", "raise_exception", "namespace", "dict", NULL};
    jj_scope *g = new_scope(r, NULL);
    for (int i = 0; names[i]; i++) {
        jv b = jv_str(names[i]);
        b.t = JV_BUILTIN;
        assign(r, g, names[i], b);
    }
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)vars, k, x)
        assign(r, g, jj_strndup(&r->pool, k, strlen(k)), jv_from_json(&r->pool, x));
    return new_scope(r, g);
}

typedef struct {
    const tram_jinja *t;
    const json_t *vars;
    long long now;
    char *out;
    tram_error *err;
    int rc;
} render_call;

/* A render, on the sized thread: every failure longjmps back here. */
static void render_here(void *arg)
{
    render_call *c = arg;
    jmp_buf on_error;
    jj_render *r = calloc(1, sizeof(*r));
    c->rc = -1;
    if (!r) {
        tram_fail(c->err, "chat template: out of memory");
        return;
    }
    r->pool = (jj_pool){.limit = MAX_MEMORY, .work_limit = MAX_WORK, .on_error = &on_error, .err = c->err};
    r->now = c->now;
    if (!setjmp(on_error)) {
        jj_buf buf = {0};
        jj_buf_add(&r->pool, &buf, "", 0);
        r->out = &buf;
        exec(r, globals(r, c->vars), c->t->body);
        c->out = jj_buf_detach(&r->pool, &buf);
        c->rc = 0;
    }
    jj_pool_free(&r->pool);
    free(r);
}

int tram_jinja_render(const tram_jinja *t, const json_t *vars, long long now, char **out, tram_error *err)
{
    render_call c = {.t = t, .vars = vars, .now = now, .err = err};
    *out = NULL;
    if (jj_run_sized(render_here, &c, err))
        return -1;
    *out = c.out;
    return c.rc;
}

typedef struct {
    const char *src;
    tram_jinja *t;
    tram_error *err;
} parse_call;

static void parse_here(void *arg)
{
    parse_call *c = arg;
    jmp_buf on_error;
    tram_jinja *t = calloc(1, sizeof(*t));
    if (!t) {
        tram_fail(c->err, "chat template: out of memory");
        return;
    }
    t->pool = (jj_pool){.limit = MAX_MEMORY, .on_error = &on_error, .err = c->err};
    if (setjmp(on_error)) {
        tram_jinja_free(t);
        return;
    }
    t->src = jj_strndup(&t->pool, c->src, strlen(c->src));
    t->body = jj_parse(&t->pool, t->src);
    t->pool.on_error = NULL;
    t->pool.err = NULL;
    c->t = t;
}

int tram_jinja_parse(tram_jinja **out, const char *src, tram_error *err)
{
    parse_call c = {.src = src, .err = err};
    *out = NULL;
    if (jj_run_sized(parse_here, &c, err))
        return -1;
    *out = c.t;
    return c.t ? 0 : -1;
}

void tram_jinja_free(tram_jinja *t)
{
    if (!t)
        return;
    jj_pool_free(&t->pool);
    free(t);
}
