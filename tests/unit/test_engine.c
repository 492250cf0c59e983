/* Engine equivalences on the real default model: batched = alone, chunked =
 * whole, prefix-cache hit = miss, preempted = never preempted; seeded sampling
 * independent of the batch; n samples sharing prompt blocks; no leaked blocks
 * after any of it; min_tokens holding back stop strings.  Outputs are short
 * (4-12 tokens: enough for several decode steps) to keep the suite fast.
 * The suite engine_tp2 runs the first four again under tensor parallelism
 * (two ranks, on dummy weights of a shape that splits in two: the default
 * model's 9 heads do not; its tokenizer still serves). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cli/defaults.h"
#include "engine/tram.h"
#include "tokenizer/tokenizer.h"
#include "tests/unit/test_util.h"

#define MAXOUT 32

typedef struct {
    int32_t toks[4][MAXOUT];
    int n[4];
    int finish[4];
    char text[4][512];
    int cached;
} result;

static int tensor_parallel = 1; /* engine_tp2 sets 2 */

static void tp2(void) { tensor_parallel = 2; }

static tram_engine *make_engine(tram_engine_config *c)
{
    c->num_threads = 1;
    if (tensor_parallel > 1) {
        c->tensor_parallel_size = tensor_parallel;
        snprintf(c->load_format, sizeof(c->load_format), "dummy");
        snprintf(c->preset, sizeof(c->preset), "tests/fixtures/tp/llama-gqa.json");
    }
    return test_engine_create(c, TRAM_DEFAULT_MODEL);
}

static tram_engine_config base_config(void)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.max_model_len = 512;
    c.kv_cache_memory = (size_t)64 << 20;
    c.max_num_seqs = 32;
    return c;
}

/* A test_output_visitor: request ids index the results ctx points to. */
static void collect(const tram_output *o, void *ctx)
{
    result *r = (result *)ctx + o->request_id;
    int s = o->sample_index;
    for (int i = 0; i < o->num_tokens; i++) {
        cr_assert_lt(r->n[s], MAXOUT);
        r->toks[s][r->n[s]++] = o->token_ids[i];
    }
    cr_assert_lt(strlen(r->text[s]) + o->text_len, sizeof(r->text[s]));
    strcat(r->text[s], o->text);
    cr_assert_eq(o->completion_tokens, r->n[s]);
    r->cached = o->cached_tokens;
    if (o->finish_reason) {
        cr_assert_eq(r->finish[s], 0, "a second final output");
        r->finish[s] = o->finish_reason;
    }
}

static void drain(tram_engine *e, result *res)
{
    test_drain(e, collect, res);
}

/* One step, its outputs collected into res. */
static void step_into(tram_engine *e, result *res)
{
    const tram_output *outs;
    int n = test_step(e, &outs);
    for (int i = 0; i < n; i++)
        collect(&outs[i], res);
}

static void add(tram_engine *e, uint64_t id, const char *text, const tram_sampling_params *p)
{
    test_add_request(e, id, (tram_prompt){.text = text}, p);
}

/* Returns the stats it checked. */
static tram_engine_stats assert_no_leak(tram_engine *e)
{
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    cr_assert_eq(s.num_blocks_free, s.num_blocks_total, "%d of %d blocks leaked",
                 s.num_blocks_total - s.num_blocks_free, s.num_blocks_total);
    cr_assert_eq(s.num_running + s.num_waiting, 0);
    return s;
}

static void prompt_text(int i, char *buf, size_t n)
{
    static const char *const subjects[] = {"The cat", "My teacher", "A robot", "The old king",
                                           "Every river", "This recipe", "The ocean", "Paris"};
    static const char *const verbs[] = {"is known for", "always says", "will never", "loves"};
    snprintf(buf, n, "%s %s %d", subjects[i % 8], verbs[(i / 8) % 4], i);
}

static void assert_same(const result *a, const result *b, int n, int samples)
{
    for (int i = 0; i < n; i++)
        for (int s = 0; s < samples; s++) {
            cr_assert_eq(a[i].n[s], b[i].n[s], "request %d sample %d: %d vs %d tokens", i, s,
                         a[i].n[s], b[i].n[s]);
            cr_assert_arr_eq(a[i].toks[s], b[i].toks[s], a[i].n[s] * sizeof(int32_t),
                             "request %d sample %d differs", i, s);
            cr_assert_str_eq(a[i].text[s], b[i].text[s]);
        }
}

