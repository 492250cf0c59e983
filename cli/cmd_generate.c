/* cmd_generate.c — `tram generate`: one prompt streamed to stdout, or a JSONL
 * batch (--input/--output) run through continuous batching all at once. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/engine_flags.h"
#include "engine/tram.h"
#include "server/structured.h"
#include "chat/chat_template.h"

typedef struct {
    const char *model, *prompt, *input, *output;
    int chat;
    tram_sampling_params p;
    tram_engine_config ec;
} gen_opts;

#define FIELD(name) offsetof(gen_opts, name)

/* --seed is the engine flag: the seed of every request that brings none (a JSONL line may). */
static const tram_flag generate_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--prompt", .alias = "-p", .kind = TRAM_FLAG_STRING, .field = FIELD(prompt)},
    {.name = "--input", .kind = TRAM_FLAG_STRING, .field = FIELD(input)},
    {.name = "--output", .kind = TRAM_FLAG_STRING, .field = FIELD(output)},
    {.name = "--chat", .kind = TRAM_FLAG_SET, .field = FIELD(chat)},
    {.name = "--ignore-eos", .kind = TRAM_FLAG_SET, .field = FIELD(p.ignore_eos)},
    {.name = "--max-tokens", .alias = "-n", .kind = TRAM_FLAG_INT, .field = FIELD(p.max_tokens), .lo = 1,
     .hi = 1 << 24},
    {.name = "--top-k", .kind = TRAM_FLAG_INT, .field = FIELD(p.top_k), .lo = 0, .hi = 1 << 24},
    {.name = "--temperature", .kind = TRAM_FLAG_FLOAT, .field = FIELD(p.temperature), .lo = 0, .hi = 100},
    {.name = "--top-p", .kind = TRAM_FLAG_FLOAT, .field = FIELD(p.top_p), .lo = 0, .hi = 100},
    {.name = "--min-p", .kind = TRAM_FLAG_FLOAT, .field = FIELD(p.min_p), .lo = 0, .hi = 100},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tram generate [-m MODEL] (-p PROMPT | --input IN.jsonl --output OUT.jsonl)\n"
                 "       [--chat] [-n N] [--temperature T] [--top-p P] [--top-k K] [--min-p P]\n"
                 "       [--seed S] [--ignore-eos] [engine flags]\n\n"
                 "JSONL lines: {\"prompt\": \"...\"} or {\"messages\": [{\"role\", \"content\"}]}\n"
                 "plus optional max_tokens, temperature, top_p, top_k, min_p, seed, stop,\n"
                 "ignore_eos, min_tokens, presence_penalty, frequency_penalty, repetition_penalty,\n"
                 "and a structured-output constraint as the API takes it: response_format,\n"
                 "structured_outputs, guided_json, guided_regex, guided_choice or guided_grammar.\n\n");
    tram_engine_print_flags(out);
}

