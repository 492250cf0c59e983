/* lora_gguf.c — a GGUF LoRA adapter read and checked against its base (see
 * lora_gguf.h). */
#include "models/lora_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/arch.h"
#include "models/gguf.h"

/* String key `key` must be `want`: anything else is another kind of file. */
static int expect_str(const tram_gguf *g, const char *key, const char *want, tram_error *err)
{
    char *v = NULL;
    if (!tram_gguf_find_kv(g, key))
        return tram_fail(err, "%s: no %s: not a LoRA adapter as llama.cpp's convert_lora_to_gguf.py writes it",
                         g->path, key);
    if (tram_gguf_get_str(g, key, &v, err))
        return -1;
    int rc = strcmp(v, want) ? tram_fail(err, "%s: %s is \"%s\": only \"%s\" is a LoRA adapter tram runs", g->path,
                                         key, v, want)
                             : 0;
    free(v);
    return rc;
}

/* The metadata: what the file is, its alpha, and the row order of its
 * architecture's Q/K. */
static int read_header(const tram_gguf *g, tram_lora_adapter *a, tram_rope_style *rope, tram_error *err)
{
    char *arch_name = NULL;
    if (expect_str(g, "general.type", "adapter", err) || expect_str(g, "adapter.type", "lora", err) ||
        tram_gguf_get_str(g, "general.architecture", &arch_name, err))
        return -1;
    const tram_arch *arch = tram_arch_of_gguf(g, arch_name);
    int rc = arch ? 0 : tram_fail(err, "%s: general.architecture \"%s\" is not one tram runs", g->path, arch_name);
    free(arch_name);
    if (rc)
        return -1;
    *rope = arch->gguf_rope;
    if (tram_gguf_find_kv(g, "adapter.alora.invocation_tokens"))
        return tram_fail(err, "%s: adapter.alora.invocation_tokens is set: activated LoRA (applied only after "
                              "its invocation tokens) is not supported", g->path);
    return tram_gguf_get_f64(g, "adapter.lora.alpha", &a->alpha, err);
}

/* Tensor t as a factor: its layer, projection and 'a' or 'b'; -1 when it is
 * none of a projection tram adapts. */
static int factor_of(const tram_gguf_tensor *t, int *layer, char *which)
{
    int used = 0;
    char proj[32];
    if (sscanf(t->name, "blk.%d.%31[a-z_].weight.lora_%c%n", layer, proj, which, &used) != 3 || t->name[used] ||
        (*which != 'a' && *which != 'b'))
        return -1;
    for (int p = 0; p < TRAM_LORA_N_TARGETS; p++) {
        char want[300];
        tram_lora_base_name(p, *layer, want, sizeof(want));
        snprintf(want + strlen(want), sizeof(want) - strlen(want), ".lora_%c", *which);
        if (!strcmp(t->name, want))
            return p;
    }
    return -1;
}

/* A tensor that is no factor tram runs: an embedding's or the output
 * head's of another vocabulary is named with both sizes (lora_b is ne
 * [r, vocab] for both), anything else refused as it is. */
static int refuse_tensor(const tram_gguf *g, const tram_gguf_tensor *t, const tram_model_config *base,
                         tram_error *err)
{
    if ((!strcmp(t->name, "token_embd.weight.lora_b") || !strcmp(t->name, "output.weight.lora_b")) &&
        t->n_dims == 2 && t->ne[1] != base->vocab_size)
        return tram_fail(err, "%s: tensor %s has a vocabulary of %lld tokens, the base model's has %d: the adapter "
                              "was trained on another vocabulary", g->path, t->name, (long long)t->ne[1],
                         base->vocab_size);
    return tram_fail(err, "%s: tensor %s is not the lora_a/lora_b factor of a q/k/v/o/gate/up/down projection, and "
                          "tram runs nothing else", g->path, t->name);
}

/* Factor t of projection p against the base's widths and the rank so far
 * (the first factor sets it: one rank per adapter, as in PEFT without
 * rank_pattern). */
