/* gpu.c — the engine's GPU-only parts (see gpu.h). */
#include "engine/gpu.h"

#include <stdlib.h>

#ifdef TRAM_CUDA
#include "kernels/cuda/cuda.h"
#endif

#define NO_CUDA "device cuda: this binary was built without CUDA (`make cuda` builds bin/tram-cuda)"

int tram_gpu_probe(tram_error *err)
{
#ifdef TRAM_CUDA
    return tram_cuda_probe(0, err);
#else
    return tram_fail(err, NO_CUDA);
#endif
}

static int device_memory(tram_backend *be, size_t *free_bytes, size_t *total_bytes, tram_error *err)
{
#ifdef TRAM_CUDA
    tram_cuda_device_info info;
    if (tram_cuda_device_info_of(be, &info, err))
        return -1;
    *free_bytes = info.free_bytes;
    *total_bytes = info.total_bytes;
    return 0;
#else
    (void)be, (void)free_bytes, (void)total_bytes;
    return tram_fail(err, NO_CUDA);
#endif
}

/* The profiling batch: min(max_seqs, max_tokens) sequences of equal length
 * (at most max_model_len) from position 0, each on blocks of its own. */
static void profile_shape(const tram_gpu_pool_spec *s, int *seqs, int *per_seq)
{
    *seqs = s->max_seqs < s->max_tokens ? s->max_seqs : s->max_tokens;
    int per = s->max_tokens / *seqs;
    *per_seq = per < s->max_model_len ? per : s->max_model_len;
}

int tram_gpu_profile_blocks(const tram_gpu_pool_spec *s)
{
    int seqs, per;
    profile_shape(s, &seqs, &per);
    return seqs * ((per + s->block_size - 1) / s->block_size);
}

static int profile_forward(tram_model *m, const tram_gpu_pool_spec *s, tram_error *err)
{
    int seqs, per, bs = s->block_size, mb = s->max_blocks_per_seq;
    profile_shape(s, &seqs, &per);
    int n = seqs * per, vocab = tram_model_config_of(m)->vocab_size;
    int32_t *ids = tram_calloc((size_t)4 * n, sizeof(int32_t), err);
    int32_t *seq = tram_calloc((size_t)3 * seqs + 1 + (size_t)seqs * mb, sizeof(int32_t), err);
    float *logits = tram_calloc((size_t)seqs * vocab, sizeof(float), err);
    int rc = -1;
    if (ids && seq && logits) {
        int32_t *pos = ids + n, *slots = pos + n, *qs = seq, *lens = qs + seqs + 1, *rows = lens + seqs;
        int32_t *tables = rows + seqs;
        for (int q = 0, next = 0; q < seqs; q++) {
            for (int j = 0; j < (per + bs - 1) / bs; j++)
                tables[q * mb + j] = next++;
            for (int p = 0; p < per; p++) {
                int t = q * per + p;
                ids[t] = t % vocab;
                pos[t] = p;
                slots[t] = tables[q * mb + p / bs] * bs + p % bs;
            }
            qs[q + 1] = (q + 1) * per;
            lens[q] = per;
            rows[q] = qs[q + 1] - 1;
        }
        tram_batch b = {n, seqs, ids, pos, slots, qs, lens, tables, mb, rows, seqs};
        rc = tram_model_forward(m, &b, logits, err);
    }
    free(ids), free(seq), free(logits);
    return rc;
}

int tram_gpu_fit_pool(tram_model *m, tram_backend *be, const tram_gpu_pool_spec *s, int *num_blocks,
                      tram_error *err)
{
    size_t free_bytes = 0, total = 0;
    if (profile_forward(m, s, err) || device_memory(be, &free_bytes, &total, err))
        return -1;
    double block = (double)tram_model_kv_block_bytes(tram_model_config_of(m), s->block_size, be->act_bytes);
    double in_use = (double)(total - free_bytes) - tram_gpu_profile_blocks(s) * block;
    double budget = s->utilization * (double)total - in_use, blocks = budget / block;
    if (blocks < s->max_blocks_per_seq)
        return tram_fail(err, "the model does not fit: weights and activations take %.2f GiB of the "
                              "%.2f GiB that --gpu-memory-utilization %.2f allows, leaving room for %.0f KV "
                              "blocks where one sequence of max_model_len %d needs %d (lower "
                              "--max-model-len or --max-num-batched-tokens, or raise the utilization)",
                         in_use / (1 << 30), s->utilization * total / (1 << 30), s->utilization,
                         blocks > 0 ? blocks : 0, s->max_model_len, s->max_blocks_per_seq);
    *num_blocks = blocks > (1 << 30) ? 1 << 30 : (int)blocks;
    return 0;
}
