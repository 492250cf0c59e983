/* bench_device.cu — the GPU's two ceilings and the engine's own forward pass.
 *
 *   copy    device-to-device bandwidth (bytes read + written per second)
 *   gemm    bf16 matrix rate through the backend's matmul (cuBLASLt), 8192³
 *   decode  tram_model_prepare + tram_model_run of a preset model on dummy
 *           weights drawn on the device (--load-format dummy), the very pass
 *           the engine's CUDA runner makes, at each (batch, context) of the
 *           sweep: batch 1, 8, 64, 256 at context 512; 1, 8 and 64 at 4k; 1
 *           and 8 at 32k.  Per case: the upload of the step's metadata
 *           (prepare), the pass run eagerly and replayed from a CUDA graph,
 *           and the graph again with attention left out (the backend's
 *           attention op swapped for one that does nothing), so the
 *           difference is what attention costs; beside the floors:
 *           (weight + KV bytes) / copy bandwidth and FLOPs / matrix rate
 *   w8a8    the same pass with every matrix int8 (the engine's
 *           --quantization int8, W8A8) at batch 1 and 64, context 512
 *   offline the floor of an offline run of N requests (IN prompt tokens, OUT
 *           output tokens, at most SEQS at a time) on that model: all its
 *           FLOPs / matrix rate, or the bytes its decode steps must read
 *           (weights once per step, each sequence's KV) / bandwidth, the
 *           larger; tests/gpu/run.sh sets the measured run beside it
 *
 * The KV pool holds whatever the device left there: attention's time does
 * not depend on the values.  Medians of repeated runs, after warm-up.
 * Correctness is tests/gpu/check_e2e.c's (the Llama shape included); this
 * program only times.
 * Usage: bench_device [preset] [--offline N,IN,OUT,SEQS] */
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
#include "models/model.h"

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
    if (cudaFree(a) != cudaSuccess || cudaFree(b) != cudaSuccess) {
        fprintf(stderr, "bench_device: cudaFree failed\n");
        exit(1);
    }
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

/* ---------------------------------------------------------------- the model's pass */

struct sweep_case {
    int batch, ctx;
};

/* Matrix weights one decode step reads (every layer's and the LM head, not
 * the embedding table), at `bytes` per weight. */
static double step_weight_bytes(const tram_model_config &c, double bytes)
{
    double qd = (double)c.n_heads * c.head_dim, kd = (double)c.n_kv_heads * c.head_dim;
    double layer = (qd + 2 * kd) * c.dim + c.dim * qd + 3.0 * c.ffn_dim * c.dim;
    return bytes * (c.n_layers * layer + (double)c.vocab_size * c.dim);
}

static double kv_token_bytes(const tram_model_config &c)
{
    return 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 2;
}

/* FLOPs of one token through the matrices, and of attention over ctx keys. */
static double token_flops(const tram_model_config &c, double ctx)
{
    return step_weight_bytes(c, 2.0) + 4.0 * ctx * c.n_heads * c.head_dim * c.n_layers;
}

/* Floor of the offline run: seconds. */
static double offline_floor(const tram_model_config &c, double n, double in, double out, double seqs, double bw,
                            double rate)
{
    double len = in + out, head = 2.0 * c.vocab_size * c.dim;  /* lm_head FLOPs: output tokens only */
    double flops = n * len * (token_flops(c, 0) - head) + n * out * head +
                   n * 4.0 * c.n_heads * c.head_dim * c.n_layers * len * len / 2;
    double steps = ceil(n / seqs) * out;
    double bytes = steps * step_weight_bytes(c, 2.0) + n * out * (in + out / 2) * kv_token_bytes(c);
    return fmax(flops / rate, bytes / bw);
}

/* Host arrays of one decode step: `batch` sequences, each decoding its last
 * token at position ctx - 1 over blocks of its own. */
struct step_arrays {
    std::vector<int32_t> ids, pos, slots, qs, lens, rows, tables;
    tram_batch b;
};

