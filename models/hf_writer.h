/* hf_writer.h — writes a GGUF model as a Hugging Face directory (`tram
 * convert`): config.json, model.safetensors, tokenizer.json,
 * tokenizer_config.json, generation_config.json.  Q and K rows stored
 * permuted for interleaved RoPE are put back in HF's rotate-half order, so the
 * directory runs in transformers (and in tram, with NeoX RoPE) unchanged.  A
 * mixture-of-experts GGUF becomes a Mixtral or Qwen2-MoE directory, each 3-D
 * ffn_*_exps tensor written as its experts' own tensors. */
#ifndef TRAM_HF_WRITER_H
#define TRAM_HF_WRITER_H

#include "kernels/base.h"
#include "models/model.h"

typedef enum {
    TRAM_HF_F32 = 0,   /* every tensor exactly as tram dequantizes it */
    TRAM_HF_BF16 = 1,  /* matrices rounded to bfloat16; norms stay F32 */
} tram_hf_dtype;

/* f must be a GGUF file; outdir is created when missing. */
int tram_hf_convert(tram_model_file *f, const char *outdir, tram_hf_dtype dtype, tram_error *err);

#endif