static void batch_invariance_32_prompts(void)
{
    tram_engine_config c = base_config();
    c.enable_prefix_caching = 0;
    tram_engine *e = make_engine(&c);
    tram_sampling_params p = test_greedy_params(4);
    static result together[32], alone[32];
    char buf[128];
    for (int i = 0; i < 32; i++) {
        prompt_text(i, buf, sizeof(buf));
        add(e, (uint64_t)i, buf, &p);
    }
    drain(e, together);
    assert_no_leak(e);
    for (int i = 0; i < 32; i++) {
        prompt_text(i, buf, sizeof(buf));
        add(e, (uint64_t)i, buf, &p);
        drain(e, alone);
    }
    assert_same(together, alone, 32, 1);
    for (int i = 0; i < 32; i++)
        cr_assert_eq(together[i].finish[0], TRAM_FINISH_LENGTH);
    assert_no_leak(e);
    tram_engine_destroy(e);
}

static const char *long_prompt =
    "You are a helpful assistant who answers questions about geography, history and science "
    "with short, precise sentences. Always mention one surprising fact, and never use lists. "
    "Keep every answer under fifty words, and end with a question for the reader.";

static void chunked_prefill_equals_whole(void)
{
    static result whole[3], chunked[3];
    tram_sampling_params p = test_greedy_params(4);
    char buf[3][512];
    for (int i = 0; i < 3; i++)
        snprintf(buf[i], sizeof(buf[i]), "%s Question %d: where is the Nile?", long_prompt, i);
    for (int run = 0; run < 2; run++) {
        tram_engine_config c = base_config();
        c.enable_prefix_caching = 0;
        c.max_num_batched_tokens = run ? 13 : 2048; /* 13: chunks end mid-block */
        c.max_num_seqs = run ? 4 : 32;
        tram_engine *e = make_engine(&c);
        for (int i = 0; i < 3; i++)
            add(e, (uint64_t)i, buf[i], &p);
        drain(e, run ? chunked : whole);
        assert_no_leak(e);
        tram_engine_destroy(e);
    }
    assert_same(whole, chunked, 3, 1);
}

static int common_prefix_tokens(const tram_tokenizer *t, const char *a, const char *b)
{
    int32_t *x, *y;
    int nx, ny, i = 0;
    tram_error err;
    cr_assert_eq(tram_tokenizer_encode(t, a, strlen(a), 1, 1, &x, &nx, &err), 0);
    cr_assert_eq(tram_tokenizer_encode(t, b, strlen(b), 1, 1, &y, &ny, &err), 0);
    while (i < nx && i < ny && x[i] == y[i])
        i++;
    free(x);
    free(y);
    return i;
}

static void prefix_caching_same_outputs_fewer_tokens(void)
{
    enum { N = 4 };
    static result res[2][N];
    uint64_t computed[2], hits[2];
    char buf[N][512];
    for (int i = 0; i < N; i++)
        snprintf(buf[i], sizeof(buf[i]), "%s Now tell me about planet number %d.", long_prompt, i);
    tram_sampling_params p = test_greedy_params(4);
    int shared = 0, bs = 16;
    for (int on = 0; on < 2; on++) {
        tram_engine_config c = base_config();
        c.enable_prefix_caching = on;
        tram_engine *e = make_engine(&c);
        shared = common_prefix_tokens(tram_engine_tokenizer(e), buf[0], buf[1]);
        add(e, 0, buf[0], &p); /* first alone, so that the others can hit its blocks */
        drain(e, res[on]);
        for (int i = 1; i < N; i++)
            add(e, (uint64_t)i, buf[i], &p);
        drain(e, res[on]);
        tram_engine_stats s = assert_no_leak(e);
        computed[on] = s.computed_prefill_tokens;
        hits[on] = s.prefix_cache_hits;
        for (int i = 1; i < N; i++)
            cr_assert_eq(res[on][i].cached, on ? shared / bs * bs : 0);
        tram_engine_destroy(e);
    }
    assert_same(res[0], res[1], N, 1);
    cr_assert_gt(shared, 32, "the shared prefix should span several blocks");
    uint64_t saved = (uint64_t)(N - 1) * (shared / bs * bs);
    cr_assert_eq(hits[0], 0);
    cr_assert_eq(hits[1], saved);
    cr_assert_eq(computed[0] - computed[1], saved, "computed %llu vs %llu, expected %llu fewer",
                 (unsigned long long)computed[0], (unsigned long long)computed[1],
                 (unsigned long long)saved);
}

