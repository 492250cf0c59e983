/* bench_grammar.c — tram's side of bench/structured.sh: the per-token mask
 * time of the grammar engine on the default model's vocabulary.
 *
 *   bench_grammar --vocab OUT.json     the vocabulary as the peers need it:
 *                                      each token's bytes (hex), control ids,
 *                                      end-of-generation ids
 *   bench_grammar WORKLOAD.jsonl       per line {"name", "schema", "token_ids"}:
 *                                      compiles the schema, then replays the
 *                                      tokens, timing each step's mask (the
 *                                      fastest of REPEATS computations); prints
 *                                      {"name", "compile_ms", "mask_us": [...]}
 *                                      per line
 *   bench_grammar --bounds             schemas, GBNF and regexes with large
 *                                      counts (maxLength 100000, minItems
 *                                      5000, ...): compile time, memory, and
 *                                      each step's mask over a walk to the
 *                                      bound; prints {"name", "compile_ms",
 *                                      "rss_mb", "can_end", "mask_us"} per case
 *   bench_grammar --big                rule chains of 8k..60k rules and enums
 *                                      of 1k..100k values (issue 21's shapes):
 *                                      compile time (wall and CPU), resident
 *                                      and peak memory growth, each step's
 *                                      mask over walks through it; prints
 *                                      {"name", "compile_ms", "cpu_ms",
 *                                      "rss_mb", "peak_mb", "mask_us"} per case
 *   bench_grammar --coverage DIR       every .json schema in DIR compiled as the
 *                                      server compiles it (GBNF, then against
 *                                      the vocabulary, and for validation);
 *                                      prints {"name", "ok", "compile_ms",
 *                                      "error"} per schema, in name order */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "grammar/gbnf_text.h"
#include "grammar/grammar.h"
#include "grammar/json_big_bounds.h"
#include "grammar/json_schema.h"
#include "grammar/json_validate.h"
#include "grammar/regex.h"
#include "kernels/strbuf.h"
#include "cli/defaults.h"
#include "tokenizer/tokenizer.h"

/* Each step's mask is computed this many times and the fastest kept: on a
 * shared machine a single timing is often a preemption's. */
#define REPEATS 3

static int dump_vocab(const tram_tokenizer *tok, const char *path)
{
    json_t *tokens = json_array(), *special = json_array(), *eog = json_array();
    int n = tram_tokenizer_vocab_size(tok), neog;
    for (int id = 0; id < n; id++) {
        size_t len;
        const char *b = tram_tokenizer_token_bytes(tok, id, &len);
        char *hex = malloc(2 * len + 1);
        for (size_t i = 0; i < len; i++)
            sprintf(hex + 2 * i, "%02x", (unsigned char)b[i]);
        hex[2 * len] = 0;
        json_array_append_new(tokens, json_string(hex));
        free(hex);
        if (tram_tokenizer_is_special(tok, id))
            json_array_append_new(special, json_integer(id));
    }
    const int32_t *e = tram_tokenizer_eog_ids(tok, &neog);
    for (int i = 0; i < neog; i++)
        json_array_append_new(eog, json_integer(e[i]));
    json_t *o = json_pack("{s:o, s:o, s:o}", "tokens", tokens, "special", special, "eog", eog);
    int rc = json_dump_file(o, path, JSON_COMPACT);
    json_decref(o);
    return rc;
}

/* The step's mask into mask; returns its time in µs, the fastest of REPEATS. */
static double timed_mask(tram_matcher *m, uint32_t *mask)
{
    double us = 1e30;
    for (int rep = 0; rep < REPEATS; rep++) {
        double a = tram_now();
        tram_matcher_fill_mask(m, mask);
        us = TRAM_MIN(us, (tram_now() - a) * 1e6);
    }
    return us;
}

