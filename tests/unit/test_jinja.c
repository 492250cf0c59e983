/* The Jinja interpreter's own semantics, construct by construct: whitespace
 * control, expressions with Python's semantics and str()/repr() of values,
 * statements, tests, filters and methods, each expected string as jinja2
 * renders it in transformers' environment (checked with jinja2 when
 * written); then errors, limits against hostile templates, and a template
 * cut anywhere, which must parse or fail cleanly. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/test_tokenizer_util.h"
#include "chat/jinja.h"

static const char vars_json[] = "{\"msgs\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": null}], \"d\": {\"b\": 2, \"a\": 1}, \"s\": \"  H\\u00e9llo w\\u00f6rld  \", \"n\": null, \"t\": true, \"f\": 1.5, \"i\": 7, \"l\": [3, 1, 2]}";
static const struct { const char *tmpl, *want; } cases[] = {
    {"a {{- ' b ' -}} c",
     "a b c"},
    {"x\n  {% if true %}\ny\n  {% endif %}\nz",
     "x\ny\nz"},
    {"{# c #}a{#- c -#}  b",
     "ab"},
    {"{%+ if true %}k{% endif %}",
     "k"},
    {"  {{ 1 }}\n{% set q = 1 -%}\n  r",
     "  1\nr"},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }}",
     "3 -4 1 2 3.5 1024 7"},
    {"{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] + [2] }}",
     "a1NoneTrue ababab [1, 2]"},
    {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1 in [True] }} {{ 3 | round }} {{ 2.5 | round }} {{ 7 | round(2) }}",
     "True False True 3 2.0 7"},
    {"{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 2 in [1, 2] }} {{ 'x' not in 'abc' }} {{ 'b' in {'b': 1} }}",
     "True True True True True"},
    {"{{ 1 if false }}|{{ 1 if false else 2 }}|{{ none or 'z' }}|{{ 0 and 1 }}|{{ not 0 }}",
     "|2|z|0|True"},
    {"{{ s[2:5] }}|{{ s[::-1] }}|{{ l[-1] }}|{{ l[::2] }}|{{ s[-3:] }}|{{ l[5] }}",
     "Hél|  dlröw olléH  |2|[3, 2]|d  |"},
    {"{{ d.a }} {{ d['b'] }} {{ d.get('c', 9) }} {{ d.items() | list }} {{ d.keys() | list }}",
     "1 2 9 [('b', 2), ('a', 1)] ['b', 'a']"},
    {"{{ (1, 2) }} {{ (1,) }} {{ {'k': [1, 'v', none, true, 1.5]} }} {{ 'it''s' }} {{ \"q\\\"\" }}",
     "(1, 2) (1,) {'k': [1, 'v', None, True, 1.5]} its q\""},
    {"{{ d }}|{{ l }}|{{ n }}|{{ t }}|{{ f }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ msgs[1] }}|{{ \"it's\" | string }}|{{ ['a\"b', \"c'd\"] }}",
     "{'b': 2, 'a': 1}|[3, 1, 2]|None|True|1.5|1e+20|0.30000000000000004|{'role': 'assistant', 'content': None}|it's|['a\"b', \"c'd\"]"},
    {"{% for m in msgs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ m.role }};{% endfor %}",
     "01TrueFalse2user;12FalseTrue2assistant;"},
    {"{% for x in l %}{{ loop.previtem is defined }}{{ loop.nextitem | default('-') }}{% endfor %}",
     "False1True2True-"},
    {"{% for x in [] %}a{% else %}empty{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}",
     "emptyb=2,a=1,"},
    {"{% for x in l if x > 1 %}{{ x }}{{ loop.last }}{% endfor %}",
     "3False2True"},
    {"{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "3"},
    {"{% set ns = namespace(c=0) %}{% for x in l %}{% set ns.c = ns.c + x %}{% endfor %}{{ ns.c }}",
     "6"},
    {"{% set y = 1 %}{% for x in l %}{% set y = x %}{% endfor %}{{ y }}",
     "1"},
    {"{% set a, b = [1, 2] %}{{ b }}{{ a }}{% set blk %}in {{ a }}{% endset %}[{{ blk }}]",
     "21[in 1]"},
    {"{% macro m(x, y='d') %}<{{ x }}{{ y }}>{% endmacro %}{{ m(1) }}{{ m(2, y='e') }}{{ m(x=3) }}",
     "<1d><2e><3d>"},
    {"{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}",
     "321"},
    {"{% generation %}gen{% endgeneration %}|{% filter upper %}up{% endfilter %}",
     "gen|UP"},
    {"{% set x | upper | replace('A', 'b') %}a{{ 1 }}{% endset %}{{ x }}|{% filter trim | upper %}  q {% endfilter %}|{{ 'ÀÉ' | lower }}{{ 'αβ' | upper }}{{ 'hello wORLD 1st' | title }}",
     "b1|Q|àéΑΒHello World 1st"},
    {"{% if n is none %}A{% elif t %}B{% else %}C{% endif %}{% if i is integer and f is float and t is boolean %}D{% endif %}",
     "AD"},
    {"{{ x is defined }}{{ x is undefined }}{{ s is string }}{{ i is number }}{{ t is number }}{{ d is mapping }}{{ l is iterable }}{{ s is sequence }}{{ i is sequence }}{{ t is true }}{{ 3 is odd }}{{ 4 is divisibleby(2) }}{{ 'a' is eq 'a' }}{{ 1 is in [1] }}",
     "FalseTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrue"},
    {"{{ s | trim }}|{{ s | length }}|{{ l | join(',') }}|{{ l | first }}{{ l | last }}|{{ x | default('dv') }}|{{ '' | d('e', true) }}|{{ s | upper }}|{{ 'aBc' | lower }}|{{ 'hello world' | title }}|{{ 'hello' | capitalize }}",
     "Héllo wörld|15|3,1,2|32|dv|e|  HÉLLO WÖRLD  |abc|Hello World|Hello"},
    {"{{ 'a-b-c' | replace('-', '+') }}|{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é\\n' | tojson }}|{{ {'b': 1, 'a': [1.0, 1e-05]} | tojson(sort_keys=true) }}|{{ 'é' | tojson(ensure_ascii=true) }}",
     "a+b+c|{\"b\": 2, \"a\": 1}|{\n  \"b\": 2,\n  \"a\": 1\n}|\"é\\n\"|{\"a\": [1.0, 1e-05], \"b\": 1}|\"\\u00e9\""},
    {"{{ '42' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }}",
     "42 0 3 2.5 3 2.0 3.14 3.0"},
    {"{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | rejectattr('content') | map(attribute='role') | list }} {{ l | select('odd') | list }} {{ l | reject('odd') | list }} {{ l | map('string') | join }}",
     "1 ['assistant'] [3, 1] [2] 312"},
    {"{{ ['b', 'A', 'a', 'B'] | unique | list }} {{ ['b', 'A', 'c'] | sort }} {{ l | sort(reverse=true) }} {{ l | reverse | list }} {{ 'abc' | reverse }} {{ d | dictsort }} {{ d | items | list }} {{ 'ab' | list }}",
     "['b', 'A'] ['A', 'b', 'c'] [3, 2, 1] [2, 1, 3] cba [('a', 1), ('b', 2)] [('b', 2), ('a', 1)] ['a', 'b']"},
    {"{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ '<a & \"b\">' | escape }}|{{ '<x>' | safe }}|{{ l | sum }} {{ l | min }} {{ l | max }}|{{ '%s-%d' | format('a', 3) }}",
     "a\n  b\n\n  c|  a\n  b|&lt;a &amp; &#34;b&#34;&gt;|<x>|6 1 3|a-3"},
    {"{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'a.b.c'.rsplit('.', 1)[0] }}",
     "x|a|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|a.b"},
    {"{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('c') }}|{{ 'aXbX'.replace('X', '-') }} {{ 'aaa'.replace('a', 'b', 2) }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ '{}-{}'.format(1, 'x') }} {{ '{a}!'.format(a=2) }}|{{ ','.join(['a', 'b']) }}|{{ 'aXa'.count('a') }}",
     "TrueTrue|2 -1 5|a-b- bba|ABab|1-x 2!|a,b|2"},
    {"{{ (tools | default([])) | length }} {{ msgs[0].content.split('i')[0] }} {{ 'x'.title() }}",
     "0 H X"},
};
static const struct { const char *tmpl, *error; } errors[] = {
    {"{{ raise_exception('nope: ' ~ 1) }}", "nope: 1"},
    {"{{ x.y }}", "'x' is undefined"},
    {"{{ d.zz.y }}", "'dict object' has no attribute 'zz'"},
    {"{{ 1 + 'a' }}", "unsupported operand"},
    {"{{ 'a' + 1 }}", "can only concatenate str"},
    {"{{ 1 / 0 }}", "division by zero"},
    {"{{ l.append(4) }}", "unsafe"},
    {"{{ n | length }}", "has no len()"},
    {"{% for x in 5 %}{% endfor %}", "not iterable"},
    {"{{ l | map(attribute='x') | tojson }}", "not JSON serializable"},
    {"{{ l | nosuchfilter }}", "no filter named 'nosuchfilter'"},
    {"{% if %}", "line 1"},
    {"{% for x in l %}", "not closed"},
    {"{{ 'a' ", "unclosed"},
    {"{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", "deeper than"},
    {"{% for i in range(3000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "loop iterations"},
    {"{% set ns = namespace(x='ab') %}{% for i in range(40) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x }}", "MiB"},
    {"{{ [1] * 100000000 }}", "items"},
    {"{{ '' * 1000000000000 }}{{ 'ab' * 100000000 }}", "MiB"},
    {"{% set big = range(100000) | list %}{% for i in range(100000) %}{% if -1 in big %}{% endif %}{% endfor %}", "steps of work"},
    {"{{ range(100000) | unique | list | length }}", "steps of work"},
    {"{{ 99999999999999999999 // 1 }}{{ -(-9223372036854775807 - 1) }}{{ (-9223372036854775807 - 1) // -1 }}{{ x.y }}", "'x' is undefined"},
};

static int render(const char *tmpl, char **out, tram_error *err)
{
    json_t *vars = json_loads(vars_json, 0, NULL);
    cr_assert_not_null(vars);
    tram_jinja *t;
    int rc = tram_jinja_parse(&t, tmpl, err);
    if (!rc) {
        rc = tram_jinja_render(t, vars, 0, out, err);
        tram_jinja_free(t);
    }
    json_decref(vars);
    return rc;
}

Test(jinja, renders_like_jinja2)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL;
        tram_error err = {{0}};
        cr_assert_eq(render(cases[i].tmpl, &out, &err), 0, "%s: %s", cases[i].tmpl, err.msg);
        cr_assert_str_eq(out, cases[i].want, "%s", cases[i].tmpl);
        free(out);
    }
}

Test(jinja, errors_and_limits, .timeout = 30)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        char *out = NULL;
        tram_error err = {{0}};
        cr_assert_eq(render(errors[i].tmpl, &out, &err), -1, "%s should fail", errors[i].tmpl);
        cr_assert_null(out);
        cr_assert(strstr(err.msg, errors[i].error), "%s: '%s' lacks '%s'", errors[i].tmpl, err.msg, errors[i].error);
    }
}

/* Big inputs stay fast: sorting is O(n log n). */
Test(jinja, big_sort, .timeout = 10)
{
    char *out = NULL;
    tram_error err = {{0}};
    cr_assert_eq(render("{{ (range(200000) | reverse | sort)[199999] }} {{ (range(50000) | map('string') | sort)[1] }}",
                        &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out, "199999 1");
    free(out);
}

/* A value nested 100000 deep (built by a loop) compares, and printing or
 * dumping it is an error, not a stack overflow. */
Test(jinja, deep_values)
{
    const char *build = "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}";
    const char *uses[] = {"{{ ns.x == ns.x }}{{ ns.x | length }}", "{{ ns.x }}", "{{ ns.x | tojson }}"};
    for (int k = 0; k < 3; k++) {
        char src[512], *out = NULL;
        tram_error err = {{0}};
        snprintf(src, sizeof(src), "%s%s", build, uses[k]);
        int rc = render(src, &out, &err);
        if (k == 0) {
            cr_assert_eq(rc, 0, "%s", err.msg);
            cr_assert_str_eq(out, "True1");
        } else {
            cr_assert_eq(rc, -1, "%s", uses[k]);
            cr_assert(strstr(err.msg, "deeper than"), "%s", err.msg);
        }
        free(out);
    }
}

/* Deep nesting in the source is a parse error, not a stack overflow. */
Test(jinja, deep_nesting)
{
    char src[4200];
    size_t n = (size_t)snprintf(src, sizeof(src), "{{ ");
    for (int i = 0; i < 2000; i++)
        src[n++] = '(';
    src[n++] = '1';
    for (int i = 0; i < 2000; i++)
        src[n++] = ')';
    snprintf(src + n, sizeof(src) - n, " }}");
    tram_jinja *t = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_jinja_parse(&t, src, &err), -1);
    cr_assert(strstr(err.msg, "deeper than"), "%s", err.msg);
    cr_assert_null(t);
}

