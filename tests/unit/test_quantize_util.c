#include "tests/unit/test_quantize_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gguf_writer.h"

static float urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* base + scale * uniform(-1, 1); a norm weight (base 1) gets outlier channels. */
static void put_tensor(tram_gguf_writer *w, int rows, int cols, float scale, float base, unsigned *seed)
{
    tram_error err;
    float *x = malloc((size_t)rows * cols * sizeof(float));
    for (int i = 0; i < rows * cols; i++)
        x[i] = base + scale * urand(seed);
    if (base) /* a norm weight: outlier channels */
        for (int i = 3; i < cols; i += 17)
            x[i] *= 20.0f;
    cr_assert(!tram_gguf_writer_write(w, x, (size_t)rows * cols * sizeof(float), &err), "%s", err.msg);
    free(x);
}

/* name, rows, cols (rows = 1: a vector) for every tensor, in file order. */
typedef struct {
    char name[64];
    int rows, cols;
} tiny_tensor;

static int tiny_tensors(tiny_tensor *t)
{
    int qd = TINY_DIM, kd = TINY_KV_HEADS * (TINY_DIM / TINY_HEADS), n = 0;
    t[n++] = (tiny_tensor){"token_embd.weight", TINY_VOCAB, TINY_DIM};
    t[n++] = (tiny_tensor){"output_norm.weight", 1, TINY_DIM};
    for (int l = 0; l < TINY_LAYERS; l++) {
        static const char *const names[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                            "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        const int shape[][2] = {{1, TINY_DIM}, {qd, TINY_DIM}, {kd, TINY_DIM}, {kd, TINY_DIM}, {TINY_DIM, qd},
                                {1, TINY_DIM}, {TINY_FFN, TINY_DIM}, {TINY_FFN, TINY_DIM}, {TINY_DIM, TINY_FFN}};
        for (int i = 0; i < 9; i++) {
            snprintf(t[n].name, sizeof(t[n].name), "blk.%d.%s.weight", l, names[i]);
            t[n].rows = shape[i][0], t[n].cols = shape[i][1];
            n++;
        }
    }
    return n;
}

void tiny_model_write(const char *path, unsigned seed)
{
    tram_error err;
    tram_gguf_writer *w;
    tiny_tensor t[2 + 9 * TINY_LAYERS];
    int n = tiny_tensors(t);
    cr_assert(!tram_gguf_writer_create(&w, path, &err), "%s", err.msg);
    cr_assert(!tram_gguf_writer_add_str(w, "general.architecture", "llama", &err) &&
              !tram_gguf_writer_add_u32(w, "llama.embedding_length", TINY_DIM, &err) &&
              !tram_gguf_writer_add_u32(w, "llama.block_count", TINY_LAYERS, &err) &&
              !tram_gguf_writer_add_u32(w, "llama.attention.head_count", TINY_HEADS, &err) &&
              !tram_gguf_writer_add_u32(w, "llama.attention.head_count_kv", TINY_KV_HEADS, &err) &&
              !tram_gguf_writer_add_u32(w, "llama.feed_forward_length", TINY_FFN, &err) &&
              !tram_gguf_writer_add_u32(w, "llama.context_length", 512, &err) &&
              !tram_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, &err),
              "%s", err.msg);
    for (int i = 0; i < n; i++) {
        int64_t ne[2] = {t[i].cols, t[i].rows};
        cr_assert(!tram_gguf_writer_add_tensor(w, t[i].name, TRAM_GGML_F32, t[i].rows == 1 ? 1 : 2, ne, &err),
                  "%s", err.msg);
    }
    for (int i = 0; i < n; i++) {
        int norm = t[i].rows == 1;
        float scale = norm ? 0.1f : i == 0 ? 0.05f : 14.0f / (float)t[i].cols;
        put_tensor(w, t[i].rows, t[i].cols, scale, norm ? 1.0f : 0.0f, &seed);
    }
    cr_assert(!tram_gguf_writer_finish(w, &err), "%s", err.msg);
}

tram_model *test_model_load(tram_model_file *f, tram_backend *be, int int8)
{
    tram_error err;
    tram_model *m;
    int blocks = TEST_MAX_TOKENS / 16;
    tram_model_limits lim = {.max_tokens = TEST_MAX_TOKENS, .max_seqs = 64,
                             .max_blocks_per_seq = blocks, .num_blocks = blocks, .block_size = 16,
                             .weight_type = TRAM_W_F32, .quantize_int8 = int8};
    cr_assert(!tram_model_create(&m, f, be, &lim, &err), "%s", err.msg);
    return m;
}

void test_forward_all(tram_model *m, const int32_t *ids, int n, float *logits)
{
    tram_error err;
    int32_t *pos = malloc((size_t)n * 4), blocks[TEST_MAX_TOKENS / 16], qs[2] = {0, n}, len = n;
    for (int i = 0; i < n; i++)
        pos[i] = i;
    for (int b = 0; b < TEST_MAX_TOKENS / 16; b++)
        blocks[b] = b;
    tram_batch b = {.num_tokens = n, .num_seqs = 1, .token_ids = ids, .positions = pos, .slot_mapping = pos,
                    .query_start = qs, .seq_lens = &len, .block_tables = blocks,
                    .max_blocks_per_seq = TEST_MAX_TOKENS / 16, .num_logits = n, .logits_rows = pos};
    cr_assert(!tram_model_forward(m, &b, logits, &err), "%s", err.msg);
    free(pos);
}
