/* W8A8 quantization: --exclude names, the GGUF writer read back by the
 * reader, SmoothQuant's identity (on one linear layer by hand, and on a whole
 * tiny model: smoothed f32 weights give the same logits), the int8 GGUF's
 * tensors, and the default model quantized by `tram quantize`'s path against
 * the f32 model on the golden prompts. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/defaults.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/smoothquant.h"
#include "models/quantize.h"
#include "tests/unit/test_quantize_util.h"
#include "tokenizer/tokenizer.h"

static float urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* A private path under /tmp, removed by the caller. */
static void tmp_path(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/tmp/tram-test-%s-%d.gguf", tag, (int)getpid());
}

/* ---------------------------------------------------------------- names */

Test(quantize, exclude_matches_gguf_and_hf_names_on_dot_boundaries)
{
    const char *list = "lm_head, layers.1.mlp,model.layers.2.self_attn.o_proj,blk.3";
    cr_assert(tram_quant_excluded(list, "output.weight"));
    cr_assert(tram_quant_excluded(list, "token_embd.weight"), "tied table is the lm_head");
    cr_assert(tram_quant_excluded(list, "blk.1.ffn_down.weight"));
    cr_assert(tram_quant_excluded(list, "blk.1.ffn_gate.weight"));
    cr_assert(!tram_quant_excluded(list, "blk.1.attn_q.weight"));
    cr_assert(tram_quant_excluded(list, "blk.2.attn_output.weight"));
    cr_assert(!tram_quant_excluded(list, "blk.2.attn_v.weight"));
    cr_assert(tram_quant_excluded(list, "blk.3.attn_k.weight"));
    cr_assert(!tram_quant_excluded(list, "blk.13.attn_k.weight"), "blk.3 is not a prefix of blk.13");
    cr_assert(!tram_quant_excluded("layers.1", "blk.11.ffn_up.weight"));
    cr_assert(!tram_quant_excluded(NULL, "output.weight"));
    cr_assert(!tram_quant_excluded("", "output.weight"));
    cr_assert(tram_quant_excluded("embed_tokens", "token_embd.weight"));
}

/* ---------------------------------------------------------------- GGUF writer */

Test(quantize, gguf_writer_output_reads_back)
{
    char path[128];
    tmp_path(path, sizeof(path), "writer");
    tram_error err;
    tram_gguf_writer *w;
    cr_assert(!tram_gguf_writer_create(&w, path, &err), "%s", err.msg);
    /* an array copied from a reader's value: three u32 */
    uint32_t raw[3] = {7, 8, 9};
    tram_gguf_value arr = {.type = TRAM_GGUF_ARRAY,
                           .v.arr = {.elem_type = TRAM_GGUF_UINT32, .count = 3, .data = (const uint8_t *)raw,
                                     .data_len = sizeof(raw)}};
    tram_gguf_value i16 = {.type = TRAM_GGUF_INT16, .v.i64 = -5}, b = {.type = TRAM_GGUF_BOOL, .v.b = 1};
    int64_t ne_a[2] = {5, 3}, ne_b[1] = {7};
    cr_assert(!tram_gguf_writer_add_str(w, "s", "hello", &err) && !tram_gguf_writer_add_f32(w, "f", 1.5f, &err) &&
              !tram_gguf_writer_add_u32(w, "general.alignment", 64, &err) &&
              !tram_gguf_writer_add_kv(w, "a", &arr, &err) && !tram_gguf_writer_add_kv(w, "i", &i16, &err) &&
              !tram_gguf_writer_add_kv(w, "b", &b, &err) &&
              !tram_gguf_writer_add_tensor(w, "ta", TRAM_GGML_I8, 2, ne_a, &err) &&
              !tram_gguf_writer_add_tensor(w, "tb", TRAM_GGML_F32, 1, ne_b, &err), "%s", err.msg);
    int8_t qa[15];
    float fb[7];
    for (int i = 0; i < 15; i++)
        qa[i] = (int8_t)(i - 7);
    for (int i = 0; i < 7; i++)
        fb[i] = i * 0.25f;
    cr_assert_eq(tram_gguf_writer_write(w, qa, 14, &err), -1, "a short write is refused");
    cr_assert(!tram_gguf_writer_write(w, qa, 15, &err) && !tram_gguf_writer_write(w, fb, sizeof(fb), &err), "%s",
              err.msg);
    cr_assert(!tram_gguf_writer_finish(w, &err), "%s", err.msg);

    tram_gguf *g;
    cr_assert(!tram_gguf_open(&g, path, &err), "%s", err.msg);
    char *s;
    double f;
    uint64_t al;
    tram_gguf_value e;
    cr_assert(!tram_gguf_get_str(g, "s", &s, &err) && !strcmp(s, "hello"));
    free(s);
    cr_assert(!tram_gguf_get_f64(g, "f", &f, &err) && f == 1.5);
    cr_assert(!tram_gguf_get_u64(g, "general.alignment", &al, &err) && al == 64 && g->alignment == 64);
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, "a");
    cr_assert(kv && kv->value.v.arr.count == 3 && !tram_gguf_arr_elem(&kv->value, 2, &e, &err) && e.v.u64 == 9);
    cr_assert_eq(tram_gguf_find_kv(g, "i")->value.v.i64, -5);
    cr_assert_eq(tram_gguf_find_kv(g, "b")->value.v.b, 1);
    const tram_gguf_tensor *ta = tram_gguf_find_tensor(g, "ta"), *tb = tram_gguf_find_tensor(g, "tb");
    cr_assert(ta && tb && ta->type == TRAM_GGML_I8 && ta->ne[0] == 5 && ta->ne[1] == 3 && tb->offset % 64 == 0);
    cr_assert(!memcmp(ta->data, qa, 15) && !memcmp(tb->data, fb, sizeof(fb)));
    tram_gguf_close(g);
    unlink(path);
}

