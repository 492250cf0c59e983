/* bench_schema_compile.c — how long JSON Schemas take to compile: each
 * schema to GBNF (grammar/json_schema.h), then the GBNF against the default
 * model's vocabulary (grammar/grammar.h, the token masks included), in
 * thread CPU time, so that other jobs on a shared machine do not count.
 *
 *   bench_schema_compile FILE...   each FILE a JSON array of {"name",
 *                                  "schema"} (tests/fixtures/schemas/
 *                                  corpus.json) or one schema
 *
 * Prints one JSON object: how many compiled, p50/p99/max of both stages in
 * ms, the exact share (no approximation left to the end validation), and
 * the slowest schemas; a refusal's reason is counted by its first words. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/defaults.h"
#include "grammar/grammar.h"
#include "grammar/json_big_bounds.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"

#define MAX_SCHEMAS 100000

typedef struct {
    const char *name;
    double gbnf_ms, full_ms;
} timing;

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_full(const void *a, const void *b)
{
    double x = ((const timing *)a)->full_ms, y = ((const timing *)b)->full_ms;
    return x < y ? -1 : x > y;
}

static int by_gbnf(const void *a, const void *b)
{
    double x = ((const timing *)a)->gbnf_ms, y = ((const timing *)b)->gbnf_ms;
    return x < y ? -1 : x > y;
}

static json_t *stats(timing *t, int n, int (*cmp)(const void *, const void *), int full)
{
    qsort(t, (size_t)n, sizeof(*t), cmp);
#define AT(i) (full ? t[i].full_ms : t[i].gbnf_ms)
    return n ? json_pack("{s:f, s:f, s:f}", "p50", AT(n / 2), "p99", AT((int)(n * 0.99)), "max", AT(n - 1))
             : json_object();
#undef AT
}

int main(int argc, char **argv)
{
    tram_error err = {{0}};
    tram_tokenizer *tok;
    if (argc < 2 || tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err)) {
        fprintf(stderr, "usage: bench_schema_compile FILE... %s\n", err.msg);
        return 2;
    }
    tram_grammar_release(tram_grammar_compile("root ::= \"x\"", "root", tok, &err)); /* the shared trie */
    timing *t = calloc(MAX_SCHEMAS, sizeof(*t));
    json_t *refused = json_object(), *docs = json_array();
    int n = 0, total = 0, exact = 0;
    for (int a = 1; a < argc; a++) {
        json_error_t je;
        json_t *doc = tram_json_schema_load_file(argv[a], 0, &je);
        json_array_append_new(docs, doc);
        size_t count = json_is_array(doc) ? json_array_size(doc) : 1;
        for (size_t i = 0; i < count && n < MAX_SCHEMAS; i++) {
            json_t *e = json_is_array(doc) ? json_array_get(doc, i) : NULL;
            json_t *schema = e ? json_object_get(e, "schema") : doc;
            char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
            tram_json_schema_result r = {0};
            total++;
            double t0 = cpu_ms();
            int rc = text ? tram_json_schema_compile(text, "root", NULL, &r, &err) : -1;
            double t1 = cpu_ms();
            tram_grammar *g = rc ? NULL : tram_grammar_compile(r.gbnf, "root", tok, &err);
            double t2 = cpu_ms();
            if (g) {
                t[n++] = (timing){.name = e ? json_string_value(json_object_get(e, "name")) : argv[a],
                                  .gbnf_ms = t1 - t0, .full_ms = t2 - t0};
                exact += r.exact;
            } else {
                char why[40];
                snprintf(why, sizeof(why), "%s", err.msg);
                json_object_set_new(refused, why, json_integer(json_integer_value(json_object_get(refused, why)) + 1));
            }
            tram_grammar_release(g);
            free(r.gbnf);
            free(text);
        }
    }
    json_t *out = json_pack("{s:i, s:i, s:i, s:o}", "schemas", total, "compiled", n, "exact", exact, "refused", refused);
    json_object_set_new(out, "to_gbnf_ms", stats(t, n, by_gbnf, 0));
    json_object_set_new(out, "full_ms", stats(t, n, by_full, 1));
    json_t *slow = json_array();
    for (int i = n - 1; i >= 0 && i >= n - 5; i--)
        json_array_append_new(slow, json_pack("{s:s?, s:f}", "name", t[i].name, "full_ms", t[i].full_ms));
    json_object_set_new(out, "slowest", slow);
    char *s = json_dumps(out, JSON_INDENT(1) | JSON_REAL_PRECISION(4));
    puts(s);
    free(s);
    json_decref(out);
    json_decref(docs);
    free(t);
    tram_tokenizer_free(tok);
    return 0;
}
