/* jinja_parse.c — the tokens of a template into its syntax tree, by
 * recursive descent with jinja2's operator precedence (lowest first): inline
 * if, or, and, not, comparisons and in, + and -, ~, * / // %, **, unary - +,
 * then filters, tests and calls after a primary. */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"
#include "chat/jinja_lex.h"

#define MAX_NESTING 256   /* brackets and blocks; deeper is an error, not a stack overflow */

typedef struct {
    jj_pool *p;
    jj_tok *t;
    int pos, depth;
} parser;

static jj_tok *cur(parser *ps)
{
    return &ps->t[ps->pos];
}

static _Noreturn void syntax(parser *ps, const char *what)
{
    jj_tok *t = cur(ps);
    jj_fail(ps->p, "chat template: line %d: %s%s%s%s", t->line, what,
            t->kind == JT_NAME || t->kind == JT_OP ? " (at '" : "", t->kind == JT_NAME || t->kind == JT_OP ? t->s : "",
            t->kind == JT_NAME || t->kind == JT_OP ? "')" : "");
}

static int is_op(parser *ps, const char *op)
{
    return cur(ps)->kind == JT_OP && !strcmp(cur(ps)->s, op);
}

static int is_name(parser *ps, const char *name)
{
    return cur(ps)->kind == JT_NAME && !strcmp(cur(ps)->s, name);
}

static int accept_op(parser *ps, const char *op)
{
    if (!is_op(ps, op))
        return 0;
    ps->pos++;
    return 1;
}

static int accept_name(parser *ps, const char *name)
{
    if (!is_name(ps, name))
        return 0;
    ps->pos++;
    return 1;
}

static void expect_op(parser *ps, const char *op)
{
    if (!accept_op(ps, op)) {
        char what[32];
        snprintf(what, sizeof(what), "expected '%s'", op);
        syntax(ps, what);
    }
}

static const char *expect_name(parser *ps)
{
    if (cur(ps)->kind != JT_NAME)
        syntax(ps, "expected a name");
    return ps->t[ps->pos++].s;
}

static jj_node *node(parser *ps, jn_kind kind)
{
    jj_node *n = jj_alloc(ps->p, sizeof(*n));
    n->kind = kind;
    n->line = cur(ps)->line;
    return n;
}

/* Room for item n of an array of n items whose capacity is the next power
 * of two: it doubles, so a body of 200,000 statements (or a call of as many
 * arguments) is not 200,000 copies of a growing array. */
static void *grown(parser *ps, void *items, int n, size_t size)
{
    if (n & (n - 1))
        return items;
    return jj_realloc(ps->p, items, (size_t)(n ? 2 * n : 1) * size);
}

static void add_arg(parser *ps, jj_node *n, jj_node *arg)
{
    n->args = grown(ps, n->args, n->nargs, sizeof(*n->args));
    n->args[n->nargs++] = arg;
}

static void add_kw(parser *ps, jj_node *n, const char *name, jj_node *value)
{
    n->kwnames = grown(ps, n->kwnames, n->nkw, sizeof(*n->kwnames));
    n->kwargs = grown(ps, n->kwargs, n->nkw, sizeof(*n->kwargs));
    n->kwnames[n->nkw] = name;
    n->kwargs[n->nkw++] = value;
}

static void enter(parser *ps)
{
    if (++ps->depth > MAX_NESTING)
        syntax(ps, "the template nests deeper than 256 levels");
}

/* ---- expressions ---- */

static jj_node *expression(parser *ps);
static jj_node *or_expr(parser *ps);
static jj_node *unary(parser *ps, int with_filter);

/* Call arguments after '(' up to ')': positional, then name=value. */
static void call_args(parser *ps, jj_node *n)
{
    while (!accept_op(ps, ")")) {
        if (n->nargs + n->nkw)
            expect_op(ps, ",");
        if (accept_op(ps, ")"))
            break;
        if (cur(ps)->kind == JT_NAME && ps->t[ps->pos + 1].kind == JT_OP && !strcmp(ps->t[ps->pos + 1].s, "=")) {
            const char *name = expect_name(ps);
            ps->pos++;
            add_kw(ps, n, name, expression(ps));
        } else {
            if (n->nkw)
                syntax(ps, "a positional argument after a keyword argument");
            add_arg(ps, n, expression(ps));
        }
    }
}

