/* sparsity.c — which tensors of a 2:4 file are sparse (format in sparsity.h). */
#include "models/sparsity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/quantize.h"

int tram_sparsity_drop_two(const float score[4])
{
    int dropped = 0;
    for (int drop = 0; drop < 2; drop++) {
        int lo = -1;
        for (int i = 0; i < 4; i++)
            if (!(dropped >> i & 1) && (lo < 0 || score[i] <= score[lo]))
                lo = i;
        dropped |= 1 << lo;
    }
    return dropped;
}

int tram_sparsity_prunable(const char *name)
{
    static const char *const suffix[] = {"attn_q.weight",  "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                         "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    int layer, used = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &used) != 1 || !used)
        return 0;
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++)
        if (!strcmp(name + used, suffix[i]))
            return 1;
    return 0;
}

/* 1 when g's tram.sparsity is "2:4". */
static int pattern_is_24(const tram_gguf *g)
{
    char *pattern = NULL;
    tram_error err;
    if (!tram_gguf_find_kv(g, "tram.sparsity") || tram_gguf_get_str(g, "tram.sparsity", &pattern, &err))
        return 0;
    int is24 = !strcmp(pattern, "2:4");
    free(pattern);
    return is24;
}

int tram_sparsity_declare(tram_gguf_writer *w, const char *exclude, tram_error *err)
{
    return tram_gguf_writer_add_str(w, "tram.sparsity", "2:4", err) ||
                   tram_gguf_writer_add_str(w, "tram.sparsity_exclude", exclude ? exclude : "", err)
               ? -1 : 0;
}

int tram_sparsity_copy(tram_gguf_writer *w, const tram_gguf *g, tram_error *err)
{
    char *exclude = NULL;
    if (!tram_gguf_find_kv(g, "tram.sparsity"))
        return 0;
    if (!pattern_is_24(g))
        return tram_fail(err, "%s: unknown tram.sparsity pattern (2:4 is the only one)", g->path);
    if (tram_gguf_find_kv(g, "tram.sparsity_exclude") && tram_gguf_get_str(g, "tram.sparsity_exclude", &exclude, err))
        return -1;
    int rc = tram_sparsity_declare(w, exclude, err);
    free(exclude);
    return rc;
}

int tram_sparsity_is_24(const tram_gguf *g, const char *name)
{
    char *exclude = NULL;
    tram_error err;
    if (!g || !tram_sparsity_prunable(name) || !pattern_is_24(g))
        return 0;
    int sparse = 1;
    if (tram_gguf_find_kv(g, "tram.sparsity_exclude") && !tram_gguf_get_str(g, "tram.sparsity_exclude", &exclude, &err))
        sparse = !exclude[0] || !tram_quant_excluded(exclude, name);
    free(exclude);
    return sparse;
}
