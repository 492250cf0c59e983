/* Embeddings against the golden fixtures of tests/fixtures/make_embed_fixtures.py
 * (a tiny Qwen3-Embedding-style model, as a sentence-transformers directory
 * and as a GGUF): cosine >= 1 - 1e-4 against sentence-transformers and
 * transformers for last-token, mean and CLS pooling and Matryoshka
 * truncation; batch invariance (alone = batched = chunked = served from the
 * prefix cache = beside a generation, within 1e-6); the metadata's refusals. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/tram.h"
#include "models/model.h"
#include "tests/unit/test_util.h"

#define EMBED_DIR "tests/fixtures/embed/"
#define ST_DIR EMBED_DIR "qwen3-st"
#define GGUF EMBED_DIR "qwen3-embed.gguf"
#define MAX_CASES 8
#define DIM 32

static json_t *golden(void)
{
    json_error_t je;
    json_t *g = json_load_file(EMBED_DIR "qwen3.json", 0, &je);
    cr_assert(g, "%s", je.text);
    cr_assert_leq(json_array_size(json_object_get(g, "cases")), MAX_CASES);
    return g;
}

static tram_engine *make_engine(const char *path, tram_pooling pooling, int max_batched)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 1;
    c.max_model_len = 256;
    c.num_kv_blocks = 256;
    c.max_num_seqs = 16;
    c.pooling = pooling;
    if (max_batched)
        c.max_num_batched_tokens = c.max_num_seqs = max_batched;
    return test_engine_create(&c, path);
}

typedef struct {
    float v[MAX_CASES + 1][DIM];
    int dim[MAX_CASES + 1];
    int done[MAX_CASES + 1];
} vectors;

/* A test_output_visitor: request ids index the vectors ctx points to. */
static void record_vector(const tram_output *o, void *ctx)
{
    vectors *out = ctx;
    if (!o->embedding)
        return;
    cr_assert_eq(o->finish_reason, TRAM_FINISH_STOP);
    cr_assert_eq(o->num_tokens, 0);
    cr_assert_eq(o->completion_tokens, 0);
    memcpy(out->v[o->request_id], o->embedding, (size_t)o->embedding_dim * sizeof(float));
    out->dim[o->request_id] = o->embedding_dim;
    out->done[o->request_id]++;
}

/* Steps until nothing is left. */
static void drain(tram_engine *e, vectors *out)
{
    test_drain(e, record_vector, out);
}

static int case_ids(const json_t *c, int32_t *ids, int cap)
{
    const json_t *a = json_object_get(c, "ids");
    int n = (int)json_array_size(a);
    cr_assert_leq(n, cap);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return n;
}

static void add(tram_engine *e, uint64_t id, const json_t *c, int use_text, int dims)
{
    int32_t ids[256];
    tram_prompt p = {.text = use_text ? json_string_value(json_object_get(c, "text")) : NULL};
    if (!use_text) {
        p.token_ids = ids;
        p.num_tokens = case_ids(c, ids, 256);
    }
    tram_embed_params ep = {.dimensions = dims};
    tram_error err = {{0}};
    cr_assert_eq(tram_engine_add_embedding(e, id, &p, &ep, 0, &err), 0, "%s", err.msg);
}

static double cosine(const float *a, const json_t *ref, int n)
{
    cr_assert_eq((int)json_array_size(ref), n);
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        double b = json_real_value(json_array_get(ref, (size_t)i));
        ab += a[i] * b;
        aa += (double)a[i] * a[i];
        bb += b * b;
    }
    return ab / sqrt(aa * bb);
}