static jj_node *literal(parser *ps, jv v)
{
    jj_node *n = node(ps, JN_LIT);
    n->lit = v;
    return n;
}

/* (...), [...], {...}: after the opening bracket. */
static jj_node *bracketed(parser *ps, const char *open)
{
    jj_node *n = node(ps, !strcmp(open, "[") ? JN_LIST : !strcmp(open, "{") ? JN_DICT : JN_TUPLE);
    const char *close = n->kind == JN_LIST ? "]" : n->kind == JN_DICT ? "}" : ")";
    int commas = 0;
    while (!accept_op(ps, close)) {
        if (n->nargs) {
            expect_op(ps, ",");
            commas++;
            if (accept_op(ps, close))
                break;
        }
        jj_node *item = expression(ps);
        if (n->kind == JN_DICT) {
            expect_op(ps, ":");
            add_kw(ps, n, NULL, expression(ps));
        }
        add_arg(ps, n, item);
    }
    if (n->kind == JN_TUPLE && n->nargs == 1 && !commas)
        return n->args[0];   /* parentheses around one expression */
    return n;
}

static jj_node *primary(parser *ps)
{
    jj_tok *t = cur(ps);
    enter(ps);
    jj_node *n;
    if (t->kind == JT_STRING) {
        jj_buf b = {0};
        for (; cur(ps)->kind == JT_STRING; ps->pos++)   /* adjacent strings join, as in Python */
            jj_buf_add(ps->p, &b, cur(ps)->s, cur(ps)->n);
        n = literal(ps, jj_buf_value(&b));
    } else if (t->kind == JT_INT || t->kind == JT_FLOAT) {
        ps->pos++;
        n = literal(ps, t->kind == JT_INT ? jv_int(t->i) : jv_float(t->f));
    } else if (t->kind == JT_NAME) {
        ps->pos++;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            n = literal(ps, jv_bool(1));
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            n = literal(ps, jv_bool(0));
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            n = literal(ps, jv_none());
        else
            (n = node(ps, JN_NAME))->name = t->s;
    } else if (t->kind == JT_OP && strchr("([{", t->s[0]) && !t->s[1]) {
        ps->pos++;
        n = bracketed(ps, t->s);
    } else {
        syntax(ps, "expected an expression");
    }
    ps->depth--;
    return n;
}

/* x[...] after the '[': an index or a slice start:stop:step. */
static jj_node *subscript(parser *ps, jj_node *obj)
{
    jj_node *parts[3] = {0};
    int colons = 0;
    for (;;) {
        if (is_op(ps, ":")) {
            if (++colons > 2)
                syntax(ps, "a slice has at most two ':'");
            ps->pos++;
        } else if (is_op(ps, "]")) {
            ps->pos++;
            break;
        } else {
            if (parts[colons])
                syntax(ps, "expected ':' or ']'");
            parts[colons] = expression(ps);
        }
    }
    jj_node *n = node(ps, colons ? JN_SLICE : JN_ITEM);
    n->a = obj;
    if (!colons && !parts[0])
        syntax(ps, "an empty subscript");
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    return n;
}

/* fn(...) after the '(' */
static jj_node *call(parser *ps, jj_node *fn)
{
    jj_node *c = node(ps, JN_CALL);
    c->a = fn;
    call_args(ps, c);
    return c;
}

static jj_node *postfix(parser *ps, jj_node *n)
{
    for (;;) {
        if (accept_op(ps, ".")) {
            jj_node *a = node(ps, JN_ATTR);
            a->a = n;
            if (cur(ps)->kind == JT_INT) {   /* x.0 is x[0] */
                a->kind = JN_ITEM;
                a->b = literal(ps, jv_int(cur(ps)->i));
                ps->pos++;
            } else {
                a->name = expect_name(ps);
            }
            n = a;
        } else if (accept_op(ps, "[")) {
            n = subscript(ps, n);
        } else if (accept_op(ps, "(")) {
            n = call(ps, n);
        } else {
            return n;
        }
    }
}

