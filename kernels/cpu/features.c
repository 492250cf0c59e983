/* features.c — run-time CPU feature detection (see features.h). */
#include "kernels/cpu/features.h"

#include "kernels/base.h"

tram_cpu_features tram_cpu_features_detect(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return (tram_cpu_features){
        .avx2 = __builtin_cpu_supports("avx2"),
        .fma = __builtin_cpu_supports("fma"),
        .f16c = __builtin_cpu_supports("f16c"),
        .bmi2 = __builtin_cpu_supports("bmi2"),
        .avx512f = __builtin_cpu_supports("avx512f"),
        .avx512bw = __builtin_cpu_supports("avx512bw"),
        .avx512vl = __builtin_cpu_supports("avx512vl"),
        .avx512vnni = __builtin_cpu_supports("avx512vnni"),
    };
#else
    return (tram_cpu_features){0};
#endif
}

int tram_cpu_fma_kernel_available(tram_cpu_kernel k)
{
    tram_cpu_features f = tram_cpu_features_detect();
    if (k == TRAM_CPU_AVX2)
        return f.avx2 && f.fma;
    return k == TRAM_CPU_GENERIC;
}

tram_cpu_kernel tram_cpu_kernel_best(int (*available)(tram_cpu_kernel k))
{
    if (available(TRAM_CPU_VNNI))
        return TRAM_CPU_VNNI;
    return available(TRAM_CPU_AVX2) ? TRAM_CPU_AVX2 : TRAM_CPU_GENERIC;
}

const char *tram_cpu_kernel_name(tram_cpu_kernel k)
{
    static const char *const names[] = {"generic", "avx2", "avx512-vnni"};
    return (unsigned)k < TRAM_ARRAY_LEN(names) ? names[k] : "unknown";
}
