/* quantize_names.c — which matrices `--exclude` keeps at full precision. */
#include <stdio.h>
#include <string.h>

#include "models/gguf.h"
#include "models/quantize.h"

/* GGUF layer tensor stems and their Hugging Face names. */
static const struct {
    const char *gguf, *hf;
} layer_names[] = {
    {"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

#define MAX_CANDS 4
typedef char cand_name[96];

/* The names `name` answers to; returns how many. */
static int candidates(const char *name, cand_name *out)
{
    size_t len = strlen(name);
    int n = 1, layer, used = 0;
    if (len > 7 && !strcmp(name + len - 7, ".weight"))
        len -= 7;
    snprintf(out[0], sizeof(out[0]), "%.*s", (int)len, name);
    if (sscanf(out[0], "blk.%d.%n", &layer, &used) == 1 && used > 0) {
        for (size_t i = 0; i < TRAM_ARRAY_LEN(layer_names); i++)
            if (!strcmp(out[0] + used, layer_names[i].gguf))
                snprintf(out[n++], sizeof(out[0]), "layers.%d.%s", layer, layer_names[i].hf);
    } else if (!strcmp(out[0], "output")) {
        strcpy(out[n++], "lm_head");
    } else if (!strcmp(out[0], "token_embd")) {
        strcpy(out[n++], "embed_tokens");
        strcpy(out[n++], "lm_head");
        strcpy(out[n++], "output");
    }
    return n;
}

/* entry[0..len) equals cand or is a dotted prefix of it. */
static int prefix_of(const char *entry, size_t len, const char *cand)
{
    return len && !strncmp(cand, entry, len) && (cand[len] == 0 || cand[len] == '.');
}

/* Calls back each entry of a comma-separated list (spaces and "model." trimmed). */
static int entry_matches(const char *entry, size_t len, const cand_name *cand, int n)
{
    while (len && *entry == ' ')
        entry++, len--;
    while (len && entry[len - 1] == ' ')
        len--;
    if (len > 6 && !strncmp(entry, "model.", 6))
        entry += 6, len -= 6;
    for (int i = 0; i < n; i++)
        if (prefix_of(entry, len, cand[i]))
            return 1;
    return 0;
}

int tram_quant_excluded(const char *list, const char *name)
{
    cand_name cand[MAX_CANDS];
    int n = candidates(name, cand);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (entry_matches(p, len, cand, n))
            return 1;
        p += len + (end != NULL);
    }
    return 0;
}

/* 1 when the entry names a 2-D tensor of the file (a matrix). */
static int entry_names_a_matrix(const char *entry, size_t len, const tram_gguf *g)
{
    for (uint64_t t = 0; t < g->n_tensors; t++) {
        cand_name cand[MAX_CANDS];
        if (g->tensors[t].n_dims == 2 && entry_matches(entry, len, cand, candidates(g->tensors[t].name, cand)))
            return 1;
    }
    return 0;
}

int tram_quant_check_exclude(const char *list, tram_model_file *f, tram_error *err)
{
    const tram_gguf *g = tram_model_file_gguf(f);
    for (const char *p = list; g && p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!entry_names_a_matrix(p, len, g))
            return tram_fail(err, "--exclude: '%.*s' names no matrix of %s (use names like lm_head, "
                                  "layers.0.mlp, layers.3.self_attn.o_proj or blk.3.ffn_down)",
                             (int)len, p, tram_model_file_path(f));
        p += len + (end != NULL);
    }
    return 0;
}