/* pre, then piece n times, then post: a hostile template of a few hundred KB. */
static char *repeated(const char *pre, const char *piece, int n, const char *post)
{
    size_t a = strlen(pre), b = strlen(piece), c = strlen(post);
    char *s = malloc(a + b * (size_t)n + c + 1), *q = s;
    cr_assert_not_null(s);
    memcpy(q, pre, a);
    q += a;
    for (int i = 0; i < n; i++, q += b)
        memcpy(q, piece, b);
    memcpy(q, post, c + 1);
    return s;
}

/* Chains the parser reads in loops, not by recursion, and nesting it reads
 * by recursion, 200,000 deep (the crash was `{{ x.y.y...` in uses()): each
 * is a parse error, never a stack overflow. */
Test(jinja, deep_chains_are_parse_errors, .timeout = 60)
{
    static const struct { const char *pre, *piece, *post, *close; } shapes[] = {
        {"{{ x", ".y", " }}", ""}, {"{{ x", "|upper", " }}", ""}, {"{{ 'a'", " ~ 'a'", " }}", ""}, {"{{ 1", " + 1", " }}", ""},
        {"{{ x", "[0]", " }}", ""}, {"{{ x", "()", " }}", ""}, {"{{ a", " and a", " }}", ""}, {"{{ a", " or a", " }}", ""},
        {"{{ x", " is defined", " }}", ""}, {"{{ 2", " ** 2", " }}", ""}, {"{{ ", "not ", "1 }}", ""}, {"{{ ", "-", "1 }}", ""},
        {"{{ ", "(", "1 }}", ")"}, {"{{ ", "[", "1 }}", "]"}, {"{{ ", "{1: ", "1 }}", "}"}, {"{{ ", "f(", "1 }}", ")"},
        {"{{ ", "1 if a else ", "1 }}", ""}, {"", "{% if x %}", "", "{% endif %}"},
        {"", "{% for a in b %}", "", "{% endfor %}"}, {"", "{% macro m() %}", "", "{% endmacro %}"},
        {"", "{% filter upper %}", "", "{% endfilter %}"}, {"", "{% set v %}", "", "{% endset %}"},
        {"{% if a %}", "{% elif a %}", "{% endif %}", ""},
    };
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        char *open = repeated(shapes[k].pre, shapes[k].piece, 200000, "");
        char *src = repeated(open, shapes[k].close, 200000, shapes[k].post);
        tram_jinja *t = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_jinja_parse(&t, src, &err), -1, "%s%s... parsed", shapes[k].pre, shapes[k].piece);
        cr_assert(strstr(err.msg, "deeper than"), "%s%s...: %s", shapes[k].pre, shapes[k].piece, err.msg);
        cr_assert_null(t);
        free(src);
        free(open);
    }
}

