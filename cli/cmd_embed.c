/* cmd_embed.c — `tram embed`: a file of inputs in, their embeddings out as
 * JSONL, in input order, batched by the engine (engine/tram.h's embedding
 * requests: the pooling of the model, or --pooling). */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/engine_flags.h"
#include "cli/text_file.h"
#include "engine/tram.h"

typedef struct {
    const char *model, *input, *output;
    int jsonl, dimensions;
    tram_engine_config ec;
} embed_opts;

#define FIELD(name) offsetof(embed_opts, name)

static const tram_flag embed_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--input", .alias = "-i", .kind = TRAM_FLAG_STRING, .field = FIELD(input)},
    {.name = "--output", .alias = "-o", .kind = TRAM_FLAG_STRING, .field = FIELD(output)},
    {.name = "--jsonl", .kind = TRAM_FLAG_SET, .field = FIELD(jsonl)},
    {.name = "--dimensions", .kind = TRAM_FLAG_INT, .field = FIELD(dimensions), .lo = 1, .hi = 1 << 20},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tram embed [-m MODEL] -i IN -o OUT [--jsonl] [--dimensions N] [engine flags]\n\n"
                 "Embeds every line of IN (\"-\": stdin) and writes one JSON line per input to OUT\n"
                 "(\"-\": stdout), in input order: {\"index\": i, \"embedding\": [...], \"prompt_tokens\": n},\n"
                 "with the line's \"id\" when it has one.  A line is text; with --jsonl (or an IN\n"
                 "ending in .jsonl) it is JSON: a string, an array of token ids, or an object\n"
                 "{\"input\": string or ids, \"id\": anything}.  Empty text lines are skipped.\n"
                 "The pooling is the model's (--pooling overrides it); --dimensions keeps the\n"
                 "first N values of a Matryoshka model's embeddings.\n\n");
    tram_engine_print_flags(out);
}

/* ---------------------------------------------------------------- inputs */

typedef struct {
    char *text;          /* a text line, or NULL */
    int32_t *ids;        /* token ids, or NULL */
    int num_ids;
    json_t *id;          /* the line's "id", or NULL */
    int line;
} embed_input;

/* A JSON line: a string, ids, or {"input", "id"}. */
static int parse_json_line(const char *s, embed_input *in, tram_error *err)
{
    json_error_t je;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &je), *input = v;
    if (!v)
        return tram_fail(err, "line %d: %s", in->line, je.text);
    if (json_is_object(v)) {
        input = json_object_get(v, "input");
        in->id = json_incref(json_object_get(v, "id"));
    }
    int rc = 0;
    if (json_is_string(input) && json_string_length(input)) {
        in->text = strdup(json_string_value(input));
    } else if (json_is_array(input) && json_array_size(input)) {
        in->num_ids = (int)json_array_size(input);
        in->ids = malloc((size_t)in->num_ids * sizeof(int32_t));
        for (int i = 0; in->ids && i < in->num_ids; i++) {
            const json_t *t = json_array_get(input, (size_t)i);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
                rc = tram_fail(err, "line %d: item %d of the input is not a token id", in->line, i);
            else
                in->ids[i] = (int32_t)json_integer_value(t);
        }
    } else {
        rc = tram_fail(err, "line %d: the input is not a non-empty string or array of token ids", in->line);
    }
    json_decref(v);
    return rc ? -1 : in->text || in->ids ? 0 : tram_fail(err, "line %d: out of memory", in->line);
}

static int read_inputs(const embed_opts *o, embed_input **out, int *n, tram_error *err)
{
    char *text;
    size_t len;
    if (tram_read_text_file(strcmp(o->input, "-") ? o->input : "/dev/stdin", &text, &len, err))
        return -1;
    int cap = 16, rc = 0, line = 0;
    embed_input *ins = malloc((size_t)cap * sizeof(*ins));
    *n = 0;
    for (char *s = text, *end; ins && !rc && s < text + len; s = end + 1) {
        end = strchr(s, '\n');
        end = end ? end : text + len;
        *end = 0;
        line++;
        if (end > s && end[-1] == '\r')
            end[-1] = 0;
        if (!*s)
            continue;
        if (*n == cap && !(ins = realloc(ins, (size_t)(cap *= 2) * sizeof(*ins))))
            break;
        embed_input *in = &ins[(*n)++];
        *in = (embed_input){.line = line};
        rc = o->jsonl ? parse_json_line(s, in, err) : (in->text = strdup(s)) ? 0 : tram_fail(err, "out of memory");
    }
    free(text);
    *out = ins;
    return !ins ? tram_fail(err, "out of memory reading %s", o->input) : rc;
}

