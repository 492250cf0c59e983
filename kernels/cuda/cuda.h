/* cuda.h — what the CUDA backend offers beyond the op table of backend.h:
 * random weights made on the device (--load-format dummy), tensor-parallel
 * set-up, sampling on the device, and CUDA graphs of decode steps.  Plain C
 * prototypes; only compiled into bin/tram-cuda (TRAM_CUDA). */
#ifndef TRAM_CUDA_H
#define TRAM_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* engine headers are plain C without linkage guards: wrap them here. */
#ifdef __cplusplus
extern "C" {
#endif

#include "engine/common.h"
#include "kernels/backend.h"

/* ---- presence ---- */

/* 0 when GPU device_index is usable; else -1 and one sentence saying why. */
int tram_cuda_probe(int device_index, tram_error *err);

/* ---- dummy weights ---- */

/* Fills w (rows × cols) with uniform random values in [-scale, scale] drawn
 * on the device from `seed`, in `type` (rows == 1: f32, as every vector). */
void tram_cuda_random_weight(tram_backend *be, tram_weight *w, int rows, int cols, tram_wtype type,
                             uint64_t seed, float scale);

/* ---- tensor parallelism ---- */

#define TRAM_CUDA_NCCL_ID_BYTES 128
/* Rank 0 makes the id and shares it with the other ranks (one process each). */
int tram_cuda_nccl_id(unsigned char id[TRAM_CUDA_NCCL_ID_BYTES], tram_error *err);
/* Joins the communicator; all_reduce then sums across world_size ranks. */
int tram_cuda_join(tram_backend *be, int rank, int world_size,
                   const unsigned char id[TRAM_CUDA_NCCL_ID_BYTES], tram_error *err);

/* ---- sampling on the device ---- */

typedef struct {
    float temperature;     /* 0: greedy (argmax, lowest id on ties) */
    int top_k;             /* 0: off */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    uint64_t seed;         /* Philox key of the request */
    uint64_t step;         /* Philox subsequence: the index of the token drawn */
} tram_cuda_sampling;

/* Draws one token per row of logits (bf16 [rows][vocab], backend memory).
 * params[rows], ids[rows] and logprobs[rows] are host arrays; logprobs
 * (log-softmax of the raw logits at the drawn id) may be NULL.  Only the ids
 * and logprobs cross to the host. */
int tram_cuda_sample(tram_backend *be, const void *logits, int rows, int vocab,
                     const tram_cuda_sampling *params, int32_t *ids, float *logprobs,
                     tram_error *err);

/* ---- CUDA graphs of decode steps ---- */

/* Capture: call begin, run the forward ops of a decode step padded to
 * `bucket` sequences (tram_cuda_graph_bucket in launch_plan.h) on buffers
 * whose addresses never change, then end.  Inside a capture no op may upload,
 * download, sync or allocate: upload the step's batch arrays before replay.
 * Replay re-runs the captured ops on the current contents of those buffers. */
int tram_cuda_graph_begin(tram_backend *be, tram_error *err);
int tram_cuda_graph_end(tram_backend *be, int bucket, tram_error *err);
int tram_cuda_graph_ready(tram_backend *be, int bucket);
int tram_cuda_graph_replay(tram_backend *be, int bucket, tram_error *err);

/* ---- device facts (benchmarks, logs) ---- */

typedef struct {
    char name[256];
    int num_sms;
    size_t total_bytes, free_bytes;
} tram_cuda_device_info;

int tram_cuda_device_info_of(tram_backend *be, tram_cuda_device_info *out, tram_error *err);

#ifdef __cplusplus
}
#endif

#endif
