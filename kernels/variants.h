/* variants.h — numbered kernel variants, as llm.c numbers its kernels.
 *
 * Each kernel family of the CUDA backend keeps today's kernel as variant 1,
 * the reference and the default, and may add numbered alternatives that
 * tests/gpu/check_variants compares against it.  A spec names families and
 * variants: "decode=2,gemm=2", or "all=2" for every family; what a spec does
 * not name stays variant 1.  The table of families (and how many variants
 * each has) lives in kernels/variants.c, the one place a new variant is
 * declared.  Plain C, no CUDA: the CLI parses and checks specs, the CUDA
 * backend reads them (tram_cuda_set_kernel_variants in kernels/cuda/cuda.h). */
#ifndef TRAM_VARIANTS_H
#define TRAM_VARIANTS_H

#include <stddef.h>

#include "kernels/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TRAM_KERNEL_DECODE = 0,   /* "decode": attention of sequences with one query token */
    TRAM_KERNEL_PREFILL = 1,  /* "prefill": attention of sequences with a longer query range */
    TRAM_KERNEL_ROPE_KV = 2,  /* "rope-kv": q/k/v split, RoPE and the KV-cache store */
    TRAM_KERNEL_GEMM = 3,     /* "gemm": bf16 matmuls */
    TRAM_KERNEL_SAMPLER = 4,  /* "sampler": the device sampler */
    TRAM_KERNEL_FAMILIES = 5,
} tram_kernel_family;

/* v[f] is family f's variant; 0 reads as 1, so a zeroed struct is the default. */
typedef struct {
    int v[TRAM_KERNEL_FAMILIES];
} tram_kernel_variants;

/* The family's name in specs ("decode" ...), and its highest variant. */
const char *tram_kernel_family_name(tram_kernel_family f);
int tram_kernel_family_max(tram_kernel_family f);

/* Family f's variant in kv (1 when kv is NULL or leaves f unset). */
int tram_kernel_variant(const tram_kernel_variants *kv, tram_kernel_family f);

/* Parses a spec into *out (every family not named is 1).  Fails with one
 * sentence naming the item for an unknown family, a malformed item or a
 * variant the family does not have; *out is then unchanged. */
int tram_kernel_variants_parse(const char *spec, tram_kernel_variants *out, tram_error *err);

/* Writes every family as "decode=1,prefill=2,..." into buf (always
 * terminated); returns buf. */
char *tram_kernel_variants_format(const tram_kernel_variants *kv, char *buf, size_t size);

/* 1 when any family is not variant 1. */
int tram_kernel_variants_any(const tram_kernel_variants *kv);

#ifdef __cplusplus
}
#endif

#endif