static int parse_args(gen_opts *o, int argc, char **argv)
{
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(generate_flags, o), tram_engine_flags(&o->ec)};
    if (tram_flags_parse(tables, 2, argc, argv, NULL, 0) < 0 || tram_engine_flags_check(&o->ec, o->model))
        return -1;
    if (!o->prompt == !(o->input && o->output)) {
        fprintf(stderr, "tram: give either -p PROMPT or both --input and --output\n");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- prompts */

/* The chat template applied to messages, or NULL with err filled. */
static char *render_chat(tram_engine *e, const tram_chat_msg *msgs, int n, tram_error *err)
{
    tram_chat_template *ct;
    char *out = NULL;
    if (tram_chat_template_for(&ct, tram_engine_tokenizer(e), NULL, 1, err))
        return NULL;
    if (tram_chat_template_render(ct, msgs, n, 1, &out, err))
        out = NULL;
    tram_chat_template_free(ct);
    return out;
}

/* ---------------------------------------------------------------- single prompt */

/* The prompt as request 0, through the chat template with --chat. */
static int add_prompt(tram_engine *e, const gen_opts *o, tram_error *err)
{
    tram_chat_msg msg = {.role = "user", .content = o->prompt};
    char *text = o->chat ? render_chat(e, &msg, 1, err) : strdup(o->prompt);
    if (!text)
        return -1;
    tram_prompt pr = {.text = text, .skip_bos = o->chat}; /* a template writes its own BOS */
    int rc = tram_engine_add_request(e, 0, &pr, &o->p, 0, err);
    free(text);
    return rc;
}

static int run_single(tram_engine *e, const gen_opts *o)
{
    tram_error err = {{0}};
    if (add_prompt(e, o, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        return 1;
    }
    double t0 = tram_now(), t_first = 0;
    int prompt_tokens = 0, gen = 0;
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n;
        if (tram_engine_step(e, &outs, &n, &err)) {
            fprintf(stderr, "\ntram: %s\n", err.msg);
            return 1;
        }
        for (int i = 0; i < n; i++) {
            if (!t_first)
                t_first = tram_now();
            fwrite(outs[i].text, 1, outs[i].text_len, stdout);
            fflush(stdout);
            prompt_tokens = outs[i].prompt_tokens;
            gen = outs[i].completion_tokens;
        }
    }
    double t1 = tram_now();
    fprintf(stdout, "\n");
    fprintf(stderr, "prompt: %d tokens, %.1f tokens/s | decode: %d tokens, %.1f tokens/s\n",
            prompt_tokens, prompt_tokens / (t_first - t0), gen,
            gen > 1 ? (gen - 1) / (t1 - t_first) : 0.0);
    return 0;
}

/* ---------------------------------------------------------------- batch */

typedef struct {
    char *text;
    size_t len, cap;
    json_t *ids;
    const char *finish;
    int prompt_tokens, completion_tokens, cached_tokens;
    char error[sizeof(((tram_error *)0)->msg)];
} gen_result;

static int json_num(json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 1;
}

/* Optional sampling fields of one input line over the command-line defaults. */
static int line_params(json_t *obj, tram_sampling_params *p, const char **stops, tram_error *err)
{
    static const char *const fkeys[] = {"temperature", "top_p", "min_p", "presence_penalty",
                                        "frequency_penalty", "repetition_penalty"};
    float *fdst[] = {&p->temperature, &p->top_p, &p->min_p, &p->presence_penalty,
                     &p->frequency_penalty, &p->repetition_penalty};
    static const char *const ikeys[] = {"max_tokens", "top_k", "min_tokens"};
    int *idst[] = {&p->max_tokens, &p->top_k, &p->min_tokens};
    double d;
    for (size_t k = 0; k < TRAM_ARRAY_LEN(fkeys); k++) {
        int r = json_num(obj, fkeys[k], &d);
        if (r < 0)
            return tram_fail(err, "%s must be a number", fkeys[k]);
        if (r > 0)
            *fdst[k] = (float)d;
    }
    for (size_t k = 0; k < TRAM_ARRAY_LEN(ikeys); k++) {
        int r = json_num(obj, ikeys[k], &d);
        if (r < 0 || (r > 0 && d != (int)d))
            return tram_fail(err, "%s must be an integer", ikeys[k]);
        if (r > 0)
            *idst[k] = (int)d;
    }
    if (json_num(obj, "seed", &d) > 0) {
        p->has_seed = 1;
        p->seed = (uint64_t)d;
    }
    if (json_is_boolean(json_object_get(obj, "ignore_eos")))
        p->ignore_eos = json_is_true(json_object_get(obj, "ignore_eos"));
    json_t *stop = json_object_get(obj, "stop");
    p->num_stop = 0;
    if (json_is_string(stop))
        stops[p->num_stop++] = json_string_value(stop);
    for (size_t k = 0; json_is_array(stop) && k < json_array_size(stop) && k < 16; k++)
        if (json_is_string(json_array_get(stop, k)))
            stops[p->num_stop++] = json_string_value(json_array_get(stop, k));
    p->stop = stops;
    return 0;
}

/* The line's structured-output constraint (the API's fields: response_format,
 * structured_outputs, guided_*), compiled into p->grammar. */
static int line_grammar(tram_engine *e, json_t *obj, tram_sampling_params *p, tram_error *err)
{
    tram_api_error ae = {0};
    if (tram_structured_grammar(obj, tram_engine_tokenizer(e), &p->grammar, &ae))
        return tram_fail(err, "%s", ae.message);
    return 0;
}

/* The line's prompt text; *chat tells whether a chat template made it. */
static char *line_prompt(tram_engine *e, json_t *obj, int *chat, tram_error *err)
{
    json_t *prompt = json_object_get(obj, "prompt"), *msgs = json_object_get(obj, "messages");
    if (json_is_string(prompt))
        return strdup(json_string_value(prompt));
    size_t n = json_array_size(msgs);
    if (!json_is_array(msgs) || n == 0) {
        tram_fail(err, "a line needs \"prompt\" (a string) or \"messages\" (a non-empty array)");
        return NULL;
    }
    tram_chat_msg *m = calloc(n, sizeof(*m));
    for (size_t i = 0; m && i < n; i++) {
        m[i].role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        m[i].content = json_string_value(json_object_get(json_array_get(msgs, i), "content"));
        if (!m[i].role || !m[i].content) {
            free(m);
            tram_fail(err, "messages[%zu] needs string \"role\" and \"content\"", i);
            return NULL;
        }
    }
    *chat = 1;
    char *text = m ? render_chat(e, m, (int)n, err) : NULL;
    free(m);
    return text;
}

static void add_line(tram_engine *e, const gen_opts *o, const char *line, int idx, gen_result *res)
{
    tram_error err = {{0}};
    json_error_t jerr;
    json_t *obj = json_loads(line, 0, &jerr);
    tram_sampling_params p = o->p;
    const char *stops[16];
    char *text = NULL;
    int chat = 0;
    if (!json_is_object(obj))
        tram_fail(&err, "line %d is not a JSON object", idx + 1);
    else if (!line_params(obj, &p, stops, &err) && !line_grammar(e, obj, &p, &err) &&
             (text = line_prompt(e, obj, &chat, &err))) {
        tram_prompt pr = {.text = text, .skip_bos = chat};
        if (!tram_engine_add_request(e, (uint64_t)idx, &pr, &p, 0, &err))
            err.msg[0] = 0;
    }
    tram_grammar_release(p.grammar);
    if (err.msg[0])
        snprintf(res->error, sizeof(res->error), "%s", err.msg);
    res->ids = json_array();
    free(text);
    json_decref(obj);
}

static void absorb(gen_result *r, const tram_output *o)
{
    if (r->len + o->text_len + 1 > r->cap) {
        r->cap = 2 * (r->len + o->text_len + 1);
        r->text = realloc(r->text, r->cap);
    }
    memcpy(r->text + r->len, o->text, o->text_len);
    r->len += o->text_len;
    r->text[r->len] = 0;
    for (int i = 0; i < o->num_tokens; i++)
        json_array_append_new(r->ids, json_integer(o->token_ids[i]));
    r->prompt_tokens = o->prompt_tokens;
    r->completion_tokens = o->completion_tokens;
    r->cached_tokens = o->cached_tokens;
    r->finish = tram_finish_reason_name(o->finish_reason);
}

static void progress(int done, int total, uint64_t toks, double t0)
{
    double el = tram_now() - t0, eta = done ? el * (total - done) / done : 0;
    int w = 30, fill = total ? w * done / total : w;
    fprintf(stderr, "\r[%.*s%*s] %d/%d requests  %.1f tok/s  elapsed %.0fs  ETA %.0fs ", fill,
            "==============================", w - fill, "", done, total, toks / (el > 0 ? el : 1), el,
            eta);
}

static int write_results(const char *path, gen_result *res, int n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tram: cannot write %s\n", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        gen_result *r = &res[i];
        json_t *o = r->error[0]
            ? json_pack("{s:i, s:s}", "index", i, "error", r->error)
            : json_pack("{s:i, s:s, s:O, s:s?, s:{s:i, s:i, s:i}}", "index", i, "text",
                        r->text ? r->text : "", "token_ids", r->ids, "finish_reason", r->finish,
                        "usage", "prompt_tokens", r->prompt_tokens, "completion_tokens",
                        r->completion_tokens, "cached_tokens", r->cached_tokens);
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        fprintf(f, "%s\n", s);
        free(s);
        json_decref(o);
    }
    return fclose(f);
}

