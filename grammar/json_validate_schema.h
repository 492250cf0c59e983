/* json_validate_schema.h — the compiled form json_validate.c checks against,
 * built by json_validate_load.c: the parsed schema document, its draft, and
 * for every schema object reached from the root (through the keywords that
 * hold subschemas, or through a reference) what the check needs without
 * searching: its base URI's resource, the resolved target of its reference,
 * its compiled pattern.  Internal to the validator. */
#ifndef TRAM_GRAMMAR_JSON_VALIDATE_SCHEMA_H
#define TRAM_GRAMMAR_JSON_VALIDATE_SCHEMA_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdint.h>

#include "grammar/json_validate.h"

enum { JV_DRAFT4 = 4, JV_DRAFT6 = 6, JV_DRAFT7 = 7, JV_DRAFT2019 = 2019, JV_DRAFT2020 = 2020 };

/* An open-addressing table: pointer keys (str NULL, key the pointer) or
 * string keys (key their hash). */
typedef struct {
    uint64_t key;
    const char *str;
    void *val;
} jv_slot;

typedef struct {
    jv_slot *slots;
    size_t cap, n;
} jv_map;

void *jv_map_get_ptr(const jv_map *m, const void *p);
void *jv_map_get_str(const jv_map *m, const char *s);

/* What a reference resolves to.  kind: plain $ref, $recursiveRef, or
 * $dynamicRef; for the last, dyn_anchor is the anchor name when the static
 * target is a $dynamicAnchor (the scope is searched for it), else NULL. */
typedef struct {
    json_t *target;
    const char *dyn_anchor;
} jv_ref;

typedef struct jv_node {
    json_t *schema;
    char *base;            /* absolute URI of the enclosing resource */
    int is_resource;       /* has an $id (or is the root): enters the dynamic scope */
    int recursive_anchor;  /* 2019-09 "$recursiveAnchor": true */
    jv_ref ref, recursive_ref, dynamic_ref;
    pcre2_code *pattern;   /* "pattern" */
} jv_node;

struct tram_jv_schema {
    json_t *doc;
    int draft;
    int assert_formats;
    int uses_unevaluated;  /* annotations are collected only when some schema needs them */
    jv_map nodes;          /* json_t* → jv_node* */
    jv_map resources;      /* absolute URI → json_t* */
    jv_map anchors;        /* URI#name → json_t* */
    jv_map dyn_anchors;    /* URI#name → json_t*, $dynamicAnchor only */
    jv_map regexes;        /* pattern text → pcre2_code* (patternProperties) */
};

/* The compiled regex for a patternProperties key (compiled at load). */
static inline pcre2_code *jv_regex(const tram_jv_schema *s, const char *pattern)
{
    return jv_map_get_str(&s->regexes, pattern);
}

/* PCRE2 options read a JSON Schema pattern as close to ECMA-262 as PCRE2
 * goes: UTF, `$` at the very end only, \uXXXX escapes. */
#define JV_PCRE2_OPTIONS (PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX)

/* Whether s (n bytes) is valid for the format; *known 0 for formats that are
 * annotations only. */
int jv_format_ok(const char *format, const char *s, size_t n, int *known);

#endif
