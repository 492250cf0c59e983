/* Dummy weights (--load-format dummy, models/dummy.h): the preset's shapes under
 * the loader's tensor names, values with the promised statistics, exactly bf16,
 * the same on every read; and the smollm2-135m preset runs a forward pass on
 * the CPU backend with finite, repeatable logits of unit spread; the engine
 * runs them with another model's tokenizer; in a block format (the native
 * format's roofline on any model size) a matrix's blocks are its values
 * quantized, and its f32 read is those blocks dequantized. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tram.h"
#include "models/gguf.h"
#include "models/model.h"
#include "models/presets.h"
#include "tests/unit/test_util.h"

#define BLOCK 16

static float *read_tensor(tram_model_file *f, const char *name, int64_t n)
{
    tram_error err = {{0}};
    float *v = malloc((size_t)n * sizeof(float));
    cr_assert(v);
    cr_assert_eq(tram_model_file_read_f32(f, name, v, n, &err), 0, "%s: %s", name, err.msg);
    return v;
}

static tram_model_file *open_dummy(const char *preset)
{
    tram_model_file *f = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_model_file_open_dummy(&f, preset, &err), 0, "%s", err.msg);
    return f;
}

Test(dummy, config_is_the_presets)
{
    tram_model_config want;
    tram_error err = {{0}};
    cr_assert_eq(tram_preset_load("qwen2.5-7b", &want, &err), 0, "%s", err.msg);
    tram_model_file *f = open_dummy("qwen2.5-7b");
    cr_assert_eq(memcmp(tram_model_file_config(f), &want, sizeof(want)), 0);
    cr_assert_str_eq(tram_model_file_path(f), "dummy:qwen2.5-7b");
    cr_assert_null(tram_model_file_gguf(f));
    cr_assert(tram_model_file_has_tensor(f, "blk.27.attn_q.bias"));   /* qwen2 has qkv biases */
    cr_assert(tram_model_file_has_tensor(f, "output.weight"));        /* and an untied head */
    cr_assert(!tram_model_file_has_tensor(f, "blk.28.attn_q.weight")); /* 28 layers: 0..27 */
    cr_assert(!tram_model_file_has_tensor(f, "rope_freqs.weight"));
    tram_model_file_close(f);
    f = open_dummy("smollm2-135m");
    cr_assert(!tram_model_file_has_tensor(f, "blk.0.attn_q.bias"));
    cr_assert(!tram_model_file_has_tensor(f, "output.weight"));       /* tied */
    cr_assert(!tram_model_file_has_tensor(f, "blk.x.attn_q.weight"));
    cr_assert(!tram_model_file_has_tensor(f, "blk.0.attn_q_norm.weight"));
    tram_model_file_close(f);
    f = open_dummy("qwen3-0.6b");                                     /* per-head q/k norms, no biases */
    cr_assert(tram_model_file_has_tensor(f, "blk.27.attn_k_norm.weight"));
    cr_assert(!tram_model_file_has_tensor(f, "blk.0.attn_q.bias"));
    float *norm = read_tensor(f, "blk.0.attn_q_norm.weight", 128);
    free(norm);
    tram_model_file_close(f);
}

Test(dummy, bad_names_sizes_and_presets_are_errors)
{
    tram_model_file *f = open_dummy("smollm2-135m");
    tram_error err = {{0}};
    float v[8];
    cr_assert_eq(tram_model_file_read_f32(f, "blk.0.attn_q.bias", v, 8, &err), -1);
    cr_assert(strstr(err.msg, "blk.0.attn_q.bias"), "%s", err.msg);
    cr_assert_eq(tram_model_file_read_f32(f, "output_norm.weight", v, 8, &err), -1);
    cr_assert(strstr(err.msg, "576"), "%s", err.msg);
    tram_model_file_close(f);
    cr_assert_eq(tram_model_file_open_dummy(&f, "no-such-preset", &err), -1);
    cr_assert(strstr(err.msg, "no-such-preset"), "%s", err.msg);
}

