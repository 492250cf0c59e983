/* bench_device.cu — the GPU's two ceilings and the CUDA backend's decode step.
 *
 *   copy    device-to-device bandwidth (bytes read + written per second)
 *   gemm    bf16 matrix rate through the backend's matmul (cuBLASLt), 8192³
 *   decode  one decode step of a preset model (random weights made on the
 *           device) at several batch sizes, context 512, run op by op in the
 *           order models/llama.c uses them, eager and replayed from a CUDA
 *           graph, beside its floors: (weight + KV bytes) / copy bandwidth
 *           and FLOPs / matrix rate
 *   offline the floor of an offline run of N requests (IN prompt tokens, OUT
 *           output tokens, at most SEQS at a time) on that model: all its
 *           FLOPs / matrix rate, or the bytes its decode steps must read
 *           (weights once per step, each sequence's KV) / bandwidth, the
 *           larger; tests/gpu/run.sh sets the measured run beside it
 *
 * It times the backend alone, without model files or the scheduler; the
 * engine's own numbers come from `tram bench`.  Medians of repeated runs,
 * after warm-up.
 * Usage: bench_device [preset] [--offline N,IN,OUT,SEQS] [batch sizes...] */
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/launch_plan.h"
#include "models/presets.h"

#define CTX 512
#define BLOCK 16

static tram_backend *be;

static void must(int rc, const char *what, const tram_error *err)
{
    if (rc) {
        fprintf(stderr, "bench_device: %s: %s\n", what, err ? err->msg : "");
        exit(1);
    }
}

static void sync_or_die(const char *what)
{
    tram_error err = {{0}};
    must(be->sync(be, &err), what, &err);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Seconds per call of fn, median of `reps` timed calls after 3 warm-ups. */
template <typename F>
static double time_it(F fn, int reps)
{
    std::vector<double> t;
    for (int i = 0; i < reps + 3; i++) {
        double t0 = tram_now();
        fn();
        sync_or_die("timed region");
        if (i >= 3)
            t.push_back(tram_now() - t0);
    }
    return median(t);
}

static double copy_bandwidth(void)
{
    size_t bytes = (size_t)2 << 30;
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaMemset(a, 1, bytes) != cudaSuccess) {
        fprintf(stderr, "bench_device: cannot allocate copy buffers\n");
        exit(1);
    }
    /* A device-to-device cudaMemcpy returns before the copy is done, on the
     * legacy stream, which the backend's sync (its own non-blocking stream)
     * does not wait for: wait for the device here. */
    double s = time_it([&] {
        if (cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
            cudaDeviceSynchronize() != cudaSuccess) {
            fprintf(stderr, "bench_device: copy failed: %s\n", cudaGetErrorString(cudaGetLastError()));
            exit(1);
        }
    }, 10);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * bytes / s;
}

static double gemm_rate(void)
{
    const int n = 8192;
    tram_weight w, x;
    tram_cuda_random_weight(be, &w, n, n, TRAM_W_BF16, 1, 0.02f);
    tram_cuda_random_weight(be, &x, n, n, TRAM_W_BF16, 2, 1.0f);
    void *y = be->alloc(be, (size_t)n * n * 2);
    sync_or_die("gemm set-up");
    double s = time_it([&] { be->matmul(be, y, x.data, &w, n); }, 10);
    be->free(be, y);
    be->free_weight(be, &w);
    be->free_weight(be, &x);
    return 2.0 * n * n * (double)n / s;
}

/* ---------------------------------------------------------------- decode step */

struct layer {
    tram_weight attn_norm, wq, wk, wv, wo, ffn_norm, gate_up, down;
    tram_weight k_cache, v_cache;  /* random K/V: zeros would time another computation */
};

struct model {
    tram_model_config c;
    tram_attn_shape shape;
    std::vector<layer> layers;
    tram_weight embed, out_norm, lm_head;
    float *inv_freq;
    void *x, *xb, *q, *k, *v, *att, *proj, *gu, *hidden, *logits;
    int32_t *ids, *pos, *slots, *qs, *lens, *tables;
    int max_batch, blocks_per_seq;
    double weight_bytes;  /* what a decode step reads: matrices, lm_head, no embedding table */
};

