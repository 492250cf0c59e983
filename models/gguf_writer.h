/* gguf_writer.h — writes GGUF v3 files (`tram quantize`, test fixtures).
 *
 * Key/value pairs and tensor infos are declared first and kept in memory; the
 * header goes out with the first tensor's data, and data then follows in the
 * order the tensors were declared, one write per tensor, so a model can be
 * written layer by layer without holding it whole. */
#ifndef TRAM_GGUF_WRITER_H
#define TRAM_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "models/gguf.h"

typedef struct tram_gguf_writer tram_gguf_writer;

int tram_gguf_writer_create(tram_gguf_writer **out, const char *path, tram_error *err);

/* A value as the reader decoded it (any type, arrays included), e.g. to copy
 * a file's metadata.  "general.alignment" also sets the data alignment. */
int tram_gguf_writer_add_kv(tram_gguf_writer *w, const char *key, const tram_gguf_value *v, tram_error *err);
/* Every key-value of g but tram's own (tram.*): what a tool that rewrites a
 * model file (prune, quantize) keeps before it adds its own tram.* keys. */
int tram_gguf_writer_copy_kvs(tram_gguf_writer *w, const tram_gguf *g, tram_error *err);
int tram_gguf_writer_add_str(tram_gguf_writer *w, const char *key, const char *s, tram_error *err);
int tram_gguf_writer_add_u32(tram_gguf_writer *w, const char *key, uint32_t v, tram_error *err);
int tram_gguf_writer_add_f32(tram_gguf_writer *w, const char *key, float v, tram_error *err);

/* Declares a tensor of n_dims (1..4) dimensions, ne[0] innermost. */
int tram_gguf_writer_add_tensor(tram_gguf_writer *w, const char *name, tram_ggml_type type, int n_dims,
                                const int64_t *ne, tram_error *err);
/* The data of the next declared tensor, exactly its size in bytes. */
int tram_gguf_writer_write(tram_gguf_writer *w, const void *data, size_t bytes, tram_error *err);

/* Checks that every tensor was written and closes the file; on any failure
 * the partial file is removed.  Frees w either way. */
int tram_gguf_writer_finish(tram_gguf_writer *w, tram_error *err);
/* Abandons the file (removed) and frees w; NULL is fine. */
void tram_gguf_writer_abort(tram_gguf_writer *w);

#endif