/* What parses but recurses when rendered (a macro calling itself, map()
 * naming map once per argument) is a render error; a chain of comparisons
 * nested 60 deep evaluates each operand once (a shared operand doubled the
 * work at each level: 2^60). */
Test(jinja, deep_renders_are_render_errors, .timeout = 60)
{
    char *shapes[] = {
        strdup("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
        strdup("{% macro f(n) %}{% for i in [1] %}{% if true %}{{ g(f(n)) | upper }}{% endif %}{% endfor %}{% endmacro %}"
               "{% macro g(x) %}{{ x }}{% endmacro %}{{ f(0) }}"),
        repeated("{{ ['a'] | map(", "'map', ", 200000, "'upper') | list }}"),
    };
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        char *out = NULL;
        tram_error err = {{0}};
        cr_assert_eq(render(shapes[k], &out, &err), -1, "%.60s rendered", shapes[k]);
        cr_assert(strstr(err.msg, "deeper than"), "%.60s: %s", shapes[k], err.msg);
        free(shapes[k]);
    }
    char *open = repeated("{{ 1 < ", "(1 < ", 60, "1"), *src = repeated(open, " < 2)", 60, " < 2 }}"), *out = NULL;
    tram_error err = {{0}};
    cr_assert_eq(render(src, &out, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out, "False");   /* as Python has it */
    free(out);
    free(src);
    free(open);
}

typedef struct {
    const char *src;
    char *out;
    int rc;
    tram_error err;
} small_stack_render;

static void *render_on(void *arg)
{
    small_stack_render *r = arg;
    r->rc = render(r->src, &r->out, &r->err);
    return NULL;
}

/* The caller's stack does not matter: a render 990 levels deep, and one
 * recursing to the limit, from a thread of 128 KiB (less than either needs). */
Test(jinja, renders_deep_from_a_small_stack, .timeout = 30)
{
    char *chain = repeated("{{ 'a'", " | upper", 990, " }}");
    small_stack_render runs[] = {{.src = chain}, {.src = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"}};
    for (int k = 0; k < 2; k++) {
        pthread_attr_t attr;
        pthread_t th;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 128 << 10);
        cr_assert_eq(pthread_create(&th, &attr, render_on, &runs[k]), 0);
        pthread_join(th, NULL);
        pthread_attr_destroy(&attr);
    }
    cr_assert_eq(runs[0].rc, 0, "%s", runs[0].err.msg);
    cr_assert_str_eq(runs[0].out, "A");
    cr_assert_eq(runs[1].rc, -1);
    cr_assert(strstr(runs[1].err.msg, "deeper than"), "%s", runs[1].err.msg);
    free(runs[0].out);
    free(chain);
}

/* A macro calling itself twice, building strings, reaches the 256 MiB cap
 * of a render: it ends in that error, and the resident memory of the
 * process (a child's, from getrusage) grew by less than the cap and the
 * render's stack: every allocation is counted at what malloc takes for it
 * (counting the bytes asked for alone, this peaked at 428 MB). */
Test(jinja, memory_cap_bounds_resident_memory, .timeout = 60)
{
    const char *fork_tmpl = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) ~ f(n - 1) }}{% endif %}xy{% endmacro %}{{ f(30) }}";
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct rusage before, after;
        char *out = NULL, line[sizeof(((tram_error *)0)->msg) + 64];
        tram_error err = {{0}};
        getrusage(RUSAGE_SELF, &before);
        int rc = render(fork_tmpl, &out, &err);
        getrusage(RUSAGE_SELF, &after);
        int n = snprintf(line, sizeof(line), "%d %ld %s", rc, after.ru_maxrss - before.ru_maxrss, err.msg);
        _exit(write(fds[1], line, (size_t)n) == n ? 0 : 1);
    }
    close(fds[1]);
    char got[400] = {0};
    cr_assert_gt(read(fds[0], got, sizeof(got) - 1), 0);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    int rc;
    long grown_kib;
    cr_assert_eq(sscanf(got, "%d %ld", &rc, &grown_kib), 2, "%s", got);
    cr_assert_eq(rc, -1, "%s", got);
    cr_assert(strstr(got, "more than 256 MiB of memory"), "%s", got);