static int replay(const tram_tokenizer *tok, json_t *line)
{
    tram_error err = {{0}};
    char *schema = json_dumps(json_object_get(line, "schema"), JSON_COMPACT), *gbnf = NULL;
    const char *name = json_string_value(json_object_get(line, "name"));
    double t0 = tram_now();
    if (tram_json_schema_to_gbnf(schema, "root", &gbnf, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return -1;
    }
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
    double compile_ms = (tram_now() - t0) * 1e3;
    tram_matcher *m;
    if (!g || tram_matcher_create(&m, g, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return -1;
    }
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    json_t *ids = json_object_get(line, "token_ids"), *times = json_array(), *v;
    size_t i;
    json_array_foreach(ids, i, v) {
        int32_t id = (int32_t)json_integer_value(v);
        json_array_append_new(times, json_real(timed_mask(m, mask)));
        if (!((mask[id >> 5] >> (id & 31)) & 1) || !tram_matcher_accept(m, id)) {
            fprintf(stderr, "%s: token %d at step %zu is not allowed\n", name, id, i);
            return -1;
        }
    }
    json_t *o = json_pack("{s:s, s:f, s:o}", "name", name, "compile_ms", compile_ms, "mask_us", times);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(o);
    free(mask);
    free(schema);
    free(gbnf);
    tram_matcher_free(m);
    tram_grammar_release(g);
    return 0;
}

/* ---------------------------------------------------------------- large bounds */

typedef struct {
    const char *name, *schema, *regex, *gbnf;
    const char *prefer[6];     /* each step takes the first of these tokens the mask allows */
} bound_case;

static const bound_case bound_cases[] = {
    {.name = "string maxLength 100", .schema = "{\"type\":\"string\",\"maxLength\":100}",
     .prefer = {" summary", " of", " the", "a", "\""}},
    {.name = "string maxLength 100000", .schema = "{\"type\":\"string\",\"maxLength\":100000}",
     .prefer = {" summary", " of", " the", "a", "\""}},
    {.name = "string minLength 100000", .schema = "{\"type\":\"string\",\"minLength\":100000}",
     .prefer = {"\"", " summary", " of"}},
    {.name = "array minItems 5000", .schema = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":5000}",
     .prefer = {"]", ",", "1"}},
    {.name = "array of strings maxLength 300, maxItems 1000",
     .schema = "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":300},\"maxItems\":1000}",
     .prefer = {" summary", " of", "a", "\"", ",", "]"}},
    {.name = "regex [a-z ]{100000}", .regex = "[a-z ]{100000}", .prefer = {" summary", " of", "a"}},
    {.name = "GBNF ( [^\\n] ){0,100000} \"\\n\"", .gbnf = "root ::= ( [^\\n] ){0,100000} \"\\n\"",
     .prefer = {" summary", " of", "a", "\n"}},
};

/* The one token text encodes to, or -1. */
static int32_t token_id(const tram_tokenizer *tok, const char *text)
{
    int32_t *ids = NULL, id = -1;
    int n = 0;
    tram_error err = {{0}};
    if (!tram_tokenizer_encode(tok, text, strlen(text), 0, 0, &ids, &n, &err) && n == 1)
        id = ids[0];
    free(ids);
    return id;
}

static double rss_mb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    return (double)resident * 4096 / (1 << 20);
}

static char *case_gbnf(const bound_case *c, tram_error *err)
{
    char *gbnf = NULL;
    if (c->gbnf)
        return strdup(c->gbnf);
    int rc = c->schema ? tram_json_schema_to_gbnf(c->schema, "root", &gbnf, err)
                       : tram_regex_to_gbnf(c->regex, "root", &gbnf, err);
    return rc ? NULL : gbnf;
}

/* Walks the case to its end (or 200000 steps), timing each step's mask. */
static int walk_bound(const tram_tokenizer *tok, const bound_case *c)
{
    tram_error err = {{0}};
    double rss0 = rss_mb(), t0 = tram_now();
    char *gbnf = case_gbnf(c, &err);
    tram_grammar *g = gbnf ? tram_grammar_compile(gbnf, "root", tok, &err) : NULL;
    double compile_ms = (tram_now() - t0) * 1e3, grown = rss_mb() - rss0;
    tram_matcher *m;
    if (!g || tram_matcher_create(&m, g, &err)) {
        fprintf(stderr, "%s: %s\n", c->name, err.msg);
        return -1;
    }
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    json_t *times = json_array();
    int32_t prefer[6];
    for (int k = 0; k < 6; k++)
        prefer[k] = c->prefer[k] ? token_id(tok, c->prefer[k]) : -1;
    /* a schema's value opens with its quote or bracket */
    int32_t first = c->schema ? token_id(tok, strstr(c->schema, "\"array\"") ? "[" : "\"") : -1;
    if (first >= 0 && !tram_matcher_accept(m, first))
        return -1;
    for (int step = 0; step < 200000 && !tram_matcher_is_done(m); step++) {
        json_array_append_new(times, json_real(timed_mask(m, mask)));
        int32_t pick = -1;
        for (int k = 0; k < 6 && prefer[k] >= 0 && pick < 0; k++)
            if ((mask[prefer[k] >> 5] >> (prefer[k] & 31)) & 1)
                pick = prefer[k];
        if (pick < 0)
            break;  /* only the end is left */
        tram_matcher_accept(m, pick);
    }
    json_t *o = json_pack("{s:s, s:f, s:f, s:i, s:o}", "name", c->name, "compile_ms", compile_ms, "rss_mb", grown,
                          "can_end", tram_matcher_can_end(m), "mask_us", times);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(o);
    free(mask);
    free(gbnf);
    tram_matcher_free(m);
    tram_grammar_release(g);
    return 0;
}

