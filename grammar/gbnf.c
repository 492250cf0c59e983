/* gbnf.c — the GBNF parser (see gbnf.h).  Each rule is built in a vector of
 * its own (a group or a repetition opens a helper rule while its parent is
 * still being read); tram_gbnf_parse then lays them end to end and checks
 * that every rule is defined and none is left-recursive. */
#include "grammar/gbnf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/utf8_ranges.h"
#include "kernels/utf8.h"

/* Limits that keep hostile text from exhausting memory or the stack
 * (and gbnf.h's on the text's size). */
#define MAX_NESTING 128
#define UNROLLED 128        /* counts up to this are expanded into rules */
#define MAX_RANGES 1024

typedef struct {
    tram_gelem *v;
    int n, cap;
} elemvec;

typedef struct {
    uint32_t lo, hi;
} cprange;

typedef struct {
    cprange *r;
    int n;
    int rule;
} interned_class;

/* A hash index over ids (rules by name, byte sets, classes), so that
 * looking one up costs the same however many there are. */
typedef struct {
    int32_t *slot;             /* id + 1, 0 empty */
    uint64_t *hash;            /* [id]: its key's hash */
    int cap, num_ids, cap_ids;
} id_index;

typedef struct {
    const char *p;
    tram_error *err;
    int failed, nesting, total_elems;
    int tail;                  /* the last iterations of a large bounded count expanded */
    char **names;
    elemvec *rules;
    uint8_t *defined, *synthetic;
    int num_rules, cap_rules;
    id_index names_ix, sets_ix, classes_ix;
    tram_byteset *sets;
    int num_sets, cap_sets;
    interned_class *classes;
    int num_classes, cap_classes;
    tram_grepeat *repeats;
    int num_repeats, cap_repeats;
    int32_t *repeated;         /* pairs (rule, term) of repetitions that may run twice */
    int num_repeated, cap_repeated;
} parser;

#define FAIL(ps, ...) ((ps)->failed ? -1 : ((ps)->failed = 1, tram_fail((ps)->err, __VA_ARGS__)))

static uint64_t hash_bytes(const void *p, size_t n)
{
    return tram_mix64(tram_fnv1a(p, n));
}

/* The slot of the first id with hash h that `same` finds equal, else the
 * first empty one (same NULL: the empty one). */
static int32_t *index_slot(const id_index *ix, uint64_t h, int (*same)(const parser *, int, const void *),
                           const parser *ps, const void *key)
{
    size_t m = (size_t)ix->cap - 1, i = (size_t)h & m;
    for (; ix->slot[i]; i = (i + 1) & m)
        if (same && ix->hash[ix->slot[i] - 1] == h && same(ps, ix->slot[i] - 1, key))
            break;
    return &ix->slot[i];
}

/* Records id with hash h. */
static int index_add(id_index *ix, int id, uint64_t h)
{
    if (tram_grow((void **)&ix->hash, &ix->cap_ids, id + 1, sizeof(uint64_t)))
        return -1;
    ix->hash[id] = h;
    if (2 * ++ix->num_ids > ix->cap) {
        int cap = ix->cap ? 2 * ix->cap : 256;
        int32_t *slot = calloc((size_t)cap, sizeof(int32_t));
        if (!slot)
            return -1;
        for (int k = 0; k < ix->cap; k++) {
            if (!ix->slot[k])
                continue;
            size_t i = (size_t)ix->hash[ix->slot[k] - 1] & (size_t)(cap - 1);
            while (slot[i])
                i = (i + 1) & (size_t)(cap - 1);
            slot[i] = ix->slot[k];
        }
        free(ix->slot);
        ix->slot = slot;
        ix->cap = cap;
    }
    *index_slot(ix, h, NULL, NULL, NULL) = id + 1;
    return 0;
}

static void index_free(id_index *ix)
{
    free(ix->slot);
    free(ix->hash);
}

static int push(parser *ps, int rule, tram_gkind kind, int32_t arg)
{
    elemvec *e = &ps->rules[rule];
    if (++ps->total_elems > TRAM_GBNF_MAX_ELEMS)
        return FAIL(ps, "grammar: more than %d elements (characters matched, references, "
                        "alternatives), the most tram compiles", TRAM_GBNF_MAX_ELEMS);
    if (tram_grow((void **)&e->v, &e->cap, e->n + 1, sizeof(*e->v)))
        return FAIL(ps, "grammar: out of memory");
    e->v[e->n++] = (tram_gelem){.kind = (uint8_t)kind, .arg = arg};
    return 0;
}