static int check_factor(const tram_gguf *g, const tram_gguf_tensor *t, tram_lora_adapter *a, int p, char which,
                        const tram_model_config *base, tram_error *err)
{
    int in, out;
    tram_lora_target_dims(base, p, &in, &out);
    int64_t width = which == 'a' ? in : out, r = which == 'a' ? t->ne[1] : t->ne[0];
    int64_t got = which == 'a' ? t->ne[0] : t->ne[1];
    if (t->n_dims != 2 || got != width || r < 1)
        return tram_fail(err, "%s: tensor %s is [%lld, %lld]; the base model's %s wants %s %d wide", g->path, t->name,
                         (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1), tram_lora_target_name(p),
                         which == 'a' ? "an input" : "an output", (int)width);
    if (a->rank && r != a->rank)
        return tram_fail(err, "%s: tensor %s has rank %lld, the adapter's other factors %d: per-module ranks are not "
                              "supported", g->path, t->name, (long long)r, a->rank);
    a->rank = (int)r;
    return 0;
}

static int check_tensors(const tram_gguf *g, tram_lora_adapter *a, const tram_model_config *base, tram_error *err)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const tram_gguf_tensor *t = &g->tensors[i];
        int layer;
        char which;
        int p = factor_of(t, &layer, &which);
        if (p < 0)
            return refuse_tensor(g, t, base, err);
        if (layer < 0 || layer >= a->n_layers)
            return tram_fail(err, "%s: tensor %s is for layer %d; the base model has %d layers", g->path, t->name,
                             layer, a->n_layers);
        if (check_factor(g, t, a, p, which, base, err))
            return -1;
        a->targets |= 1u << p;
    }
    if (!a->targets)
        return tram_fail(err, "%s: the adapter has no lora_a/lora_b factors", g->path);
    return 0;
}

/* Both factors of every targeted projection in every layer, as f32. */
static int read_factors(const tram_gguf *g, tram_lora_adapter *a, const tram_model_config *base, tram_error *err)
{
    for (int l = 0; l < a->n_layers; l++)
        for (int p = 0; p < TRAM_LORA_N_TARGETS; p++) {
            if (!(a->targets & (1u << p)))
                continue;
            int in, out, k = l * TRAM_LORA_N_TARGETS + p;
            tram_lora_target_dims(base, p, &in, &out);
            char name[256], na[300], nb[300];
            tram_lora_base_name(p, l, name, sizeof(name));
            snprintf(na, sizeof(na), "%s.lora_a", name);
            snprintf(nb, sizeof(nb), "%s.lora_b", name);
            const tram_gguf_tensor *ta = tram_gguf_find_tensor(g, na), *tb = tram_gguf_find_tensor(g, nb);
            if (!ta || !tb)
                return tram_fail(err, "%s: tensor %s is missing: every layer of an adapted projection needs both "
                                      "factors", g->path, ta ? nb : na);
            a->a[k] = tram_calloc((size_t)a->rank * in, sizeof(float), err);
            a->b[k] = a->a[k] ? tram_calloc((size_t)out * a->rank, sizeof(float), err) : NULL;
            if (!a->b[k] || tram_gguf_dequantize(ta, a->a[k], err) || tram_gguf_dequantize(tb, a->b[k], err))
                return -1;
        }
    return 0;
}

int tram_lora_gguf_read(tram_lora_adapter *a, const tram_model_config *base, int max_rank, tram_rope_style *rope,
                        tram_error *err)
{
    tram_gguf *g;
    if (tram_gguf_open(&g, a->path, err))
        return -1;
    int rc = read_header(g, a, rope, err) || check_tensors(g, a, base, err) ? -1 : 0;
    if (!rc && max_rank > 0 && a->rank > max_rank)
        rc = tram_fail(err, "%s: rank %d exceeds --max-lora-rank %d", a->path, a->rank, max_rank);
    if (!rc) {
        a->scale = (float)(a->alpha / a->rank);
        rc = read_factors(g, a, base, err);
    }
    tram_gguf_close(g);
    return rc;
}