static int bounds(const tram_tokenizer *tok)
{
    tram_error err = {{0}};
    tram_grammar_release(tram_grammar_compile("root ::= \"x\"", "root", tok, &err));  /* builds the shared trie */
    int rc = 0;
    for (size_t i = 0; i < TRAM_ARRAY_LEN(bound_cases); i++)
        rc |= walk_bound(tok, &bound_cases[i]);
    return rc;
}

/* ---------------------------------------------------------------- large grammars */

static double peak_mb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024;
}

/* n rules r_i ::= "x" r_(i+1), the last "y", the root first (forward) or last. */
static char *chain_gbnf(int n, int backward)
{
    tram_strbuf b = {0};
    for (int k = 0; k < n; k++) {
        int i = backward ? n - 1 - k : k;
        if (i == 0)
            tram_strbuf_addf(&b, "root ::= \"x\" r1\n");
        else if (i == n - 1)
            tram_strbuf_addf(&b, "r%d ::= \"y\"\n", i);
        else
            tram_strbuf_addf(&b, "r%d ::= \"x\" r%d\n", i, i + 1);
    }
    return b.s;
}

/* Value i of an n-value list: a product code, every first letter used. */
static void code_of(int i, char *out)
{
    snprintf(out, 16, "%c%c-%06d", 'A' + i % 26, 'A' + (i / 26) % 26, i);
}

static char *enum_schema(int n)
{
    tram_strbuf b = {0};
    char code[16];
    tram_strbuf_addf(&b, "{\"enum\":[");
    for (int i = 0; i < n; i++) {
        code_of(i, code);
        tram_strbuf_addf(&b, "%s\"%s\"", i ? "," : "", code);
    }
    tram_strbuf_addf(&b, "]}");
    return b.s;
}

/* Walks text's tokens through a new matcher, timing each step's mask into
 * times; -1 when a token is refused. */
static int timed_walk(const tram_tokenizer *tok, const tram_grammar *g, const char *text, json_t *times)
{
    tram_matcher *m;
    tram_error err = {{0}};
    int32_t *ids = NULL;
    int n = 0, rc = 0;
    if (tram_matcher_create(&m, g, &err) || tram_tokenizer_encode(tok, text, strlen(text), 0, 0, &ids, &n, &err))
        return -1;
    uint32_t *mask = calloc((size_t)tram_grammar_mask_words(g), sizeof(uint32_t));
    for (int i = 0; i < n && !rc; i++) {
        json_array_append_new(times, json_real(timed_mask(m, mask)));
        rc = (mask[ids[i] >> 5] >> (ids[i] & 31)) & 1 && tram_matcher_accept(m, ids[i]) ? 0 : -1;
    }
    free(mask);
    free(ids);
    tram_matcher_free(m);
    return rc;
}

/* Compiles gbnf and walks each of texts[0..n); prints the case's line. */
static int big_case(const tram_tokenizer *tok, const char *name, const char *gbnf, char **texts, int n)
{
    tram_error err = {{0}};
    double rss0 = rss_mb(), peak0 = peak_mb(), t0 = tram_now();
    clock_t c0 = clock();
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tok, &err);
    double compile_ms = (tram_now() - t0) * 1e3, cpu_ms = (double)(clock() - c0) * 1e3 / CLOCKS_PER_SEC;
    if (!g) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return -1;
    }
    json_t *times = json_array();
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if ((rc = timed_walk(tok, g, texts[i], times)))
            fprintf(stderr, "%s: '%s' refused\n", name, texts[i]);
    json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:f, s:o}", "name", name, "compile_ms", compile_ms, "cpu_ms", cpu_ms,
                          "rss_mb", rss_mb() - rss0, "peak_mb", peak_mb() - peak0, "mask_us", times);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(o);
    tram_grammar_release(g);
    return rc;
}