static void preemption_keeps_outputs(void)
{
    enum { N = 8 };
    static result res[2][N];
    tram_sampling_params p = test_greedy_params(8);
    char buf[N][128];
    for (int i = 0; i < N; i++)
        prompt_text(i * 3 + 1, buf[i], sizeof(buf[i]));
    uint64_t preemptions = 0;
    for (int tiny = 0; tiny < 2; tiny++) {
        tram_engine_config c = base_config();
        c.enable_prefix_caching = 0;
        c.max_model_len = 64;
        c.block_size = 4;
        c.num_kv_blocks = tiny ? 16 : 0; /* 8 requests of ~20 tokens need ~40 */
        tram_engine *e = make_engine(&c);
        for (int i = 0; i < N; i++)
            add(e, (uint64_t)i, buf[i], &p);
        drain(e, res[tiny]);
        tram_engine_stats s = assert_no_leak(e);
        preemptions = s.num_preemptions;
        tram_engine_destroy(e);
    }
    cr_assert_gt(preemptions, 0, "the tiny pool must force preemptions");
    assert_same(res[0], res[1], N, 1);
}

/* Each equivalence on one rank, then on two. */
Test(engine, batch_invariance_32_prompts, .timeout = 300) { batch_invariance_32_prompts(); }
Test(engine, chunked_prefill_equals_whole, .timeout = 300) { chunked_prefill_equals_whole(); }
Test(engine, prefix_caching_same_outputs_fewer_tokens, .timeout = 300) { prefix_caching_same_outputs_fewer_tokens(); }
Test(engine, preemption_keeps_outputs, .timeout = 300) { preemption_keeps_outputs(); }
Test(engine_tp2, batch_invariance_32_prompts, .init = tp2, .timeout = 300) { batch_invariance_32_prompts(); }
Test(engine_tp2, chunked_prefill_equals_whole, .init = tp2, .timeout = 300) { chunked_prefill_equals_whole(); }
Test(engine_tp2, prefix_caching_same_outputs_fewer_tokens, .init = tp2, .timeout = 300)
{
    prefix_caching_same_outputs_fewer_tokens();
}
Test(engine_tp2, preemption_keeps_outputs, .init = tp2, .timeout = 300) { preemption_keeps_outputs(); }

Test(engine, seeded_sampling_ignores_batch_and_n_shares_blocks, .timeout = 300)
{
    static result alone[8], crowd[8];
    tram_engine_config c = base_config();
    c.enable_prefix_caching = 0;
    tram_engine *e = make_engine(&c);
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.top_k = 40;
    p.has_seed = 1;
    p.seed = 77;
    p.max_tokens = 8;
    p.ignore_eos = 1;
    p.n = 4;
    add(e, 0, long_prompt, &p);
    /* after the first step the 4 samples exist and share the full prompt blocks */
    const tram_output *outs;
    int n = test_step(e, &outs);
    cr_assert_eq(n, 4);
    for (int i = 0; i < n; i++)
        collect(&outs[i], alone);
    tram_engine_stats s;
    tram_engine_stats_get(e, &s);
    int prompt_len = outs[0].prompt_tokens, full = prompt_len / 16;
    cr_assert_eq(s.num_blocks_total - s.num_blocks_free, full + (prompt_len % 16 ? 1 : 0),
                 "before the samples diverge only the parent holds blocks");
    drain(e, alone);
    test_step(e, &outs); /* frees the finished request */
    assert_no_leak(e);
    /* the same seeded request amid others, unseeded and seeded differently */
    tram_sampling_params other = p;
    other.seed = 5;
    other.n = 1;
    add(e, 1, "Once upon a time", &other);
    other.has_seed = 0;
    add(e, 2, "The weather today", &other);
    for (int i = 0; i < 2; i++)
        step_into(e, crowd);
    add(e, 0, long_prompt, &p);
    add(e, 3, "Another story begins", &other);
    drain(e, crowd);
    assert_same(alone, crowd, 1, 4);
    int differ = 0;
    for (int j = 1; j < 4; j++)
        differ += memcmp(alone[0].toks[0], alone[0].toks[j], sizeof(alone[0].toks[0])) != 0;
    cr_assert_gt(differ, 0, "4 samples at temperature 0.9 should not all agree");
    assert_no_leak(e);
    tram_engine_destroy(e);
}

