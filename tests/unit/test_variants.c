/* Kernel variant specs (kernels/variants.h): what --cuda-kernels and the GPU
 * check programs accept, and the clear error for everything else. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/tram.h"
#include "cli/engine_flags.h"
#include "kernels/variants.h"

Test(variants, zeroed_is_variant_one_everywhere)
{
    tram_kernel_variants kv = {{0}};
    for (int f = 0; f < TRAM_KERNEL_FAMILIES; f++) {
        cr_assert_eq(tram_kernel_variant(&kv, (tram_kernel_family)f), 1);
        cr_assert_eq(tram_kernel_variant(NULL, (tram_kernel_family)f), 1);
        cr_assert(tram_kernel_family_max((tram_kernel_family)f) >= 1);
    }
    cr_assert_not(tram_kernel_variants_any(&kv));
    char buf[128];
    cr_assert_str_eq(tram_kernel_variants_format(&kv, buf, sizeof(buf)),
                     "decode=1,prefill=1,rope-kv=1,gemm=1,sampler=1");
}

Test(variants, names_families_and_keeps_the_rest_at_one)
{
    tram_error err = {{0}};
    tram_kernel_variants kv;
    cr_assert_eq(tram_kernel_variants_parse("sampler=1,decode=1", &kv, &err), 0, "%s", err.msg);
    cr_assert_not(tram_kernel_variants_any(&kv));
    for (int f = 0; f < TRAM_KERNEL_FAMILIES; f++) {
        int top = tram_kernel_family_max((tram_kernel_family)f);
        char spec[64], buf[128];
        snprintf(spec, sizeof(spec), "%s=%d", tram_kernel_family_name((tram_kernel_family)f), top);
        cr_assert_eq(tram_kernel_variants_parse(spec, &kv, &err), 0, "%s: %s", spec, err.msg);
        for (int g = 0; g < TRAM_KERNEL_FAMILIES; g++)
            cr_assert_eq(tram_kernel_variant(&kv, (tram_kernel_family)g), g == f ? top : 1, "%s", spec);
        cr_assert_eq(tram_kernel_variants_any(&kv), top > 1);
        cr_assert(strstr(tram_kernel_variants_format(&kv, buf, sizeof(buf)), spec), "%s in %s", spec, buf);
    }
    cr_assert_eq(tram_kernel_variants_parse("all=1", &kv, &err), 0, "%s", err.msg);
}

Test(variants, refuses_what_does_not_exist)
{
    static const char *const bad[] = {"", "decode", "decode=", "decode=0", "decode=x", "decode=2x", "attn=1",
                                      "decode=1,", ",decode=1", "decode=99", "all=99", "decode=1,gemm",
                                      "decode=99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tram_kernel_variants kv = {.v = {7, 7, 7, 7, 7}};
        tram_error err = {{0}};
        cr_assert_eq(tram_kernel_variants_parse(bad[i], &kv, &err), -1, "'%s' accepted", bad[i]);
        cr_assert(strstr(err.msg, "kernel variants"), "'%s': %s", bad[i], err.msg);
        cr_assert_eq(kv.v[0], 7, "'%s' changed the output", bad[i]);
    }
    tram_kernel_variants kv;
    tram_error err = {{0}};
    char spec[32];
    snprintf(spec, sizeof(spec), "gemm=%d", tram_kernel_family_max(TRAM_KERNEL_GEMM) + 1);
    cr_assert_eq(tram_kernel_variants_parse(spec, &kv, &err), -1);
    cr_assert(strstr(err.msg, "gemm has variants 1.."), "%s", err.msg);
}

Test(variants, the_cpu_engine_refuses_them)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    cr_assert_eq(tram_kernel_variants_parse("all=1", &c.kernels, &(tram_error){{0}}), 0);
    c.kernels.v[TRAM_KERNEL_GEMM] = 2;  /* as a parse of gemm=2 would set it */
    tram_engine *e = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_engine_create(&e, &c, "models/none.gguf", &err), -1);
    cr_assert(strstr(err.msg, "--cuda-kernels") && strstr(err.msg, "--device cuda"), "%s", err.msg);
}

Test(variants, the_cli_flag_fills_the_engine_config)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    tram_flag_table t = tram_engine_flags(&c);
    char *good[] = {"tram", "--cuda-kernels", "decode=2,rope-kv=2", NULL};
    const char *args[1];
    cr_assert_eq(tram_flags_parse(&t, 1, 3, good, args, 1), 0);
    cr_assert_eq(tram_kernel_variant(&c.kernels, TRAM_KERNEL_DECODE), 2);
    cr_assert_eq(tram_kernel_variant(&c.kernels, TRAM_KERNEL_ROPE_KV), 2);
    cr_assert_eq(tram_kernel_variant(&c.kernels, TRAM_KERNEL_GEMM), 1);
    char *bad[] = {"tram", "--cuda-kernels", "decode=99", NULL};
    cr_assert_eq(tram_flags_parse(&t, 1, 3, bad, args, 1), -1, "a variant that does not exist was accepted");
}
