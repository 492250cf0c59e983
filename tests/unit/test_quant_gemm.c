/* Block-quantized matmuls (kernels/cpu/gemm_blocks.h) against a double
 * reference built from the independent dequantizer (kernels/dequant.c), on
 * every kernel this CPU runs; the backend's block weights; and the whole model
 * on its native Q4_1/Q8_0 blocks against the f32 path on the golden prompts. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "kernels/cpu/gemm_blocks.h"
#include "kernels/dequant.h"
#include "models/model.h"
#include "tests/unit/test_util.h"

static const tram_wtype types[] = {TRAM_W_Q8_0, TRAM_W_Q4_0, TRAM_W_Q4_1};

static tram_ggml_type ggml_of(tram_wtype t)
{
    return t == TRAM_W_Q8_0 ? TRAM_GGML_Q8_0 : t == TRAM_W_Q4_0 ? TRAM_GGML_Q4_0 : TRAM_GGML_Q4_1;
}

/* Random but valid blocks: any quant bytes, and f16 scales (and Q4_1 mins) of
 * magnitude 2^-9 .. 2^-6 with a random sign for the min. */
static void random_blocks(tram_wtype t, uint8_t *p, size_t n_blocks)
{
    size_t bb = tram_q_block_bytes(t);
    for (size_t b = 0; b < n_blocks; b++, p += bb) {
        for (size_t j = 0; j < bb; j++)
            p[j] = (uint8_t)rand();
        uint16_t d = (uint16_t)(0x1800 + rand() % 0x0c00);
        memcpy(p, &d, 2);
        if (t == TRAM_W_Q4_1) {
            uint16_t m = (uint16_t)((rand() & 1) << 15 | (0x1800 + rand() % 0x0c00));
            memcpy(p + 2, &m, 2);
        }
    }
}

static void random_floats(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rand() / RAND_MAX * 4.0f - 2.0f;
}

Test(quant_gemm, activation_blocks_round_to_the_nearest_step)
{
    float x[96];
    tram_q8_block q[3];
    random_floats(x, 96);
    x[40] = 0.0f; /* a block need not contain its own max at any fixed place */
    tram_q8_quantize_row(x, 96, q);
    for (int b = 0; b < 3; b++) {
        float amax = 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        cr_expect_float_eq(q[b].d, amax / 127.0f, 1e-7f);
        for (int j = 0; j < 32; j++) {
            cr_expect_leq(fabsf(x[b * 32 + j] - q[b].q[j] * q[b].d), q[b].d * 0.5001f);
            cr_expect_leq(abs(q[b].q[j]), 127);
            sum += q[b].q[j];
        }
        cr_expect_float_eq(q[b].s, q[b].d * sum, 1e-6f);
        cr_expect_eq(q[b].sum, sum);
    }
}

Test(quant_gemm, zero_activations_give_zero_scale)
{
    float x[32] = {0};
    tram_q8_block q;
    tram_q8_quantize_row(x, 32, &q);
    cr_expect_eq(q.d, 0.0f);
    for (int j = 0; j < 32; j++)
        cr_expect_eq(q.q[j], 0);
}

/* y = x · Wᵀ for every type and kernel, with row counts off the 8-row groups
 * and 32-row chunks, and token counts off the 8-token tiles; each token row
 * alone equals its row of the batch bit for bit; and every row of the
 * repacked weights dequantizes to the file's values. */