/* Every case embedded in one batch, compared with the reference `key`. */
static void check_against(const char *path, tram_pooling pooling, int use_text, int dims, const char *key)
{
    json_t *g = golden();
    const json_t *cases = json_object_get(g, "cases");
    tram_engine *e = make_engine(path, pooling, 0);
    vectors out = {0};
    for (size_t i = 0; i < json_array_size(cases); i++)
        add(e, i, json_array_get(cases, i), use_text, dims);
    drain(e, &out);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *ref = json_object_get(json_array_get(cases, i), key);
        cr_assert_eq(out.done[i], 1, "case %zu", i);
        double cos = cosine(out.v[i], ref, out.dim[i]);
        cr_expect_geq(cos, 1 - 1e-4, "%s %s case %zu: cosine %.7f", path, key, i, cos);
        double norm = 0;
        for (int d = 0; d < out.dim[i]; d++)
            norm += (double)out.v[i][d] * out.v[i][d];
        cr_expect_float_eq(norm, 1.0, 1e-5, "case %zu: not normalized (%g)", i, norm);
    }
    tram_engine_destroy(e);
    json_decref(g);
}

Test(embed, sentence_transformers_dir_matches_sentence_transformers)
{
    check_against(ST_DIR, TRAM_POOLING_UNSET, 1, 0, "sentence_transformers");
    check_against(ST_DIR, TRAM_POOLING_UNSET, 0, 0, "last");
}

Test(embed, gguf_matches_transformers)
{
    check_against(GGUF, TRAM_POOLING_UNSET, 1, 0, "sentence_transformers");
    check_against(GGUF, TRAM_POOLING_UNSET, 0, 0, "last");
}

Test(embed, pooling_override_mean_and_cls)
{
    check_against(ST_DIR, TRAM_POOLING_MEAN, 0, 0, "mean");
    check_against(GGUF, TRAM_POOLING_CLS, 0, 0, "cls");
}

Test(embed, matryoshka_dimensions_cut_then_normalize)
{
    check_against(ST_DIR, TRAM_POOLING_UNSET, 0, 16, "last_dim16");
}

Test(embed, metadata_pooling_is_read)
{
    tram_engine *e = make_engine(ST_DIR, TRAM_POOLING_UNSET, 0);
    tram_pooling p;
    int normalize;
    tram_engine_pooling(e, &p, &normalize);
    cr_assert_eq(p, TRAM_POOLING_LAST);
    cr_assert_eq(normalize, 1);
    cr_assert(tram_engine_model_config(e)->matryoshka);
    tram_engine_destroy(e);
    e = make_engine(GGUF, TRAM_POOLING_UNSET, 0);
    cr_assert_eq(tram_engine_model_config(e)->pooling, TRAM_POOLING_LAST);
    /* the GGUF says nothing of Matryoshka: a shortened embedding is refused */
    tram_embed_params ep = {.dimensions = 16};
    const char *param = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_engine_check_embed(e, &ep, &param, &err), -1);
    cr_assert_str_eq(param, "dimensions");
    cr_assert(strstr(err.msg, "Matryoshka"), "%s", err.msg);
    tram_engine_destroy(e);
}

