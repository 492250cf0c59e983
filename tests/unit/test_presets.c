/* Presets (models/presets/NAME.json): each one's parameter count, computed from
 * its hyper-parameters (the MoE ones' experts, Qwen3's q/k norms included), equals the count its
 * model card publishes; bad files
 * fail with the file and field named. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "models/arch.h"
#include "models/presets.h"

static int64_t param_count(const tram_model_config *c)
{
    int64_t qd = (int64_t)c->n_heads * c->head_dim, kd = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t ffn = 3 * (int64_t)c->dim * c->ffn_dim;
    if (c->n_experts)  /* the experts, the router, the shared expert and its gate */
        ffn = ffn * c->n_experts + (int64_t)c->dim * c->n_experts +
              (c->shared_ffn_dim ? 3 * (int64_t)c->dim * c->shared_ffn_dim + c->dim : 0);
    int64_t layer = c->dim * (qd + 2 * kd) + qd * c->dim + ffn + 2 * c->dim;
    if (c->qkv_bias)
        layer += qd + 2 * kd;
    if (tram_arch_by_name(c->arch)->qk_norm)
        layer += 2 * c->head_dim;
    return (int64_t)c->vocab_size * c->dim * (c->tied_embeddings ? 1 : 2) + c->n_layers * layer + c->dim;
}

Test(presets, parameter_counts_match_the_model_cards)
{
    static const struct {
        const char *name;
        int64_t params;  /* safetensors totals on Hugging Face */
    } cards[] = {
        {"llama-3.1-8b", 8030261248LL},
        {"llama-3.2-1b", 1235814400LL},
        {"qwen2.5-7b", 7615616512LL},
        {"smollm2-135m", 134515008LL},
        {"mixtral-8x7b", 46702792704LL},
        {"qwen1.5-moe-a2.7b", 14315784192LL},
        {"qwen3-0.6b", 596049920LL},
    };
    for (size_t i = 0; i < sizeof(cards) / sizeof(cards[0]); i++) {
        tram_model_config c;
        tram_error err = {{0}};
        cr_assert_eq(tram_preset_load(cards[i].name, &c, &err), 0, "%s: %s", cards[i].name, err.msg);
        cr_assert_eq(param_count(&c), cards[i].params, "%s", cards[i].name);
        /* Qwen3-0.6B's queries are twice as wide as its residual stream */
        cr_assert_eq(c.n_heads * c.head_dim, strcmp(c.arch, "qwen3") ? c.dim : 2 * c.dim, "%s", cards[i].name);
        cr_assert_eq(c.rope_style, TRAM_ROPE_NEOX);
    }
}

Test(presets, llama3_rope_scaling_is_read)
{
    tram_model_config c;
    tram_error err = {{0}};
    cr_assert_eq(tram_preset_load("models/presets/llama-3.1-8b.json", &c, &err), 0, "%s", err.msg);
    cr_assert(c.rope_scaling_llama3);
    cr_assert_float_eq(c.rope_factor, 8.0f, 1e-6);
    cr_assert_eq(c.rope_original_max_pos, 8192);
    cr_assert_float_eq(c.rope_theta, 500000.0f, 1e-1);
    cr_assert_str_eq(c.arch, "llama");
}

static int load_text(const char *text, tram_error *err)
{
    const char *path = "/tmp/tram_test_preset.json";
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    tram_model_config c;
    return tram_preset_load(path, &c, err);
}

#define GOOD_TAIL "\"ffn_dim\": 8, \"vocab_size\": 10, \"max_seq_len\": 64, \"norm_eps\": 1e-5, " \
                  "\"rope_theta\": 10000, \"rope_style\": \"neox\", \"tied_embeddings\": true, \"qkv_bias\": false}"

Test(presets, bad_files_name_the_field)
{
    tram_error err = {{0}};
    cr_assert_eq(load_text("{\"arch\": \"llama\", \"dim\": 8, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 3, "
                           "\"head_dim\": 2, " GOOD_TAIL, &err), -1);
    cr_assert(strstr(err.msg, "n_kv_heads"), "%s", err.msg);
    cr_assert_eq(load_text("{\"arch\": \"llama\", \"dim\": 8, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2, "
                           GOOD_TAIL, &err), -1);
    cr_assert(strstr(err.msg, "head_dim") && strstr(err.msg, "tram_test_preset.json"), "%s", err.msg);
    cr_assert_eq(load_text("{\"arch\": \"gpt2\", \"dim\": 8, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2, "
                           "\"head_dim\": 2, " GOOD_TAIL, &err), -1);
    cr_assert(strstr(err.msg, "gpt2"), "%s", err.msg);
    cr_assert_eq(load_text("{\"arch\": \"llama\", \"dim\": 8, \"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2, "
                           "\"head_dim\": 2, " GOOD_TAIL, &err), 0, "%s", err.msg);
    cr_assert_eq(tram_preset_load("no-such-preset", NULL, &err), -1);
    cr_assert(strstr(err.msg, "models/presets/no-such-preset.json"), "%s", err.msg);
}