static int big(const tram_tokenizer *tok)
{
    tram_error err = {{0}};
    tram_grammar_release(tram_grammar_compile("root ::= \"x\"", "root", tok, &err));  /* builds the shared trie */
    int rc = 0;
    char name[64], *walk[16], xs[] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    static const int rules[] = {8000, 16000, 32000, 60000};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(rules); i++)
        for (int backward = 0; backward < 2; backward++) {
            char *gbnf = chain_gbnf(rules[i], backward);
            snprintf(name, sizeof(name), "chain of %dk rules, %s", rules[i] / 1000, backward ? "backward" : "forward");
            walk[0] = xs;
            rc |= big_case(tok, name, gbnf, walk, 1);
            free(gbnf);
        }
    static const int values[] = {1000, 10000, 100000};
    for (size_t i = 0; i < TRAM_ARRAY_LEN(values); i++) {
        int n = values[i];
        for (int k = 0; k < 16; k++) {  /* 16 values spread over the list, quoted */
            walk[k] = malloc(24);
            char code[16];
            code_of((int)((long)k * (n - 1) / 15), code);
            snprintf(walk[k], 24, "\"%s\"", code);
        }
        char *schema = enum_schema(n), *gbnf = NULL;
        snprintf(name, sizeof(name), "JSON Schema enum of %dk values", n / 1000);
        rc |= tram_json_schema_to_gbnf(schema, "root", &gbnf, &err) || big_case(tok, name, gbnf, walk, 16);
        free(schema);
        free(gbnf);
        const char **choices = malloc((size_t)n * sizeof(char *));
        for (int k = 0; k < n; k++) {
            char code[16];
            code_of(k, code);
            choices[k] = strdup(code);
        }
        for (int k = 0; k < 16; k++) {  /* the same values, unquoted */
            memmove(walk[k], walk[k] + 1, strlen(walk[k]));
            walk[k][strlen(walk[k]) - 1] = 0;
        }
        snprintf(name, sizeof(name), "choice of %dk values", n / 1000);
        rc |= tram_choice_to_gbnf(choices, n, "root", &gbnf, &err) || big_case(tok, name, gbnf, walk, 16);
        for (int k = 0; k < n; k++)
            free((char *)choices[k]);
        free(choices);
        free(gbnf);
        for (int k = 0; k < 16; k++)
            free(walk[k]);
    }
    return rc;
}

/* ---------------------------------------------------------------- coverage */

/* One schema file compiled as the server compiles it; ok 0 with the reason
 * when any step refuses it. */
static void cover_one(const tram_tokenizer *tok, const char *dir, const char *name)
{
    char path[4096], *gbnf = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    json_error_t je;
    json_t *doc = tram_json_schema_load_file(path, JSON_DECODE_ANY, &je);
    char *schema = doc ? json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    tram_error err = {{0}};
    tram_grammar *g = NULL;
    tram_jv_schema *v = NULL;
    double t0 = tram_now();
    int ok = schema && !tram_json_schema_to_gbnf(schema, "root", &gbnf, &err) &&
             (g = tram_grammar_compile(gbnf, "root", tok, &err)) &&
             !tram_jv_compile(schema, strlen(schema), &v, &err);
    double ms = (tram_now() - t0) * 1e3;
    json_t *o = json_pack("{s:s, s:b, s:f, s:s}", "name", name, "ok", ok, "compile_ms", ms, "error",
                          ok ? "" : schema ? err.msg : je.text);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(o);
    tram_jv_free(v);
    tram_grammar_release(g);
    free(gbnf);
    free(schema);
    json_decref(doc);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_json(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 5 && !strcmp(e->d_name + n - 5, ".json");
}

static int coverage(const tram_tokenizer *tok, const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, is_json, by_name);
    if (n < 0) {
        perror(dir);
        return -1;
    }
    tram_error err = {{0}};
    tram_grammar_release(tram_grammar_compile("root ::= \"x\"", "root", tok, &err)); /* the shared trie */
    for (int i = 0; i < n; i++) {
        cover_one(tok, dir, names[i]->d_name);
        free(names[i]);
    }
    free(names);
    return 0;
}

int main(int argc, char **argv)
{
    tram_error err = {{0}};
    tram_tokenizer *tok;
    if (argc < 2 || tram_tokenizer_load(&tok, TRAM_DEFAULT_MODEL, &err)) {
        fprintf(stderr, "usage: bench_grammar --vocab OUT.json | WORKLOAD.jsonl %s\n", err.msg);
        return 2;
    }
    if (!strcmp(argv[1], "--vocab"))
        return argc > 2 && !dump_vocab(tok, argv[2]) ? 0 : 1;
    if (!strcmp(argv[1], "--bounds"))
        return bounds(tok) ? 1 : 0;
    if (!strcmp(argv[1], "--big"))
        return big(tok) ? 1 : 0;
    if (!strcmp(argv[1], "--coverage"))
        return argc > 2 && !coverage(tok, argv[2]) ? 0 : 1;
    FILE *f = fopen(argv[1], "r");
    char *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    while (f && getline(&buf, &cap, f) > 0) {
        json_t *line = json_loads(buf, 0, NULL);
        rc |= !line || replay(tok, line);
        json_decref(line);
    }
    free(buf);
    tram_tokenizer_free(tok);
    return f && !rc ? 0 : 1;
}