/* A test's one argument without parentheses: `x is divisibleby 3`. */
static int starts_test_arg(parser *ps)
{
    jj_tok *t = cur(ps);
    if (t->kind == JT_STRING || t->kind == JT_INT || t->kind == JT_FLOAT)
        return 1;
    if (t->kind == JT_NAME)
        return strcmp(t->s, "else") && strcmp(t->s, "or") && strcmp(t->s, "and") && strcmp(t->s, "if") &&
               strcmp(t->s, "is") && strcmp(t->s, "in") && strcmp(t->s, "not");
    return t->kind == JT_OP && (is_op(ps, "[") || is_op(ps, "{"));
}

/* operand | name(args), after the '|' */
static jj_node *filter(parser *ps, jj_node *operand)
{
    jj_node *f = node(ps, JN_FILTER);
    f->a = operand;
    f->name = expect_name(ps);
    if (accept_op(ps, "("))
        call_args(ps, f);
    return f;
}

static jj_node *filters_and_tests(parser *ps, jj_node *n)
{
    for (;;) {
        if (accept_op(ps, "|")) {
            n = filter(ps, n);
        } else if (accept_name(ps, "is")) {
            jj_node *t = node(ps, JN_TEST);
            t->a = n;
            t->negated = accept_name(ps, "not");
            t->name = expect_name(ps);
            if (accept_op(ps, "("))
                call_args(ps, t);
            else if (starts_test_arg(ps))
                add_arg(ps, t, postfix(ps, primary(ps)));
            n = t;
        } else if (accept_op(ps, "(")) {
            n = call(ps, n);
        } else {
            return n;
        }
    }
}

static jj_node *unary(parser *ps, int with_filter)
{
    jj_node *n;
    enter(ps);
    if (is_op(ps, "-") || is_op(ps, "+")) {
        n = node(ps, is_op(ps, "-") ? JN_NEG : JN_POS);
        ps->pos++;
        n->a = unary(ps, 0);
    } else {
        n = primary(ps);
    }
    n = postfix(ps, n);
    if (with_filter)
        n = filters_and_tests(ps, n);
    ps->depth--;
    return n;
}