#ifndef __SANITIZE_ADDRESS__   /* ASan's quarantine and shadow memory are more */
    cr_assert_lt(grown_kib, (256 + 8) << 10, "the render grew the process by %ld KiB", grown_kib);
#endif
}

/* Every cut of a real template parses, or fails with a message. */
Test(jinja, truncated_templates, .timeout = 30)
{
    json_t *lines = tok_load_jsonl(TOK_FIXTURES "jinja_templates.jsonl");
    const char *full = NULL;
    for (size_t i = 1; i < json_array_size(lines) && !full; i++)
        if (strstr(json_string_value(json_object_get(json_array_get(lines, i), "name")), "Llama-3.1"))
            full = json_string_value(json_object_get(json_array_get(lines, i), "template"));
    cr_assert_not_null(full);
    size_t len = strlen(full);
    char *cut = malloc(len + 1);
    int parsed = 0, failed = 0;
    for (size_t k = 0; k <= len; k += 3) {
        memcpy(cut, full, k);
        cut[k] = 0;
        tram_jinja *t = NULL;
        tram_error err = {{0}};
        if (tram_jinja_parse(&t, cut, &err) == 0) {
            parsed++;
            tram_jinja_free(t);
        } else {
            failed++;
            cr_assert(strstr(err.msg, "chat template: "), "cut at %zu: '%s'", k, err.msg);
        }
    }
    cr_assert_gt(parsed, 0);
    cr_assert_gt(failed, 0);
    free(cut);
    json_decref(lines);
}

Test(jinja, uses_variable)
{
    tram_jinja *t;
    cr_assert_eq(tram_jinja_parse(&t, "{% for m in messages %}{{ m.content if tools else m.role }}{% endfor %}", NULL), 0);
    cr_assert(tram_jinja_uses(t, "tools"));
    cr_assert(tram_jinja_uses(t, "messages"));
    cr_assert_not(tram_jinja_uses(t, "documents"));
    tram_jinja_free(t);
}
