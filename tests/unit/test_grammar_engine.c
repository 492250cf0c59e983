/* Grammar-constrained generation through the real engine and default
 * model: outputs parse as the schema's JSON and finish with "stop";
 * constrained requests batched with free ones give, row for row, the same
 * tokens as each alone; n > 1 with a seed; preemption (recompute) keeps
 * the matcher's state; logprobs are those of the masked distribution. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tram.h"
#include "grammar/json_schema.h"
#include "cli/defaults.h"
#include "tokenizer/tokenizer.h"
#include "tests/unit/test_util.h"

#define MAXOUT 160
#define NREQ 6

typedef struct {
    int32_t toks[2][MAXOUT];
    int n[2], finish[2];
    char text[2][2048];
    float logprob_sum[2];
    int infinite_alternatives;
} result;

static tram_engine *engine(int num_kv_blocks)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.max_model_len = 256;
    c.kv_cache_memory = (size_t)64 << 20;
    c.num_kv_blocks = num_kv_blocks;
    c.max_num_seqs = 16;
    c.num_threads = 1;
    return test_engine_create(&c, TRAM_DEFAULT_MODEL);
}

static tram_grammar *schema_grammar(tram_engine *e, const char *schema)
{
    char *gbnf = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_json_schema_to_gbnf(schema, "root", &gbnf, &err), 0, "%s", err.msg);
    tram_grammar *g = tram_grammar_compile(gbnf, "root", tram_engine_tokenizer(e), &err);
    cr_assert(g, "%s", err.msg);
    free(gbnf);
    return g;
}

/* A test_output_visitor: request ids index the results ctx points to. */
static void collect(const tram_output *o, void *ctx)
{
    result *r = (result *)ctx + o->request_id;
    int s = o->sample_index;
    for (int k = 0; k < o->num_tokens; k++) {
        cr_assert_lt(r->n[s], MAXOUT);
        r->toks[s][r->n[s]++] = o->token_ids[k];
        if (o->logprobs) {
            r->logprob_sum[s] += o->logprobs[k].logprob;
            for (int a = 0; a < o->logprobs[k].num_top; a++)
                r->infinite_alternatives += !isfinite(o->logprobs[k].top[a].logprob);
        }
    }
    cr_assert_lt(strlen(r->text[s]) + o->text_len, sizeof(r->text[s]));
    strcat(r->text[s], o->text);
    if (o->finish_reason)
        r->finish[s] = o->finish_reason;
}

static void drain(tram_engine *e, result *res)
{
    test_drain(e, collect, res);
}

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120}},\"required\":[\"name\",\"age\"]}",
    "{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"minItems\":1,\"maxItems\":3}",
    "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"when\":{\"type\":\"string\","
    "\"format\":\"date\"}},\"required\":[\"ok\",\"when\"],\"additionalProperties\":false}",
};

static const char *const prompts[] = {
    "<|im_start|>user\nDescribe a person as JSON.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nName some colours.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
};

/* Request i: even ones constrained by schema (i / 2) % 3, odd ones free;
 * i % 3 == 2 sampled at temperature 1 with a seed, the rest greedy. */
static void add(tram_engine *e, int i, tram_grammar *const *g, int n, int logprobs)
{
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.max_tokens = 64;
    p.n = n;
    p.logprobs = logprobs;
    p.temperature = i % 3 == 2 ? 1.0f : 0.0f;
    p.has_seed = 1;
    p.seed = 1234 + (uint64_t)i;
    p.grammar = i % 2 == 0 ? g[(i / 2) % 3] : NULL;
    test_add_request(e, (uint64_t)i, (tram_prompt){.text = prompts[i % 3], .skip_bos = 1}, &p);
}

static void check_constrained(const result *r, int i, int samples)
{
    for (int s = 0; i % 2 == 0 && s < samples; s++) {
        json_error_t je;
        json_t *v = json_loads(r->text[s], JSON_DECODE_ANY, &je);
        cr_assert(v, "request %d sample %d is not JSON (%s): %s", i, s, je.text, r->text[s]);
        cr_assert_eq(r->finish[s], TRAM_FINISH_STOP, "request %d: finish %d, text %s", i, r->finish[s],
                     r->text[s]);
        json_decref(v);
    }
}

static void compile_all(tram_engine *e, tram_grammar **g)
{
    for (int k = 0; k < 3; k++)
        g[k] = schema_grammar(e, schemas[k]);
}