static double max_diff(const float *a, const float *b, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

/* Case 2 alone, then inside the batch of every case, chunked by a small
 * token budget, served from the prefix cache, and beside a generation. */
static void check_invariance(tram_pooling pooling)
{
    json_t *g = golden();
    const json_t *cases = json_object_get(g, "cases");
    size_t n = json_array_size(cases);
    const json_t *c = json_array_get(cases, 2);
    vectors alone = {0}, batched = {0}, chunked = {0}, again = {0}, mixed = {0};
    tram_engine *e = make_engine(ST_DIR, pooling, 0);
    add(e, 0, c, 0, 0);
    drain(e, &alone);
    for (size_t i = 0; i < n; i++)
        add(e, i, json_array_get(cases, i), 0, 0);
    drain(e, &batched);
    add(e, 0, c, 0, 0);   /* its full blocks are cached now: last pooling hits */
    drain(e, &again);
    int32_t ids[64];
    tram_prompt gen = {.token_ids = ids, .num_tokens = case_ids(json_array_get(cases, 0), ids, 64)};
    tram_sampling_params sp;
    tram_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = 4;
    tram_error err = {{0}};
    cr_assert_eq(tram_engine_add_request(e, 7, &gen, &sp, 0, &err), 0, "%s", err.msg);
    add(e, 2, c, 0, 0);
    drain(e, &mixed);
    tram_engine_stats st;
    tram_engine_stats_get(e, &st);
    tram_engine_destroy(e);
    e = make_engine(ST_DIR, pooling, 5);   /* every prompt in chunks of at most 5 tokens */
    for (size_t i = 0; i < n; i++)
        add(e, i, json_array_get(cases, i), 0, 0);
    drain(e, &chunked);
    tram_engine_destroy(e);
    cr_assert_lt(max_diff(alone.v[0], batched.v[2], DIM), 1e-6, "batched");
    cr_assert_lt(max_diff(alone.v[0], chunked.v[2], DIM), 1e-6, "chunked");
    cr_assert_lt(max_diff(alone.v[0], again.v[0], DIM), 1e-6, "from the prefix cache");
    cr_assert_lt(max_diff(alone.v[0], mixed.v[2], DIM), 1e-6, "beside a generation");
    if (pooling == TRAM_POOLING_LAST)
        cr_assert_gt(st.prefix_cache_hits, 0, "the cache served none of the repeated input");
    json_decref(g);
}

Test(embed, batch_invariance_last) { check_invariance(TRAM_POOLING_UNSET); }
Test(embed, batch_invariance_mean) { check_invariance(TRAM_POOLING_MEAN); }

Test(embed, whole_context_and_empty_inputs)
{
    tram_engine *e = make_engine(GGUF, TRAM_POOLING_UNSET, 0);
    int32_t ids[257];
    for (int i = 0; i < 257; i++)
        ids[i] = 100 + i;
    tram_embed_params ep = {0};
    tram_error err = {{0}};
    tram_prompt full = {.token_ids = ids, .num_tokens = 256}, over = {.token_ids = ids, .num_tokens = 257};
    cr_assert_eq(tram_engine_add_embedding(e, 1, &full, &ep, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_engine_add_embedding(e, 2, &over, &ep, 0, &err), -1);
    cr_assert(strstr(err.msg, "257 tokens"), "%s", err.msg);
    tram_prompt empty = {.text = ""};
    cr_assert_eq(tram_engine_add_embedding(e, 3, &empty, &ep, 0, &err), -1);
    vectors out = {0};
    drain(e, &out);
    cr_assert_eq(out.done[1], 1);
    tram_engine_destroy(e);
}

/* A sentence-transformers pipeline tram cannot compute is refused by name. */
Test(embed, unsupported_modules_are_refused)
{
    char dir[] = "/tmp/tram-embed-XXXXXX";
    cr_assert(mkdtemp(dir));
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp -r " ST_DIR "/. %s/", dir);
    cr_assert_eq(system(cmd), 0);
    static const char *const cases[][3] = {
        {"1_Pooling/config.json", "{\"embedding_dimension\": 32, \"pooling_mode\": \"max\"}", "max"},
        {"1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": true, \"pooling_mode_cls_token\": true}",
         "more than one"},
        {"1_Pooling/config.json", "{\"pooling_mode\": \"mean\", \"include_prompt\": false}", "include_prompt"},
        {"modules.json", "[{\"type\": \"sentence_transformers.models.Dense\", \"path\": \"2_Dense\"}]", "Dense"},
        {"sentence_bert_config.json", "{\"do_lower_case\": true}", "do_lower_case"},
        {"config_sentence_transformers.json", "{\"default_prompt_name\": \"query\"}", "default_prompt_name"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        snprintf(cmd, sizeof(cmd), "cp -r " ST_DIR "/. %s/", dir);
        cr_assert_eq(system(cmd), 0);
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, cases[i][0]);
        FILE *f = fopen(path, "w");
        cr_assert(f);
        fputs(cases[i][1], f);
        fclose(f);
        tram_model_file *mf = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_model_file_open(&mf, dir, &err), -1, "%s was accepted", cases[i][1]);
        cr_assert(strstr(err.msg, cases[i][2]), "%s", err.msg);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
