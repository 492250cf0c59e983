/* window.h — one sequence of consecutive tokens through a model, at
 * positions 0..len-1: a window of `tram perplexity`, a calibration window of
 * `tram quantize`.  The model's KV pool holds exactly one window's blocks, in
 * order, so a token's position is also its KV slot. */
#ifndef TRAM_WINDOW_H
#define TRAM_WINDOW_H

#include <stdint.h>

#include "kernels/base.h"
#include "models/model.h"

typedef struct {
    int ctx;           /* the longest window */
    int32_t *pos;      /* [ctx] 0..ctx-1: positions, KV slots and logits rows */
    int32_t *blocks;   /* [ctx / 16, rounded up] 0, 1, ...: the block table */
} tram_window;

/* The limits of an f32 model that runs windows of up to ctx tokens, its LM
 * head logits_rows rows at a time. */
tram_model_limits tram_window_limits(int ctx, int logits_rows);

int tram_window_init(tram_window *w, int ctx, tram_error *err);
void tram_window_free(tram_window *w);

/* Which logits a window returns: rows [count][vocab] of positions
 * first..first+count-1, written to out. */
typedef struct {
    int first;
    int count;
    float *out;
} tram_window_logits;

/* Runs tokens[len] (len <= w->ctx) as one sequence on m (made with
 * tram_window_limits(w->ctx, ...)) and writes the logits `want` asks for
 * (NULL: none, the run only fills the KV cache and what the model observes). */
int tram_window_forward(tram_model *m, const tram_window *w, const int32_t *tokens, int len,
                        const tram_window_logits *want, tram_error *err);

#endif
