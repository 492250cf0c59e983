/* ranks.h — tensor parallelism's ranks: one backend, one part of the model
 * (models/shard.h) and one thread per rank, in one process.
 *
 * Rank 0 runs on the calling thread (the engine thread: it samples from rank
 * 0's logits); ranks 1 .. N-1 each on a thread of their own that waits for
 * work.  tram_ranks_run hands every rank the same function at once and waits
 * for all: ranks must run together, since their all-reduces meet (the CPU
 * group's barriers, NCCL's collectives).  At world size 1 there is no thread
 * and run is a plain call.  One scheduler and one block manager drive them
 * all: every rank runs the same unified batch, and each rank's KV pool holds
 * the KV heads of its own query heads, at the same block numbers. */
#ifndef TRAM_RANKS_H
#define TRAM_RANKS_H

#include "kernels/backend.h"
#include "models/model.h"

typedef struct tram_ranks tram_ranks;

#define TRAM_RANKS_MAX 64

typedef struct {
    const char *device;   /* "cpu" or "cuda" */
    int world_size;       /* ranks (--tensor-parallel-size) */
    int num_threads;      /* CPU threads of all ranks together; 0 = all cores; each rank gets its share */
} tram_ranks_spec;

/* Checks that world_size ranks can split the model c and, on CUDA, that as
 * many GPUs exist; one sentence on failure. */
int tram_ranks_check(const tram_ranks_spec *spec, const tram_model_config *c, tram_error *err);

/* Creates the backends (a CPU group, or NCCL communicators) and the threads. */
int tram_ranks_create(tram_ranks **out, const tram_ranks_spec *spec, tram_error *err);
/* Loads every rank's part of f, each on its own thread. */
int tram_ranks_load(tram_ranks *r, tram_model_file *f, const tram_model_limits *lim, tram_error *err);
void tram_ranks_destroy(tram_ranks *r);

int tram_ranks_world_size(const tram_ranks *r);
tram_backend *tram_ranks_backend(const tram_ranks *r, int rank);
tram_model *tram_ranks_model(const tram_ranks *r, int rank);

/* Runs fn(r, rank, ctx) on every rank's thread at once and waits for all;
 * returns the lowest failing rank's error. */
typedef int (*tram_rank_fn)(tram_ranks *r, int rank, void *ctx, tram_error *err);
int tram_ranks_run(tram_ranks *r, tram_rank_fn fn, void *ctx, tram_error *err);

/* tram_model_forward on every rank; rank 0 writes the logits. */
int tram_ranks_forward(tram_ranks *r, const tram_batch *b, float *logits, tram_error *err);
/* tram_model_resize_kv on every rank. */
int tram_ranks_resize_kv(tram_ranks *r, int num_blocks, tram_error *err);

#endif
