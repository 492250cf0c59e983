/* cmd_validate_schema.c — `tram validate-schema SCHEMA [INSTANCE...]`: the
 * JSON Schema validator that guards structured outputs
 * (grammar/json_validate.h), on files; and what the server would make of
 * the schema: whether tram compiles it into a grammar
 * (grammar/json_schema.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/text_file.h"
#include "grammar/json_schema.h"
#include "grammar/json_validate.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tram validate-schema [--jsonl] [--no-format] SCHEMA [INSTANCE...]\n\n"
                 "Validates each INSTANCE file (\"-\": standard input) against the JSON Schema in\n"
                 "SCHEMA, with the validator tram runs on every schema-constrained output, and\n"
                 "says whether tram compiles SCHEMA into a grammar for structured outputs.\n"
                 "One line per instance: valid, invalid (the instance path, the keyword, why),\n"
                 "or no verdict (not JSON, or past the validator's budget).\n\n"
                 "  --jsonl       each line of an INSTANCE file is one instance\n"
                 "  --no-format   \"format\" as an annotation (tram asserts it by default)\n\n"
                 "Exit status: 0 when the schema compiles for validation and every instance\n"
                 "is valid, 1 otherwise.\n");
}

static const char *draft_name(int draft)
{
    return draft == 4 ? "draft-04" : draft == 6 ? "draft-06" : draft == 7 ? "draft-07" : draft == 2019 ? "2019-09" : "2020-12";
}

/* The grammar side: compiles or not, and the reason. */
static void report_grammar(const char *schema)
{
    char *gbnf = NULL;
    tram_error err = {{0}};
    if (tram_json_schema_to_gbnf(schema, "root", &gbnf, &err))
        printf("grammar: refused: %s\n", err.msg);
    else
        printf("grammar: compiles (%zu bytes of GBNF)\n", strlen(gbnf));
    free(gbnf);
}

/* One instance: prints its line; returns 1 unless it is valid. */
static int check_one(const tram_jv_schema *s, const char *name, long line, const char *text, size_t len)
{
    tram_jv_failure f;
    int r = tram_jv_check(s, text, len, &f);
    if (line > 0)
        printf("%s:%ld: ", name, line);
    else
        printf("%s: ", name);
    if (r == 0)
        printf("valid\n");
    else
        printf("%s %s\n", r > 0 ? "invalid" : "no verdict:", f.message);
    return r != 0;
}

static int read_input(const char *path, char **text, size_t *len, tram_error *err)
{
    if (strcmp(path, "-"))
        return tram_read_text_file(path, text, len, err);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, stdin)) > 0;) {
        n += got;
        char *grown = n + 1 >= cap ? realloc(buf, cap *= 2) : buf;
        if (!grown)
            free(buf);
        buf = grown;
    }
    if (!buf)
        return tram_fail(err, "standard input: out of memory");
    buf[n] = 0;
    *text = buf, *len = n;
    return 0;
}

static int check_file(const tram_jv_schema *s, const char *path, int jsonl)
{
    char *text;
    size_t len;
    tram_error err = {{0}};
    if (read_input(path, &text, &len, &err)) {
        fprintf(stderr, "validate-schema: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    if (!jsonl)
        bad = check_one(s, path, 0, text, len);
    long line = 0;
    for (char *p = text; jsonl && p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        size_t n = end ? (size_t)(end - p) : (size_t)(text + len - p);
        line++;
        if (n > 0)
            bad |= check_one(s, path, line, p, n);
        p += n + 1;
    }
    free(text);
    return bad;
}

typedef struct {
    int jsonl, no_format;
} validate_opts;

static const tram_flag validate_flags[] = {
    {.name = "--jsonl", .kind = TRAM_FLAG_SET, .field = offsetof(validate_opts, jsonl)},
    {.name = "--no-format", .kind = TRAM_FLAG_SET, .field = offsetof(validate_opts, no_format)},
};

#define MAX_FILES 256

static int validate_schema(int argc, char **argv)
{
    validate_opts o = {0};
    const char *files[MAX_FILES + 1];
    const tram_flag_table table = TRAM_FLAG_TABLE(validate_flags, &o);
    int n = tram_flags_parse(&table, 1, argc, argv, files, MAX_FILES + 1);
    if (n < 1) {
        if (n == 0)
            fprintf(stderr, "validate-schema: a SCHEMA file is required\n");
        return TRAM_EXIT_USAGE;
    }
    char *schema;
    size_t len;
    tram_error err = {{0}};
    tram_jv_schema *s = NULL;
    if (tram_read_text_file(files[0], &schema, &len, &err))
        return tram_exit_status("validate-schema", 1, &err);
    int failed = tram_jv_compile(schema, len, &s, &err);
    if (failed)
        printf("validator: refused: %s\n", err.msg);
    else
        printf("validator: compiles (%s)\n", draft_name(tram_jv_draft(s)));
    report_grammar(schema);
    free(schema);
    if (s)
        tram_jv_set_format_assertion(s, !o.no_format);
    for (int i = 1; s && i < n; i++)
        failed |= check_file(s, files[i], o.jsonl);
    tram_jv_free(s);
    return failed ? 1 : 0;
}

const tram_command tram_cmd_validate_schema = {.name = "validate-schema",
                                               .summary = "validate JSON files against a JSON Schema",
                                               .run = validate_schema,
                                               .usage = usage};
