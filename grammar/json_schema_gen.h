/* json_schema_gen.h — the JSON Schema compiler's inside (grammar/json_schema*.c).
 *
 * A schema node is first normalized (json_schema_norm.c): its draft's
 * spellings become 2020-12's, annotations and unknown keywords are dropped,
 * allOf is merged, keywords beside $ref/anyOf/oneOf are merged into them.
 * Then gen() writes one GBNF rule for the node and returns its name; the
 * per-type writers (json_schema_number.c, _string.c, _object.c, _array.c)
 * write a rule's body.  A node no value satisfies yields JS_EMPTY and no
 * rule: the caller drops that alternative (an optional property, a type of
 * a list, an anyOf branch) or is empty itself. */
#ifndef TRAM_GRAMMAR_JSON_SCHEMA_GEN_H
#define TRAM_GRAMMAR_JSON_SCHEMA_GEN_H

#include <jansson.h>
#include <stdint.h>

#include "grammar/json_schema.h"
#include "kernels/strbuf.h"

#define JS_NAME_MAX 160
#define JS_PATH_MAX 512
#define JS_EMPTY 1 /* gen's result for a schema that no value satisfies */
#define JS_MAX_WORK 200000
/* The rules a document's patterns may take crossed with their lengths
 * (regex.h's pairs); past them a pattern keeps its plain rule and the
 * lengths are validated at the end. */
#define JS_PATTERN_PAIRS 2048

enum { JS_USE_WS = 1, JS_USE_STRING = 2, JS_USE_NUMBER = 4, JS_USE_INTEGER = 8, JS_USE_VALUE = 16 };

/* One JSON character of a string's content, in GBNF. */
#define JS_JSON_CHAR "( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )"

typedef struct {
    json_t *target; /* a node of the document */
    char name[JS_NAME_MAX];
    int state; /* -1 new, 0 being written, 2 written, JS_EMPTY none satisfies it */
    int used_while_written;
} js_ref_memo;

/* A rule body written, for sharing identical ones. */
typedef struct {
    char *text;
    uint64_t hash;
    char name[JS_NAME_MAX];
} js_body;

/* $id and $anchor of the document: where a non-pointer $ref lands. */
typedef struct {
    char *uri;
    json_t *node;
} js_anchor;

typedef struct jsc jsc;

struct jsc {
    /* the rule of a node: json_schema.c's, called through here so that the
     * writers below it need not call back up into it */
    int (*gen)(jsc *c, json_t *s, const char *path, char *name);
    tram_strbuf out;
    const char *prefix;
    json_t *doc;
    int draft; /* 4, 6, 7, 2019 or 2020 */
    int strict;
    int counter, depth, failed;
    long work; /* nodes normalized: the compile's budget, JS_MAX_WORK */
    int pattern_pairs; /* left of JS_PATTERN_PAIRS */
    unsigned used;
    js_ref_memo *refs;
    int num_refs, cap_refs;
    js_body *bodies; /* open addressing, cap_bodies a power of two */
    int num_bodies, cap_bodies;
    js_anchor *anchors;
    int num_anchors;
    int exact;
    char approximated[JS_PATH_MAX];
    char empty_why[JS_PATH_MAX];
    tram_error *err;
};

#define JS_FAIL(c, ...) ((c)->failed ? -1 : ((c)->failed = 1, tram_fail((c)->err, __VA_ARGS__)))

/* The rule of node s, named into name: 0, JS_EMPTY, or -1 on an error. */
static inline int js_gen(jsc *c, json_t *s, const char *path, char *name)
{
    return c->gen(c, s, path, name);
}

/* json_schema_util.c: rules and names. */
void js_shared(jsc *c, unsigned what, char *name, const char *suffix);
void js_new_name(jsc *c, char *name);
void js_sub_path(char *out, const char *path, const char *a, const char *b);
/* The schema at path has no instance: returns JS_EMPTY, the first reason kept. */
int js_empty(jsc *c, const char *path, const char *why);
/* The grammar accepts more than the schema at path (the end validation decides). */
void js_approximate(jsc *c, const char *keyword, const char *path);
int js_literal(jsc *c, tram_strbuf *b, json_t *v);
int js_in_list(const char *const *list, const char *k);

/* json_schema_merge.c: allOf of two normalized schemas (a new reference,
 * false when none satisfies both; NULL on an error). */
json_t *js_merge(jsc *c, json_t *a, json_t *b, const char *path);
/* {"allOf": [x, y]}, or the one that is not trivial (a new reference). */
json_t *js_all_of(json_t *x, json_t *y);
int js_enum_has(json_t *values, json_t *v);
/* "type" as bits: 1 null, 2 boolean, 4 object, 8 array, 16 string, 32
 * integer, 64 non-integer number; absent: all (127). */
unsigned js_type_bits(json_t *t);
json_t *js_type_of_bits(unsigned bits);

/* json_schema_norm.c */
json_t *js_normalize(jsc *c, json_t *s, const char *path);
/* The schema `$ref` value names, or NULL. */
json_t *js_resolve(jsc *c, const char *ref);
int js_index_anchors(jsc *c);
void js_free_anchors(jsc *c);
int js_read_draft(jsc *c);

/* A count keyword (minLength, maxItems, ...): 1 when present (*out set), 0
 * absent, -1 on an error naming it. */
int js_read_count(jsc *c, json_t *s, const char *key, const char *path, long long *out);

/* json_schema_chain.c: elements in order, each required or optional (or
 * absent: it cannot be written), min..max of them (max -1: no bound),
 * comma-separated between open and close: the body of the rule. */
typedef struct {
    const char *text; /* the element's GBNF */
    int required, absent;
} js_link;
int js_gen_chain(jsc *c, const js_link *e, int n, long long min, long long max, const char *base,
                 const char *open, const char *close, const char *path, tram_strbuf *b);

/* The per-type writers: the body of the rule `name` for schema s. */
int js_gen_integer(jsc *c, json_t *s, const char *path, tram_strbuf *b);
int js_gen_number(jsc *c, json_t *s, const char *path, tram_strbuf *b);
int js_gen_string(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b);
int js_gen_object(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b);
int js_gen_array(jsc *c, json_t *s, const char *path, const char *name, tram_strbuf *b);

#endif