/* Values keyed by name: two files agree, two names differ; matrices have
 * mean 0 and variance 1/cols, norms lie in 1 ± 0.1 (plus bf16 rounding, at
 * most 2^-8 near 1); everything is bf16. */
Test(dummy, values_have_the_promised_statistics)
{
    tram_model_file *a = open_dummy("smollm2-135m"), *b = open_dummy("smollm2-135m");
    const int64_t rows = 1536, cols = 576, n = rows * cols;
    float *up = read_tensor(a, "blk.3.ffn_up.weight", n), *again = read_tensor(b, "blk.3.ffn_up.weight", n);
    float *gate = read_tensor(a, "blk.3.ffn_gate.weight", n), *norm = read_tensor(a, "blk.3.attn_norm.weight", cols);
    cr_assert_eq(memcmp(up, again, (size_t)n * sizeof(float)), 0);
    double sum = 0, sq = 0;
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &up[i], 4);
        cr_assert_eq(bits & 0xffff, 0, "element %lld is not a bf16 value", (long long)i);
        sum += up[i];
        sq += (double)up[i] * up[i];
        same += up[i] == gate[i];
    }
    double mean = sum / n, var = sq / n - mean * mean, want = 1.0 / cols;
    cr_assert(fabs(mean) < 0.01 * sqrt(want), "mean %g", mean);
    cr_assert(fabs(var / want - 1) < 0.01, "variance %g, want %g", var, want);
    cr_assert(same < n / 100, "%lld of %lld values equal across two tensors", (long long)same, (long long)n);
    for (int64_t i = 0; i < cols; i++)
        cr_assert(norm[i] >= 0.896f && norm[i] <= 1.104f, "norm[%lld] = %g", (long long)i, norm[i]);
    free(up), free(again), free(gate), free(norm);
    tram_model_file_close(a);
    tram_model_file_close(b);
}

/* Greedy decoding of a 5-token prompt: the prefill's last row equals a
 * decode step's row for the same context, logits are finite with a spread of
 * order one, and a second model built from a second file gives the same
 * logits bit for bit. */
static void prefill(tram_model *m, const int32_t *ids, int n, float *logits)
{
    int32_t pos[8], slots[8], qs[2] = {0, n}, lens[1] = {n}, table[4] = {3, 2, 1, 0}, row[1] = {n - 1};
    for (int i = 0; i < n; i++) {
        pos[i] = i;
        slots[i] = table[i / BLOCK] * BLOCK + i % BLOCK;
    }
    tram_batch b = {.num_tokens = n, .num_seqs = 1, .token_ids = ids, .positions = pos, .slot_mapping = slots,
                    .query_start = qs, .seq_lens = lens, .block_tables = table, .max_blocks_per_seq = 4,
                    .logits_rows = row, .num_logits = 1};
    tram_error err = {{0}};
    cr_assert_eq(tram_model_forward(m, &b, logits, &err), 0, "%s", err.msg);
}

static tram_model *cpu_model(tram_model_file *f, tram_backend *be)
{
    tram_model_limits lim = {.max_tokens = 8, .max_seqs = 1, .max_blocks_per_seq = 4, .num_blocks = 4,
                             .block_size = BLOCK, .weight_type = TRAM_W_F32};
    tram_model *m = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_model_create(&m, f, be, &lim, &err), 0, "%s", err.msg);
    return m;
}