Test(quant_gemm, every_kernel_matches_the_dequantized_product)
{
    enum { ROWS = 70, COLS = 160, N = 11, NB = COLS / 32 };
    static uint8_t w[ROWS * NB * 34];
    static uint8_t packed[(ROWS + 7) / 8 * 8 * NB * 34]; /* rows padded to groups of 8 */
    static float row[COLS], alone[ROWS];
    static float wf[ROWS * COLS], x[N * COLS], xf[N * COLS], y[N * ROWS];
    tram_q8_block xq[N * NB];
    srand(7);
    random_floats(x, N * COLS);
    for (int i = 0; i < N; i++)
        tram_q8_quantize_row(x + i * COLS, COLS, xq + i * NB);
    for (int i = 0; i < N * NB; i++)
        for (int j = 0; j < 32; j++)
            xf[i * 32 + j] = xq[i].q[j] * xq[i].d;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        tram_wtype t = types[ti];
        random_blocks(t, w, ROWS * NB);
        cr_assert(!tram_dequantize(ggml_of(t), w, wf, ROWS * COLS, NULL));
        cr_assert_leq(tram_q_packed_bytes(t, ROWS, COLS), sizeof(packed));
        tram_q_pack(t, ROWS, COLS, w, packed);
        tram_weight tw = {.type = t, .rows = ROWS, .cols = COLS, .data = packed};
        for (int r = 0; r < ROWS; r++) {
            tram_q_row_f32(&tw, r, row);
            cr_expect(!memcmp(row, wf + r * COLS, sizeof(row)), "type %d: row %d differs after packing", (int)t,
                      r);
        }
        tram_cpu_pool *pool = NULL;
        tram_error err;
        cr_assert(!tram_cpu_pool_create(&pool, 2, &err), "%s", err.msg);
        for (tram_cpu_kernel k = TRAM_CPU_GENERIC; k <= TRAM_CPU_VNNI; k++) {
            if (!tram_q_kernel_available(k))
                continue;
            memset(y, 0, sizeof(y));
            tram_q_gemm(k, y, xq, N, &tw, pool);
            for (int i = 0; i < N; i++)
                for (int r = 0; r < ROWS; r++) {
                    double ref = 0.0, mag = 0.0;
                    for (int c = 0; c < COLS; c++) {
                        ref += (double)xf[i * COLS + c] * wf[r * COLS + c];
                        mag += fabs((double)xf[i * COLS + c] * wf[r * COLS + c]);
                    }
                    cr_expect(fabs(y[i * ROWS + r] - ref) <= 1e-5 * mag + 1e-6,
                              "%s kernel, type %d: y[%d][%d] = %g, reference %g", tram_cpu_kernel_name(k),
                              (int)t, i, r, y[i * ROWS + r], ref);
                }
            /* a token row alone gives the very bits it gets in a batch */
            for (int i = 0; i < N; i++) {
                tram_q_gemm(k, alone, xq + i * NB, 1, &tw, NULL);
                cr_expect(!memcmp(alone, y + i * ROWS, sizeof(alone)),
                          "%s kernel, type %d: token %d alone differs", tram_cpu_kernel_name(k), (int)t, i);
            }
        }
        tram_cpu_pool_destroy(pool);
    }
}

/* The backend's matmul and embedding on block weights. */
Test(quant_gemm, backend_runs_block_weights)
{
    enum { ROWS = 40, COLS = 64, N = 3, NB = COLS / 32 };
    static uint8_t w[ROWS * NB * 20];
    static float wf[ROWS * COLS], x[N * COLS], y[N * ROWS], ref[N * ROWS], row[COLS];
    tram_q8_block xq[N * NB];
    tram_error err;
    tram_backend *be;
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    srand(11);
    random_blocks(TRAM_W_Q4_1, w, ROWS * NB);
    random_floats(x, N * COLS);
    cr_assert(!tram_dequantize(TRAM_GGML_Q4_1, w, wf, ROWS * COLS, NULL));
    tram_weight tw;
    be->upload_weight_blocks(be, &tw, w, ROWS, COLS, TRAM_W_Q4_1);
    cr_assert(!be->sync(be, &err), "%s", err.msg);
    be->matmul(be, y, x, &tw, N);
    for (int i = 0; i < N; i++)
        tram_q8_quantize_row(x + i * COLS, COLS, xq + i * NB);
    tram_q_gemm(TRAM_CPU_GENERIC, ref, xq, N, &tw, NULL);
    for (int i = 0; i < N * ROWS; i++)
        cr_expect(fabsf(y[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i])), "y[%d] = %g, generic %g", i, y[i],
                  ref[i]);
    int32_t id = 17;
    be->embed(be, row, &tw, &id, 1);
    for (int c = 0; c < COLS; c++)
        cr_expect_eq(row[c], wf[17 * COLS + c]);
    be->free_weight(be, &tw);
    be->upload_weight_blocks(be, &tw, w, ROWS, 48, TRAM_W_Q4_1);
    cr_expect(be->sync(be, &err), "48 columns are not whole blocks, yet the upload succeeded");
    be->destroy(be);
}

/* ---------------------------------------------------------------- the model */

#define GOLDEN "tests/fixtures/golden/smollm2.json"
#define BLOCK 16
#define MAX_BLOCKS 16

