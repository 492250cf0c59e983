/* cmd_generate.c — `tram generate`: one prompt streamed to stdout, or a JSONL
 * batch (--input/--output, cli/batch_run.c) run through the server's request
 * path with continuous batching. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/batch_run.h"
#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/engine_flags.h"
#include "cli/text_file.h"
#include "engine/tram.h"
#include "chat/chat_template.h"

typedef struct {
    const char *model, *prompt, *input, *output, *chat_template;
    int chat, progress;
    const char *lora_modules[TRAM_MAX_LORA_MODULES];  /* --input: adapters a line's model may name */
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
    {.name = "--progress", .kind = TRAM_FLAG_SET, .field = FIELD(progress)},
    {.name = "--lora-modules", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(lora_modules), .parse = tram_lora_modules_flag},
    {.name = "--chat-template", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(chat_template),
     .parse = tram_chat_template_flag},
};

/* What -p's one request is sampled with; a batch line's body says its own. */
static const tram_flag prompt_flags[] = {
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
    fprintf(out, "usage: tram generate [-m MODEL] -p PROMPT [--chat] [-n N] [--temperature T] [--top-p P]\n"
                 "                     [--top-k K] [--min-p P] [--seed S] [--ignore-eos] [engine flags]\n"
                 "       tram generate [-m MODEL] --input IN.jsonl --output OUT.jsonl [--progress]\n"
                 "                     [--chat-template FILE] [--lora-modules NAME=PATH,...] [engine flags]\n\n"
                 "-p streams one completion of PROMPT to stdout (--chat: through the chat template).\n\n"
                 "--input runs a file of requests as `tram serve` would answer them, and writes\n"
                 "OpenAI Batch output lines to OUT (\"-\": stdin, stdout).  A line is an OpenAI\n"
                 "Batch request, {\"custom_id\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\"\n"
                 "or \"/v1/completions\", \"body\"}, or a body alone ({\"messages\": ...} or\n"
                 "{\"prompt\": ...}, its id \"line-N\").  Run again, it skips the ids OUT holds.\n"
                 "Exit: 0 all answered, 1 some lines failed, 2 nothing ran, 3 unfinished (rerun).\n"
                 "--progress draws the progress line when stderr is not a terminal too.\n"
                 "--lora-modules: LoRA adapters a line's \"model\" may name, as `tram serve`'s.\n\n");
    tram_engine_print_flags(out);
}

/* A -p flag given with --input, or NULL. */
static const char *prompt_flag_given(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < TRAM_ARRAY_LEN(prompt_flags); k++)
            if (!strcmp(argv[i], prompt_flags[k].name) ||
                (prompt_flags[k].alias && !strcmp(argv[i], prompt_flags[k].alias)))
                return argv[i];
    return NULL;
}

static int parse_args(gen_opts *o, int argc, char **argv)
{
    const tram_flag_table tables[] = {TRAM_FLAG_TABLE(generate_flags, o), TRAM_FLAG_TABLE(prompt_flags, o),
                                      tram_engine_flags(&o->ec)};
    if (tram_flags_parse(tables, 3, argc, argv, NULL, 0) < 0 || tram_engine_flags_check(&o->ec, o->model))
        return -1;
    if (!o->prompt == !(o->input && o->output)) {
        fprintf(stderr, "tram: give either -p PROMPT or both --input and --output\n");
        return -1;
    }
    const char *flag = o->input ? prompt_flag_given(argc, argv) : NULL;
    if (flag) {
        fprintf(stderr, "tram: %s applies to -p; with --input each line's body sets its own\n", flag);
        return -1;
    }
    if (o->prompt && (o->progress || o->chat_template || o->lora_modules[0])) {
        fprintf(stderr, "tram: %s applies to --input\n",
                o->progress ? "--progress" : o->chat_template ? "--chat-template" : "--lora-modules");
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
    const tram_chat_conversation c = {.msgs = msgs, .n = n, .ending = TRAM_CHAT_OPEN_ASSISTANT};
    if (tram_chat_template_render(ct, &c, &out, err))
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

static int run_batch(const gen_opts *o)
{
    tram_batch_opts b = {.input = o->input, .output = o->output, .progress = o->progress};
    tram_server_config_init(&b.server);
    b.server.model_path = o->model;
    b.server.chat_template = o->chat_template;
    b.server.engine = o->ec;
    for (; b.server.num_lora_modules < TRAM_MAX_LORA_MODULES && o->lora_modules[b.server.num_lora_modules];
         b.server.num_lora_modules++)
        b.server.lora_modules[b.server.num_lora_modules] = o->lora_modules[b.server.num_lora_modules];
    if (b.server.num_lora_modules && !b.server.engine.max_loras)
        b.server.engine.max_loras = 1;
    return tram_batch_run(&b);
}

static int generate(int argc, char **argv)
{
    gen_opts o = {.model = TRAM_DEFAULT_MODEL};
    tram_sampling_params_init(&o.p);
    o.p.max_tokens = 128;
    tram_engine_config_init(&o.ec);
    if (parse_args(&o, argc, argv))
        return TRAM_EXIT_USAGE;
    if (o.input)
        return run_batch(&o);
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
        rc = run_single(e, &o);
    }
    tram_engine_destroy(e);
    return rc;
}

const tram_command tram_cmd_generate = {
    .name = "generate", .run = generate, .usage = usage,
    .summary = "generate text from a prompt (or a JSONL batch)"};