static void decode_step(step_arrays &s, int batch, int ctx, int max_blocks, int vocab)
{
    int per = (ctx + BLOCK - 1) / BLOCK;
    s.ids.assign(batch, 0), s.pos.assign(batch, ctx - 1), s.slots.assign(batch, 0), s.qs.assign(batch + 1, 0);
    s.lens.assign(batch, ctx), s.rows.assign(batch, 0), s.tables.assign((size_t)batch * max_blocks, 0);
    for (int i = 0; i < batch; i++) {
        s.ids[i] = (i * 7919) % vocab;
        for (int j = 0; j < per; j++)
            s.tables[(size_t)i * max_blocks + j] = i * per + j;
        s.slots[i] = s.tables[(size_t)i * max_blocks + (ctx - 1) / BLOCK] * BLOCK + (ctx - 1) % BLOCK;
        s.qs[i + 1] = i + 1;
        s.rows[i] = i;
    }
    tram_batch b = {.num_tokens = batch, .num_seqs = batch, .token_ids = s.ids.data(), .positions = s.pos.data(),
                    .slot_mapping = s.slots.data(), .query_start = s.qs.data(), .seq_lens = s.lens.data(),
                    .block_tables = s.tables.data(), .max_blocks_per_seq = max_blocks,
                    .logits_rows = s.rows.data(), .num_logits = batch,
                    .min_query_len = 0, .max_query_len = 0,  /* tram_model_prepare sets them */
                    .seq_lora = NULL};
    s.b = b;
}

static void no_attention(tram_backend *, void *, const void *, const void *, const void *, const tram_batch *,
                         const tram_attn_shape *)
{
}

struct timing {
    double prepare, eager, graph, no_attn;
};

/* One case: prepare, eager run, graph replay, graph replay without attention. */
static timing time_case(tram_model *m, int batch, int ctx, int max_blocks)
{
    const tram_model_config *c = tram_model_config_of(m);
    step_arrays s;
    decode_step(s, batch, ctx, max_blocks, c->vocab_size);
    tram_error err = {{0}};
    timing t;
    t.prepare = time_it([&] { must(tram_model_prepare(m, &s.b, &err), "prepare", &err); }, 10);
    t.eager = time_it([&] { tram_model_run(m); }, 10);
    auto graph_time = [&] {
        must(tram_cuda_graph_begin(be, &err), "graph begin", &err);
        tram_model_run(m);
        must(tram_cuda_graph_end(be, batch, &err), "graph end", &err);
        return time_it([&] { must(tram_cuda_graph_replay(be, batch, &err), "replay", &err); }, 20);
    };
    t.graph = graph_time();
    auto attention = be->attention;
    be->attention = no_attention;
    tram_model_run(m);  /* eager once: anything the pass allocates, outside the capture */
    sync_or_die("run without attention");
    t.no_attn = graph_time();
    be->attention = attention;
    return t;
}

static tram_model *make_model(tram_model_file *f, const std::vector<sweep_case> &cases, int int8, int *max_blocks)
{
    int max_batch = 1, blocks = 0, max_ctx = 1;
    for (const sweep_case &k : cases) {
        max_batch = std::max(max_batch, k.batch);
        max_ctx = std::max(max_ctx, k.ctx);
        blocks = std::max(blocks, k.batch * ((k.ctx + BLOCK - 1) / BLOCK));
    }
    *max_blocks = (max_ctx + BLOCK - 1) / BLOCK;
    tram_model_limits lim = {.max_tokens = max_batch, .max_seqs = max_batch, .max_logits = 0,
                             .max_blocks_per_seq = *max_blocks,
                             .num_blocks = blocks, .block_size = BLOCK, .weight_type = TRAM_W_BF16,
                             .quantize_int8 = int8, .quantize_fp8 = 0, .int8_exclude = NULL, .keep_blocks = 0,
                             .kv_dtype = TRAM_KV_AUTO, .max_loras = 0, .max_lora_rank = 0};
    tram_model *m;
    tram_error err = {{0}};
    double t0 = tram_now();
    must(tram_model_create(&m, f, be, &lim, &err), "model", &err);
    fprintf(stderr, "bench_device: %s model (%d KV blocks) loaded in %.1f s\n", int8 ? "W8A8" : "bf16", blocks,
            tram_now() - t0);
    return m;
}

