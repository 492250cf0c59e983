/* FP8 (E4M3) weight files: tram quantize --format fp8's GGUF (its codes and
 * scales exactly the row quantizer's, loaded back), the Hugging Face layouts
 * of tests/fixtures/make_fp8_checkpoints.py (compressed-tensors per channel
 * and per tensor, FBGEMM), each run on the CPU's FP8 product against the
 * same weights dequantized to f32, a tensor-parallel rank's cut of the codes
 * and scales, and every configuration tram refuses, named in its error. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_fp8.h"
#include "kernels/fp8_format.h"
#include "models/quantize.h"
#include "models/shard.h"
#include "tests/unit/test_quantize_util.h"
#include "tests/unit/test_util.h"

#define FIX "tests/fixtures/fp8_hf"
#define N_IDS 12

static tram_model_file *open_file(const char *path)
{
    tram_model_file *f;
    tram_error err;
    cr_assert(!tram_model_file_open(&f, path, &err), "%s", err.msg);
    return f;
}

/* The file's codes and scales of `name`, against its dequantized values. */
static void check_codes_match_f32(tram_model_file *f, const char *name, int rows, int cols, float *scales)
{
    tram_error err;
    uint8_t *codes = malloc((size_t)rows * cols);
    float *x = malloc((size_t)rows * cols * sizeof(float));
    cr_assert(tram_model_file_is_fp8(f, name), "%s is not FP8", name);
    cr_assert(!tram_model_file_read_fp8(f, name, codes, scales, rows, cols, &err), "%s", err.msg);
    cr_assert(!tram_model_file_read_f32(f, name, x, (int64_t)rows * cols, &err), "%s", err.msg);
    for (int i = 0; i < rows * cols; i++)
        cr_assert_eq(x[i], tram_fp8_e4m3_decode(codes[i]) * scales[i / cols], "%s[%d]", name, i);
    free(codes);
    free(x);
}

/* Logits of the same ids with the FP8 product and with the weights
 * dequantized to f32 (a backend without upload_weight_fp8 loads them so):
 * the activations' E4M3 rounding (3 mantissa bits) is the difference, so
 * they differ, by at most `tol` of the logits' largest magnitude. */
static void check_fp8_forward_near_f32(tram_model_file *f, int vocab, double tol)
{
    tram_backend *be = test_cpu_backend(), plain = *be;
    plain.upload_weight_fp8 = NULL;
    tram_model *fp8 = test_model_load(f, be, 0), *f32 = test_model_load(f, &plain, 0);
    int32_t ids[N_IDS];
    for (int i = 0; i < N_IDS; i++)
        ids[i] = (i * 7 + 3) % vocab;
    float *a = malloc((size_t)N_IDS * vocab * sizeof(float)), *b = malloc((size_t)N_IDS * vocab * sizeof(float));
    test_forward_all(fp8, ids, N_IDS, a);
    test_forward_all(f32, ids, N_IDS, b);
    double diff = 0, range = 0;
    for (int i = 0; i < N_IDS * vocab; i++) {
        cr_assert(isfinite(a[i]));
        diff = fmax(diff, fabs(a[i] - b[i]));
        range = fmax(range, fabs(b[i]));
    }
    cr_assert(diff > 0, "the FP8 model computed exactly the f32 one: its activations were not quantized");
    cr_assert(diff <= tol * range, "FP8 logits %g from f32 ones of magnitude %g", diff, range);
    tram_model_destroy(fp8);
    tram_model_destroy(f32);
    be->destroy(be);
    free(a);
    free(b);
}

/* The source model quantized to FP8 at load (--quantization fp8) against
 * the file tram quantize --format fp8 wrote from it: the same row quantizer
 * makes the same codes and scales, so the logits are the same bits. */
