/* variants.c — the kernel families, their variant counts and the spec parser
 * (kernels/variants.h). */
#include "kernels/variants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Raise a family's count here when its next variant exists in kernels/cuda
 * and tests/gpu/check_variants compares it. */
static const struct {
    const char *name;
    int max;
} families[TRAM_KERNEL_FAMILIES] = {
    [TRAM_KERNEL_DECODE] = {"decode", 2},
    [TRAM_KERNEL_PREFILL] = {"prefill", 2},
    [TRAM_KERNEL_ROPE_KV] = {"rope-kv", 2},
    [TRAM_KERNEL_GEMM] = {"gemm", 2},
    [TRAM_KERNEL_SAMPLER] = {"sampler", 2},
};

const char *tram_kernel_family_name(tram_kernel_family f) { return families[f].name; }

int tram_kernel_family_max(tram_kernel_family f) { return families[f].max; }

int tram_kernel_variant(const tram_kernel_variants *kv, tram_kernel_family f)
{
    return kv && kv->v[f] > 0 ? kv->v[f] : 1;
}

/* The family called name[0, len), or -1. */
static int family_of(const char *name, size_t len)
{
    for (int f = 0; f < TRAM_KERNEL_FAMILIES; f++)
        if (strlen(families[f].name) == len && !strncmp(families[f].name, name, len))
            return f;
    return -1;
}

static int bad_item(tram_error *err, const char *item, size_t len, const char *why)
{
    char names[128] = "";
    for (int f = 0; f < TRAM_KERNEL_FAMILIES; f++)
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", f ? ", " : "", families[f].name);
    return tram_fail(err, "kernel variants: '%.*s': %s (items are FAMILY=N or all=N; families: %s)", (int)len,
                     item, why, names);
}

/* Sets family f (or every family when f < 0) to variant n, when it has it. */
static int set_variant(tram_kernel_variants *kv, int f, int n, const char *item, size_t len, tram_error *err)
{
    for (int g = f < 0 ? 0 : f; g < (f < 0 ? TRAM_KERNEL_FAMILIES : f + 1); g++) {
        if (n > families[g].max) {
            char why[96];
            snprintf(why, sizeof(why), "%s has variants 1..%d", families[g].name, families[g].max);
            return bad_item(err, item, len, why);
        }
        kv->v[g] = n;
    }
    return 0;
}

static int parse_item(tram_kernel_variants *kv, const char *item, size_t len, tram_error *err)
{
    const char *eq = memchr(item, '=', len);
    if (!eq)
        return bad_item(err, item, len, "no '='");
    size_t name_len = (size_t)(eq - item);
    int all = name_len == 3 && !strncmp(item, "all", 3);
    int f = all ? -1 : family_of(item, name_len);
    if (!all && f < 0)
        return bad_item(err, item, len, "unknown family");
    char digits[16];
    size_t dn = len - name_len - 1;
    if (dn < 1 || dn >= sizeof(digits) || strspn(eq + 1, "0123456789") < dn)
        return bad_item(err, item, len, "the variant must be a number");
    memcpy(digits, eq + 1, dn);
    digits[dn] = 0;
    long n = strtol(digits, NULL, 10);
    if (n < 1)
        return bad_item(err, item, len, "variants count from 1");
    return set_variant(kv, f, (int)n, item, len, err);
}

int tram_kernel_variants_parse(const char *spec, tram_kernel_variants *out, tram_error *err)
{
    tram_kernel_variants kv = {{0}};
    if (!spec || !*spec)
        return tram_fail(err, "kernel variants: empty spec (items are FAMILY=N or all=N)");
    for (const char *p = spec;; p++) {
        size_t len = strcspn(p, ",");
        if (parse_item(&kv, p, len, err))
            return -1;
        p += len;
        if (!*p)
            break;
    }
    *out = kv;
    return 0;
}

char *tram_kernel_variants_format(const tram_kernel_variants *kv, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int f = 0; f < TRAM_KERNEL_FAMILIES && used < size; f++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s=%d", f ? "," : "", families[f].name,
                                 tram_kernel_variant(kv, (tram_kernel_family)f));
    return buf;
}

int tram_kernel_variants_any(const tram_kernel_variants *kv)
{
    for (int f = 0; f < TRAM_KERNEL_FAMILIES; f++)
        if (tram_kernel_variant(kv, (tram_kernel_family)f) != 1)
            return 1;
    return 0;
}