static jj_node *binop(parser *ps, jj_op op, jj_node *l, jj_node *r)
{
    jj_node *n = node(ps, JN_BINOP);
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static jj_node *power(parser *ps)
{
    jj_node *n = unary(ps, 1);
    while (accept_op(ps, "**"))
        n = binop(ps, JOP_POW, n, unary(ps, 1));
    return n;
}

static jj_node *product(parser *ps)
{
    static const char *const ops[] = {"*", "/", "//", "%"};
    static const jj_op codes[] = {JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD};
    jj_node *n = power(ps);
    for (int k = 0; k < 4;)
        if (accept_op(ps, ops[k])) {
            n = binop(ps, codes[k], n, power(ps));
            k = 0;
        } else {
            k++;
        }
    return n;
}

static jj_node *concat(parser *ps)
{
    jj_node *n = product(ps);
    while (accept_op(ps, "~"))
        n = binop(ps, JOP_CONCAT, n, product(ps));
    return n;
}

static jj_node *sum(parser *ps)
{
    jj_node *n = concat(ps);
    for (;;) {
        if (accept_op(ps, "+"))
            n = binop(ps, JOP_ADD, n, concat(ps));
        else if (accept_op(ps, "-"))
            n = binop(ps, JOP_SUB, n, concat(ps));
        else
            return n;
    }
}

/* The comparison operator at the cursor, taken; 0 when there is none. */
static int comparison_op(parser *ps, jj_op *op)
{
    static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    static const jj_op codes[] = {JOP_EQ, JOP_NE, JOP_LE, JOP_GE, JOP_LT, JOP_GT};
    for (int k = 0; k < 6; k++)
        if (accept_op(ps, ops[k])) {
            *op = codes[k];
            return 1;
        }
    if (accept_name(ps, "in")) {
        *op = JOP_IN;
        return 1;
    }
    if (is_name(ps, "not") && ps->t[ps->pos + 1].kind == JT_NAME && !strcmp(ps->t[ps->pos + 1].s, "in")) {
        ps->pos += 2;
        *op = JOP_NOT_IN;
        return 1;
    }
    return 0;
}

/* a < b < c is Python's (a < b) and (b < c), b evaluated once: one node
 * with every operand (sharing b between two nodes would make the tree a
 * graph whose walks double at each nested chain). */
static jj_node *comparison(parser *ps)
{
    jj_node *first = sum(ps), *n = NULL;
    jj_op op;
    while (comparison_op(ps, &op)) {
        if (!n) {
            n = node(ps, JN_COMPARE);
            add_arg(ps, n, first);
        }
        n->ops = grown(ps, n->ops, n->nargs - 1, sizeof(*n->ops));
        n->ops[n->nargs - 1] = op;
        add_arg(ps, n, sum(ps));
    }
    return n ? n : first;
}

static jj_node *not_expr(parser *ps)
{
    if (accept_name(ps, "not")) {
        enter(ps);
        jj_node *n = node(ps, JN_NOT);
        n->a = not_expr(ps);
        ps->depth--;
        return n;
    }
    return comparison(ps);
}

static jj_node *logic(parser *ps, jn_kind kind)
{
    jj_node *n = kind == JN_OR ? logic(ps, JN_AND) : not_expr(ps);
    while (accept_name(ps, kind == JN_OR ? "or" : "and")) {
        jj_node *l = node(ps, kind);
        l->a = n;
        l->b = kind == JN_OR ? logic(ps, JN_AND) : not_expr(ps);
        n = l;
    }
    return n;
}

static jj_node *or_expr(parser *ps)
{
    return logic(ps, JN_OR);
}

static jj_node *expression(parser *ps)
{
    enter(ps);
    jj_node *n = or_expr(ps);
    while (accept_name(ps, "if")) {
        jj_node *c = node(ps, JN_COND);
        c->b = n;
        c->a = or_expr(ps);
        if (accept_name(ps, "else"))
            c->c = expression(ps);
        n = c;
    }
    ps->depth--;
    return n;
}

/* `a, b` without brackets, as `{{ }}` and `set` allow. */
static jj_node *tuple_or_expression(parser *ps)
{
    jj_node *first = expression(ps);
    if (!is_op(ps, ","))
        return first;
    jj_node *t = node(ps, JN_TUPLE);
    add_arg(ps, t, first);
    while (accept_op(ps, ",") && cur(ps)->kind != JT_BLOCK_END && cur(ps)->kind != JT_VAR_END)
        add_arg(ps, t, expression(ps));
    return t;
}

/* ---- statements ---- */

static jj_node *body(parser *ps, const char *const *ends, const char **ended);

static void end_block(parser *ps)
{
    if (cur(ps)->kind != JT_BLOCK_END)
        syntax(ps, "expected the end of the tag");
    ps->pos++;
}

/* The end of a block's opening tag, its body, and its {% end... %} tag. */
static jj_node *block_body(parser *ps, const char *end)
{
    const char *const ends[] = {end, NULL};
    const char *ended;
    end_block(ps);
    jj_node *n = body(ps, ends, &ended);
    end_block(ps);
    return n;
}

/* Where a block's filters start from: the block's output, filled in later. */
static jj_node *hole(parser *ps)
{
    jj_node *n = node(ps, JN_LIT);
    n->lit = jv_undef(NULL);
    return n;
}

/* if ... elif ... else ... endif: each elif an if in the one before's
 * else, read in a loop (a chain of them nests no deeper in the parser). */
static jj_node *if_stmt(parser *ps)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL}, *const endif[] = {"endif", NULL};
    jj_node *first = NULL, **slot = &first;
    const char *ended;
    do {
        jj_node *n = *slot = node(ps, JN_IF);
        n->a = expression(ps);
        end_block(ps);
        n->b = body(ps, ends, &ended);
        slot = &n->c;
    } while (!strcmp(ended, "elif"));
    if (!strcmp(ended, "else")) {
        end_block(ps);
        *slot = body(ps, endif, &ended);
    }
    end_block(ps);
    return first;
}

