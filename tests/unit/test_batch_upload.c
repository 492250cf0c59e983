/* The batch upload of models/llama.c: the block-table columns a step uses
 * (kernels/batch.h), packed and copied as rows into the model's table of
 * max_blocks_per_seq columns; a pass must read nothing of the columns left
 * stale by an earlier, longer step. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/batch.h"
#include "models/model.h"
#include "models/presets.h"

Test(batch_upload, used_blocks_and_packed_tables_match_a_scan)
{
    enum { SEQS = 9, MB = 40, BS = 16 };
    static int32_t tables[SEQS * MB], lens[SEQS], packed[SEQS * MB];
    srand(3);
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < SEQS * MB; i++)
            tables[i] = rand();
        int seqs = 1 + rand() % SEQS, want = 0;
        for (int s = 0; s < seqs; s++) {
            lens[s] = 1 + rand() % (trial % 2 ? MB * BS : 3 * BS);
            int blocks = 0;
            for (int p = 0; p < lens[s]; p += BS)  /* blocks holding positions [0, len) */
                blocks++;
            want = blocks > want ? blocks : want;
        }
        tram_batch b = {.num_seqs = seqs, .seq_lens = lens, .block_tables = tables, .max_blocks_per_seq = MB};
        int used = tram_batch_used_blocks(&b, BS);
        cr_assert_eq(used, want, "trial %d", trial);
        tram_batch_pack_tables(&b, used, packed);
        for (int s = 0; s < seqs; s++)
            for (int j = 0; j < used; j++)
                cr_assert_eq(packed[s * used + j], tables[s * MB + j]);
    }
}

static tram_model *tiny_model(tram_backend *be, tram_model_file **f)
{
    tram_model_config c;
    tram_error err = {{0}};
    cr_assert_eq(tram_preset_load("smollm2-135m", &c, &err), 0, "%s", err.msg);
    c.dim = 128, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32, c.ffn_dim = 256, c.vocab_size = 512;
    c.n_layers = 2;
    cr_assert_eq(tram_model_file_open_dummy_config(f, &c, "tiny", &err), 0, "%s", err.msg);
    tram_model_limits lim = {.max_tokens = 128, .max_seqs = 2, .max_blocks_per_seq = 16, .num_blocks = 40,
                             .block_size = 16, .weight_type = TRAM_W_F32};
    tram_model *m;
    cr_assert_eq(tram_model_create(&m, *f, be, &lim, &err), 0, "%s", err.msg);
    return m;
}

/* Two sequences of n tokens from position 0, the first on blocks first,
 * first + 1, ..., the second on first + 20, ... */
static void prefill(tram_model *m, int n, int first, float *logits)
{
    static int32_t ids[128], pos[128], slots[128], tables[2 * 16];
    int32_t qs[3] = {0, n, 2 * n}, lens[2] = {n, n}, rows[2] = {n - 1, 2 * n - 1};
    for (int q = 0; q < 2; q++) {
        for (int j = 0; j < 16; j++)
            tables[q * 16 + j] = first + 20 * q + j;
        for (int i = 0; i < n; i++) {
            int t = q * n + i;
            ids[t] = (t * 37) % 512, pos[t] = i, slots[t] = tables[q * 16 + i / 16] * 16 + i % 16;
        }
    }
    tram_batch b = {.num_tokens = 2 * n, .num_seqs = 2, .token_ids = ids, .positions = pos, .slot_mapping = slots,
                    .query_start = qs, .seq_lens = lens, .block_tables = tables, .max_blocks_per_seq = 16,
                    .logits_rows = rows, .num_logits = 2};
    tram_error err = {{0}};
    cr_assert_eq(tram_model_forward(m, &b, logits, &err), 0, "%s", err.msg);
}

Test(batch_upload, a_short_step_after_a_long_one_reads_only_its_own_blocks)
{
    tram_backend *be;
    tram_error err = {{0}};
    cr_assert_eq(tram_backend_cpu_create(&be, 1, &err), 0, "%s", err.msg);
    tram_model_file *f1, *f2;
    tram_model *used = tiny_model(be, &f1), *fresh = tiny_model(be, &f2);
    static float a[2 * 512], b[2 * 512];
    prefill(used, 64, 0, a);   /* 4 columns of the table: blocks 0..3 and 20..23 */
    prefill(used, 20, 8, a);   /* 2 columns: 8, 9 and 28, 29; columns 2, 3 still name earlier blocks */
    prefill(fresh, 20, 8, b);
    cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "the short step's logits depend on the long step before it");
    tram_model_destroy(used), tram_model_destroy(fresh);
    tram_model_file_close(f1), tram_model_file_close(f2);
    be->destroy(be);
}
