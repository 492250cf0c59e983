/* sampler.h — a sequence's next draw in the samplers' terms: its request's
 * parameters as kernels/sampling_params.h reads them, and the input of the host
 * sampler (kernels/cpu/cpu_sampling.h).  The CUDA runner builds its device rows
 * from the same parameters (engine/cuda_runner.c). */
#ifndef TRAM_ENGINE_SAMPLER_H
#define TRAM_ENGINE_SAMPLER_H

#include "engine/sequence.h"
#include "kernels/cpu/cpu_sampling.h"
#include "kernels/sampling_params.h"

/* 1 while s's end-of-generation and stop tokens are held back (min_tokens). */
int tram_seq_holds_stops(const tram_seq *s);

/* The parameters of s's draws; a greedy temperature reads as 0. */
tram_sampler_row tram_seq_sampler_row(const tram_seq *s);

/* The host sampler's input for s's next token: the logit bias, the held-back
 * tokens as bans, and s's prompt and output for the penalties. */
tram_sample_input tram_seq_sample_input(const tram_seq *s);

#endif