static void targets(parser *ps, jj_node *n)
{
    int paren = accept_op(ps, "(");
    do
        add_kw(ps, n, expect_name(ps), NULL);
    while (accept_op(ps, ",") && !is_name(ps, "in") && !is_op(ps, "="));
    if (paren)
        expect_op(ps, ")");
}

static jj_node *for_stmt(parser *ps)
{
    static const char *const ends[] = {"else", "endfor", NULL}, *const endfor[] = {"endfor", NULL};
    jj_node *n = node(ps, JN_FOR);
    targets(ps, n);
    if (!accept_name(ps, "in"))
        syntax(ps, "expected 'in'");
    n->a = or_expr(ps);
    if (is_op(ps, ",")) {   /* for x in a, b */
        jj_node *t = node(ps, JN_TUPLE);
        add_arg(ps, t, n->a);
        while (accept_op(ps, ","))
            add_arg(ps, t, or_expr(ps));
        n->a = t;
    }
    if (accept_name(ps, "if"))
        n->d = or_expr(ps);
    if (accept_name(ps, "recursive"))
        syntax(ps, "recursive loops are not supported");
    end_block(ps);
    const char *ended;
    n->b = body(ps, ends, &ended);
    if (!strcmp(ended, "else")) {
        end_block(ps);
        n->c = body(ps, endfor, &ended);
    }
    end_block(ps);
    return n;
}

static jj_node *set_stmt(parser *ps)
{
    jj_node *n = node(ps, JN_SET);
    if (cur(ps)->kind == JT_NAME && ps->t[ps->pos + 1].kind == JT_OP && !strcmp(ps->t[ps->pos + 1].s, ".")) {
        (n->d = node(ps, JN_NAME))->name = expect_name(ps);   /* ns.attr = ... */
        ps->pos++;
        n->name = expect_name(ps);
    } else {
        targets(ps, n);
    }
    if (!accept_op(ps, "=")) {
        if (n->d || n->nkw != 1)
            syntax(ps, "expected '='");
        n->kind = JN_SET_BLOCK;
        n->name = n->kwnames[0];
        n->d = filters_and_tests(ps, hole(ps));   /* {% set x | f %}: the filters apply to the body */
        n->b = block_body(ps, "endset");
        return n;
    }
    n->a = tuple_or_expression(ps);
    end_block(ps);
    return n;
}

static jj_node *macro_stmt(parser *ps)
{
    jj_node *n = node(ps, JN_MACRO);
    n->name = expect_name(ps);
    expect_op(ps, "(");
    while (!accept_op(ps, ")")) {
        if (n->nkw)
            expect_op(ps, ",");
        const char *param = expect_name(ps);
        add_kw(ps, n, param, accept_op(ps, "=") ? expression(ps) : NULL);
    }
    n->b = block_body(ps, "endmacro");
    return n;
}

/* {% filter name(args) %}...{% endfilter %} */
static jj_node *filter_stmt(parser *ps)
{
    jj_node *n = node(ps, JN_FILTER_BLOCK);
    n->d = filters_and_tests(ps, filter(ps, hole(ps)));
    n->b = block_body(ps, "endfilter");
    return n;
}

/* A {% ... %} statement after its name; NULL for a body-ending name. */
static jj_node *statement(parser *ps, const char *name)
{
    if (!strcmp(name, "if"))
        return if_stmt(ps);
    if (!strcmp(name, "for"))
        return for_stmt(ps);
    if (!strcmp(name, "set"))
        return set_stmt(ps);
    if (!strcmp(name, "macro"))
        return macro_stmt(ps);
    if (!strcmp(name, "filter"))
        return filter_stmt(ps);
    if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        jj_node *n = node(ps, name[0] == 'b' ? JN_BREAK : JN_CONTINUE);
        end_block(ps);
        return n;
    }
    if (!strcmp(name, "generation"))   /* transformers' assistant-mask tag: its body renders as it is */
        return block_body(ps, "endgeneration");
    ps->pos--;
    syntax(ps, "unknown or misplaced tag");
}