static void free_inputs(embed_input *ins, int n)
{
    for (int i = 0; ins && i < n; i++) {
        free(ins[i].text);
        free(ins[i].ids);
        json_decref(ins[i].id);
    }
    free(ins);
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    float *vec;
    int dim, prompt_tokens, done;
} embed_result;

static int write_result(FILE *f, int index, const embed_input *in, const embed_result *r)
{
    json_t *a = json_array();
    for (int d = 0; a && d < r->dim; d++)
        json_array_append_new(a, json_real(r->vec[d]));
    json_t *line = json_pack("{s:i, s:O*, s:o?, s:i}", "index", index, "id", in->id, "embedding", a,
                             "prompt_tokens", r->prompt_tokens);
    char *s = line ? json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(line);
    int rc = s && fprintf(f, "%s\n", s) > 0 ? 0 : -1;
    free(s);
    return rc;
}

/* Keeps a window of requests in the engine (room for the scheduler to
 * batch), writing each result as soon as every earlier one is written. */
static int run(tram_engine *e, const embed_opts *o, const embed_input *ins, int n, FILE *f, tram_error *err)
{
    embed_result *res = calloc((size_t)(n ? n : 1), sizeof(*res));
    int window = 4 * o->ec.max_num_seqs, added = 0, written = 0, rc = res ? 0 : tram_fail(err, "out of memory");
    tram_embed_params p = {.dimensions = o->dimensions};
    while (!rc && written < n) {
        for (; !rc && added < n && added - written < window; added++) {
            tram_prompt pr = {.text = ins[added].text, .token_ids = ins[added].ids, .num_tokens = ins[added].num_ids};
            if (tram_engine_add_embedding(e, (uint64_t)added, &pr, &p, 0, err)) {
                tram_error inner = *err;
                rc = tram_fail(err, "line %d: %s", ins[added].line, inner.msg);
            }
        }
        const tram_output *outs;
        int k;
        if (rc || tram_engine_step(e, &outs, &k, err))
            break;
        for (int i = 0; !rc && i < k; i++) {
            embed_result *r = &res[outs[i].request_id];
            r->done = 1;
            r->dim = outs[i].embedding_dim;
            r->prompt_tokens = outs[i].prompt_tokens;
            if (outs[i].embedding && !(r->vec = malloc((size_t)r->dim * sizeof(float))))
                rc = tram_fail(err, "out of memory");
            else if (outs[i].embedding)
                memcpy(r->vec, outs[i].embedding, (size_t)r->dim * sizeof(float));
        }
        for (; !rc && written < n && res[written].done; written++) {
            if (write_result(f, written, &ins[written], &res[written]))
                rc = tram_fail(err, "writing %s failed", o->output);
            free(res[written].vec);
            res[written].vec = NULL;
        }
    }
    for (int i = 0; res && i < n; i++)
        free(res[i].vec);
    free(res);
    return rc || written < n ? -1 : 0;
}

static int embed(int argc, char **argv)
{
    embed_opts o = {.model = TRAM_DEFAULT_MODEL};
    tram_engine_config_init(&o.ec);
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(embed_flags, &o), tram_engine_flags(&o.ec)};
    if (tram_flags_parse(tables, 2, argc, argv, NULL, 0) < 0 || tram_engine_flags_check(&o.ec, o.model))
        return TRAM_EXIT_USAGE;
    if (!o.input || !o.output) {
        fprintf(stderr, "tram: give both --input and --output\n");
        return TRAM_EXIT_USAGE;
    }
    size_t len = strlen(o.input);
    o.jsonl |= len > 6 && !strcmp(o.input + len - 6, ".jsonl");
    tram_error err = {{0}};
    embed_input *ins = NULL;
    int n = 0;
    if (read_inputs(&o, &ins, &n, &err)) {
        free_inputs(ins, n);
        fprintf(stderr, "tram: %s: %s\n", o.input, err.msg);
        return TRAM_EXIT_INPUT;
    }
    tram_engine *e = NULL;
    FILE *f = NULL;
    int failed = tram_engine_create(&e, &o.ec, o.model, &err) ||
                 !(f = strcmp(o.output, "-") ? fopen(o.output, "w") : stdout) ||
                 run(e, &o, ins, n, f, &err);
    if (!f && e)
        tram_fail(&err, "cannot write %s", o.output);
    if (f && f != stdout && fclose(f) && !failed)
        failed = tram_fail(&err, "writing %s failed", o.output) != 0;
    tram_engine_destroy(e);
    free_inputs(ins, n);
    return tram_exit_status("tram embed", failed, &err);
}

const tram_command tram_cmd_embed = {
    .name = "embed", .run = embed, .usage = usage, .summary = "embed the lines of a file (text or JSONL)"};