Test(quantize, gguf_writer_removes_an_incomplete_file)
{
    char path[128];
    tmp_path(path, sizeof(path), "partial");
    tram_error err;
    tram_gguf_writer *w;
    int64_t ne[1] = {4};
    cr_assert(!tram_gguf_writer_create(&w, path, &err));
    cr_assert(!tram_gguf_writer_add_tensor(w, "t", TRAM_GGML_F32, 1, ne, &err));
    cr_assert_eq(tram_gguf_writer_finish(w, &err), -1);
    cr_assert(strstr(err.msg, "0 of 1 tensors"), "%s", err.msg);
    cr_assert(access(path, F_OK) != 0, "the partial file was left behind");
}

/* ---------------------------------------------------------------- SmoothQuant */

/* rmsnorm(x) * g · Wᵀ == rmsnorm(x) * (g / s) · (W * s)ᵀ, with s from the
 * formula, to float rounding; and s itself follows the formula. */
Test(quantize, smoothing_a_norm_and_its_matrices_keeps_the_output)
{
    enum { N = 6, K = 40, R = 24 };
    unsigned seed = 11;
    float x[N][K], g[K], w[R][K], w0[R][K], g0[K], xa[K] = {0}, wa[K] = {0}, s[K];
    for (int k = 0; k < K; k++)
        g[k] = g0[k] = 1.0f + 0.2f * urand(&seed) + (k % 9 == 0 ? 30.0f : 0.0f);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < K; k++) {
            x[i][k] = urand(&seed);
            xa[k] = fmaxf(xa[k], fabsf(x[i][k] * g[k]));
        }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++)
            w[r][k] = w0[r][k] = 0.3f * urand(&seed);
    tram_col_amax(&w[0][0], R, K, wa);
    tram_smooth_factors(xa, wa, K, 0.5f, s);
    for (int k = 0; k < K; k++)
        cr_assert_float_eq(s[k], sqrtf(xa[k]) / sqrtf(wa[k]), 1e-5f * s[k], "s[%d]", k);
    tram_unscale_rows(g, K, 1, s);
    tram_scale_cols(&w[0][0], R, K, s);
    for (int i = 0; i < N; i++)
        for (int r = 0; r < R; r++) {
            double before = 0, after = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                before += (double)x[i][k] * g0[k] * w0[r][k];
                after += (double)x[i][k] * g[k] * w[r][k];
                mag += fabs((double)x[i][k] * g0[k] * w0[r][k]);
            }
            cr_assert(fabs(before - after) <= 1e-6 * mag, "y[%d][%d] %g vs %g", i, r, before, after);
        }
    /* smoothing flattens the activation outliers: max over channels of
     * max|X_j| / s_j is smaller than max|X_j| */
    float before = 0, after = 0;
    for (int k = 0; k < K; k++)
        before = fmaxf(before, xa[k]), after = fmaxf(after, xa[k] / s[k]);
    cr_assert(after < before / 2, "outliers %g -> %g", before, after);
}

Test(quantize, smooth_factors_leave_unseen_channels_alone)
{
    float xa[3] = {0.0f, 2.0f, 4.0f}, wa[3] = {1.0f, 0.0f, 1.0f}, s[3];
    tram_smooth_factors(xa, wa, 3, 0.8f, s);
    cr_assert(s[0] == 1.0f && s[1] == 1.0f);
    cr_assert_float_eq(s[2], powf(4.0f, 0.8f), 1e-6f);
}

/* The whole identity on a model: the five folds (norms into q/k/v and
 * gate/up, V rows into o_proj, up rows into down_proj, the final norm into
 * the untied lm_head) written as F32 give the same logits as the original;
 * at a fixed α, or at the α searched per input (samples > 0). */
