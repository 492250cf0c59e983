/* sparsity.h — the 2:4 sparse GGUF that `tram prune` writes (models/prune.h).
 *
 * Every pruned matrix keeps its GGUF name and shape, as F32, with at most 2
 * nonzeros in every group of 4 consecutive weights along a row (ne[0]).  The
 * metadata gains tram.sparsity = "2:4" and tram.sparsity_exclude, the
 * comma-separated list of matrices left dense (models/quantize.h's names; ""
 * for none).  The pruned matrices are every layer's q, k, v, o and gate, up,
 * down that the list does not name; the rest of the file is copied as it was.
 * The CPU loads the pruned ones as TRAM_W_S24 (kernels/cpu/sparse24.c). */
#ifndef TRAM_SPARSITY_H
#define TRAM_SPARSITY_H

#include "models/gguf.h"

/* 1 for a layer matrix prune acts on (blk.N.attn_q.weight, ... ffn_down.weight). */
int tram_sparsity_prunable(const char *name);

/* 1 when g is a 2:4 file and `name` one of its pruned matrices. */
int tram_sparsity_is_24(const tram_gguf *g, const char *name);

#endif
