/* jinja_impl.h — what the Jinja interpreter's modules share: the memory
 * pool (every allocation of a parse or a render, freed at once; a failure
 * longjmps out of the pool's user), values, and the syntax tree.  Private to
 * chat/jinja_*.c. */
#ifndef TRAM_JINJA_IMPL_H
#define TRAM_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "kernels/list.h"
#include "chat/jinja.h"

/* ---- the stack: every recursive walk is bounded ----
 * Parses and renders run on a thread of their own (jj_run_sized) whose stack
 * is JJ_STACK_BYTES, whatever the caller's thread has (a main thread under
 * `ulimit -s 2048`, a server worker).  The depth limit is derived from it: a
 * level of evaluation (eval, exec, a macro call, a filter calling a filter:
 * each jj_enter) takes at most JJ_LEVEL_BYTES of stack (measured: 1.4 KiB at
 * -O2, 6.1 KiB under ASan), and JJ_RESERVE_BYTES is left on top for a value
 * walk (printing, tojson, comparing, reading JSON: JJ_VALUE_DEPTH levels of
 * small frames) or the parser (its brackets and blocks are bounded apart,
 * MAX_NESTING in jinja_parse.c).  The syntax tree's height is bounded after
 * the parse, so the walks of the tree are too. */
#define JJ_STACK_BYTES (24u << 20)
#define JJ_RESERVE_BYTES (8u << 20)
#define JJ_LEVEL_BYTES (8u << 10)
#define JJ_MAX_DEPTH ((int)((JJ_STACK_BYTES - JJ_RESERVE_BYTES) / JJ_LEVEL_BYTES))   /* 2048 */
#define JJ_VALUE_DEPTH 2048
#define JJ_MAX_HEIGHT 1000   /* of the syntax tree: a real template's is under 50 */

/* Runs fn(arg) on a thread with a stack of JJ_STACK_BYTES and waits for it. */
int jj_run_sized(void (*fn)(void *), void *arg, tram_error *err);

/* ---- the pool: each block on one list, all freed together ---- */
typedef struct jj_block jj_block;
typedef struct {
    TRAM_LIST_OF(jj_block) blocks;
    size_t total, limit;   /* bytes held (malloc's own overhead counted), and the most allowed */
    size_t work, work_limit;   /* units of work done (bytes written, items visited), and the most allowed (0: any) */
    int depth;             /* levels of recursion now (jj_enter) */
    jmp_buf *on_error;     /* where jj_fail jumps */
    tram_error *err;
} jj_pool;

void *jj_alloc(jj_pool *p, size_t n);   /* zeroed */
void *jj_realloc(jj_pool *p, void *old, size_t n);
void jj_pool_free(jj_pool *p);
_Noreturn void jj_fail(jj_pool *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *jj_strndup(jj_pool *p, const char *s, size_t n);
/* Counts units of work (a byte written, an item visited): a render that
 * would run for too long, each step cheap but too many, ends in an error. */
void jj_work(jj_pool *p, size_t units);
/* One level of recursion deeper (an error past JJ_MAX_DEPTH), and back. */
void jj_enter(jj_pool *p, int line);
static inline void jj_leave(jj_pool *p) { p->depth--; }

/* ---- values ---- */
typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_TUPLE, JV_DICT,
    JV_GEN,      /* what jinja2's map, select, unique, reverse, ... give: iterable once, no len(), no JSON */
    JV_NS,       /* namespace(): a dict whose attributes `set` may change */
    JV_MACRO, JV_BUILTIN, JV_METHOD,
    JV_LOOP,     /* a for loop's `loop`: its attributes are computed when read */
} jv_type;

typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_node jj_node;
typedef struct jj_loop jj_loop;

typedef struct jv {
    jv_type t;
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *s; size_t n; } str;   /* also JV_METHOD's name, JV_BUILTIN's */
        jj_list *list;                            /* JV_LIST, JV_TUPLE, JV_GEN */
        jj_dict *dict;                            /* JV_DICT, JV_NS */
        struct { const jj_node *node; void *scope; } macro;   /* JV_MACRO: its definition and where */
        const char *undef;                        /* JV_UNDEF: why (for the error), or NULL */
        const jj_loop *loop;                      /* JV_LOOP */
    };
    const struct jv *self;                        /* JV_METHOD: the value it is bound to */
    int markup;   /* JV_STR: markupsafe's Markup (|safe, |escape): what is added to it gets HTML-escaped */
} jv;

struct jj_list { jv *v; size_t n, cap; };
struct jj_dict { jv *keys, *vals; size_t n, cap; };
struct jj_loop { jv items; size_t i; };   /* items: a list; i: the current one */

typedef struct { char *s; size_t n, cap; } jj_buf;   /* a string being built, in the pool */
void jj_buf_add(jj_pool *p, jj_buf *b, const char *s, size_t n);
void jj_buf_str(jj_pool *p, jj_buf *b, const char *s);
jv jj_buf_value(jj_buf *b);
/* The buffer's string as a plain malloc'd one, taken out of the pool (no copy). */
char *jj_buf_detach(jj_pool *p, jj_buf *b);

