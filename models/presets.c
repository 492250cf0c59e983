/* presets.c — reads models/presets/NAME.json into a tram_model_config. */
#include "models/presets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/arch.h"
#include "models/json_util.h"

static void preset_path(const char *name, char *path, size_t len)
{
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 5 && !strcmp(name + n - 5, ".json"))) {
        snprintf(path, len, "%s", name);
        return;
    }
    const char *dir = getenv("TRAM_PRESET_DIR");
    snprintf(path, len, "%s/%s.json", dir && *dir ? dir : TRAM_PRESET_DIR, name);
}

static int preset_sizes(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    static const struct {
        const char *key;
        long long lo, hi;
        size_t off;
    } ints[] = {
        {"dim", 1, 1 << 16, offsetof(tram_model_config, dim)},
        {"n_layers", 1, 1024, offsetof(tram_model_config, n_layers)},
        {"n_heads", 1, 1024, offsetof(tram_model_config, n_heads)},
        {"n_kv_heads", 1, 1024, offsetof(tram_model_config, n_kv_heads)},
        {"head_dim", 2, 1024, offsetof(tram_model_config, head_dim)},
        {"ffn_dim", 1, 1 << 20, offsetof(tram_model_config, ffn_dim)},
        {"vocab_size", 1, 1 << 22, offsetof(tram_model_config, vocab_size)},
        {"max_seq_len", 1, 1 << 24, offsetof(tram_model_config, max_seq_len)},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(ints); i++) {
        long long v;
        if (tram_json_get_int(root, ints[i].key, 1, ints[i].lo, ints[i].hi, &v, path, err))
            return -1;
        *(int *)((char *)c + ints[i].off) = (int)v;
    }
    if (c->n_heads % c->n_kv_heads)
        return tram_fail(err, "%s: n_heads %d is not a multiple of n_kv_heads %d", path, c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return tram_fail(err, "%s: head_dim %d must be even (RoPE rotates pairs)", path, c->head_dim);
    double eps, theta;
    if (tram_json_get_number(root, "norm_eps", 1, &eps, path, err) ||
        tram_json_get_number(root, "rope_theta", 1, &theta, path, err))
        return -1;
    if (!(eps > 0 && eps < 1) || !(theta > 1))
        return tram_fail(err, "%s: norm_eps must be in (0, 1) and rope_theta above 1", path);
    c->norm_eps = (float)eps;
    c->rope_theta = (float)theta;
    return tram_json_get_bool(root, "tied_embeddings", 1, &c->tied_embeddings, path, err) ||
           tram_json_get_bool(root, "qkv_bias", 1, &c->qkv_bias, path, err) ? -1 : 0;
}

/* Mixture of experts: n_experts, n_experts_used, norm_topk_prob and
 * shared_ffn_dim, all required when arch is an MoE row (models/arch.h). */
static int preset_experts(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    long long experts, used, shared;
    if (tram_json_get_int(root, "n_experts", 1, 1, 1024, &experts, path, err) ||
        tram_json_get_int(root, "n_experts_used", 1, 1, experts, &used, path, err) ||
        tram_json_get_int(root, "shared_ffn_dim", 1, 0, 1 << 20, &shared, path, err) ||
        tram_json_get_bool(root, "norm_topk_prob", 1, &c->norm_topk_prob, path, err))
        return -1;
    c->n_experts = (int)experts;
    c->n_experts_used = (int)used;
    c->shared_ffn_dim = (int)shared;
    return 0;
}

static int preset_rope(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    const char *style, *type = NULL;
    if (tram_json_get_string(root, "rope_style", 1, &style, path, err))
        return -1;
    if (strcmp(style, "neox") && strcmp(style, "interleaved"))
        return tram_fail(err, "%s: rope_style '%s' must be 'neox' or 'interleaved'", path, style);
    c->rope_style = strcmp(style, "neox") ? TRAM_ROPE_INTERLEAVED : TRAM_ROPE_NEOX;
    json_t *s = json_object_get(root, "rope_scaling");
    if (!s)
        return 0;
    if (!json_is_object(s) || tram_json_get_string(s, "type", 1, &type, path, err))
        return tram_fail(err, "%s: rope_scaling must be an object with a 'type'", path);
    return tram_json_get_rope_scaling(s, type, c, path, err);
}

int tram_preset_load(const char *name, tram_model_config *out, tram_error *err)
{
    char path[1024];
    json_t *root;
    const char *arch;
    preset_path(name, path, sizeof(path));
    if (tram_json_load_object(&root, path, err))
        return -1;
    tram_model_config c = {0};
    int rc = tram_json_get_string(root, "arch", 1, &arch, path, err) || preset_sizes(root, &c, path, err) ||
             preset_rope(root, &c, path, err);
    const tram_arch *a = rc ? NULL : tram_arch_by_name(arch);
    if (!rc && !a) {
        char known[256];
        tram_arch_list(TRAM_ARCH_LIST_NAME, known, sizeof(known));
        rc = tram_fail(err, "%s: arch '%s' is not supported (%s)", path, arch, known);
    }
    if (a && a->moe)
        rc = preset_experts(root, &c, path, err);
    if (!rc)
        snprintf(c.arch, sizeof(c.arch), "%s", arch);
    json_decref(root);
    if (rc)
        return -1;
    *out = c;
    return 0;
}
