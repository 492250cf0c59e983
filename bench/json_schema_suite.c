/* json_schema_suite.c — the official JSON-Schema-Test-Suite run through
 * grammar/json_validate.c, as a pass rate per draft.  The suite is not part
 * of the project: point this at a checkout of it (make json-schema-suite
 * SUITE=dir, where dir holds tests/draft4 ... tests/draft2020-12).
 *
 * A test passes when the validator's verdict is the suite's.  Its schema may
 * be refused at compile (a reference to another document, draft 3): such
 * tests count as refused, not passed.  The required tests run with `format`
 * as an annotation (2019-09 and 2020-12 say so; the older drafts' required
 * tests do not depend on it); optional/format runs with it asserted, which
 * is how tram serves a schema.  Prints one line per draft and part, and with
 * -v every failure. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_validate.h"

typedef struct {
    int pass, fail, refused;
} tally;

static int verbose;

static const char *draft_uri(const char *draft)
{
    static const struct {
        const char *dir, *uri;
    } uris[] = {
        {"draft4", "http://json-schema.org/draft-04/schema#"},
        {"draft6", "http://json-schema.org/draft-06/schema#"},
        {"draft7", "http://json-schema.org/draft-07/schema#"},
        {"draft2019-09", "https://json-schema.org/draft/2019-09/schema"},
        {"draft2020-12", "https://json-schema.org/draft/2020-12/schema"},
    };
    for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++)
        if (!strcmp(draft, uris[i].dir))
            return uris[i].uri;
    return NULL;
}

/* The group's schema as text, with the draft's $schema when it names none. */
static char *schema_text(json_t *schema, const char *draft)
{
    if (json_is_object(schema) && !json_object_get(schema, "$schema")) {
        json_t *copy = json_deep_copy(schema);
        json_object_set_new(copy, "$schema", json_string(draft_uri(draft)));
        char *text = json_dumps(copy, JSON_ENCODE_ANY);
        json_decref(copy);
        return text;
    }
    return json_dumps(schema, JSON_ENCODE_ANY);
}

static void run_group(json_t *group, const char *draft, const char *file, int formats, tally *t)
{
    json_t *tests = json_object_get(group, "tests");
    char *text = schema_text(json_object_get(group, "schema"), draft);
    tram_jv_schema *s = NULL;
    tram_error err = {{0}};
    if (tram_jv_compile(text, strlen(text), &s, &err)) {
        t->refused += (int)json_array_size(tests);
        if (verbose)
            printf("REFUSED %s: %s: %s\n", file, json_string_value(json_object_get(group, "description")), err.msg);
        free(text);
        return;
    }
    tram_jv_set_format_assertion(s, formats);
    size_t i;
    json_t *test;
    json_array_foreach(tests, i, test)
    {
        char *data = json_dumps(json_object_get(test, "data"), JSON_ENCODE_ANY);
        tram_jv_failure f;
        int r = tram_jv_check(s, data, strlen(data), &f);
        int want_valid = json_is_true(json_object_get(test, "valid"));
        if ((r == 0) == want_valid && r >= 0)
            t->pass++;
        else {
            t->fail++;
            if (verbose)
                printf("FAIL %s: %s / %s: got %s %s\n", file, json_string_value(json_object_get(group, "description")),
                       json_string_value(json_object_get(test, "description")), r == 0 ? "valid" : r == 1 ? "invalid" : "no verdict",
                       r ? f.message : "");
        }
        free(data);
    }
    tram_jv_free(s);
    free(text);
}

/* optional/format/X.json for a format the validator asserts (the others,
 * idn-email, iri, uri-template, ..., are annotations in tram). */
static int asserted_format(const char *file)
{
    static const char *names[] = {"date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6",
                                  "uuid", "uri", "uri-reference", "json-pointer", "regex", "ecmascript-regex"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(file) == strlen(names[i]) + 5 && !strncmp(file, names[i], strlen(names[i])))
            return 1;
    return 0;
}

static void run_dir(const char *dir, const char *draft, int formats, tally *t)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") || (formats && !asserted_format(e->d_name)))
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        json_error_t je;
        json_t *groups = json_load_file(path, 0, &je);
        size_t i;
        json_t *g;
        json_array_foreach(groups, i, g) run_group(g, draft, path, formats, t);
        json_decref(groups);
    }
    if (d)
        closedir(d);
}

static void report(const char *draft, const char *part, const tally *t)
{
    int all = t->pass + t->fail + t->refused;
    printf("%-13s %-9s %5d tests  %5d pass (%5.1f%%)  %4d fail  %4d refused\n", draft, part, all, t->pass,
           all ? 100.0 * t->pass / all : 0.0, t->fail, t->refused);
}

int main(int argc, char **argv)
{
    int a = 1;
    if (a < argc && !strcmp(argv[a], "-v"))
        verbose = 1, a++;
    if (a >= argc) {
        fprintf(stderr, "usage: %s [-v] SUITE_DIR\n", argv[0]);
        return 2;
    }
    static const char *drafts[] = {"draft4", "draft6", "draft7", "draft2019-09", "draft2020-12"};
    for (size_t k = 0; k < sizeof(drafts) / sizeof(drafts[0]); k++) {
        char dir[4096];
        tally req = {0}, fmt = {0};
        snprintf(dir, sizeof(dir), "%s/tests/%s", argv[a], drafts[k]);
        run_dir(dir, drafts[k], 0, &req);
        snprintf(dir, sizeof(dir), "%s/tests/%s/optional/format", argv[a], drafts[k]);
        run_dir(dir, drafts[k], 1, &fmt);
        report(drafts[k], "required", &req);
        report(drafts[k], "format", &fmt);
    }
    return 0;
}