static int read_lines(const char *path, char ***lines, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tram: cannot read %s\n", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int count = 0, alloc = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        if (count == alloc) {
            alloc = alloc ? 2 * alloc : 64;
            *lines = realloc(*lines, (size_t)alloc * sizeof(char *));
        }
        (*lines)[count++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n = count;
    return 0;
}

static void summary(tram_engine *e, int n, double el)
{
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    fprintf(stderr, "%d requests in %.1fs: %.2f requests/s, prompt %.1f tokens/s, generated %.1f "
                    "tokens/s, prefix-cache hit rate %.1f%%, preemptions %llu\n",
            n, el, n / el, s.prompt_tokens_total / el, s.generation_tokens_total / el,
            s.prefix_cache_queries ? 100.0 * s.prefix_cache_hits / s.prefix_cache_queries : 0.0,
            (unsigned long long)s.num_preemptions);
}

/* Steps until every request finished, each output into its result; done
 * requests (of n) so far, from t0 on, for the progress line. */
static int step_all(tram_engine *e, gen_result *res, int n, int done, double t0)
{
    tram_error err = {{0}};
    uint64_t toks = 0;
    int rc = 0, tty = isatty(2);
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int m;
        if (tram_engine_step(e, &outs, &m, &err)) {
            fprintf(stderr, "\ntram: %s\n", err.msg);
            rc = 1;
            break;
        }
        for (int i = 0; i < m; i++) {
            absorb(&res[outs[i].request_id], &outs[i]);
            toks += (uint64_t)outs[i].num_tokens;
            done += outs[i].finish_reason != TRAM_FINISH_NONE;
        }
        if (tty)
            progress(done, n, toks, t0);
    }
    if (tty)
        fprintf(stderr, "\n");
    return rc;
}