Test(grammar_engine, batched_equals_alone_and_outputs_parse, .timeout = 300)
{
    tram_engine *e = engine(0);
    tram_grammar *g[3];
    compile_all(e, g);
    static result together[NREQ], alone[NREQ];
    memset(together, 0, sizeof(together));
    memset(alone, 0, sizeof(alone));
    for (int i = 0; i < NREQ; i++)
        add(e, i, g, 1, -1);
    drain(e, together);
    for (int i = 0; i < NREQ; i++) {
        add(e, i, g, 1, -1);
        drain(e, alone);
    }
    for (int i = 0; i < NREQ; i++) {
        cr_assert_eq(together[i].n[0], alone[i].n[0], "request %d: %d tokens batched, %d alone", i,
                     together[i].n[0], alone[i].n[0]);
        cr_assert_arr_eq(together[i].toks[0], alone[i].toks[0], (size_t)alone[i].n[0] * sizeof(int32_t),
                         "request %d differs batched", i);
        check_constrained(&together[i], i, 1);
    }
    for (int k = 0; k < 3; k++)
        tram_grammar_release(g[k]);
    tram_engine_destroy(e);
}

Test(grammar_engine, preemption_n2_and_masked_logprobs, .timeout = 300)
{
    static result roomy[NREQ], tiny[NREQ];
    memset(roomy, 0, sizeof(roomy));
    memset(tiny, 0, sizeof(tiny));
    uint64_t preemptions = 0;
    for (int pass = 0; pass < 2; pass++) {
        tram_engine *e = engine(pass ? 20 : 0);
        tram_grammar *g[3];
        compile_all(e, g);
        for (int i = 0; i < NREQ; i++)
            add(e, i, g, 2, 3);
        for (int k = 0; k < 3; k++)
            tram_grammar_release(g[k]);   /* the requests hold their own references */
        drain(e, pass ? tiny : roomy);
        tram_engine_stats st;
        tram_engine_stats_get(e, &st);
        preemptions = st.num_preemptions;
        tram_engine_destroy(e);
    }
    cr_assert_gt(preemptions, 0, "the tiny pool must force preemptions");
    for (int i = 0; i < NREQ; i++) {
        for (int s = 0; s < 2; s++) {
            cr_assert_eq(roomy[i].n[s], tiny[i].n[s], "request %d sample %d: preemption changed the length", i, s);
            cr_assert_arr_eq(roomy[i].toks[s], tiny[i].toks[s], (size_t)roomy[i].n[s] * sizeof(int32_t));
        }
        check_constrained(&roomy[i], i, 2);
        cr_assert_eq(roomy[i].infinite_alternatives, 0, "a token the grammar forbids was reported");
        cr_assert(isfinite(roomy[i].logprob_sum[0]));
    }
}

/* A grammar that dead-ends on the vocabulary ("ab", then a character of an
 * empty class): the sample ends with TRAM_FINISH_ERROR and the cause
 * grammar_dead_end, its text the "ab" the grammar did allow, never a token
 * it forbids and never "stop"; a free request batched beside it runs on. */
Test(grammar_engine, a_dead_end_finishes_with_error_and_its_cause, .timeout = 120)
{
    tram_engine *e = engine(0);
    tram_error err = {{0}};
    tram_grammar *g = tram_grammar_compile("root ::= \"ab\" [^\\x00-\\U0010FFFF]", "root",
                                           tram_engine_tokenizer(e), &err);
    cr_assert(g, "%s", err.msg);
    for (uint64_t id = 0; id < 2; id++) {
        tram_sampling_params p;
        tram_sampling_params_init(&p);
        p.max_tokens = 8;
        p.temperature = 0.0f;
        p.grammar = id == 0 ? g : NULL;
        test_add_request(e, id, (tram_prompt){.text = prompts[0], .skip_bos = 1}, &p);
    }
    tram_grammar_release(g);
    char text[2][256] = {{0}};
    int finish[2] = {0}, tokens[2] = {0};
    const char *cause[2] = {NULL, NULL};
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n = test_step(e, &outs);
        for (int i = 0; i < n; i++) {
            int id = (int)outs[i].request_id;
            cr_assert_lt(strlen(text[id]) + outs[i].text_len, sizeof(text[id]));
            strcat(text[id], outs[i].text);
            tokens[id] += outs[i].num_tokens;
            if (outs[i].finish_reason) {
                finish[id] = outs[i].finish_reason;
                cause[id] = outs[i].error;
            }
        }
    }
    cr_assert_eq(finish[0], TRAM_FINISH_ERROR, "finish %d, text '%s'", finish[0], text[0]);
    cr_assert_str_eq(cause[0], TRAM_GRAMMAR_DEAD_END);
    cr_assert_str_eq(text[0], "ab");
    cr_assert_str_eq(tram_finish_reason_name(TRAM_FINISH_ERROR), "error");
    cr_assert_eq(finish[1], TRAM_FINISH_LENGTH, "the free request beside it: finish %d", finish[1]);
    cr_assert_eq(tokens[1], 8);
    cr_assert_null(cause[1]);
    tram_engine_destroy(e);
}