Test(dummy, smollm2_forward_is_finite_and_repeatable, .timeout = 120)
{
    tram_backend *be;
    tram_error err = {{0}};
    cr_assert_eq(tram_backend_cpu_create(&be, 2, &err), 0, "%s", err.msg);
    tram_model_file *f = open_dummy("smollm2-135m");
    int vocab = tram_model_file_config(f)->vocab_size;
    float *l1 = malloc((size_t)vocab * 4), *l2 = malloc((size_t)vocab * 4), *l3 = malloc((size_t)vocab * 4);
    const int32_t ids[5] = {1, 4093, 27, 31999, 49151};
    tram_model *m = cpu_model(f, be);
    prefill(m, ids, 5, l1);
    prefill(m, ids, 5, l2);
    tram_model_destroy(m);
    tram_model_file_close(f);
    f = open_dummy("smollm2-135m");
    m = cpu_model(f, be);
    prefill(m, ids, 5, l3);
    double sq = 0;
    for (int i = 0; i < vocab; i++) {
        cr_assert(isfinite(l1[i]), "logit %d is %g", i, l1[i]);
        sq += (double)l1[i] * l1[i];
    }
    double rms = sqrt(sq / vocab);
    cr_assert(rms > 0.2 && rms < 5, "logits rms %g", rms);
    cr_assert_eq(memcmp(l1, l2, (size_t)vocab * 4), 0, "same model, same prompt, other logits");
    cr_assert_eq(memcmp(l1, l3, (size_t)vocab * 4), 0, "a second dummy model differs");
    tram_model_destroy(m);
    tram_model_file_close(f);
    be->destroy(be);
    free(l1), free(l2), free(l3);
}

/* The engine on dummy weights whose tokenizer (the 1200-token SentencePiece
 * fixture) is smaller than the preset's 49152-row LM head: it accepts and
 * samples only ids the tokenizer decodes, and finishes the request. */
Test(dummy, engine_samples_only_ids_its_tokenizer_decodes, .timeout = 120)
{
    tram_engine_config ec;
    tram_engine_config_init(&ec);
    ec.num_kv_blocks = 16;
    ec.max_model_len = 256;
    ec.num_threads = 2;
    tram_engine *e = NULL;
    tram_error err = {{0}};
    strcpy(ec.preset, "smollm2-135m");
    cr_assert_eq(tram_engine_create(&e, &ec, "", &err), -1, "a preset without --load-format dummy");
    cr_assert(strstr(err.msg, "--load-format dummy"), "%s", err.msg);
    strcpy(ec.load_format, "dummy");
    ec.preset[0] = 0;
    cr_assert_eq(tram_engine_create(&e, &ec, "", &err), -1, "dummy weights without a preset");
    cr_assert(strstr(err.msg, "--preset"), "%s", err.msg);
    strcpy(ec.preset, "smollm2-135m");
    strcpy(ec.tokenizer, "tests/fixtures/tokenizer/spm/spm.gguf");
    cr_assert_eq(tram_engine_create(&e, &ec, "", &err), 0, "%s", err.msg);
    cr_assert_str_eq(tram_engine_model_name(e), "dummy-smollm2-135m");
    tram_sampling_params p;
    tram_sampling_params_init(&p);
    p.max_tokens = 24;
    p.ignore_eos = 1;
    p.temperature = 5.0f; /* near-uniform draws would hit ids >= 1200 at once if allowed */
    int32_t ids[3] = {5, 700, 1199}, bad[1] = {1200};
    tram_prompt pr = {.token_ids = bad, .num_tokens = 1};
    cr_assert_eq(tram_engine_add_request(e, 1, &pr, &p, 0, &err), -1);
    pr = (tram_prompt){.token_ids = ids, .num_tokens = 3};
    cr_assert_eq(tram_engine_add_request(e, 1, &pr, &p, 0, &err), 0, "%s", err.msg);
    int got = 0;
    while (tram_engine_has_unfinished(e)) {
        const tram_output *outs;
        int n = test_step(e, &outs);
        for (int k = 0; k < n; k++)
            for (int t = 0; t < outs[k].num_tokens; t++, got++)
                cr_assert(outs[k].token_ids[t] >= 0 && outs[k].token_ids[t] < 1200, "sampled id %d",
                          outs[k].token_ids[t]);
    }
    cr_assert_eq(got, 24);
    tram_engine_destroy(e);
}

/* The formula the CUDA backend draws dummy weights with on the device
 * (kernels/dummy_values.h, its upload_weight_dummy) gives bit for bit the
 * values the host reads (tests/gpu/check_e2e.c compares the device's own). */
