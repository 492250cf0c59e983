/* hf_quant.c — quantization_config read, FP8 W8A8 accepted, the rest
 * refused (see hf_quant.h). */
#include "models/hf_quant.h"

#include <stdio.h>
#include <string.h>

/* One key's value as text, for the refusal that names it. */
static void value_text(const json_t *v, char *out, size_t cap)
{
    if (!v)
        snprintf(out, cap, "absent");
    else if (json_is_string(v))
        snprintf(out, cap, "'%s'", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, cap, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false");
    else
        snprintf(out, cap, "%s", json_is_null(v) ? "null" : "an object or list");
}

static int refuse(const json_t *v, const char *where, const char *key, const char *wanted, const char *path,
                  tram_error *err)
{
    char text[128];
    value_text(v, text, sizeof(text));
    return tram_fail(err, "%s: quantization_config.%s%s%s = %s is not supported (tram runs %s)", path, where,
                     where[0] ? "." : "", key, text, wanted);
}

/* obj[key] is the string `want`, or one of want's '|'-separated choices;
 * absent when may_lack. */
static int expect_str(const json_t *obj, const char *where, const char *key, const char *want, int may_lack,
                      const char *path, tram_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v && may_lack)
        return 0;
    const char *s = json_string_value(v);
    size_t n = s ? strlen(s) : 0;
    for (const char *p = want; s && *p; p += strcspn(p, "|"), p += *p == '|')
        if (strcspn(p, "|") == n && !strncmp(p, s, n))
            return 0;
    return refuse(v, where, key, want, path, err);
}

static int expect_int(const json_t *obj, const char *where, const char *key, long long want, const char *path,
                      tram_error *err)
{
    const json_t *v = json_object_get(obj, key);
    char text[32];
    snprintf(text, sizeof(text), "%lld", want);
    return json_is_integer(v) && json_integer_value(v) == want ? 0 : refuse(v, where, key, text, path, err);
}

/* Absent, null, or (want_true) true / (!want_true) false. */
static int expect_bool(const json_t *obj, const char *where, const char *key, int want_true, const char *path,
                       tram_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v) || (json_is_boolean(v) && json_is_true(v) == want_true))
        return 0;
    return refuse(v, where, key, want_true ? "true" : "false", path, err);
}

/* obj[key] is true (absent, compressed-tensors' default is false). */
static int expect_true(const json_t *obj, const char *where, const char *key, const char *path, tram_error *err)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_true(v) ? 0 : refuse(v, where, key, "true", path, err);
}

static int expect_null(const json_t *obj, const char *where, const char *key, const char *path, tram_error *err)
{
    const json_t *v = json_object_get(obj, key);
    return !v || json_is_null(v) ? 0 : refuse(v, where, key, "null", path, err);
}

/* An FP8 scheme's common keys: E4M3 ("float", 8 bits), symmetric, no
 * blocks or groups. */
static int fp8_scheme(const json_t *s, const char *where, const char *path, tram_error *err)
{
    return expect_str(s, where, "type", "float", 0, path, err) || expect_int(s, where, "num_bits", 8, path, err) ||
           expect_bool(s, where, "symmetric", 1, path, err) || expect_null(s, where, "block_structure", path, err) ||
           expect_null(s, where, "group_size", path, err);
}

static int ct_group(const char *name, const json_t *g, const char *path, tram_error *err)
{
    char at[128], w[160], a[160];
    snprintf(at, sizeof(at), "config_groups.%s", name);
    snprintf(w, sizeof(w), "%s.weights", at);
    snprintf(a, sizeof(a), "%s.input_activations", at);
    const json_t *weights = json_object_get(g, "weights"), *acts = json_object_get(g, "input_activations");
    if (!json_is_object(weights))
        return refuse(weights, at, "weights", "FP8 weights", path, err);
    if (!json_is_object(acts)) /* weight-only FP8: the activations would stay at full precision */
        return refuse(acts, at, "input_activations", "activations quantized per token", path, err);
    return fp8_scheme(weights, w, path, err) || expect_str(weights, w, "strategy", "channel|tensor", 0, path, err) ||
           expect_bool(weights, w, "dynamic", 0, path, err) || fp8_scheme(acts, a, path, err) ||
           expect_true(acts, a, "dynamic", path, err) || expect_str(acts, a, "strategy", "token", 0, path, err) ||
           expect_null(g, at, "output_activations", path, err);
}

static int compressed_tensors(const json_t *qc, const char *path, tram_error *err)
{
    const json_t *groups = json_object_get(qc, "config_groups"), *sparsity = json_object_get(qc, "sparsity_config");
    if (expect_str(qc, "", "format", "float-quantized|naive-quantized", 0, path, err) ||
        expect_null(qc, "", "kv_cache_scheme", path, err))
        return -1;
    if (sparsity && !json_is_null(sparsity) && expect_str(sparsity, "sparsity_config", "format", "dense", 0, path, err))
        return -1;
    if (!json_is_object(groups) || !json_object_size(groups))
        return refuse(groups, "", "config_groups", "one or more FP8 groups", path, err);
    const char *name;
    json_t *g;
    json_object_foreach((json_t *)groups, name, g)
        if (ct_group(name, g, path, err))
            return -1;
    return 0;
}

int tram_hf_quant_config(const json_t *root, tram_hf_quant *q, const char *path, tram_error *err)
{
    const json_t *qc = json_object_get(root, "quantization_config");
    *q = (tram_hf_quant){0};
    if (!qc || json_is_null(qc))
        return 0;
    if (expect_str(qc, "", "quant_method", "compressed-tensors|fbgemm_fp8", 0, path, err) ||
        expect_null(qc, "", "weight_block_size", path, err))
        return -1;
    q->fp8 = 1;
    if (!strcmp(json_string_value(json_object_get(qc, "quant_method")), "compressed-tensors"))
        return compressed_tensors(qc, path, err);
    const json_t *ub = json_object_get(qc, "activation_scale_ub");
    if (ub && !json_is_null(ub) && !(json_is_number(ub) && json_number_value(ub) > 0))
        return refuse(ub, "", "activation_scale_ub", "a positive bound", path, err);
    q->act_max = ub && json_is_number(ub) ? (float)json_number_value(ub) : 0.0f;
    return 0;
}
