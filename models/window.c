#include "models/window.h"

#include <stdlib.h>

enum { BLOCK_SIZE = 16 };

static int window_blocks(int ctx)
{
    return (ctx + BLOCK_SIZE - 1) / BLOCK_SIZE;
}

tram_model_limits tram_window_limits(int ctx, int logits_rows)
{
    return (tram_model_limits){.max_tokens = ctx, .max_seqs = logits_rows,
                               .max_blocks_per_seq = window_blocks(ctx), .num_blocks = window_blocks(ctx),
                               .block_size = BLOCK_SIZE, .weight_type = TRAM_W_F32};
}

int tram_window_init(tram_window *w, int ctx, tram_error *err)
{
    int blocks = window_blocks(ctx);
    *w = (tram_window){.ctx = ctx, .pos = tram_calloc((size_t)ctx + blocks, sizeof(int32_t), err)};
    if (!w->pos)
        return -1;
    w->blocks = w->pos + ctx;
    for (int i = 0; i < ctx; i++)
        w->pos[i] = i;
    for (int b = 0; b < blocks; b++)
        w->blocks[b] = b;
    return 0;
}

void tram_window_free(tram_window *w)
{
    free(w->pos);
    *w = (tram_window){0};
}

int tram_window_forward(tram_model *m, const tram_window *w, const int32_t *tokens, int len,
                        const tram_window_logits *want, tram_error *err)
{
    const tram_window_logits none = {0};
    if (!want)
        want = &none;
    int32_t query_start[2] = {0, len}, seq_len = len;
    tram_batch b = {.num_tokens = len, .num_seqs = 1, .token_ids = tokens, .positions = w->pos,
                    .slot_mapping = w->pos, .query_start = query_start, .seq_lens = &seq_len,
                    .block_tables = w->blocks, .max_blocks_per_seq = window_blocks(w->ctx),
                    .num_logits = want->count, .logits_rows = w->pos + want->first};
    return tram_model_forward(m, &b, want->out, err);
}
