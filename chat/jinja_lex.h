/* jinja_lex.h — a template's source cut into tokens: text between tags, and
 * the tags' names, literals and operators, with jinja2's whitespace control
 * (trim_blocks, lstrip_blocks, `-` and `+` at a tag's edges) already applied
 * to the text.  Private to chat/jinja_*.c. */
#ifndef TRAM_JINJA_LEX_H
#define TRAM_JINJA_LEX_H

#include "chat/jinja_impl.h"

typedef enum {
    JT_TEXT, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END, JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP,
    JT_EOF,
} jj_tok_kind;

typedef struct {
    jj_tok_kind kind;
    int line;
    const char *s;   /* TEXT, NAME, STRING (unescaped), OP: NUL-terminated */
    size_t n;
    int64_t i;       /* INT */
    double f;        /* FLOAT */
} jj_tok;

/* The tokens of src, ending with JT_EOF. */
jj_tok *jj_lex(jj_pool *p, const char *src, int *count);

#endif
