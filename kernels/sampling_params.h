/* sampling_params.h — what both samplers share: how one row of logits is turned
 * into a token, and the logprob records they report.
 *
 * kernels/cpu/sampling.c is the reference, kernels/cuda/sampling.cu draws the
 * same distribution on the device.  Order of work on a row: logit bias (then
 * bans), presence and frequency penalties over the output tokens, the
 * repetition penalty over prompt and output tokens, then temperature, min-p,
 * top-k and top-p.  Ties at a top-k or top-p boundary go to the lower ids. */
#ifndef TRAM_SAMPLING_PARAMS_H
#define TRAM_SAMPLING_PARAMS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t token;
    float bias;                   /* added to the logit; -INFINITY bans the token */
} tram_logit_bias;

/* Temperatures below this draw greedily: the argmax, the lowest id on ties. */
#define TRAM_SAMPLE_GREEDY_BELOW 1e-5f

/* One row's parameters, read the same way by both backends. */
typedef struct {
    float temperature;            /* below TRAM_SAMPLE_GREEDY_BELOW: greedy */
    int top_k;                    /* 0: off */
    float top_p;                  /* 1: off */
    float min_p;                  /* 0: off */
    float repetition_penalty;     /* 1: off */
    float presence_penalty;       /* 0: off */
    float frequency_penalty;      /* 0: off */
    uint64_t seed;                /* the request's: same seed, same tokens, whatever shares the batch */
} tram_sampler_row;

/* 1 when a penalty is on: the draw then reads the sequence's token history. */
static inline int tram_sample_has_penalties(const tram_sampler_row *p)
{
    return p->repetition_penalty != 1.0f || p->presence_penalty != 0 || p->frequency_penalty != 0;
}

typedef struct {
    int32_t token;
    float logprob;                /* natural log, of the model's raw distribution */
} tram_token_logprob;

typedef struct {
    int32_t token;                /* the chosen (or prompt) token */
    float logprob;                /* NaN for the first prompt token, which has none */
    int rank;                     /* 1 = the most likely token */
    int num_top;
    const tram_token_logprob *top;/* [num_top] best first */
} tram_logprob_entry;

#ifdef __cplusplus
}
#endif

#endif
