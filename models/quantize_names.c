/* quantize_names.c — which matrices `--exclude` keeps at full precision. */
#include <stdio.h>
#include <string.h>

#include "models/arch.h"
#include "models/gguf.h"
#include "models/quantize.h"

#define MAX_CANDS 4
typedef char cand_name[96];

/* The HF name of a GGUF tensor without "model." and ".weight"
 * (layers.3.mlp.down_proj); the dense names every row of models/arch.c shares. */
static int hf_stem(const char *gguf_name, char *out, size_t len)
{
    char hf[128];
    if (tram_arch_hf_name(tram_arch_by_name("llama"), gguf_name, hf, sizeof(hf)))
        return -1;
    const char *s = strncmp(hf, "model.", 6) ? hf : hf + 6;
    size_t n = strlen(s);
    if (n > 7 && !strcmp(s + n - 7, ".weight"))
        n -= 7;
    return snprintf(out, len, "%.*s", (int)n, s) < (int)len ? 0 : -1;
}

/* The names `name` answers to; returns how many. */
static int candidates(const char *name, cand_name *out)
{
    size_t len = strlen(name);
    int n = 1;
    if (len > 7 && !strcmp(name + len - 7, ".weight"))
        len -= 7;
    snprintf(out[0], sizeof(out[0]), "%.*s", (int)len, name);
    char weight[sizeof(cand_name) + 8];
    snprintf(weight, sizeof(weight), "%s.weight", out[0]);
    if (!hf_stem(weight, out[n], sizeof(out[n])))
        n++;
    if (!strcmp(out[0], "token_embd")) {  /* a tied table is the lm_head too */
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