/* FLOPs of one token through the matrices, and of attention over ctx keys. */
static double token_flops(const model &m, double ctx)
{
    const tram_model_config &c = m.c;
    return m.weight_bytes + 4.0 * ctx * c.n_heads * c.head_dim * c.n_layers;  /* 2 FLOPs per bf16 weight */
}

/* KV bytes of one token over every layer. */
static double kv_token_bytes(const model &m)
{
    return 2.0 * m.c.n_layers * m.c.n_kv_heads * m.c.head_dim * 2;
}

/* Floor of the offline run: seconds. */
static double offline_floor(const model &m, double n, double in, double out, double seqs, double bw, double rate)
{
    double len = in + out, head = 2.0 * m.c.vocab_size * m.c.dim;  /* lm_head FLOPs: output tokens only */
    double flops = n * len * (token_flops(m, 0) - head) + n * out * head +
                   n * 4.0 * m.c.n_heads * m.c.head_dim * m.c.n_layers * len * len / 2;
    double steps = ceil(n / seqs) * out;
    double bytes = steps * m.weight_bytes + n * out * (in + out / 2) * kv_token_bytes(m);
    return fmax(flops / rate, bytes / bw);
}

static void *dev(size_t bytes)
{
    void *p = be->alloc(be, bytes);
    if (!p)
        sync_or_die("alloc");
    return p;
}

static void random_w(model &m, tram_weight *w, int rows, int cols, uint64_t seed)
{
    tram_cuda_random_weight(be, w, rows, cols, TRAM_W_BF16, seed, 1.0f / sqrtf((float)cols));
    if (rows > 1)
        m.weight_bytes += 2.0 * rows * cols;
}

static void build(model &m, int max_batch)
{
    const tram_model_config &c = m.c;
    int qd = c.n_heads * c.head_dim, kd = c.n_kv_heads * c.head_dim;
    m.shape = {c.n_heads, c.n_kv_heads, c.head_dim, BLOCK, 1.0f / sqrtf((float)c.head_dim)};
    m.max_batch = max_batch;
    m.blocks_per_seq = (CTX + BLOCK - 1) / BLOCK;
    size_t slots = (size_t)max_batch * m.blocks_per_seq * BLOCK;
    uint64_t seed = 100;
    m.layers.resize(c.n_layers);
    for (layer &L : m.layers) {
        tram_cuda_random_weight(be, &L.attn_norm, 1, c.dim, TRAM_W_F32, seed++, 1.0f);
        tram_cuda_random_weight(be, &L.ffn_norm, 1, c.dim, TRAM_W_F32, seed++, 1.0f);
        random_w(m, &L.wq, qd, c.dim, seed++);
        random_w(m, &L.wk, kd, c.dim, seed++);
        random_w(m, &L.wv, kd, c.dim, seed++);
        random_w(m, &L.wo, c.dim, qd, seed++);
        random_w(m, &L.gate_up, 2 * c.ffn_dim, c.dim, seed++);
        random_w(m, &L.down, c.dim, c.ffn_dim, seed++);
        tram_cuda_random_weight(be, &L.k_cache, (int)slots, kd, TRAM_W_BF16, seed++, 1.0f);
        tram_cuda_random_weight(be, &L.v_cache, (int)slots, kd, TRAM_W_BF16, seed++, 1.0f);
    }
    random_w(m, &m.embed, c.vocab_size, c.dim, seed++);
    tram_cuda_random_weight(be, &m.out_norm, 1, c.dim, TRAM_W_F32, seed++, 1.0f);
    if (c.tied_embeddings)
        m.lm_head = m.embed;
    else
        random_w(m, &m.lm_head, c.vocab_size, c.dim, seed++);
    m.weight_bytes -= 2.0 * c.vocab_size * c.dim;  /* decode reads a few embedding rows, not the table */
    if (c.tied_embeddings)
        m.weight_bytes += 2.0 * c.vocab_size * c.dim;
    std::vector<float> inv(c.head_dim / 2);
    tram_rope_inv_freq(&c, inv.data());
    m.inv_freq = (float *)dev(inv.size() * 4);
    be->upload(be, m.inv_freq, inv.data(), inv.size() * 4);
    size_t B = max_batch;
    m.x = dev(B * c.dim * 2), m.xb = dev(B * c.dim * 2), m.q = dev(B * qd * 2), m.k = dev(B * kd * 2);
    m.v = dev(B * kd * 2), m.att = dev(B * qd * 2), m.proj = dev(B * c.dim * 2);
    m.gu = dev(B * 2 * c.ffn_dim * 2), m.hidden = dev(B * c.ffn_dim * 2), m.logits = dev(B * c.vocab_size * 2);
    m.ids = (int32_t *)dev(B * 4), m.pos = (int32_t *)dev(B * 4), m.slots = (int32_t *)dev(B * 4);
    m.qs = (int32_t *)dev((B + 1) * 4), m.lens = (int32_t *)dev(B * 4);
    m.tables = (int32_t *)dev(B * m.blocks_per_seq * 4);
    sync_or_die("model set-up");
}

