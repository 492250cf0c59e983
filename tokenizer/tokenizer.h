/* tokenizer.h — text ↔ token ids, exactly as Hugging Face `tokenizers` does.
 *
 * Kinds: byte-level BPE (GPT-2 / Llama-3 / Qwen2 / SmolLM pre-tokenizers,
 * from GGUF metadata or tokenizer.json), SentencePiece-style vocabularies
 * stored in GGUF (tokenizer.ggml.model = llama: scores, byte fallback), and
 * SentencePiece tokenizer.model files through libsentencepiece.
 *
 * Input text must be valid UTF-8: encode rejects anything else with an error
 * naming the byte offset (JSON from the server is always valid UTF-8, so this
 * only ever catches a caller's bug).  Decoded text is always valid UTF-8:
 * bytes that do not form UTF-8 become U+FFFD, as in HF's lossy decode.
 *
 * A tram_tokenizer is immutable after loading; every function taking a const
 * pointer may be called from several threads at once. */
#ifndef TRAM_TOKENIZER_H
#define TRAM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tram_tokenizer tram_tokenizer;
struct tram_gguf;

int tram_tokenizer_from_gguf(tram_tokenizer **out, const struct tram_gguf *g, tram_error *err);
/* hf_dir holds tokenizer.json (+ tokenizer_config.json) or tokenizer.model. */
int tram_tokenizer_from_dir(tram_tokenizer **out, const char *hf_dir, tram_error *err);
/* Trains a SentencePiece BPE model (byte fallback, no normalization) with
 * libsentencepiece's trainer: writes PREFIX.model and PREFIX.vocab. */
int tram_spm_train(const char *text_file, const char *model_prefix, int vocab_size, tram_error *err);
/* path: a .gguf file or a Hugging Face directory. */
int tram_tokenizer_load(tram_tokenizer **out, const char *path, tram_error *err);
void tram_tokenizer_free(tram_tokenizer *t);

/* Encodes text[0..len) into a new malloc'd array *ids of *n ids (the caller
 * frees it).  add_bos: prepend BOS when the model asks for it (HF's
 * add_special_tokens).  parse_special: split special tokens written in the
 * text out as their ids; when 0 they are tokenized as plain text, which is
 * what user content must get. */
int tram_tokenizer_encode(const tram_tokenizer *t, const char *text, size_t len, int add_bos,
                          int parse_special, int32_t **ids, int *n, tram_error *err);

/* Decodes ids into a new malloc'd NUL-terminated UTF-8 string (*len bytes).
 * skip_special drops control tokens (BOS, EOS, <|im_end|>, ...). */
int tram_tokenizer_decode(const tram_tokenizer *t, const int32_t *ids, int n, int skip_special,
                          char **text, size_t *len, tram_error *err);

int tram_tokenizer_vocab_size(const tram_tokenizer *t);
/* The token's vocabulary string (byte-level or ▁ form), NUL-terminated, or
 * NULL for an id out of range. */
const char *tram_tokenizer_piece(const tram_tokenizer *t, int32_t id);
/* Raw bytes the token stands for in decoded text (not NUL-terminated). */
const char *tram_tokenizer_token_bytes(const tram_tokenizer *t, int32_t id, size_t *len);
int tram_tokenizer_is_special(const tram_tokenizer *t, int32_t id);
/* The id of a vocabulary string, or -1. */
int32_t tram_tokenizer_find(const tram_tokenizer *t, const char *piece);
int32_t tram_tokenizer_bos(const tram_tokenizer *t);   /* -1 when none */
int32_t tram_tokenizer_eos(const tram_tokenizer *t);   /* -1 when none */
int tram_tokenizer_adds_bos(const tram_tokenizer *t);
/* Ids that end generation: EOS plus the model's end-of-turn tokens
 * (<|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>, ...). */
const int32_t *tram_tokenizer_eog_ids(const tram_tokenizer *t, int *n);
int tram_tokenizer_is_eog(const tram_tokenizer *t, int32_t id);
/* The chat template stored with the model, or NULL. */
const char *tram_tokenizer_chat_template(const tram_tokenizer *t);

/* ---- incremental detokenizer (streaming) ----
 *
 * Fed one id at a time, it returns only complete UTF-8 text, and the
 * concatenation of everything it returns (pushes, then finish) equals
 * tram_tokenizer_decode of all the ids.  With stop strings, text that could
 * still be the start of a stop string is held back; when a stop string
 * completes, the text before it is returned, the stop string and anything
 * after it never are, and push reports the stop. */
typedef struct tram_detok tram_detok;

int tram_detok_create(tram_detok **out, const tram_tokenizer *t, int skip_special,
                      const char *const *stops, int n_stops, tram_error *err);
void tram_detok_free(tram_detok *d);
/* *text / *len: new text, valid until the next call.  Returns 1 when a stop
 * string matched (index in *stop_index when not NULL; later pushes return
 * nothing), 0 otherwise, -1 on a bad id. */
int tram_detok_push(tram_detok *d, int32_t id, const char **text, size_t *len, int *stop_index,
                    tram_error *err);
/* on = 0 pauses stop strings (min_tokens): no text is held back for them and
 * none matches; on = 1 resumes with the text pushed from then on. */
void tram_detok_check_stops(tram_detok *d, int on);
/* End of stream: returns the held-back text (an incomplete UTF-8 tail
 * becomes U+FFFD, a partial stop string is released). */
void tram_detok_finish(tram_detok *d, const char **text, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