static int add_rule(parser *ps, const char *name, size_t len, int synthetic)
{
    if (ps->num_rules >= TRAM_GBNF_MAX_RULES)
        return FAIL(ps, "grammar: more than %d rules (helper rules of groups and repetitions "
                        "included), the most tram compiles", TRAM_GBNF_MAX_RULES);
    int n = ps->num_rules + 1, c1 = ps->cap_rules, c2 = c1, c3 = c1, c4 = c1;
    if (tram_grow((void **)&ps->names, &c1, n, sizeof(char *)) ||
        tram_grow((void **)&ps->rules, &c2, n, sizeof(elemvec)) ||
        tram_grow((void **)&ps->defined, &c3, n, 1) || tram_grow((void **)&ps->synthetic, &c4, n, 1))
        return FAIL(ps, "grammar: out of memory");
    ps->cap_rules = c1;
    int id = ps->num_rules;
    ps->names[id] = strndup(name, len);
    ps->rules[id] = (elemvec){0};
    ps->defined[id] = (uint8_t)synthetic;
    ps->synthetic[id] = (uint8_t)synthetic;
    if (!ps->names[id])
        return FAIL(ps, "grammar: out of memory");
    ps->num_rules = n;
    return id;
}

typedef struct {
    const char *s;
    size_t n;
} name_key;

static int same_name(const parser *ps, int id, const void *key)
{
    const name_key *k = key;
    return strlen(ps->names[id]) == k->n && !memcmp(ps->names[id], k->s, k->n);
}

/* The rule named name[0..len), added (not yet defined) when new. */
static int rule_id(parser *ps, const char *name, size_t len)
{
    name_key k = {name, len};
    uint64_t h = hash_bytes(name, len);
    if (ps->names_ix.cap) {
        int32_t *slot = index_slot(&ps->names_ix, h, same_name, ps, &k);
        if (*slot)
            return *slot - 1;
    }
    int id = add_rule(ps, name, len, 0);
    if (id >= 0 && index_add(&ps->names_ix, id, h))
        return FAIL(ps, "grammar: out of memory");
    return id;
}

/* A helper rule for a group or repetition inside `parent`: "parent_N". */
static int helper_rule(parser *ps, int parent)
{
    char name[300];
    int len = snprintf(name, sizeof(name), "%.200s_%d", ps->names[parent], ps->num_rules);
    return add_rule(ps, name, (size_t)len, 1);
}

static int same_set(const parser *ps, int id, const void *key)
{
    return !memcmp(&ps->sets[id], key, sizeof(tram_byteset));
}

static int intern_set(parser *ps, const tram_byteset *s)
{
    uint64_t h = hash_bytes(s, sizeof(*s));
    if (ps->sets_ix.cap) {
        int32_t *slot = index_slot(&ps->sets_ix, h, same_set, ps, s);
        if (*slot)
            return *slot - 1;
    }
    if (tram_grow((void **)&ps->sets, &ps->cap_sets, ps->num_sets + 1, sizeof(*s)) ||
        index_add(&ps->sets_ix, ps->num_sets, h))
        return FAIL(ps, "grammar: out of memory");
    ps->sets[ps->num_sets] = *s;
    return ps->num_sets++;
}

static int push_byte_range(parser *ps, int rule, unsigned lo, unsigned hi)
{
    tram_byteset s = {{0}};
    tram_byteset_add(&s, lo, hi);
    int id = intern_set(ps, &s);
    return id < 0 ? -1 : push(ps, rule, TRAM_G_BYTES, id);
}

/* ---------------------------------------------------------------- lexing */

static void skip_space(parser *ps, int newline_ok)
{
    for (;;) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r')))
            ps->p++;
        else if (c == '#')
            while (*ps->p && *ps->p != '\n' && *ps->p != '\r')
                ps->p++;
        else
            return;
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* A character of a literal or class: an escape or one UTF-8 character. */
static int64_t parse_char(parser *ps)
{
    if (*ps->p != '\\') {
        uint32_t cp;
        int n = tram_utf8_decode(ps->p, 4, &cp);  /* the NUL ends a short one */
        if (!n)
            return FAIL(ps, "grammar: invalid UTF-8");
        ps->p += n;
        return cp;
    }
    char c = ps->p[1];
    if (!c)
        return FAIL(ps, "grammar: a '\\' ends the text");
    ps->p += 2;
    static const char simple[] = "n\nr\rt\t\\\\\"\"[[]]--^^//''..";
    for (const char *s = simple; *s; s += 2)
        if (c == s[0])
            return (unsigned char)s[1];
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (!digits)
        return FAIL(ps, "grammar: unknown escape '\\%c'", c ? c : '0');
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++, ps->p++) {
        int h = tram_hex_digit(*ps->p);
        if (h < 0)
            return FAIL(ps, "grammar: '\\%c' needs %d hex digits", c, digits);
        cp = cp << 4 | (uint32_t)h;
    }
    if (cp > TRAM_MAX_CODEPOINT)
        return FAIL(ps, "grammar: code point %X is past U+10FFFF", cp);
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return FAIL(ps, "grammar: '\\%c%0*X' is a surrogate, not a character (UTF-8 text has none)", c,
                    digits, cp);
    return cp;
}