static void check_smoothed_identity(float alpha, int samples, const char *tag)
{
    char orig[128], smooth[128], smooth_tag[32];
    snprintf(smooth_tag, sizeof(smooth_tag), "%s-smooth", tag);
    tmp_path(orig, sizeof(orig), tag);
    tmp_path(smooth, sizeof(smooth), smooth_tag);
    tiny_model_write(orig, 42);
    tram_error err;
    tram_model_file *f, *sf;
    cr_assert(!tram_model_file_open(&f, orig, &err), "%s", err.msg);
    int32_t ids[200];
    unsigned seed = 5;
    for (int i = 0; i < 200; i++)
        ids[i] = (int32_t)((urand(&seed) + 1.0f) * 0.5f * (TINY_VOCAB - 1));
    tram_calib_stats st;
    cr_assert(!tram_calibrate(f, ids, 200, 64, 2, samples, 0, &st, &err), "%s", err.msg);
    cr_assert_eq(st.tokens, 200);
    cr_assert_eq(st.n_samples, samples ? 200 / ((200 + samples - 1) / samples) : 0);
    tram_quant_opts o = {.out_path = smooth, .stats = &st, .alpha = alpha, .keep_f32 = 1, .threads = 2};
    cr_assert(!tram_quantize_model(f, &o, &err), "%s", err.msg);
    cr_assert(!tram_model_file_open(&sf, smooth, &err), "%s", err.msg);

    tram_backend *be;
    cr_assert(!tram_backend_cpu_create(&be, 2, &err));
    tram_model *m = test_model_load(f, be, 0), *sm = test_model_load(sf, be, 0);
    float *a = malloc(100 * TINY_VOCAB * sizeof(float)), *b = malloc(100 * TINY_VOCAB * sizeof(float));
    test_forward_all(m, ids + 100, 100, a);
    test_forward_all(sm, ids + 100, 100, b);
    /* float rounding through two layers: relative to the logits' range (~80);
     * a wrong fold moves logits by whole units */
    float range = 0;
    for (int i = 0; i < 100 * TINY_VOCAB; i++)
        range = fmaxf(range, fabsf(a[i]));
    for (int i = 0; i < 100 * TINY_VOCAB; i++)
        cr_assert(fabsf(a[i] - b[i]) <= 2e-5f * range, "logit %d: %g vs %g", i, a[i], b[i]);
    /* and the smoothing did change the weights */
    float n0[TINY_DIM], n1[TINY_DIM];
    cr_assert(!tram_model_file_read_f32(f, "blk.1.attn_norm.weight", n0, TINY_DIM, &err));
    cr_assert(!tram_model_file_read_f32(sf, "blk.1.attn_norm.weight", n1, TINY_DIM, &err));
    cr_assert(memcmp(n0, n1, sizeof(n0)), "attn_norm was not smoothed");
    cr_assert(!tram_model_file_read_f32(f, "output_norm.weight", n0, TINY_DIM, &err));
    cr_assert(!tram_model_file_read_f32(sf, "output_norm.weight", n1, TINY_DIM, &err));
    cr_assert(memcmp(n0, n1, sizeof(n0)), "output_norm was not smoothed");
    cr_assert(tram_model_file_config(sf)->tied_embeddings == 0, "the smoothed lm_head is a tensor of its own");

    free(a), free(b);
    tram_model_destroy(m), tram_model_destroy(sm);
    be->destroy(be);
    tram_calib_stats_free(&st);
    tram_model_file_close(f), tram_model_file_close(sf);
    unlink(orig), unlink(smooth);
}

Test(quantize, smoothed_f32_model_computes_the_same_logits, .timeout = 60)
{
    check_smoothed_identity(0.8f, 0, "tiny");
}

Test(quantize, searched_smoothing_computes_the_same_logits, .timeout = 60)
{
    check_smoothed_identity(-1.0f, 64, "tiny3");
}

/* The int8 file: I8 matrices with per-row scales read back within half a
 * step of the f32 weights, excluded ones exactly, norms as they were; and the
 * model loads them as int8 (it runs and agrees with the on-the-fly path). */