/* Times every case on one model; appends its rows. */
static void sweep(tram_model_file *f, const char *preset, const char *what, int int8,
                  const std::vector<sweep_case> &cases, double bw, double rate, std::vector<std::string> &rows)
{
    int max_blocks;
    tram_model *m = make_model(f, cases, int8, &max_blocks);
    const tram_model_config &c = *tram_model_config_of(m);
    double wbytes = step_weight_bytes(c, int8 ? 1.0 : 2.0);
    for (const sweep_case &k : cases) {
        timing t = time_case(m, k.batch, k.ctx, max_blocks);
        double bytes_s = (wbytes + k.batch * k.ctx * kv_token_bytes(c)) / bw;
        double flops_s = k.batch * token_flops(c, k.ctx) / (int8 ? 2 * rate : rate);  /* int8 runs at 2x */
        double floor_s = fmax(bytes_s, flops_s);
        char line[400];
        snprintf(line, sizeof(line), "| %s %s | %5d | %6d | %7.3f | %8.3f | %8.3f | %8.3f | %4.0f%% | %8.3f | %4.0f%% | "
                 "%9.0f |", preset, what, k.batch, k.ctx, t.prepare * 1e3, t.eager * 1e3, t.graph * 1e3,
                 t.no_attn * 1e3, 100 * (t.graph - t.no_attn) / t.graph, floor_s * 1e3, 100 * floor_s / t.graph,
                 k.batch / t.graph);
        rows.push_back(line);
    }
    tram_model_destroy(m);
}

int main(int argc, char **argv)
{
    const char *preset = argc > 1 && argv[1][0] != '-' ? argv[1] : "llama-3.1-8b";
    double off[4] = {0, 0, 0, 0};  /* N, IN, OUT, SEQS */
    for (int i = 1 + (argc > 1 && argv[1][0] != '-'); i < argc; i++) {
        if (strcmp(argv[i], "--offline") || i + 1 == argc ||
            sscanf(argv[++i], "%lf,%lf,%lf,%lf", &off[0], &off[1], &off[2], &off[3]) != 4 || off[3] < 1) {
            fprintf(stderr, "usage: bench_device [preset] [--offline N,IN,OUT,SEQS]\n");
            return 1;
        }
    }
    tram_error err = {{0}};
    if (tram_backend_cuda_create(&be, 0, &err)) {
        fprintf(stderr, "bench_device: %s\n", err.msg);
        return 2;
    }
    tram_cuda_device_info info;
    must(tram_cuda_device_info_of(be, &info, &err), "device info", &err);
    double bw = copy_bandwidth(), flops = gemm_rate();
    tram_model_file *f;
    must(tram_model_file_open_dummy(&f, preset, &err), "dummy weights", &err);
    std::vector<std::string> rows;
    sweep(f, preset, "bf16", 0, {{1, 512}, {8, 512}, {64, 512}, {256, 512}, {1, 4096}, {8, 4096}, {64, 4096},
                                 {1, 32768}, {8, 32768}}, bw, flops, rows);
    sweep(f, preset, "W8A8", 1, {{1, 512}, {64, 512}}, bw, flops, rows);
    /* The table comes last, after every measurement. */
    printf("\n| %s, %d SMs | copy %.0f GB/s | bf16 GEMM 8192^3 %.0f TFLOP/s |\n", info.name, info.num_sms, bw / 1e9,
           flops / 1e12);
    printf("| model pass | batch | ctx | prepare ms | eager ms | graph ms | no-attn ms | attn share | floor ms | "
           "floor / graph | tokens/s |\n");
    for (const std::string &r : rows)
        printf("%s\n", r.c_str());
    if (off[0] > 0) {
        double fs = offline_floor(*tram_model_file_config(f), off[0], off[1], off[2], off[3], bw, flops);
        printf("| offline floor | %.0f x (%.0f in, %.0f out), %.0f at a time | %.1f s | %.0f output tok/s |\n", off[0],
               off[1], off[2], off[3], fs, off[0] * off[2] / fs);
    }
    tram_model_file_close(f);
    be->destroy(be);
    return 0;
}