/* ---------------------------------------------------------------- terms */

static int parse_literal(parser *ps, int rule)
{
    ps->p++;
    while (*ps->p != '"') {
        if (!*ps->p)
            return FAIL(ps, "grammar: unterminated string literal");
        int64_t cp = parse_char(ps);
        if (cp < 0)
            return -1;
        uint8_t b[4];
        int n = tram_utf8_put((uint32_t)cp, (char *)b);
        for (int i = 0; i < n; i++)
            if (push_byte_range(ps, rule, b[i], b[i]))
                return -1;
    }
    ps->p++;
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges r[0..n); with negate, replaces it by its complement. */
static int normalize(cprange *r, int n, int negate)
{
    qsort(r, (size_t)n, sizeof(*r), cmp_range);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    if (!negate)
        return m;
    cprange out[MAX_RANGES + 1];
    int k = 0;
    uint32_t next = 0;
    for (int i = 0; i < m; i++) {
        if (r[i].lo > next)
            out[k++] = (cprange){next, r[i].lo - 1};
        next = r[i].hi + 1;
    }
    if (next <= TRAM_MAX_CODEPOINT)
        out[k++] = (cprange){next, TRAM_MAX_CODEPOINT};
    memcpy(r, out, (size_t)k * sizeof(*r));
    return k;
}

typedef struct {
    parser *ps;
    int rule, first;
} class_emit;

static int emit_sequence(void *ctx, const uint8_t *lo, const uint8_t *hi, int n)
{
    class_emit *c = ctx;
    if (!c->first && push(c->ps, c->rule, TRAM_G_ALT, 0))
        return -1;
    c->first = 0;
    for (int i = 0; i < n; i++)
        if (push_byte_range(c->ps, c->rule, lo[i], hi[i]))
            return -1;
    return 0;
}

/* A class beyond ASCII becomes a helper rule, one per distinct class: its
 * ASCII part as one alternative, then the UTF-8 sequences of the rest. */
static int same_class(const parser *ps, int id, const void *key)
{
    const interned_class *k = key;
    return ps->classes[id].n == k->n && !memcmp(ps->classes[id].r, k->r, (size_t)k->n * sizeof(*k->r));
}

static int class_rule(parser *ps, int parent, const cprange *r, int n)
{
    interned_class key = {.r = (cprange *)r, .n = n};
    uint64_t h = hash_bytes(r, (size_t)n * sizeof(*r));
    int32_t *slot = ps->classes_ix.cap ? index_slot(&ps->classes_ix, h, same_class, ps, &key) : NULL;
    if (slot && *slot)
        return ps->classes[*slot - 1].rule;
    int rule = helper_rule(ps, parent);
    if (rule < 0 || tram_grow((void **)&ps->classes, &ps->cap_classes, ps->num_classes + 1,
                         sizeof(*ps->classes)) || index_add(&ps->classes_ix, ps->num_classes, h))
        return FAIL(ps, "grammar: out of memory");
    interned_class *ic = &ps->classes[ps->num_classes++];
    *ic = (interned_class){.r = malloc((size_t)n * sizeof(*r)), .n = n, .rule = rule};
    if (!ic->r)
        return FAIL(ps, "grammar: out of memory");
    memcpy(ic->r, r, (size_t)n * sizeof(*r));
    class_emit c = {.ps = ps, .rule = rule, .first = 1};
    tram_byteset ascii = {{0}};
    int has_ascii = 0;
    for (int i = 0; i < n && r[i].lo < 0x80; i++, has_ascii = 1)
        tram_byteset_add(&ascii, r[i].lo, TRAM_MIN(r[i].hi, 0x7Fu));
    if (has_ascii) {
        int set = intern_set(ps, &ascii);
        if (set < 0 || push(ps, rule, TRAM_G_BYTES, set))
            return -1;
        c.first = 0;
    }
    for (int i = 0; i < n; i++)
        if (r[i].hi >= 0x80 && tram_utf8_split(TRAM_MAX(r[i].lo, 0x80u), r[i].hi, emit_sequence, &c))
            return -1;
    if (c.first && push_byte_range(ps, rule, 1, 0))   /* an empty class matches nothing */
        return -1;
    return push(ps, rule, TRAM_G_END, 0) ? -1 : rule;
}

static int push_class(parser *ps, int rule, cprange *r, int n)
{
    if (n > 0 && r[n - 1].hi < 0x80) {
        tram_byteset s = {{0}};
        for (int i = 0; i < n; i++)
            tram_byteset_add(&s, r[i].lo, r[i].hi);
        int set = intern_set(ps, &s);
        return set < 0 ? -1 : push(ps, rule, TRAM_G_BYTES, set);
    }
    int sub = class_rule(ps, rule, r, n);
    return sub < 0 ? -1 : push(ps, rule, TRAM_G_REF, sub);
}

static int parse_class(parser *ps, int rule)
{
    cprange r[MAX_RANGES + 1];
    int n = 0, negate = 0;
    ps->p++;
    if (*ps->p == '^') {
        negate = 1;
        ps->p++;
    }
    while (*ps->p != ']') {
        if (!*ps->p)
            return FAIL(ps, "grammar: unterminated character class");
        if (n == MAX_RANGES)
            return FAIL(ps, "grammar: more than %d ranges in one class", MAX_RANGES);
        int64_t lo = parse_char(ps), hi = lo;
        if (lo >= 0 && ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
            ps->p++;
            hi = parse_char(ps);
        }
        if (lo < 0 || hi < 0)
            return -1;
        if (hi < lo)
            return FAIL(ps, "grammar: class range %X-%X runs backwards", (unsigned)lo, (unsigned)hi);
        r[n++] = (cprange){(uint32_t)lo, (uint32_t)hi};
    }
    ps->p++;
    n = normalize(r, n, negate);
    return push_class(ps, rule, r, n);
}

static int parse_alternates(parser *ps, int rule, int nested);

static int parse_group(parser *ps, int rule)
{
    if (++ps->nesting > MAX_NESTING)
        return FAIL(ps, "grammar: groups nested more than %d deep", MAX_NESTING);
    int sub = helper_rule(ps, rule);
    ps->p++;
    skip_space(ps, 1);
    if (sub < 0 || parse_alternates(ps, sub, 1))
        return -1;
    if (*ps->p != ')')
        return FAIL(ps, "grammar: expected ')'");
    ps->p++;
    ps->nesting--;
    return push(ps, rule, TRAM_G_REF, sub);
}

/* ---------------------------------------------------------------- repetition */

/* The term elems[start..] of `rule` as a rule of its own: the rule it
 * already is when it is one reference, else a new helper rule. */
static int term_rule(parser *ps, int rule, int start)
{
    elemvec *e = &ps->rules[rule];
    if (e->n - start == 1 && e->v[start].kind == TRAM_G_REF)
        return e->v[start].arg;
    int sub = helper_rule(ps, rule);
    if (sub < 0)
        return -1;
    e = &ps->rules[rule];
    for (int i = start; i < e->n; i++)
        if (push(ps, sub, (tram_gkind)e->v[i].kind, e->v[i].arg))
            return -1;
    return push(ps, sub, TRAM_G_END, 0) ? -1 : sub;
}

/* Appends the alternatives "term tail" to `rule` (tail < 0: none), with no
 * terminator.  A helper term's own alternatives are copied in, each
 * followed by tail, and so on into a helper rule that makes up a whole
 * alternative: a repetition then stays in one rule, which keeps more
 * tokens decided by their position alone in the mask.  Any other term is
 * referenced. */
static int push_term_then(parser *ps, int rule, int term, int tail, int depth)
{
    if (!ps->synthetic[term] || depth > 8)
        return push(ps, rule, TRAM_G_REF, term) || (tail >= 0 && push(ps, rule, TRAM_G_REF, tail));
    for (int a = 0; a < ps->rules[term].n;) {
        int b = a;
        while (!tram_gelem_ends_alt(&ps->rules[term].v[b]))
            b++;
        tram_gelem first = ps->rules[term].v[a];
        if (a > 0 && push(ps, rule, TRAM_G_ALT, 0))
            return -1;
        if (b == a + 1 && first.kind == TRAM_G_REF && ps->synthetic[first.arg] && first.arg != term) {
            if (push_term_then(ps, rule, first.arg, tail, depth + 1))
                return -1;
        } else {
            for (int i = a; i < b; i++)
                if (push(ps, rule, (tram_gkind)ps->rules[term].v[i].kind, ps->rules[term].v[i].arg))
                    return -1;
            if (tail >= 0 && push(ps, rule, TRAM_G_REF, tail))
                return -1;
        }
        a = b + 1;
    }
    return 0;
}

/* star: term star | ε.  optional (tail = next optional or -1): term tail | ε.
 * required: term tail. */
static int repeat_rule(parser *ps, int parent, int term, int star, int tail, int required)
{
    int r = helper_rule(ps, parent);
    if (r < 0 || push_term_then(ps, r, term, star ? r : tail, 0) ||
        (!required && push(ps, r, TRAM_G_ALT, 0)) || push(ps, r, TRAM_G_END, 0))
        return -1;
    return r;
}

static int repeat(parser *ps, int rule, int start, int min, int max);

/* A large count: the term at elems[start..] of `rule` becomes one REPEAT
 * element over a body rule of its own (the term's alternatives inlined, as
 * in repeat_rule), and the matcher keeps the count on the stack (ir.h).
 *
 * Why a counter and not an expansion: unrolling x{0,100000} makes 100000
 * rules whose every byte position needs its own precomputed mask (a walk
 * of the whole vocabulary each), and an expansion into O(log n) rules is
 * ambiguous, so the matcher would carry many stacks at once.  With a
 * counter the grammar and its masks are the same size at any count, and
 * the stack set stays as small as for x*.  The masks of the body's
 * positions are computed for "any count" (x* semantics, token_mask.c),
 * which is exact while no token can run past the last iteration; so a
 * bounded count x{m,n} is the loop up to n - tail iterations and then, for
 * the last `tail`, x{max(0, m - (n - tail)), tail} expanded as usual.  A
 * token starts at most one iteration per byte after its first, so with a
 * tail as long as the longest token no token reaches the loop's end from
 * inside it; a shorter tail stays exact, with the tokens that can checked
 * at run time (token_mask.c). */
static int counted_repeat(parser *ps, int rule, int start, int term, int min, int max)
{
    int body = helper_rule(ps, rule);
    if (body < 0 || push_term_then(ps, body, term, -1, 0) || push(ps, body, TRAM_G_END, 0))
        return -1;
    tram_grepeat rep = {.body = body, .min = min, .max = max, .tail = -1};
    if (max >= 0) {
        rep.max = max - ps->tail;
        rep.min = TRAM_MIN(min, rep.max);
        rep.tail_max = ps->tail;
        if ((rep.tail = helper_rule(ps, rule)) < 0 || push(ps, rep.tail, TRAM_G_REF, term) ||
            repeat(ps, rep.tail, 0, TRAM_MAX(0, min - rep.max), ps->tail) || push(ps, rep.tail, TRAM_G_END, 0))
            return -1;
    }
    if (tram_grow((void **)&ps->repeats, &ps->cap_repeats, ps->num_repeats + 1, sizeof(*ps->repeats)))
        return FAIL(ps, "grammar: out of memory");
    ps->repeats[ps->num_repeats] = rep;
    elemvec *e = &ps->rules[rule];
    ps->total_elems -= e->n - start;
    e->n = start;
    return push(ps, rule, TRAM_G_REPEAT, ps->num_repeats++);
}

/* Replaces the term at elems[start..] of `rule` by min copies of it, then
 * (max - min) optional ones, or any number when max < 0.  A helper term
 * (a group, a class beyond ASCII) is inlined into a chain of rules, each
 * ending in a reference to the next; a short run of bytes is copied.
 * Large counts are counted instead (counted_repeat). */
static int repeat(parser *ps, int rule, int start, int min, int max)
{
    if (ps->rules[rule].n == start)
        return 0;  /* an empty literal repeated is still empty */
    int term = term_rule(ps, rule, start);
    if (term < 0)
        return -1;
    if (max < 0 || max > 1) {  /* checked once all rules are known (check_repeated) */
        if (tram_grow((void **)&ps->repeated, &ps->cap_repeated, 2 * ps->num_repeated + 2, sizeof(int32_t)))
            return FAIL(ps, "grammar: out of memory");
        ps->repeated[2 * ps->num_repeated] = rule;
        ps->repeated[2 * ps->num_repeated++ + 1] = term;
    }
    if (max >= 0 ? max > UNROLLED && max > ps->tail : min > UNROLLED)
        return counted_repeat(ps, rule, start, term, min, max);
    elemvec *e = &ps->rules[rule];
    int len = e->n - start;
    tram_gelem copy[64];
    int chain = ps->synthetic[term] && len == 1, flat = !chain && len <= (int)TRAM_ARRAY_LEN(copy);
    if (flat)
        memcpy(copy, e->v + start, (size_t)len * sizeof(*copy));
    ps->total_elems -= len;
    e->n = start;
    int tail = -1;
    if (max < 0 && (tail = repeat_rule(ps, rule, term, 1, -1, 0)) < 0)
        return -1;
    for (int i = min; i < max; i++)
        if ((tail = repeat_rule(ps, rule, term, 0, tail, 0)) < 0)
            return -1;
    for (int i = 0; chain && i < min; i++)
        if ((tail = repeat_rule(ps, rule, term, 0, tail, 1)) < 0)
            return -1;
    for (int i = 0; !chain && i < min; i++)
        for (int k = 0; k < (flat ? len : 1); k++)
            if (push(ps, rule, flat ? (tram_gkind)copy[k].kind : TRAM_G_REF, flat ? copy[k].arg : term))
                return -1;
    return tail >= 0 ? push(ps, rule, TRAM_G_REF, tail) : 0;
}

static int parse_count(parser *ps, int *out)
{
    if (*ps->p < '0' || *ps->p > '9')
        return 0;
    long v = 0;
    while (*ps->p >= '0' && *ps->p <= '9' && v <= TRAM_GBNF_MAX_REPEAT)
        v = v * 10 + (*ps->p++ - '0');
    if (v > TRAM_GBNF_MAX_REPEAT)
        return FAIL(ps, "grammar: repetition count over %d, the largest tram supports", TRAM_GBNF_MAX_REPEAT);
    *out = (int)v;
    return 1;
}

/* {m}, {m,}, {m,n}, {,n} */
static int parse_braces(parser *ps, int *min, int *max)
{
    ps->p++;
    skip_space(ps, 1);
    *min = 0;
    int has_min = parse_count(ps, min);
    if (has_min < 0)
        return -1;
    skip_space(ps, 1);
    *max = *min;
    if (*ps->p == ',') {
        ps->p++;
        skip_space(ps, 1);
        *max = -1;
        if (parse_count(ps, max) < 0)
            return -1;
        skip_space(ps, 1);
    } else if (!has_min) {
        return FAIL(ps, "grammar: '{' needs a count");
    }
    if (*ps->p != '}')
        return FAIL(ps, "grammar: expected '}' after a repetition count");
    ps->p++;
    if (*max >= 0 && *max < *min)
        return FAIL(ps, "grammar: repetition {%d,%d} has max below min", *min, *max);
    return 0;
}

static int parse_postfix(parser *ps, int rule, int start)
{
    char c = *ps->p;
    if (c == '*' || c == '+' || c == '?') {
        ps->p++;
        return repeat(ps, rule, start, c == '+', c == '?' ? 1 : -1);
    }
    int min, max;
    return parse_braces(ps, &min, &max) || repeat(ps, rule, start, min, max) ? -1 : 0;
}

/* ---------------------------------------------------------------- sequences, rules */

static int parse_term(parser *ps, int rule)
{
    char c = *ps->p;
    if (c == '"')
        return parse_literal(ps, rule);
    if (c == '[')
        return parse_class(ps, rule);
    if (c == '(')
        return parse_group(ps, rule);
    if (c == '.') {
        ps->p++;
        cprange any = {0, TRAM_MAX_CODEPOINT};
        return push_class(ps, rule, &any, 1);
    }
    if (is_name_char(c)) {
        const char *s = ps->p;
        while (is_name_char(*ps->p))
            ps->p++;
        int ref = rule_id(ps, s, (size_t)(ps->p - s));
        return ref < 0 ? -1 : push(ps, rule, TRAM_G_REF, ref);
    }
    return FAIL(ps, "grammar: unexpected '%c'", c);
}

static int parse_sequence(parser *ps, int rule, int nested)
{
    for (;;) {
        char c = *ps->p;
        if (!c || c == '|' || c == ')' || (!nested && (c == '\n' || c == '\r')))
            return 0;
        int start = ps->rules[rule].n;
        if (parse_term(ps, rule))
            return -1;
        skip_space(ps, nested);
        while (*ps->p == '*' || *ps->p == '+' || *ps->p == '?' || *ps->p == '{') {
            if (parse_postfix(ps, rule, start))
                return -1;
            skip_space(ps, nested);
        }
    }
}

static int parse_alternates(parser *ps, int rule, int nested)
{
    if (parse_sequence(ps, rule, nested))
        return -1;
    while (*ps->p == '|') {
        ps->p++;
        skip_space(ps, 1);
        if (push(ps, rule, TRAM_G_ALT, 0) || parse_sequence(ps, rule, nested))
            return -1;
    }
    return push(ps, rule, TRAM_G_END, 0);
}

static int parse_rule(parser *ps)
{
    const char *s = ps->p;
    while (is_name_char(*ps->p))
        ps->p++;
    if (ps->p == s)
        return FAIL(ps, "grammar: expected a rule name, got '%c'", *ps->p);
    int rule = rule_id(ps, s, (size_t)(ps->p - s));
    if (rule < 0)
        return -1;
    if (ps->defined[rule])
        return FAIL(ps, "grammar: rule '%s' is defined twice", ps->names[rule]);
    ps->defined[rule] = 1;
    skip_space(ps, 0);
    if (strncmp(ps->p, "::=", 3))
        return FAIL(ps, "grammar: expected '::=' after '%s'", ps->names[rule]);
    ps->p += 3;
    skip_space(ps, 1);
    if (parse_alternates(ps, rule, 0))
        return -1;
    skip_space(ps, 0);
    if (*ps->p && *ps->p != '\n' && *ps->p != '\r')
        return FAIL(ps, "grammar: unexpected '%c' after rule '%s'", *ps->p, ps->names[rule]);
    return 0;
}

/* ---------------------------------------------------------------- checks */

/* Linear: each alternative counts its elements not yet known to match
 * empty; a rule found nullable decrements the alternatives it occurs in,
 * and one that reaches zero makes its rule nullable in turn. */
uint8_t *tram_gbnf_nullable(const tram_gbnf *g)
{
    int n = g->num_rules;
    size_t ne = (size_t)g->num_elems + 1;
    uint8_t *nul = calloc((size_t)n + 1, 1);
    int32_t *alt_rule = malloc(ne * sizeof(int32_t)), *left = malloc(ne * sizeof(int32_t));
    int32_t *occ_start = calloc((size_t)n + 2, sizeof(int32_t)), *occ = malloc(ne * sizeof(int32_t));
    int32_t *queue = malloc(((size_t)n + 1) * sizeof(int32_t));
    int num_alts = 0, head = 0, tail = 0, ok = nul && alt_rule && left && occ_start && occ && queue;
    /* alternatives numbered in order; left[a]: its elements not known to be empty (BYTES: never) */
    for (int r = 0; ok && r < n; r++)
        for (const tram_gelem *e = g->elems + g->rule_start[r];; e++) {
            if (e == g->elems + g->rule_start[r] || tram_gelem_ends_alt(e - 1)) {
                alt_rule[num_alts] = r;
                left[num_alts++] = 0;
            }
            if (tram_gelem_ends_alt(e)) {
                if (e->kind == TRAM_G_END)
                    break;
            } else if (e->kind == TRAM_G_BYTES) {
                left[num_alts - 1] = INT32_MAX / 2;
            } else if (!(e->kind == TRAM_G_REPEAT && g->repeats[e->arg].min == 0)) {
                left[num_alts - 1]++;
                occ_start[tram_gelem_rule(g, e) + 2]++;
            }
        }
    for (int r = 0; ok && r < n; r++)
        occ_start[r + 2] += occ_start[r + 1];
    for (int r = 0, a = 0; ok && r < n; r++)
        for (const tram_gelem *e = g->elems + g->rule_start[r];; e++) {
            if (tram_gelem_ends_alt(e)) {
                a++;
                if (e->kind == TRAM_G_END)
                    break;
            } else if (e->kind != TRAM_G_BYTES && !(e->kind == TRAM_G_REPEAT && g->repeats[e->arg].min == 0)) {
                occ[occ_start[tram_gelem_rule(g, e) + 1]++] = a;
            }
        }
    for (int a = 0; ok && a < num_alts; a++)
        if (left[a] == 0 && !nul[alt_rule[a]]) {
            nul[alt_rule[a]] = 1;
            queue[tail++] = alt_rule[a];
        }
    while (ok && head < tail) {
        int x = queue[head++];
        for (int32_t k = occ_start[x]; k < occ_start[x + 1]; k++)
            if (--left[occ[k]] == 0 && !nul[alt_rule[occ[k]]]) {
                nul[alt_rule[occ[k]]] = 1;
                queue[tail++] = alt_rule[occ[k]];
            }
    }
    TRAM_FREE_ALL(alt_rule, left, occ_start, occ, queue);
    if (!ok) {
        free(nul);
        return NULL;
    }
    return nul;
}

/* Depth-first over "r can start with rule x" edges, on an explicit stack
 * (a chain of rules may be as long as the rule bound); a rule met again
 * while on the path is left-recursive.  colour: 0 new, 1 on the path, 2
 * done.  Frame d of the path is rule path[d] read up to at[d], open[d]
 * while nothing of the current alternative can have matched a character. */
typedef struct {
    int32_t *path, *at;
    uint8_t *open;
} dfs_path;

static int left_recursive(const tram_gbnf *g, const uint8_t *nul, uint8_t *colour, int root, dfs_path *p)
{
    int d = 0;
    colour[root] = 1;
    *p->path = root;
    *p->at = g->rule_start[root];
    *p->open = 1;
    while (d >= 0) {
        const tram_gelem *e = g->elems + p->at[d]++;
        int sub = p->open[d] && !tram_gelem_ends_alt(e) ? tram_gelem_rule(g, e) : -1;
        if (e->kind == TRAM_G_END) {
            colour[p->path[d--]] = 2;
            if (d >= 0)  /* the parent goes on after the reference it followed */
                p->open[d] = (uint8_t)tram_gelem_nullable(g, nul, g->elems + p->at[d] - 1);
        } else if (e->kind == TRAM_G_ALT) {
            p->open[d] = 1;
        } else if (sub < 0 || colour[sub] == 2) {
            p->open[d] = sub >= 0 && tram_gelem_nullable(g, nul, e);
        } else if (colour[sub] == 1) {
            return sub;
        } else {
            colour[sub] = 1;
            p->path[++d] = sub;
            p->at[d] = g->rule_start[sub];
            p->open[d] = 1;
        }
    }
    return -1;
}

/* A rule that repeats, more than once, something that can be empty, or -1.
 * Every way through the empty copies would be a stack to expand: 2^n of
 * them for (""|""){n}, so it is refused, as x* of such an x is. */
static int empty_repeated(const uint8_t *nul, const int32_t *repeated, int num_repeated)
{
    for (int i = 0; i < num_repeated; i++)
        if (nul[repeated[2 * i + 1]])
            return repeated[2 * i];
    return -1;
}

static int check_left_recursion(const tram_gbnf *g, const int32_t *repeated, int num_repeated, tram_error *err)
{
    size_t n = (size_t)g->num_rules + 1;
    uint8_t *nul = tram_gbnf_nullable(g), *colour = calloc(n, 1);
    dfs_path p = {malloc(n * sizeof(int32_t)), malloc(n * sizeof(int32_t)), malloc(n)};
    int bad = -1, empty = -1, oom = !nul || !colour || !p.path || !p.at || !p.open;
    for (int r = 0; !oom && r < g->num_rules && bad < 0; r++)
        if (!colour[r])
            bad = left_recursive(g, nul, colour, r, &p);
    if (!oom && bad < 0)
        empty = empty_repeated(nul, repeated, num_repeated);
    TRAM_FREE_ALL(nul, colour, p.path, p.at, p.open);
    if (oom)
        return tram_fail(err, "grammar: out of memory");
    if (bad >= 0)
        return tram_fail(err, "grammar: rule '%s' is left-recursive (it can reach itself before "
                              "matching a character, e.g. a repetition of something that can be empty)",
                         g->rule_names[bad]);
    if (empty >= 0)
        return tram_fail(err, "grammar: rule '%s' repeats something that can be empty (repeat what it "
                              "must match instead: x{0,n}, not (x?){n})", g->rule_names[empty]);
    return 0;
}

/* ---------------------------------------------------------------- assembly */

static int flatten(parser *ps, tram_gbnf *g)
{
    g->num_rules = ps->num_rules;
    g->rule_start = calloc((size_t)ps->num_rules + 1, sizeof(int32_t));
    g->elems = calloc((size_t)ps->total_elems + 1, sizeof(tram_gelem));
    if (!g->rule_start || !g->elems)
        return FAIL(ps, "grammar: out of memory");
    for (int r = 0; r < ps->num_rules; r++) {
        if (!ps->defined[r])
            return FAIL(ps, "grammar: rule '%s' is used but never defined", ps->names[r]);
        g->rule_start[r] = g->num_elems;
        memcpy(g->elems + g->num_elems, ps->rules[r].v, (size_t)ps->rules[r].n * sizeof(tram_gelem));
        g->num_elems += ps->rules[r].n;
    }
    return 0;
}

static void free_parser(parser *ps)
{
    for (int i = 0; i < ps->num_rules; i++)
        free(ps->rules[i].v);
    for (int i = 0; i < ps->num_classes; i++)
        free(ps->classes[i].r);
    TRAM_FREE_ALL(ps->rules, ps->defined, ps->synthetic, ps->classes);
    index_free(&ps->names_ix);
    index_free(&ps->sets_ix);
    index_free(&ps->classes_ix);
}

int tram_gbnf_parse(const char *text, const char *root, int tail, tram_gbnf *g, tram_error *err)
{
    *g = (tram_gbnf){.root = -1};
    parser ps = {.p = text, .err = err, .tail = TRAM_MAX(tail, 1)};
    if (strnlen(text, TRAM_GBNF_MAX_TEXT + 1) > TRAM_GBNF_MAX_TEXT)
        FAIL(&ps, "grammar: its text is over %d MiB, the most tram compiles", TRAM_GBNF_MAX_TEXT >> 20);
    skip_space(&ps, 1);
    while (*ps.p && !ps.failed) {
        parse_rule(&ps);
        skip_space(&ps, 1);
    }
    if (!ps.failed && ps.num_rules == 0)
        FAIL(&ps, "grammar: no rules");
    if (!ps.failed)
        flatten(&ps, g);
    g->rule_names = ps.names;
    g->sets = ps.sets;
    g->num_sets = ps.num_sets;
    g->repeats = ps.repeats;
    g->num_repeats = ps.num_repeats;
    if (!ps.failed) {
        g->num_rules = ps.num_rules;
        for (int r = 0; r < ps.num_rules && g->root < 0; r++)
            if (!ps.synthetic[r] && !strcmp(ps.names[r], root))
                g->root = r;
        if (g->root < 0)
            FAIL(&ps, "grammar: no rule named '%s' (the root)", root);
    }
    g->num_rules = ps.num_rules;
    free_parser(&ps);
    int bad = ps.failed || check_left_recursion(g, ps.repeated, ps.num_repeated, err) || tram_gbnf_factor(g, err);
    free(ps.repeated);
    if (bad) {
        tram_gbnf_free(g);
        return -1;
    }
    return 0;
}

void tram_gbnf_free(tram_gbnf *g)
{
    for (int i = 0; g->rule_names && i < g->num_rules; i++)
        free(g->rule_names[i]);
    TRAM_FREE_ALL(g->rule_names, g->elems, g->rule_start, g->sets, g->repeats);
    *g = (tram_gbnf){.root = -1};
}