/* 12 sampled requests (their own seeds, penalties on some, one greedy) run
 * by an engine of 2 threads, whose step draws its rows side by side on the
 * backend's threads (engine/predraw.h), and by one of 1, which draws them
 * in order: every token the same. */
static void run_sampled_batch(int threads, result *res)
{
    tram_engine_config c = base_config();
    c.num_threads = threads; /* not make_engine, which sets one */
    tram_engine *e = test_engine_create(&c, TRAM_DEFAULT_MODEL);
    for (int i = 0; i < 12; i++) {
        tram_sampling_params p;
        tram_sampling_params_init(&p);
        p.temperature = i == 5 ? 0.0f : 0.7f + 0.05f * (float)i;
        p.top_p = 0.9f;
        p.has_seed = 1;
        p.seed = 100 + (uint64_t)i;
        p.repetition_penalty = i % 3 == 0 ? 1.3f : 1.0f;
        p.presence_penalty = i % 4 == 1 ? 0.5f : 0.0f;
        p.max_tokens = 12 + i;
        p.ignore_eos = 1;
        char text[64];
        prompt_text(i, text, sizeof(text));
        add(e, (uint64_t)i, text, &p);
    }
    drain(e, res);
    assert_no_leak(e);
    tram_engine_destroy(e);
}

Test(engine, draws_on_two_threads_equal_draws_on_one, .timeout = 300)
{
    static result one[12], two[12];
    run_sampled_batch(1, one);
    run_sampled_batch(2, two);
    assert_same(one, two, 12, 1);
    int differ = 0;
    for (int i = 1; i < 12; i++)
        differ += memcmp(one[0].toks[0], one[i].toks[0], sizeof(one[0].toks[0])) != 0;
    cr_assert_gt(differ, 0, "12 sampled requests should not all agree");
}

Test(engine, abort_frees_and_reports_once, .timeout = 120)
{
    static result res[3];
    tram_engine_config c = base_config();
    tram_engine *e = make_engine(&c);
    tram_sampling_params p = test_greedy_params(12);
    add(e, 0, "Hello there", &p);
    add(e, 1, "General Kenobi", &p);
    for (int i = 0; i < 2; i++)
        step_into(e, res);
    cr_assert_eq(tram_engine_abort(e, 1), 0);
    cr_assert_eq(tram_engine_abort(e, 1), -1, "aborting twice must fail");
    cr_assert_eq(tram_engine_abort(e, 42), -1);
    drain(e, res);
    cr_assert_eq(res[1].finish[0], TRAM_FINISH_ABORT);
    cr_assert_eq(res[1].n[0], 2);
    cr_assert_eq(res[0].finish[0], TRAM_FINISH_LENGTH);
    cr_assert_eq(res[0].n[0], 12);
    assert_no_leak(e);
    tram_engine_destroy(e);
}

Test(engine, rejects_bad_requests, .timeout = 120)
{
    tram_engine_config c = base_config();
    c.max_model_len = 32;
    tram_engine *e = make_engine(&c);
    tram_sampling_params p = test_greedy_params(4);
    tram_error err = {{0}};
    const char *param = NULL;
    p.temperature = -1;
    cr_assert_eq(tram_engine_validate_params(e, &p, &param, &err), -1);
    cr_assert_str_eq(param, "temperature");
    p = test_greedy_params(4);
    p.top_p = 0;
    cr_assert_eq(tram_engine_validate_params(e, &p, &param, &err), -1);
    cr_assert_str_eq(param, "top_p");
    p = test_greedy_params(4);
    int32_t big[40] = {0};
    tram_prompt pr = {.token_ids = big, .num_tokens = 40};
    cr_assert_eq(tram_engine_add_request(e, 1, &pr, &p, 0, &err), -1);
    cr_assert(strstr(err.msg, "40") && strstr(err.msg, "32"), "%s", err.msg);
    big[3] = 1 << 20;
    pr.num_tokens = 8;
    cr_assert_eq(tram_engine_add_request(e, 1, &pr, &p, 0, &err), -1);
    cr_assert_eq(tram_engine_has_unfinished(e), 0);
    tram_engine_destroy(e);
}

