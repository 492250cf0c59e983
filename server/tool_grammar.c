/* tool_grammar.c — see tool_grammar.h. */
#include "server/tool_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema.h"
#include "kernels/strbuf.h"

/* A GBNF string literal of s. */
static void put_literal(tram_strbuf *b, const char *s)
{
    tram_strbuf_add(b, "\"", 1);
    for (; *s; s++) {
        const char *esc = *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : NULL;
        if (esc)
            tram_strbuf_add(b, esc, 2);
        else
            tram_strbuf_add(b, s, 1);
    }
    tram_strbuf_add(b, "\"", 1);
}

/* The text around a call's arguments, in the template's syntax. */
static void call_rule(tram_strbuf *b, tram_tool_format f, const char *name, int k)
{
    char rule[32];
    snprintf(rule, sizeof(rule), "call%d ::= ", k);
    tram_strbuf_cat(b, rule, NULL);
    tram_strbuf head = {0};
    tram_strbuf_cat(&head, f == TRAM_TOOLS_LLAMA3 || f == TRAM_TOOLS_MISTRAL ? "" : "<tool_call>\n",
                  "{\"name\": \"", name, f == TRAM_TOOLS_LLAMA3 ? "\", \"parameters\": " : "\", \"arguments\": ",
                  NULL);
    put_literal(b, head.s ? head.s : "");
    free(head.s);
    snprintf(rule, sizeof(rule), " fn%d ", k);
    tram_strbuf_cat(b, rule, NULL);
    put_literal(b, f == TRAM_TOOLS_LLAMA3 || f == TRAM_TOOLS_MISTRAL ? "}" : "}\n</tool_call>");
    tram_strbuf_cat(b, "\n", NULL);
}

/* The function's parameters schema as JSON text (malloc'd): no parameters
 * is no arguments. */
static char *parameters_text(const json_t *fn)
{
    const json_t *params = json_object_get(fn, "parameters");
    return params ? json_dumps(params, JSON_COMPACT)
                  : strdup("{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}");
}

static int parameters_error(size_t i, const tram_error *err, tram_api_error *e)
{
    char param[64];
    snprintf(param, sizeof(param), "tools[%zu].function.parameters", i);
    return tram_api_fail(e, 400, param, "invalid_value", "Invalid '%s': %s", param,
                         err->msg[0] ? err->msg : "out of memory");
}

/* fnK's rules from the function's parameters schema. */
static int schema_rules(tram_strbuf *b, const json_t *fn, size_t i, int k, tram_api_error *e)
{
    char *schema = parameters_text(fn);
    char prefix[16], *gbnf = NULL;
    snprintf(prefix, sizeof(prefix), "fn%d", k);
    tram_error err = {{0}};
    /* a keyword the grammar approximates is fine: each call's arguments are
     * validated after generation (tram_tool_validators), as outputs are */
    tram_json_schema_opts opts = {0};
    tram_json_schema_result r = {0};
    int rc = schema ? tram_json_schema_compile(schema, prefix, &opts, &r, &err) : -1;
    gbnf = r.gbnf;
    free(schema);
    if (rc)
        return parameters_error(i, &err, e);
    tram_strbuf_cat(b, gbnf, "\n", NULL);
    free(gbnf);
    return 0;
}

/* root: one call, or calls joined as the template joins them. */
static void root_rule(tram_strbuf *b, tram_tool_format f, int many)
{
    const char *sep = f == TRAM_TOOLS_MISTRAL ? ", " : "\n";
    tram_strbuf_cat(b, "root ::= ", NULL);
    if (f == TRAM_TOOLS_MISTRAL)
        put_literal(b, "[TOOL_CALLS] [");
    tram_strbuf_cat(b, " call", NULL);
    if (many && f != TRAM_TOOLS_LLAMA3) {
        tram_strbuf_cat(b, " (", NULL);
        put_literal(b, sep);
        tram_strbuf_cat(b, " call)*", NULL);
    }
    if (f == TRAM_TOOLS_MISTRAL)
        put_literal(b, "]");
    tram_strbuf_cat(b, "\ncall ::=", NULL);
}

char *tram_tool_grammar_gbnf(tram_tool_format f, const tram_api_tools *t, tram_api_error *e)
{
    tram_strbuf b = {0}, calls = {0};
    root_rule(&b, f, t->parallel && t->choice != TRAM_TOOL_CHOICE_NAMED);
    int k = 0, rc = 0;
    for (size_t i = 0; !rc && i < json_array_size(t->tools); i++) {
        const json_t *fn = json_object_get(json_array_get(t->tools, i), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (t->choice == TRAM_TOOL_CHOICE_NAMED && strcmp(name, t->named))
            continue;
        char alt[24];
        snprintf(alt, sizeof(alt), "%s call%d", k ? " |" : "", k);
        tram_strbuf_cat(&b, alt, NULL);
        call_rule(&calls, f, name, k);
        rc = schema_rules(&calls, fn, i, k, e);
        k++;
    }
    tram_strbuf_cat(&b, "\n", calls.s ? calls.s : "", NULL);
    free(calls.s);
    if (!rc && (b.oom || calls.oom))
        rc = tram_api_out_of_memory(e);
    if (rc) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

const tram_grammar *tram_tool_grammar(tram_tool_format f, const tram_api_tools *t,
                                      const struct tram_tokenizer *tok, tram_api_error *e)
{
    char *gbnf = tram_tool_grammar_gbnf(f, t, e);
    if (!gbnf)
        return NULL;
    tram_error err = {{0}};
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
    free(gbnf);
    if (!g)
        tram_api_fail(e, 400, "tools", "invalid_value", "Invalid 'tools': %s", err.msg);
    return g;
}

int tram_tool_validators(const tram_api_tools *t, tram_jv_schema ***out, tram_api_error *e)
{
    size_t n = json_array_size(t->tools);
    tram_jv_schema **v = calloc(n ? n : 1, sizeof(*v));
    if (!v)
        return tram_api_out_of_memory(e);
    *out = v;
    for (size_t i = 0; i < n; i++) {
        char *schema = parameters_text(json_object_get(json_array_get(t->tools, i), "function"));
        tram_error err = {{0}};
        int rc = !schema || tram_jv_compile(schema, strlen(schema), &v[i], &err);
        free(schema);
        if (rc)
            return parameters_error(i, &err, e);
    }
    return 0;
}
