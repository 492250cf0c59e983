/* The default model through `tram quantize`'s path (calibration on
 * tests/fixtures/int8/calib.txt, SmoothQuant α = 0.5, int8 GGUF), loaded back
 * and run against the golden greedy tokens of Hugging Face transformers (the
 * f32 model reproduces them: test_forward.c).  Each golden continuation is
 * fed whole (teacher forcing), so one early difference does not decide every
 * later position; the int8 model's argmax must agree on at least
 * MIN_AGREEMENT of the positions. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/defaults.h"
#include "cli/text_file.h"
#include "models/quantize.h"
#include "tests/unit/test_quantize_util.h"
#include "tests/unit/test_util.h"
#include "tokenizer/tokenizer.h"

#define GOLDEN "tests/fixtures/golden/smollm2.json"
#define CALIB "tests/fixtures/int8/calib.txt"
#define CALIB_TOKENS 256
/* Measured on the 211 golden positions: this model 196 (0.929); int8
 * without smoothing 187 (0.886); f32 all 211.  The floor sits between the
 * first two, so losing the smoothing fails the test, and leaves 6 tokens for
 * calibration sums that vary with the thread count. */
#define MIN_AGREEMENT 0.90

typedef struct {
    int32_t ids[1024];
    int n_prompt, n;
} golden_seq;

static int load_golden(golden_seq *seqs, int cap)
{
    json_error_t jerr;
    json_t *root = json_load_file(GOLDEN, 0, &jerr);
    cr_assert(root, "cannot read %s: %s", GOLDEN, jerr.text);
    json_t *cases = json_object_get(root, "cases");
    int n = (int)json_array_size(cases);
    cr_assert(n <= cap);
    for (int c = 0; c < n; c++) {
        json_t *prompt = json_object_get(json_array_get(cases, c), "prompt_ids");
        json_t *greedy = json_object_get(json_array_get(cases, c), "greedy_ids");
        golden_seq *s = &seqs[c];
        s->n_prompt = (int)json_array_size(prompt);
        s->n = s->n_prompt + (int)json_array_size(greedy);
        cr_assert(s->n <= TEST_MAX_TOKENS);
        for (int i = 0; i < s->n; i++)
            s->ids[i] = (int32_t)json_integer_value(
                i < s->n_prompt ? json_array_get(prompt, i) : json_array_get(greedy, i - s->n_prompt));
    }
    json_decref(root);
    return n;
}

static void quantize_default_model(const char *out)
{
    tram_error err;
    tram_model_file *f;
    tram_tokenizer *tok;
    int32_t *ids;
    int n;
    tram_calib_stats st;
    cr_assert(!tram_model_file_open(&f, TRAM_DEFAULT_MODEL, &err), "%s", err.msg);
    cr_assert(!tram_tokenizer_from_gguf(&tok, tram_model_file_gguf(f), &err), "%s", err.msg);
    cr_assert(!tram_tokenize_file(tok, CALIB, &ids, &n, &err), "%s", err.msg);
    cr_assert(n >= CALIB_TOKENS);
    cr_assert(!tram_calibrate(f, ids, CALIB_TOKENS, CALIB_TOKENS, 2, 0, 0, &st, &err), "%s", err.msg);
    tram_quant_opts o = {.out_path = out, .stats = &st, .alpha = 0.5f};
    cr_assert(!tram_quantize_model(f, &o, &err), "%s", err.msg);
    tram_calib_stats_free(&st);
    free(ids);
    tram_tokenizer_free(tok);
    tram_model_file_close(f);
}

Test(quantize_model, w8a8_smoothquant_agrees_with_the_golden_greedy_tokens, .timeout = 300)
{
    char path[128];
    snprintf(path, sizeof(path), "/tmp/tram-test-w8a8-%d.gguf", (int)getpid());
    quantize_default_model(path);
    tram_error err;
    tram_model_file *f;
    tram_backend *be;
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    cr_assert(tram_model_file_is_int8(f, "blk.0.ffn_down.weight"));
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    tram_model *m = test_model_load(f, be, 0);
    int vocab = tram_model_config_of(m)->vocab_size;
    static golden_seq seqs[16];
    int n_cases = load_golden(seqs, 16), same = 0, total = 0;
    float *logits = malloc((size_t)TEST_MAX_TOKENS * vocab * sizeof(float));
    for (int c = 0; c < n_cases; c++) {
        golden_seq *s = &seqs[c];
        test_forward_all(m, s->ids, s->n - 1, logits);
        for (int p = s->n_prompt - 1; p < s->n - 1; p++, total++)
            same += test_argmax(logits + (size_t)p * vocab, vocab) == s->ids[p + 1];
    }
    double agreement = (double)same / total;
    cr_log_info("W8A8 SmoothQuant: %d of %d golden greedy tokens (%.3f)", same, total, agreement);
    cr_assert(agreement >= MIN_AGREEMENT, "%d of %d golden greedy tokens (%.3f < %.2f)", same, total, agreement,
              MIN_AGREEMENT);
    free(logits);
    tram_model_destroy(m);
    be->destroy(be);
    tram_model_file_close(f);
    unlink(path);
}