Test(quantize, int8_file_holds_matrices_and_scales, .timeout = 60)
{
    char orig[128], q8[128];
    tmp_path(orig, sizeof(orig), "tiny2");
    tmp_path(q8, sizeof(q8), "tiny2-q8");
    tiny_model_write(orig, 7);
    tram_error err;
    tram_model_file *f, *qf;
    cr_assert(!tram_model_file_open(&f, orig, &err), "%s", err.msg);
    tram_quant_opts o = {.out_path = q8, .exclude = "layers.1.mlp.down_proj"};
    cr_assert(!tram_quantize_model(f, &o, &err), "%s", err.msg);
    cr_assert(!tram_model_file_open(&qf, q8, &err), "%s", err.msg);
    cr_assert(tram_model_file_is_int8(qf, "blk.0.ffn_down.weight"));
    cr_assert(tram_model_file_is_int8(qf, "token_embd.weight"), "tied table = lm_head, quantized");
    cr_assert(!tram_model_file_is_int8(qf, "blk.1.ffn_down.weight"));
    cr_assert(!tram_model_file_is_int8(qf, "blk.0.attn_norm.weight"));
    const tram_gguf_tensor *t = tram_gguf_find_tensor(tram_model_file_gguf(qf), "blk.0.attn_q.weight.scale");
    cr_assert(t && t->type == TRAM_GGML_F32 && t->ne[0] == TINY_DIM);

    static const char *const names[] = {"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "blk.1.ffn_norm.weight"};
    static const int rows[] = {TINY_DIM, TINY_DIM, 1}, cols[] = {TINY_DIM, TINY_FFN, TINY_DIM};
    for (int n = 0; n < 3; n++) {
        int numel = rows[n] * cols[n];
        float *w = malloc(numel * 4), *back = malloc(numel * 4);
        cr_assert(!tram_model_file_read_f32(f, names[n], w, numel, &err), "%s", err.msg);
        cr_assert(!tram_model_file_read_f32(qf, names[n], back, numel, &err), "%s", err.msg);
        for (int r = 0; r < rows[n]; r++) {
            float amax = 0;
            for (int k = 0; k < cols[n]; k++)
                amax = fmaxf(amax, fabsf(w[r * cols[n] + k]));
            float tol = n == 0 ? amax / 127.0f * 0.5f * 1.0001f : 0.0f;
            for (int k = 0; k < cols[n]; k++)
                cr_assert(fabsf(back[r * cols[n] + k] - w[r * cols[n] + k]) <= tol, "%s [%d][%d]", names[n], r, k);
        }
        free(w), free(back);
    }
    /* the stored int8 weights load as they are: same logits as quantizing
     * the f32 file at load with the same exclusion */
    tram_backend *be;
    cr_assert(!tram_backend_cpu_create(&be, 2, &err));
    tram_model *a = test_model_load(qf, be, 0);
    int blocks = TEST_MAX_TOKENS / 16;
    tram_model_limits lim = {.max_tokens = TEST_MAX_TOKENS, .max_seqs = 64, .max_blocks_per_seq = blocks,
                             .num_blocks = blocks, .block_size = 16, .weight_type = TRAM_W_F32,
                             .quantize_int8 = 1, .int8_exclude = "blk.1.ffn_down"};
    tram_model *b;
    cr_assert(!tram_model_create(&b, f, be, &lim, &err), "%s", err.msg);
    int32_t ids[50];
    for (int i = 0; i < 50; i++)
        ids[i] = (i * 37) % TINY_VOCAB;
    float *la = malloc(50 * TINY_VOCAB * 4), *lb = malloc(50 * TINY_VOCAB * 4);
    test_forward_all(a, ids, 50, la);
    test_forward_all(b, ids, 50, lb);
    for (int i = 0; i < 50 * TINY_VOCAB; i++)
        cr_assert(fabsf(la[i] - lb[i]) <= 1e-5f * (1.0f + fabsf(lb[i])), "logit %d: %g vs %g", i, la[i], lb[i]);
    free(la), free(lb);
    tram_model_destroy(a), tram_model_destroy(b);
    be->destroy(be);
    tram_model_file_close(f), tram_model_file_close(qf);
    unlink(orig), unlink(q8);
}

Test(quantize, refuses_typos_in_exclude_and_int8_input)
{
    char orig[128], q8[128], again[128];
    tmp_path(orig, sizeof(orig), "tiny3");
    tmp_path(q8, sizeof(q8), "tiny3-q8");
    tmp_path(again, sizeof(again), "tiny3-again");
    tiny_model_write(orig, 3);
    tram_error err;
    tram_model_file *f, *qf;
    cr_assert(!tram_model_file_open(&f, orig, &err));
    tram_quant_opts o = {.out_path = q8, .exclude = "layers.0.mlp.dwon_proj"};
    cr_assert_eq(tram_quantize_model(f, &o, &err), -1);
    cr_assert(strstr(err.msg, "dwon_proj"), "%s", err.msg);
    cr_assert(access(q8, F_OK) != 0);
    o.exclude = NULL;
    cr_assert(!tram_quantize_model(f, &o, &err), "%s", err.msg);
    cr_assert(!tram_model_file_open(&qf, q8, &err));
    o.out_path = again;
    cr_assert_eq(tram_quantize_model(qf, &o, &err), -1);
    cr_assert(strstr(err.msg, "already quantized"), "%s", err.msg);
    tram_model_file_close(f), tram_model_file_close(qf);
    unlink(orig), unlink(q8);
}
