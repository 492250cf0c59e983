/* sparsity.c — which tensors of a 2:4 file are sparse (format in sparsity.h). */
#include "models/sparsity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/quantize.h"

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

int tram_sparsity_is_24(const tram_gguf *g, const char *name)
{
    char *pattern = NULL, *exclude = NULL;
    tram_error err;
    if (!g || !tram_sparsity_prunable(name) || !tram_gguf_find_kv(g, "tram.sparsity") ||
        tram_gguf_get_str(g, "tram.sparsity", &pattern, &err))
        return 0;
    int sparse = !strcmp(pattern, "2:4");
    if (sparse && tram_gguf_find_kv(g, "tram.sparsity_exclude") &&
        !tram_gguf_get_str(g, "tram.sparsity_exclude", &exclude, &err))
        sparse = !exclude[0] || !tram_quant_excluded(exclude, name);
    free(pattern);
    free(exclude);
    return sparse;
}
