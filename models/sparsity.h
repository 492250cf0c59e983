/* sparsity.h — the 2:4 sparse GGUF that `tram prune` writes (models/prune.h).
 *
 * Every pruned matrix keeps its GGUF name and shape, as F32, with at most 2
 * nonzeros in every group of 4 consecutive weights along a row (ne[0]).  The
 * metadata gains tram.sparsity = "2:4" and tram.sparsity_exclude, the
 * comma-separated list of matrices left dense (models/quantize.h's names; ""
 * for none).  The pruned matrices are every layer's q, k, v, o and gate, up,
 * down that the list does not name; the rest of the file is copied as it was.
 * The CPU loads the pruned ones as TRAM_W_S24 (kernels/cpu/sparse24.c).
 *
 * `tram quantize` over such a file keeps both keys: SmoothQuant's folds
 * scale whole rows and columns, so every zero stays zero, and the pruned
 * matrices become I8 with at most 2 nonzero codes in every group of 4,
 * which the CPU loads as TRAM_W_S24_INT8 (kernels/cpu/sparse24_int8.c). */
#ifndef TRAM_SPARSITY_H
#define TRAM_SPARSITY_H

#include "models/gguf.h"
#include "models/gguf_writer.h"

/* Which 2 of a group of 4 weights 2:4 pruning drops: a mask (bit i for
 * weight i) of the 2 smallest scores, the later of equals. */
int tram_sparsity_drop_two(const float score[4]);

/* 1 for a layer matrix prune acts on (blk.N.attn_q.weight, ... ffn_down.weight). */
int tram_sparsity_prunable(const char *name);

/* 1 when g is a 2:4 file and `name` one of its pruned matrices. */
int tram_sparsity_is_24(const tram_gguf *g, const char *name);

/* Declares a 2:4 file whose matrices on the list stay dense (NULL: none). */
int tram_sparsity_declare(tram_gguf_writer *w, const char *exclude, tram_error *err);

/* Declares the file written from g 2:4 as g is (nothing when g is not): a
 * tool that keeps every zero (tram quantize) keeps the pattern. */
int tram_sparsity_copy(tram_gguf_writer *w, const tram_gguf *g, tram_error *err);

#endif
