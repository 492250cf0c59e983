/* quantize.h — W8A8 models: which matrices stay at full precision,
 * calibration statistics, and the int8 GGUF `tram quantize` writes, smoothed
 * with SmoothQuant (models/smoothquant.h).
 *
 * The file format (also in docs/models.md): every quantized matrix keeps its GGUF
 * name and shape with ggml type I8 (24), values in [-127, 127], and gains an
 * F32 tensor "<name>.scale" of one scale per output row: w = q * scale[row].
 * Norm weights into which SmoothQuant folded its factors are F32; every other
 * tensor is copied as it was.  With smoothing, a model whose lm_head is tied
 * to token_embd gets its own smoothed I8 output.weight (the lookup table
 * cannot take the head's factors) and output_norm turns F32; token_embd stays
 * as it was.  The metadata gains tram.quantization = "w8a8" and, with
 * smoothing, tram.smoothquant_alpha (f32; -1 when searched per layer).
 *
 * FP8 (fp8 set, never smoothed): the same matrices are I8 tensors holding
 * OCP E4M3 codes (kernels/fp8_format.h) beside an F32 "<name>.fp8_scale" of
 * one scale per output row, w = e4m3(q) * scale[row], and
 * tram.quantization = "fp8".  A tied token_embd stays as it was (no FP8
 * lookup), and with it the head it doubles as. */
#ifndef TRAM_QUANTIZE_H
#define TRAM_QUANTIZE_H

#include <stdint.h>

#include "kernels/base.h"
#include "models/model.h"

/* 1 when the comma-separated list names the GGUF tensor `name`.  An entry
 * names every tensor whose GGUF name (blk.3, blk.3.ffn_down, output) or
 * Hugging Face name (layers.3, layers.3.mlp, layers.3.mlp.down_proj, lm_head,
 * embed_tokens; "model." optional) it equals or is a dotted prefix of.  With
 * tied embeddings token_embd.weight is also the lm_head and answers to both. */
int tram_quant_excluded(const char *list, const char *name);

/* Fails naming the first entry of the list that matches no matrix of f (a
 * typo would otherwise quantize what was meant to stay). */
int tram_quant_check_exclude(const char *list, tram_model_file *f, tram_error *err);

/* Per input channel max |x| of every linear layer's input, over the
 * calibration tokens; and, for the α search, some of those inputs whole. */
typedef struct {
    int n_layers, dim, qd, ffn;
    float *attn_in;     /* [n_layers][dim]  input of q/k/v   */
    float *attn_out;    /* [n_layers][qd]   input of o_proj  */
    float *ffn_in;      /* [n_layers][dim]  input of gate/up */
    float *ffn_hidden;  /* [n_layers][ffn]  input of down    */
    float *head_in;     /* [dim]            input of lm_head */
    int64_t tokens;
    int samples;        /* input rows kept per site: every stride-th token, at most `samples` */
    int stride, n_samples;
    float *rows[TRAM_ACT_HEAD_IN + 1];  /* by tram_act_site: [layers][samples][width], head: [samples][dim] */
    double *sumsq[TRAM_ACT_HEAD_IN + 1];/* by tram_act_site: Σ x² per input channel over every calibration
                                           token, [layers][width], head: [dim] (Wanda's ‖x‖², prune.h) */
    float *xtx[TRAM_ACT_HEAD_IN];       /* when asked, by layer input site: XᵀX over every calibration
                                           token, [layers][width][width], lower triangle (SparseGPT's
                                           Hessian, models/sparsegpt.h); else NULL */
} tram_calib_stats;

/* Runs tokens[n] through the f32 model on the CPU in windows of ctx tokens,
 * keeping up to `samples` input rows of every linear layer (0: none), and
 * with `hessians` every layer input's XᵀX. */
int tram_calibrate(tram_model_file *f, const int32_t *tokens, int n, int ctx, int threads, int samples,
                   int hessians, tram_calib_stats *st, tram_error *err);
void tram_calib_stats_free(tram_calib_stats *st);

/* ---- the int8 and FP8 GGUFs ---- */

typedef struct {
    const char *out_path;
    const char *exclude;          /* NULL or a list as above */
    const tram_calib_stats *stats;/* NULL: no smoothing */
    float alpha;                  /* SmoothQuant migration strength; < 0: searched per input
                                     (needs stats->n_samples) */
    int threads;                  /* for the search (0: OpenMP's default) */
    int verbose;                  /* the searched α of every input to stderr */
    int keep_f32;                 /* smooth but write F32 matrices (tests the identity) */
    int fp8;                      /* E4M3 codes and row scales instead of int8 (no stats) */
} tram_quant_opts;

/* Reads f (a GGUF), smooths and quantizes its matrices (or quantizes them to
 * FP8), writes o->out_path. */
int tram_quantize_model(tram_model_file *f, const tram_quant_opts *o, tram_error *err);

#endif
