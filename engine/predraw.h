/* predraw.h — a step's free draws taken side by side on the backend's host
 * threads (backend.h's host_run) before engine.c's bookkeeping walks the
 * step's sequences one by one.  A draw over a 49k vocabulary (the logits
 * copied, penalties, softmax, truncation) is 0.2 ms; a batch of 32 sampled
 * sequences spent 4 ms of a 42 ms step drawing on one thread.  Each thread
 * draws with a sampler of its own, so a draw's token is the one
 * tram_sample gives on the engine's (a sequence's seed, sample index and
 * position fix it), whoever takes it. */
#ifndef TRAM_ENGINE_PREDRAW_H
#define TRAM_ENGINE_PREDRAW_H

#include "kernels/backend.h"
#include "kernels/cpu/cpu_sampling.h"

/* One draw: the row and what tram_sample takes with it; the token into *out. */
typedef struct {
    const float *row;
    tram_sample_input in;
    int32_t *out;
} tram_draw;

typedef struct tram_predraw tram_predraw;

/* NULL in *out (and 0) where the backend lends no more than one thread:
 * the engine then draws each row itself. */
int tram_predraw_create(tram_predraw **out, tram_backend *be, int vocab, tram_error *err);
void tram_predraw_destroy(tram_predraw *p);

/* Takes the n draws, each one's token into its *out. */
void tram_predraw_run(tram_predraw *p, const tram_draw *draws, int n);

#endif
