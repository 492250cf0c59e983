/* tram_perplexity against a direct computation written out here: the tiny
 * model decoding one token at a time, log-softmax in double; KL divergence
 * and top-1 agreement against logits of both models computed separately. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/perplexity.h"
#include "tests/unit/test_quantize_util.h"

#define CTX TEST_MAX_TOKENS
#define N_TOKENS (2 * CTX + 100)  /* two windows and a partial one, dropped */

static char path[128];
static tram_model_file *file;
static tram_backend *be;
static tram_model *f32, *int8;
static int32_t tokens[N_TOKENS];

static void setup(void)
{
    tram_error err;
    snprintf(path, sizeof(path), "/tmp/tram-test-ppl-%d.gguf", (int)getpid());
    tiny_model_write(path, 9);
    cr_assert(!tram_model_file_open(&file, path, &err), "%s", err.msg);
    /* one thread: a thousand tiny forward passes would mostly wait on
     * OpenMP barriers */
    cr_assert(!tram_backend_cpu_create(&be, 1, &err), "%s", err.msg);
    f32 = test_model_load(file, be, 0);
    int8 = test_model_load(file, be, 1);
    unsigned s = 77;
    for (int i = 0; i < N_TOKENS; i++) { /* a little structure, so the model is not uniform over it */
        s = s * 1103515245u + 12345u;
        tokens[i] = i % 3 == 2 ? tokens[i - 1] : (int32_t)((s >> 16) % TINY_VOCAB);
    }
}

static void teardown(void)
{
    tram_model_destroy(f32);
    tram_model_destroy(int8);
    be->destroy(be);
    tram_model_file_close(file);
    unlink(path);
}

TestSuite(perplexity, .init = setup, .fini = teardown, .timeout = 120);

static double log_softmax_at(const float *logits, int target)
{
    double mx = logits[0], sum = 0;
    for (int v = 1; v < TINY_VOCAB; v++)
        mx = fmax(mx, logits[v]);
    for (int v = 0; v < TINY_VOCAB; v++)
        sum += exp(logits[v] - mx);
    return logits[target] - mx - log(sum);
}

/* Logits of position p of a sequence whose earlier tokens are cached. */
static void decode_one(tram_model *m, int32_t token, int p, float *logits)
{
    tram_error err;
    int32_t blocks[CTX / 16], qs[2] = {0, 1}, len = p + 1, row = 0, pos = p;
    for (int b = 0; b < CTX / 16; b++)
        blocks[b] = b;
    tram_batch b = {.num_tokens = 1, .num_seqs = 1, .token_ids = &token, .positions = &pos, .slot_mapping = &pos,
                    .query_start = qs, .seq_lens = &len, .block_tables = blocks, .max_blocks_per_seq = CTX / 16,
                    .num_logits = 1, .logits_rows = &row};
    cr_assert(!tram_model_forward(m, &b, logits, &err), "%s", err.msg);
}

static void check_against_decoding(int first, int32_t bos)
{
    tram_error err;
    tram_ppl_opts o = {.ctx = CTX, .first = first, .bos = bos};
    tram_ppl_stats st;
    cr_assert(!tram_perplexity(f32, NULL, tokens, N_TOKENS, &o, &st, &err), "%s", err.msg);
    double nll = 0;
    int scored = 0;
    float logits[TINY_VOCAB];
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < CTX - 1; p++) {
            const int32_t *win = tokens + w * CTX;
            decode_one(f32, p == 0 && bos >= 0 ? bos : win[p], p, logits);
            if (p >= first) {
                nll -= log_softmax_at(logits, win[p + 1]);
                scored++;
            }
        }
    cr_assert_eq(st.scored, scored);
    cr_assert_eq(scored, 2 * (CTX - 1 - first));
    double want = exp(nll / scored), got = exp(st.nll / st.scored);
    cr_assert(fabs(got - want) <= 1e-4 * want, "PPL %.6f vs decoded %.6f", got, want);
    cr_assert(want > 1.5 && want < 1000, "PPL %.3f: a random model, but not a degenerate one", want);
}

Test(perplexity, equals_token_by_token_decoding_llama_style_halves)
{
    check_against_decoding(CTX / 2, -1);
}

Test(perplexity, equals_decoding_with_every_position_and_bos)
{
    check_against_decoding(0, 5);
}

Test(perplexity, a_model_against_itself_has_zero_kl_and_full_agreement)
{
    tram_error err;
    tram_ppl_opts o = {.ctx = CTX, .first = CTX / 2, .bos = -1};
    tram_ppl_stats st;
    cr_assert(!tram_perplexity(f32, f32, tokens, N_TOKENS, &o, &st, &err), "%s", err.msg);
    cr_assert_eq(st.top1_same, st.scored);
    cr_assert(fabs(st.kl) < 1e-9 * st.scored, "KL %g", st.kl);
    cr_assert_eq(st.nll, st.ref_nll);
}

/* KL(f32 || int8) and top-1 agreement over the first window, recomputed here
 * from both models' logits of every position. */
Test(perplexity, kl_and_top1_match_a_direct_computation)
{
    tram_error err;
    tram_ppl_opts o = {.ctx = CTX, .first = 100, .max_windows = 1, .bos = -1};
    tram_ppl_stats st;
    cr_assert(!tram_perplexity(int8, f32, tokens, N_TOKENS, &o, &st, &err), "%s", err.msg);
    float *lq = malloc((size_t)CTX * TINY_VOCAB * 4), *lf = malloc((size_t)CTX * TINY_VOCAB * 4);
    test_forward_all(int8, tokens, CTX, lq);
    test_forward_all(f32, tokens, CTX, lf);
    double kl = 0;
    int same = 0, n = 0;
    for (int p = 100; p < CTX - 1; p++, n++) {
        const float *a = lf + (size_t)p * TINY_VOCAB, *b = lq + (size_t)p * TINY_VOCAB;
        int am = 0, bm = 0;
        for (int v = 0; v < TINY_VOCAB; v++) {
            double la = log_softmax_at(a, v), lb = log_softmax_at(b, v);
            kl += exp(la) * (la - lb);
            am = a[v] > a[am] ? v : am;
            bm = b[v] > b[bm] ? v : bm;
        }
        same += am == bm;
    }
    cr_assert_eq(st.scored, n);
    cr_assert(kl > 0, "int8 should differ from f32 a little");
    cr_assert(fabs(st.kl - kl) <= 1e-3 * kl, "KL %g vs %g", st.kl / n, kl / n);
    cr_assert(abs((int)st.top1_same - same) <= 1, "top-1 %lld vs %d", (long long)st.top1_same, same);
    free(lq), free(lf);
}

Test(perplexity, refuses_texts_shorter_than_a_window_and_bad_windows)
{
    tram_error err;
    tram_ppl_stats st;
    tram_ppl_opts o = {.ctx = CTX, .first = 10, .bos = -1};
    cr_assert_eq(tram_perplexity(f32, NULL, tokens, CTX - 1, &o, &st, &err), -1);
    cr_assert(strstr(err.msg, "fewer than one window"), "%s", err.msg);
    o.first = CTX - 1;
    cr_assert_eq(tram_perplexity(f32, NULL, tokens, N_TOKENS, &o, &st, &err), -1);
}
