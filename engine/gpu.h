/* gpu.h — what the engine does only on a GPU.  These functions exist in every
 * build (without CUDA they fail with one sentence), so that engine.c and
 * main.c need no #ifdef. */
#ifndef TRAM_GPU_H
#define TRAM_GPU_H

#include "engine/common.h"
#include "models/model.h"

/* 0 when a usable NVIDIA GPU is present; else -1 and one sentence saying why
 * (no device, no driver, or a binary built without CUDA). */
int tram_gpu_probe(tram_error *err);

typedef struct {
    int max_tokens, max_seqs;    /* the engine's step limits */
    int block_size, max_blocks_per_seq, max_model_len;
    double utilization;          /* --gpu-memory-utilization */
} tram_gpu_pool_spec;

/* KV blocks the profiling pass needs: create the model with this pool first. */
int tram_gpu_profile_blocks(const tram_gpu_pool_spec *s);
/* Runs a profiling forward pass of a full token budget (every buffer a step
 * grows is then allocated), then returns in *num_blocks how many KV blocks
 * fit in utilization × device memory beside what is in use, the profiling
 * pool excepted.  Fails with the numbers when not even one sequence of
 * max_model_len fits. */
int tram_gpu_fit_pool(tram_model *m, tram_backend *be, const tram_gpu_pool_spec *s, int *num_blocks,
                      tram_error *err);

#endif