Test(dummy, the_device_formula_is_the_hosts)
{
    tram_model_file *f = open_dummy("smollm2-135m");
    const tram_model_config *c = tram_model_file_config(f);
    const char *names[] = {"blk.3.attn_norm.weight", "blk.0.attn_k.weight", "blk.1.ffn_down.weight"};
    int64_t counts[] = {c->dim, (int64_t)c->n_kv_heads * c->head_dim * c->dim, (int64_t)c->dim * c->ffn_dim};
    for (size_t t = 0; t < TRAM_ARRAY_LEN(names); t++) {
        float *host = read_tensor(f, names[t], counts[t]);
        tram_dummy_stream s;
        tram_error err = {{0}};
        cr_assert_eq(tram_model_file_dummy_stream(f, names[t], counts[t], &s, &err), 1, "%s", err.msg);
        for (int64_t i = 0; i < counts[t]; i++) {
            float v = tram_dummy_value(&s, (uint64_t)i);
            cr_assert_eq(memcmp(&v, &host[i], 4), 0, "%s[%lld]: %a, host %a", names[t], (long long)i, v, host[i]);
        }
        free(host);
    }
    tram_error err = {{0}};
    tram_dummy_stream s;
    cr_assert_eq(tram_model_file_dummy_stream(f, "blk.0.attn_k.weight", 5, &s, &err), -1, "a wrong size is refused");
    tram_model_file_close(f);
}

Test(dummy, block_matrices_are_the_values_quantized)
{
    tram_model_file *plain = open_dummy("smollm2-135m"), *f = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_model_file_open_dummy_blocks(&f, "smollm2-135m", TRAM_GGML_Q4_1, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_model_file_block_type(f, "blk.3.ffn_down.weight"), TRAM_W_Q4_1);
    cr_assert_eq(tram_model_file_block_type(f, "token_embd.weight"), TRAM_W_Q4_1);
    cr_assert_eq(tram_model_file_block_type(f, "blk.3.ffn_norm.weight"), TRAM_W_F32, "norms stay f32");
    cr_assert_eq(tram_model_file_block_type(plain, "blk.3.ffn_down.weight"), TRAM_W_F32);
    tram_dummy_stream st;
    cr_assert_eq(tram_model_file_dummy_stream(f, "blk.0.attn_k.weight", 192 * 576, &st, &err), 0,
                 "a block matrix's values are its blocks', not the stream's");
    int64_t n = 192 * 576; /* blk.0.attn_k: 3 kv heads of 64 x dim 576 */
    size_t bytes = 0;
    uint8_t *blocks = malloc((size_t)tram_ggml_type_size(TRAM_GGML_Q4_1, n));
    float *dq = malloc((size_t)n * sizeof(float));
    cr_assert_eq(tram_model_file_read_blocks(f, "blk.0.attn_k.weight", blocks, n, &bytes, &err), 0, "%s", err.msg);
    cr_assert_eq(bytes, (size_t)tram_ggml_type_size(TRAM_GGML_Q4_1, n));
    cr_assert_eq(tram_dequantize(TRAM_GGML_Q4_1, blocks, dq, n, &err), 0, "%s", err.msg);
    float *got = read_tensor(f, "blk.0.attn_k.weight", n), *raw = read_tensor(plain, "blk.0.attn_k.weight", n);
    double a = sqrt(3.0 / 576), worst = 0; /* values uniform on [-a, a] */
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(got[i], dq[i], "[%lld]: the f32 read is the blocks dequantized", (long long)i);
        worst = fmax(worst, fabs(got[i] - raw[i]));
    }
    cr_assert(worst > 0 && worst <= 2 * a / 15 * 0.51 + 1e-4, "quantization moved a value by %g", worst);
    cr_assert_eq(tram_model_file_read_blocks(f, "blk.0.attn_norm.weight", blocks, 576, &bytes, &err), -1);
    tram_model_file_close(f);
    cr_assert_eq(tram_model_file_open_dummy_blocks(&f, "smollm2-135m", TRAM_GGML_Q6_K, &err), -1);
    cr_assert(strstr(err.msg, "Q6_K"), "%s", err.msg);
    TRAM_FREE_ALL(blocks, dq, got, raw);
    tram_model_file_close(plain);
}