/* Batch of `b` sequences, each decoding its token at position CTX - 1. */
static tram_batch upload_batch(model &m, int b)
{
    std::vector<int32_t> ids(b), pos(b, CTX - 1), slots(b), qs(b + 1), lens(b, CTX), tables(b * m.blocks_per_seq);
    for (int i = 0; i < b; i++) {
        ids[i] = (i * 7919) % m.c.vocab_size;
        slots[i] = (i * m.blocks_per_seq) * BLOCK + CTX - 1;
        qs[i + 1] = i + 1;
        for (int j = 0; j < m.blocks_per_seq; j++)
            tables[i * m.blocks_per_seq + j] = i * m.blocks_per_seq + j;
    }
    qs[0] = 0;
    be->upload(be, m.ids, ids.data(), b * 4);
    be->upload(be, m.pos, pos.data(), b * 4);
    be->upload(be, m.slots, slots.data(), b * 4);
    be->upload(be, m.qs, qs.data(), (b + 1) * 4);
    be->upload(be, m.lens, lens.data(), b * 4);
    be->upload(be, m.tables, tables.data(), tables.size() * 4);
    tram_batch d;
    memset(&d, 0, sizeof(d));
    d.num_tokens = b, d.num_seqs = b, d.token_ids = m.ids, d.positions = m.pos, d.slot_mapping = m.slots;
    d.query_start = m.qs, d.seq_lens = m.lens, d.block_tables = m.tables, d.max_blocks_per_seq = m.blocks_per_seq;
    return d;
}

static void step(model &m, const tram_batch &d)
{
    const tram_model_config &c = m.c;
    int n = d.num_tokens;
    float eps = c.norm_eps;
    be->embed(be, m.x, &m.embed, d.token_ids, n);
    be->rmsnorm(be, m.xb, m.x, &m.layers[0].attn_norm, n, eps);
    for (int l = 0; l < c.n_layers; l++) {
        layer &L = m.layers[l];
        be->matmul(be, m.q, m.xb, &L.wq, n);
        be->matmul(be, m.k, m.xb, &L.wk, n);
        be->matmul(be, m.v, m.xb, &L.wv, n);
        be->rope(be, m.q, m.k, d.positions, n, &m.shape, m.inv_freq, c.rope_style);
        be->kv_store(be, L.k_cache.data, L.v_cache.data, m.k, m.v, d.slot_mapping, n, &m.shape);
        be->attention(be, m.att, m.q, L.k_cache.data, L.v_cache.data, &d, &m.shape);
        be->matmul(be, m.proj, m.att, &L.wo, n);
        be->add_rmsnorm(be, m.x, m.xb, m.proj, &L.ffn_norm, n, eps);
        be->matmul(be, m.gu, m.xb, &L.gate_up, n);
        be->silu_mul(be, m.hidden, m.gu, n, c.ffn_dim);
        be->matmul(be, m.proj, m.hidden, &L.down, n);
        const tram_weight *next = l + 1 < c.n_layers ? &m.layers[l + 1].attn_norm : &m.out_norm;
        be->add_rmsnorm(be, m.x, m.xb, m.proj, next, n, eps);
    }
    be->matmul(be, m.logits, m.xb, &m.lm_head, n);
}

