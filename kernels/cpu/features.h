/* features.h — which instruction sets the CPU kernels may use here.
 *
 * The int8 kernels (kernels/cpu/int8.c) and the GGUF block kernels
 * (kernels/cpu/gemm_blocks.c) are each built three times, for the levels
 * below, with target attributes, so one binary runs on any x86-64 and picks
 * at run time.  Each family says which features its levels need
 * (tram_i8_kernel_available, tram_q_kernel_available). */
#ifndef TRAM_CPU_FEATURES_H
#define TRAM_CPU_FEATURES_H

typedef enum {
    TRAM_CPU_GENERIC = 0,  /* plain C, any CPU */
    TRAM_CPU_AVX2 = 1,     /* 256-bit byte dot products (vpmaddubsw) */
    TRAM_CPU_VNNI = 2,     /* AVX-512 VNNI (vpdpbusd) */
} tram_cpu_kernel;

typedef struct {
    int avx2, fma, f16c, bmi2;
    int avx512f, avx512bw, avx512vl, avx512vnni;
} tram_cpu_features;

/* What this CPU supports (all 0 off x86-64). */
tram_cpu_features tram_cpu_features_detect(void);

/* The levels of a family whose fast kernel is AVX2 with FMA (2:4 sparse,
 * FP8): AVX2 where the CPU has both, GENERIC always. */
int tram_cpu_fma_kernel_available(tram_cpu_kernel k);

/* The fastest level for which available() holds; GENERIC always does. */
tram_cpu_kernel tram_cpu_kernel_best(int (*available)(tram_cpu_kernel k));
/* "generic", "avx2", "avx512-vnni". */
const char *tram_cpu_kernel_name(tram_cpu_kernel k);

#endif