static int run_batch(tram_engine *e, const gen_opts *o)
{
    char **lines = NULL;
    int n = 0, done = 0;
    if (read_lines(o->input, &lines, &n))
        return 1;
    gen_result *res = calloc((size_t)n + 1, sizeof(*res));
    double t0 = tram_now();
    for (int i = 0; i < n; i++) {
        add_line(e, o, lines[i], i, &res[i]);
        done += res[i].error[0] != 0;
    }
    int rc = step_all(e, res, n, done, t0);
    if (!rc) {
        summary(e, n, tram_now() - t0);
        rc = write_results(o->output, res, n) ? 1 : 0;
    }
    for (int i = 0; i < n; i++) {
        free(lines[i]);
        free(res[i].text);
        json_decref(res[i].ids);
    }
    free(lines);
    free(res);
    return rc;
}

static int generate(int argc, char **argv)
{
    gen_opts o = {.model = TRAM_DEFAULT_MODEL};
    tram_sampling_params_init(&o.p);
    o.p.max_tokens = 128;
    tram_engine_config_init(&o.ec);
    if (parse_args(&o, argc, argv))
        return TRAM_EXIT_USAGE;
    tram_error err = {{0}};
    tram_engine *e;
    if (tram_engine_create(&e, &o.ec, o.model, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        return 1;
    }
    const char *param;
    int rc;
    if (tram_engine_validate_params(e, &o.p, &param, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        rc = TRAM_EXIT_USAGE;
    } else {
        rc = o.prompt ? run_single(e, &o) : run_batch(e, &o);
    }
    tram_engine_destroy(e);
    return rc;
}

const tram_command tram_cmd_generate = {
    .name = "generate", .run = generate, .usage = usage,
    .summary = "generate text from a prompt (or a JSONL batch)"};