int main(int argc, char **argv)
{
    const char *preset = argc > 1 ? argv[1] : "llama-3.1-8b";
    std::vector<int> batches;
    double off[4] = {0, 0, 0, 0};  /* N, IN, OUT, SEQS */
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--offline") && i + 1 < argc) {
            if (sscanf(argv[++i], "%lf,%lf,%lf,%lf", &off[0], &off[1], &off[2], &off[3]) != 4 || off[3] < 1) {
                fprintf(stderr, "bench_device: --offline wants N,IN,OUT,SEQS\n");
                return 1;
            }
            continue;
        }
        int b = atoi(argv[i]);
        if (b < 1) {
            fprintf(stderr, "bench_device: batch size '%s' is not a positive number\n", argv[i]);
            return 1;
        }
        batches.push_back(b);
    }
    if (batches.empty())
        batches = {1, 8, 64, 256};
    tram_error err = {{0}};
    if (tram_backend_cuda_create(&be, 0, &err)) {
        fprintf(stderr, "bench_device: %s\n", err.msg);
        return 2;
    }
    tram_cuda_device_info info;
    must(tram_cuda_device_info_of(be, &info, &err), "device info", &err);
    double bw = copy_bandwidth(), flops = gemm_rate();
    model m;
    must(tram_preset_load(preset, &m.c, &err), "preset", &err);
    build(m, *std::max_element(batches.begin(), batches.end()));
    double kv_per_seq = CTX * kv_token_bytes(m);
    /* The table is printed after every measurement, so that it comes last. */
    std::vector<std::string> rows;
    char line[400];
    for (int b : batches) {
        tram_batch d = upload_batch(m, b);
        sync_or_die("batch upload");
        double eager = time_it([&] { step(m, d); }, 10);
        double graph = NAN;
        if (tram_cuda_graph_bucket(b) == b) {  /* graphs exist for powers of two */
            must(tram_cuda_graph_begin(be, &err), "graph begin", &err);
            step(m, d);
            must(tram_cuda_graph_end(be, b, &err), "graph end", &err);
            graph = time_it([&] { must(tram_cuda_graph_replay(be, b, &err), "replay", &err); }, 20);
        }
        double bytes_s = (m.weight_bytes + b * kv_per_seq) / bw, flops_s = b * token_flops(m, CTX) / flops;
        double best = isnan(graph) ? eager : graph;
        snprintf(line, sizeof(line), "| | %5d | %8.3f | %8.3f | %8.3f | %8.3f | %5.0f%% | %10.0f |", b, eager * 1e3,
                 graph * 1e3, bytes_s * 1e3, flops_s * 1e3, 100 * fmax(bytes_s, flops_s) / best, b / best);
        rows.push_back(line);
    }
    printf("\n| %s, %d SMs | copy %.0f GB/s | bf16 GEMM 8192^3 %.0f TFLOP/s |\n", info.name, info.num_sms, bw / 1e9,
           flops / 1e12);
    printf("| %s decode step, ctx %d | batch | eager ms | graph ms | floor ms (bytes) | floor ms (FLOPs) | floor / "
           "time | tokens/s |\n", preset, CTX);
    for (const std::string &r : rows)
        printf("%s\n", r.c_str());
    if (off[0] > 0) {
        double fs = offline_floor(m, off[0], off[1], off[2], off[3], bw, flops);
        printf("| offline floor | %.0f x (%.0f in, %.0f out), %.0f at a time | %.1f s | %.0f output tok/s |\n", off[0],
               off[1], off[2], off[3], fs, off[0] * off[2] / fs);
    }
    be->destroy(be);
    return 0;
}