static void check_load_time_fp8_equals_the_file(tram_model_file *src, tram_model_file *file)
{
    tram_error err;
    tram_backend *be = test_cpu_backend();
    int blocks = TEST_MAX_TOKENS / 16;
    tram_model_limits lim = {.max_tokens = TEST_MAX_TOKENS, .max_seqs = 64, .max_blocks_per_seq = blocks,
                             .num_blocks = blocks, .block_size = 16, .weight_type = TRAM_W_F32,
                             .quantize_fp8 = 1, .int8_exclude = "lm_head"};
    tram_model *at_load, *stored = test_model_load(file, be, 0);
    cr_assert(!tram_model_create(&at_load, src, be, &lim, &err), "%s", err.msg);
    int32_t ids[N_IDS];
    for (int i = 0; i < N_IDS; i++)
        ids[i] = (i * 5 + 1) % TINY_VOCAB;
    float *a = malloc((size_t)N_IDS * TINY_VOCAB * sizeof(float)), *b = malloc((size_t)N_IDS * TINY_VOCAB * 4);
    test_forward_all(at_load, ids, N_IDS, a);
    test_forward_all(stored, ids, N_IDS, b);
    cr_assert_eq(memcmp(a, b, (size_t)N_IDS * TINY_VOCAB * sizeof(float)), 0);
    tram_model_destroy(at_load);
    tram_model_destroy(stored);
    be->destroy(be);
    free(a);
    free(b);
}

Test(fp8_loader, quantize_writes_the_row_quantizers_codes, .timeout = 60)
{
    char src[] = "/tmp/tram-fp8-src-XXXXXX", out[] = "/tmp/tram-fp8-out-XXXXXX";
    int fd1 = mkstemp(src), fd2 = mkstemp(out);
    cr_assert(fd1 >= 0 && fd2 >= 0);
    close(fd1), close(fd2);
    tiny_model_write(src, 5);
    tram_model_file *f = open_file(src);
    tram_quant_opts o = {.out_path = out, .exclude = "lm_head", .fp8 = 1};
    tram_error err;
    cr_assert(!tram_quantize_model(f, &o, &err), "%s", err.msg);
    tram_model_file *q = open_file(out);
    int rows = TINY_HEADS * (TINY_DIM / TINY_HEADS), cols = TINY_DIM;
    float *w = malloc((size_t)rows * cols * sizeof(float)), scales[TINY_DIM], want[TINY_DIM];
    uint8_t *codes = malloc((size_t)rows * cols), *want_codes = malloc((size_t)rows * cols);
    cr_assert(!tram_model_file_read_f32(f, "blk.1.attn_q.weight", w, (int64_t)rows * cols, &err), "%s", err.msg);
    for (int r = 0; r < rows; r++)
        want[r] = tram_fp8_quantize_row(w + (size_t)r * cols, cols, cols, want_codes + (size_t)r * cols);
    cr_assert(!tram_model_file_read_fp8(q, "blk.1.attn_q.weight", codes, scales, rows, cols, &err), "%s", err.msg);
    cr_assert_eq(memcmp(codes, want_codes, (size_t)rows * cols), 0);
    cr_assert_eq(memcmp(scales, want, rows * sizeof(float)), 0);
    cr_assert(!tram_model_file_is_fp8(q, "token_embd.weight"), "a tied table has no FP8 lookup");
    cr_assert(tram_model_file_is_fp8(q, "blk.0.ffn_down.weight"));
    /* quantized twice is refused */
    o.out_path = src;
    cr_assert(tram_quantize_model(q, &o, &err));
    cr_assert(strstr(err.msg, "already quantized to FP8"), "%s", err.msg);
    /* 0.37 of the range measured: this random model (weights of gain ~1,
     * outlier norm channels) amplifies any perturbation through its layers;
     * int8 at load moves its logits by 0.14 of the range */
    check_fp8_forward_near_f32(q, TINY_VOCAB, 0.5);
    check_load_time_fp8_equals_the_file(f, q);
    tram_model_file_close(f);
    tram_model_file_close(q);
    free(w);
    free(codes);
    free(want_codes);
    unlink(src);
    unlink(out);
}

/* The fixtures' sizes (make_fp8_checkpoints.py). */
#define FIX_DIM 32
#define FIX_VOCAB 64

Test(fp8_loader, compressed_tensors_per_channel)
{
    tram_model_file *f = open_file(FIX "/ct_channel");
    float scales[FIX_DIM];
    check_codes_match_f32(f, "blk.0.attn_q.weight", FIX_DIM, FIX_DIM, scales);
    uint32_t bits;
    memcpy(&bits, &scales[3], 4);
    cr_assert_eq(bits & 0xffff, 0, "the BF16 scales widened exactly");
    cr_assert_neq(scales[0], scales[1], "one scale per row");
    cr_assert(!tram_model_file_is_fp8(f, "output.weight"), "lm_head is in the ignore list, F32");
    check_fp8_forward_near_f32(f, FIX_VOCAB, 0.05);
    tram_model_file_close(f);
}