static int make_model(tram_model **m, tram_model_file *f, tram_backend *be, int keep_blocks)
{
    tram_error err;
    tram_model_limits lim = {.max_tokens = MAX_BLOCKS * BLOCK, .max_seqs = 1, .max_blocks_per_seq = MAX_BLOCKS,
                             .num_blocks = MAX_BLOCKS, .block_size = BLOCK, .weight_type = TRAM_W_F32,
                             .keep_blocks = keep_blocks};
    int rc = tram_model_create(m, f, be, &lim, &err);
    cr_assert(!rc, "%s", err.msg);
    return rc;
}

static void prefill(tram_model *m, const int32_t *ids, int n, float *logits)
{
    static int32_t pos[MAX_BLOCKS * BLOCK], slots[MAX_BLOCKS * BLOCK], table[MAX_BLOCKS];
    int32_t qstart[2] = {0, n}, len = n, row = n - 1;
    for (int i = 0; i < MAX_BLOCKS; i++)
        table[i] = i;
    for (int i = 0; i < n; i++)
        pos[i] = slots[i] = i;
    tram_batch b = {.num_tokens = n, .num_seqs = 1, .token_ids = ids, .positions = pos, .slot_mapping = slots,
                    .query_start = qstart, .seq_lens = &len, .block_tables = table,
                    .max_blocks_per_seq = MAX_BLOCKS, .num_logits = 1, .logits_rows = &row};
    tram_error err;
    cr_assert(!tram_model_forward(m, &b, logits, &err), "%s", err.msg);
}

/* The native path differs from f32 by the rounding of activations to 8 bits
 * per block of 32 (relative step 1/254 of each block's max) in every matmul;
 * llama.cpp runs the same file the same way.  Measured on the golden prompts
 * (prefill of 5-37 tokens): after removing the common shift of all logits
 * (which changes no probability), the largest difference is 0.59-1.02, i.e.
 * 1.8-3.0 % of the spread of the f32 logits (30-41); the bound below is 5 %.
 * The top token must agree wherever f32's top two are further apart than
 * twice that difference (one prompt of six has a near tie and flips). */
Test(quant_gemm, native_blocks_agree_with_the_f32_path_on_the_golden_prompts, .timeout = 120)
{
    tram_error err;
    tram_model_file *f;
    tram_backend *be;
    tram_model *native, *ref;
    cr_assert(!tram_model_file_open(&f, TRAM_DEFAULT_MODEL, &err), "%s", err.msg);
    cr_assert(!tram_backend_cpu_create(&be, 2, &err), "%s", err.msg);
    make_model(&native, f, be, 1);
    make_model(&ref, f, be, 0);
    int vocab = tram_model_file_config(f)->vocab_size;
    float *a = malloc(vocab * sizeof(float)), *b = malloc(vocab * sizeof(float));
    json_error_t jerr;
    json_t *root = json_load_file(GOLDEN, 0, &jerr), *cases = json_object_get(root, "cases");
    cr_assert(root, "cannot read %s: %s", GOLDEN, jerr.text);
    static int32_t ids[MAX_BLOCKS * BLOCK];
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *p = json_object_get(json_array_get(cases, c), "prompt_ids");
        int n = (int)json_array_size(p);
        if (n > MAX_BLOCKS * BLOCK)
            continue;
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)json_integer_value(json_array_get(p, i));
        prefill(native, ids, n, a);
        prefill(ref, ids, n, b);
        /* a shift of every logit by one constant changes no probability */
        double shift = 0.0;
        for (int v = 0; v < vocab; v++)
            shift += (double)a[v] - b[v];
        shift /= vocab;
        float lo = b[0], hi = b[0], maxdiff = 0.0f;
        for (int v = 0; v < vocab; v++) {
            lo = fminf(lo, b[v]);
            hi = fmaxf(hi, b[v]);
            maxdiff = fmaxf(maxdiff, fabsf((float)(a[v] - shift) - b[v]));
        }
        cr_expect(maxdiff <= 0.05f * (hi - lo), "case %zu: logits differ by %g, spread %g", c, maxdiff, hi - lo);
        int top = test_argmax(b, vocab), got = test_argmax(a, vocab);
        float second = -INFINITY;
        for (int v = 0; v < vocab; v++)
            if (v != top)
                second = fmaxf(second, b[v]);
        if (b[top] - second > 2.0f * maxdiff)
            cr_expect_eq(got, top, "case %zu: native top token %d, f32 %d", c, got, top);
    }
    json_decref(root);
    free(a);
    free(b);
    tram_model_destroy(native);
    tram_model_destroy(ref);
    be->destroy(be);
    tram_model_file_close(f);
}