/* The text of the first n generated tokens, as the tokenizer decodes them. */
static size_t decoded_len(tram_engine *e, const int32_t *ids, int n)
{
    char *text;
    size_t len;
    tram_error err;
    cr_assert_eq(tram_tokenizer_decode(tram_engine_tokenizer(e), ids, n, 1, &text, &len, &err), 0);
    free(text);
    return len;
}

Test(engine, min_tokens_holds_back_stop_strings, .timeout = 120)
{
    static result plain[1], early[1], held[1];
    enum { MIN = 6 };
    tram_engine_config c = base_config();
    tram_engine *e = make_engine(&c);
    const char *prompt = "Count with me: 1, 2, 3, 4, 5, 6,";
    tram_sampling_params p = test_greedy_params(12);
    add(e, 0, prompt, &p);
    drain(e, plain);
    const char *text = plain[0].text[0], *stops[] = {","};
    size_t prefix = decoded_len(e, plain[0].toks[0], MIN);
    const char *first = strstr(text, stops[0]), *later = strstr(text + prefix, stops[0]);
    cr_assert(first && (size_t)(first - text) < prefix,
              "the stop string should occur within the first %d tokens of '%s'", MIN, text);
    p.stop = stops;
    p.num_stop = 1;
    add(e, 0, prompt, &p);
    drain(e, early);
    cr_assert_eq(early[0].finish[0], TRAM_FINISH_STOP);
    cr_assert_eq(strlen(early[0].text[0]), (size_t)(first - text));
    cr_assert_eq(strncmp(early[0].text[0], text, (size_t)(first - text)), 0);
    p.min_tokens = MIN;
    add(e, 0, prompt, &p);
    drain(e, held);
    size_t want = later ? (size_t)(later - text) : strlen(text);
    cr_assert_geq(held[0].n[0], MIN);
    cr_assert_arr_eq(held[0].toks[0], plain[0].toks[0], held[0].n[0] * sizeof(int32_t));
    cr_assert_eq(held[0].finish[0], later ? TRAM_FINISH_STOP : TRAM_FINISH_LENGTH);
    cr_assert_eq(strlen(held[0].text[0]), want, "'%s' vs '%s'", held[0].text[0], text);
    cr_assert_eq(strncmp(held[0].text[0], text, want), 0);
    assert_no_leak(e);
    tram_engine_destroy(e);
}

/* Under an int8 KV cache, one batch where later requests hit the first's
 * cached prefix blocks, prefill in chunks of 13 tokens and are preempted by a
 * pool of 24 blocks of 4, gives each request the tokens it gets alone (whole
 * prefill, no prefix cache, room to spare): each token's K/V are quantized
 * once, when stored, whatever the step that stores them. */
Test(engine, int8_kv_mixed_batch_equals_each_alone, .timeout = 300)
{
    enum { N = 5 };
    static result mixed[N], alone[N];
    char buf[N][512];
    snprintf(buf[0], sizeof(buf[0]), "Paris is");
    for (int i = 1; i < N; i++)
        snprintf(buf[i], sizeof(buf[i]), "%s Now tell me about planet number %d.", long_prompt, i);
    tram_sampling_params p = test_greedy_params(10);
    tram_engine_config c = base_config();
    snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "int8");
    c.max_model_len = 80;
    c.block_size = 4;
    c.num_kv_blocks = 24;
    c.max_num_batched_tokens = 13;
    c.max_num_seqs = 4;
    tram_engine *e = make_engine(&c);
    add(e, 1, buf[1], &p); /* first alone, so that the others can hit its blocks */
    drain(e, mixed);
    for (int i = 0; i < N; i++)
        if (i != 1)
            add(e, (uint64_t)i, buf[i], &p);
    drain(e, mixed);
    tram_engine_stats s = assert_no_leak(e);
    tram_engine_destroy(e);
    cr_assert_gt(s.prefix_cache_hits, 0, "the batch must hit cached prefix blocks");
    cr_assert_gt(s.num_preemptions, 0, "the pool of 24 blocks must force preemptions");

    c = base_config();
    snprintf(c.kv_cache_dtype, sizeof(c.kv_cache_dtype), "int8");
    c.enable_prefix_caching = 0;
    c.block_size = 4; /* attention's key chunks end at block ends: the same sums */
    e = make_engine(&c);
    for (int i = 0; i < N; i++) {
        add(e, (uint64_t)i, buf[i], &p);
        drain(e, alone);
    }
    assert_no_leak(e);
    tram_engine_destroy(e);
    assert_same(mixed, alone, N, 1);
}