Test(fp8_loader, compressed_tensors_per_tensor_scale_repeats)
{
    tram_model_file *f = open_file(FIX "/ct_tensor");
    float scales[FIX_DIM];
    check_codes_match_f32(f, "blk.0.ffn_down.weight", FIX_DIM, 64, scales);
    for (int r = 1; r < FIX_DIM; r++)
        cr_assert_eq(scales[r], scales[0]);
    check_fp8_forward_near_f32(f, FIX_VOCAB, 0.05);
    tram_model_file_close(f);
}

/* A part of an FP8 tensor loaded as a rank would (models/shard.h): the
 * backend's codes are the file's in the part's rows and columns, its scales
 * those rows' scales, and the weight carries the file's activation bound. */
static void check_part(tram_model_file *f, tram_shard_part p)
{
    tram_error err;
    tram_backend *be = test_cpu_backend();
    tram_shard_scratch sc;
    cr_assert(!tram_shard_scratch_init(&sc, (size_t)p.rows * p.cols, (size_t)p.rows * p.cols, &err), "%s", err.msg);
    uint8_t *codes = malloc((size_t)p.rows * p.cols);
    float *scales = malloc(p.rows * sizeof(float));
    cr_assert(!tram_model_file_read_fp8(f, p.name, codes, scales, p.rows, p.cols, &err), "%s", err.msg);
    tram_weight w;
    cr_assert(!tram_shard_load(be, f, &w, &p, 1, p.nrows, p.ncols, TRAM_W_FP8, &sc, &err), "%s", err.msg);
    cr_assert_eq(w.type, TRAM_W_FP8);
    cr_assert_eq(w.act_max, tram_model_file_fp8_act_max(f));
    const uint8_t *got = w.data;
    int kp = tram_fp8_stride(p.ncols);
    for (int r = 0; r < p.nrows; r++) {
        cr_assert_eq(w.scales[r], scales[p.row0 + r], "%s row %d", p.name, r);
        for (int c = 0; c < p.ncols; c++)
            cr_assert_eq(got[(size_t)r * kp + c], codes[(size_t)(p.row0 + r) * p.cols + p.col0 + c], "%s (%d, %d)",
                         p.name, r, c);
    }
    be->free_weight(be, &w);
    be->destroy(be);
    tram_shard_scratch_free(&sc);
    free(codes);
    free(scales);
}

Test(fp8_loader, a_rank_holds_the_files_codes_of_its_rows_and_columns)
{
    tram_model_file *f = open_file(FIX "/ct_channel");
    check_part(f, tram_shard_cols("blk.0.ffn_down.weight", FIX_DIM, 64, 32, 32));
    check_part(f, tram_shard_rows("blk.0.ffn_gate.weight", 64, FIX_DIM, 16, 32));
    tram_model_file_close(f);
}

Test(fp8_loader, fbgemm_per_row_with_its_activation_bound)
{
    tram_model_file *f = open_file(FIX "/fbgemm");
    float scales[64];
    check_codes_match_f32(f, "blk.0.ffn_gate.weight", 64, FIX_DIM, scales);
    cr_assert_eq(tram_model_file_fp8_act_max(f), 1200.0f);
    check_part(f, tram_shard_whole("blk.0.ffn_gate.weight", 64, FIX_DIM));
    check_fp8_forward_near_f32(f, FIX_VOCAB, 0.05);
    tram_model_file_close(f);
}

Test(fp8_loader, unsupported_configurations_are_refused_by_key)
{
    static const char *const cases[][2] = {
        {"refuse_static_input", "input_activations.dynamic"},
        {"refuse_weight_only", "input_activations = null"},
        {"refuse_num_bits", "weights.type = 'int'"},
        {"refuse_group", "weights.group_size = 128"},
        {"refuse_block", "weights.block_structure"},
        {"refuse_kv_cache", "kv_cache_scheme"},
        {"refuse_format", "format = 'pack-quantized'"},
        {"refuse_deepseek", "quant_method = 'fp8'"},
        {"refuse_block_size", "weight_block_size"},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(cases); i++) {
        char path[256];
        tram_model_file *f = NULL;
        tram_error err = {{0}};
        snprintf(path, sizeof(path), FIX "/%s", cases[i][0]);
        cr_assert(tram_model_file_open(&f, path, &err), "%s was accepted", path);
        cr_assert(strstr(err.msg, cases[i][1]), "%s: '%s' does not name %s", path, err.msg, cases[i][1]);
    }
}