/* Statements up to one of ends (NULL-terminated; none: the end of the
 * template), whose name is left in *ended with its tag's rest unread. */
static jj_node *body(parser *ps, const char *const *ends, const char **ended)
{
    jj_node *n = node(ps, JN_BODY);
    enter(ps);
    for (;;) {
        jj_tok *t = cur(ps);
        if (t->kind == JT_EOF) {
            if (ends)
                syntax(ps, "a block is not closed");
            break;
        }
        ps->pos++;
        if (t->kind == JT_TEXT) {
            jj_node *text = node(ps, JN_TEXT);
            text->lit = jv_strn(t->s, t->n);
            add_arg(ps, n, text);
        } else if (t->kind == JT_VAR_BEGIN) {
            jj_node *out = node(ps, JN_OUTPUT);
            out->a = tuple_or_expression(ps);
            if (cur(ps)->kind != JT_VAR_END)
                syntax(ps, "expected '}}'");
            ps->pos++;
            add_arg(ps, n, out);
        } else {
            const char *name = expect_name(ps);
            int k = 0;
            while (ends && ends[k] && strcmp(ends[k], name))
                k++;
            if (ends && ends[k]) {
                *ended = ends[k];
                break;
            }
            add_arg(ps, n, statement(ps, name));
        }
    }
    ps->depth--;
    return n;
}

/* ---- the tree's height ---- */

typedef struct {
    const jj_node *n;
    int height;
} walk_item;

typedef struct {
    walk_item *items;
    size_t n, cap;
} walk_stack;

static void walk_push(jj_pool *p, walk_stack *w, const jj_node *n, int height)
{
    if (!n)
        return;
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 256;
        w->items = jj_realloc(p, w->items, w->cap * sizeof(*w->items));
    }
    w->items[w->n++] = (walk_item){n, height};
}

/* The walks of the tree (uses(), the render) recurse once a level, and the
 * chains the parser builds in loops, not by recursion (x.y.y..., a ~ b ~ ...,
 * |f|f..., elif after elif), nest without bound: the height is checked here,
 * with a stack of its own. */
static void check_height(jj_pool *p, const jj_node *root)
{
    walk_stack w = {0};
    walk_push(p, &w, root, 1);
    while (w.n) {
        walk_item it = w.items[--w.n];
        const jj_node *n = it.n;
        if (it.height > JJ_MAX_HEIGHT)
            jj_fail(p, "chat template: line %d: the template nests deeper than %d levels (brackets, blocks, chains "
                       "of attributes, filters or operators)", n->line, JJ_MAX_HEIGHT);
        const jj_node *kids[] = {n->a, n->b, n->c, n->d};
        for (int i = 0; i < 4; i++)
            walk_push(p, &w, kids[i], it.height + 1);
        for (int i = 0; i < n->nargs; i++)
            walk_push(p, &w, n->args[i], it.height + 1);
        for (int i = 0; n->kwargs && i < n->nkw; i++)
            walk_push(p, &w, n->kwargs[i], it.height + 1);
    }
}

jj_node *jj_parse(jj_pool *p, const char *src)
{
    parser ps = {.p = p};
    int count;
    ps.t = jj_lex(p, src, &count);
    jj_node *root = body(&ps, NULL, NULL);
    check_height(p, root);
    return root;
}

/* Recursive: the parse bounded the tree's height. */
static int uses(const jj_node *n, const char *name)
{
    if (!n)
        return 0;
    if (n->kind == JN_NAME && !strcmp(n->name, name))
        return 1;
    if (uses(n->a, name) || uses(n->b, name) || uses(n->c, name) || uses(n->d, name))
        return 1;
    for (int i = 0; i < n->nargs; i++)
        if (uses(n->args[i], name))
            return 1;
    for (int i = 0; n->kwargs && i < n->nkw; i++)
        if (uses(n->kwargs[i], name))
            return 1;
    return 0;
}

int tram_jinja_uses(const tram_jinja *t, const char *name)
{
    return uses(t->body, name);
}