static inline jv jv_none(void) { return (jv){.t = JV_NONE}; }
static inline jv jv_undef(const char *why) { return (jv){.t = JV_UNDEF, .undef = why}; }
static inline jv jv_bool(int b) { return (jv){.t = JV_BOOL, .b = !!b}; }
static inline jv jv_int(int64_t i) { return (jv){.t = JV_INT, .i = i}; }
static inline jv jv_float(double f) { return (jv){.t = JV_FLOAT, .f = f}; }
static inline jv jv_strn(const char *s, size_t n) { return (jv){.t = JV_STR, .str = {s, n}}; }
jv jv_str(const char *s);
jv jv_list(jj_pool *p, jv_type t);
void jv_push(jj_pool *p, jv list, jv item);
jv jv_dict(jj_pool *p, jv_type t);
void jv_set(jj_pool *p, jv dict, jv key, jv val);
/* The value at key, or NULL. */
jv *jv_get(jv dict, jv key);
jv *jv_get_str(jv dict, const char *key);

int jv_truthy(jv v);
int jv_equal(jv a, jv b);
int jv_is_number(jv v);          /* int, float or bool, as Python's numbers */
double jv_num(jv v);
/* The integer of an int or a bool. */
int64_t jv_int_of(jv v);
/* int(f) of a float: the value, or (NaN, infinite, past int64) otherwise. */
jv jv_float_to_int(double f, jv otherwise);
const char *jv_type_name(jv v);  /* Python's type name: 'str', 'dict', ... */
/* Python's str() and repr(), appended. */
void jv_put_str(jj_pool *p, jj_buf *b, jv v);
void jv_put_repr(jj_pool *p, jj_buf *b, jv v);
jv jv_to_str(jj_pool *p, jv v);
/* json.dumps(v, ensure_ascii, indent=indent (< 0: None), sort_keys). */
jv jv_tojson(jj_pool *p, jv v, int indent, int sort_keys, int ensure_ascii);
/* markupsafe's escape(): & < > " ' as HTML entities, a Markup string. */
jv jv_escape(jj_pool *p, jv v);
jv jv_from_json(jj_pool *p, const json_t *j);
/* Python's len() of a string: its characters. */
size_t jj_utf8_len(const char *s, size_t n);
/* The byte offset of character i of s (i <= the length). */
size_t jj_utf8_offset(const char *s, size_t n, size_t i);

/* ---- the syntax tree ---- */
typedef enum {
    /* expressions */
    JN_LIT, JN_NAME, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_BINOP, JN_NEG, JN_POS, JN_NOT,
    JN_COMPARE, JN_AND, JN_OR, JN_COND, JN_LIST, JN_TUPLE, JN_DICT,
    /* statements */
    JN_BODY, JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_CALL_BLOCK, JN_BREAK,
    JN_CONTINUE, JN_FILTER_BLOCK,
} jn_kind;

/* Binary operators, as the parser hands them over. */
typedef enum {
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOT_IN,
} jj_op;

/* One node; which fields a kind uses is written beside each. */
struct jj_node {
    jn_kind kind;
    int line;
    jj_op op;                 /* BINOP */
    jj_op *ops;               /* COMPARE: the nargs - 1 operators between its operands (a < b <= c) */
    int negated;              /* TEST: `is not` */
    const char *name;         /* NAME, ATTR, FILTER, TEST, MACRO, SET_BLOCK; SET: ns.name's attribute */
    jv lit;                   /* LIT, TEXT (a string) */
    jj_node *a, *b, *c;       /* operands; IF: cond, then, else; FOR: iter, body, else; SLICE: obj, start, stop */
    jj_node *d;               /* SLICE: step; FOR: the `if` filter; SET: the namespace (ns.x = ...) */
    jj_node **args;           /* CALL/FILTER/TEST positional args, LIST/TUPLE items, DICT keys, BODY items */
    int nargs;
    const char **kwnames;     /* CALL/FILTER keyword names; MACRO parameters; FOR/SET targets */
    jj_node **kwargs;         /* their values; MACRO parameter defaults (NULL: none); DICT values */
    int nkw;
};

struct tram_jinja {
    jj_pool pool;
    jj_node *body;
    const char *src;
};

/* jinja_lex.c + jinja_parse.c */
jj_node *jj_parse(jj_pool *p, const char *src);

/* A call's evaluated arguments. */
typedef struct {
    jv *args;
    int nargs;
    const char **kwnames;
    jv *kwargs;
    int nkw;
} jj_args;
/* The keyword argument `name`, else positional argument `pos`, else NULL. */
const jv *jj_arg(const jj_args *a, int pos, const char *name);
/* A render error at a template line. */
_Noreturn void jj_fail_at(jj_pool *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The items a for loop walks: a list's, a dict's keys, a string's characters
 * (Undefined: none). */
jv jj_iterable(jj_pool *p, jv v, int line);
/* Python's `needle in hay`. */
int jj_contains(jj_pool *p, jv hay, jv needle, int line);

/* jinja_filters.c */
/* Calls filter `name` on v, or returns 0 when there is none of that name. */
int jj_filter(jj_pool *p, const char *name, jv v, const jj_args *a, int line, jv *out);
/* Test `name` of v; -1 when there is none of that name. */
int jj_test(jj_pool *p, const char *name, jv v, const jj_args *a, int line);

/* jinja_methods.c */
/* Method `name` of self, called. */
jv jj_method(jj_pool *p, jv self, const char *name, const jj_args *a, int line);
/* Whether v has a method `name` (str.strip, dict.items, ...). */
int jj_has_method(jv v, const char *name);
/* str.upper, lower, title and capitalize (how: the method's name). */
jv jj_str_case(jj_pool *p, jv v, const char *how);
/* str.replace(old, new, count); count < 0: all. */
jv jj_str_replace(jj_pool *p, jv v, jv old, jv new_, int64_t count);

#endif
