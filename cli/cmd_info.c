/* cmd_info.c — `tram info [MODEL]`: what a GGUF file holds, read straight
 * from its metadata and tensor infos (no weights are loaded). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "models/arch.h"
#include "models/gguf.h"
#include "models/lora.h"

enum { TEMPLATE_LINE_MAX = 160 };

static void usage(FILE *out)
{
    fprintf(out, "usage: tram info [MODEL | -m MODEL]\n\n"
                 "Prints a GGUF model's architecture, hyper-parameters, tensor types and sizes;\n"
                 "for a PEFT LoRA adapter directory, its rank, alpha and target modules.\n"
                 "MODEL defaults to %s.\n", TRAM_DEFAULT_MODEL);
}

/* A metadata value on one line: numbers and strings as they are, arrays by
 * their length and element type. */
static void print_value(const tram_gguf_value *v)
{
    switch (v->type) {
    case TRAM_GGUF_UINT8: case TRAM_GGUF_UINT16: case TRAM_GGUF_UINT32: case TRAM_GGUF_UINT64:
        printf("%" PRIu64, v->v.u64);
        break;
    case TRAM_GGUF_INT8: case TRAM_GGUF_INT16: case TRAM_GGUF_INT32: case TRAM_GGUF_INT64:
        printf("%" PRId64, v->v.i64);
        break;
    case TRAM_GGUF_FLOAT32: case TRAM_GGUF_FLOAT64:
        printf("%g", v->v.f64);
        break;
    case TRAM_GGUF_BOOL:
        printf("%s", v->v.b ? "true" : "false");
        break;
    case TRAM_GGUF_STRING:
        printf("%.*s", (int)TRAM_MIN(v->v.str.len, TEMPLATE_LINE_MAX), v->v.str.ptr);
        break;
    case TRAM_GGUF_ARRAY:
        printf("[%" PRIu64 " x %s]", v->v.arr.count, tram_gguf_type_name(v->v.arr.elem_type));
        break;
    }
}

static void print_key(const tram_gguf *g, const char *label, const char *key)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, key);
    printf("%-24s ", label);
    if (kv)
        print_value(&kv->value);
    else
        printf("-");
    printf("\n");
}

static void print_hparams(const tram_gguf *g, const char *arch)
{
    static const char *suffixes[] = {"block_count", "embedding_length", "attention.head_count",
                                     "attention.head_count_kv", "feed_forward_length", "vocab_size",
                                     "context_length", "rope.freq_base"};
    const tram_gguf_kv *tokens = tram_gguf_find_kv(g, "tokenizer.ggml.tokens");
    char key[128];
    for (size_t i = 0; i < TRAM_ARRAY_LEN(suffixes); i++) {
        snprintf(key, sizeof(key), "%s.%s", arch, suffixes[i]);
        /* Many files state the vocabulary only through the token list. */
        if (!strcmp(suffixes[i], "vocab_size") && !tram_gguf_find_kv(g, key) && tokens &&
            tokens->value.type == TRAM_GGUF_ARRAY)
            printf("%-24s %" PRIu64 " (tokens)\n", suffixes[i], tokens->value.v.arr.count);
        else
            print_key(g, suffixes[i], key);
    }
    /* mixture of experts: shown when the file has experts */
    static const char *experts[][2] = {{"experts", "expert_count"}, {"experts_per_token", "expert_used_count"},
                                       {"expert_ffn_length", "expert_feed_forward_length"},
                                       {"shared_expert_ffn_length", "expert_shared_feed_forward_length"}};
    snprintf(key, sizeof(key), "%s.expert_count", arch);
    for (size_t i = 0; tram_gguf_find_kv(g, key) && i < TRAM_ARRAY_LEN(experts); i++) {
        char expert_key[128];
        snprintf(expert_key, sizeof(expert_key), "%s.%s", arch, experts[i][1]);
        print_key(g, experts[i][0], expert_key);
    }
}

/* The row of models/arch.c the file loads as. */
static void print_family(const tram_gguf *g, const char *arch)
{
    const tram_arch *a = tram_arch_of_gguf(g, arch);
    if (a)
        printf("%-24s %s (%s)\n", "family", a->name, a->hf_architecture);
    else
        printf("%-24s none: tram does not run '%s' files\n", "family", arch);
}

static void print_tensors(const tram_gguf *g)
{
    uint64_t per_type[64] = {0}, params = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        per_type[g->tensors[i].type % TRAM_ARRAY_LEN(per_type)]++;  /* known types are all < 64 */
        params += (uint64_t)tram_gguf_tensor_numel(&g->tensors[i]);
    }
    printf("%-24s %" PRIu64 " (", "tensors", g->n_tensors);
    const char *sep = "";
    for (size_t t = 0; t < TRAM_ARRAY_LEN(per_type); t++) {
        if (per_type[t]) {
            printf("%s%s: %" PRIu64, sep, tram_ggml_type_name((tram_ggml_type)t), per_type[t]);
            sep = ", ";
        }
    }
    printf(")\n%-24s %" PRIu64 " (%.1f M)\n", "parameters", params, params / 1e6);
}

static void print_template(const tram_gguf *g)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, "tokenizer.chat_template");
    if (!kv || kv->value.type != TRAM_GGUF_STRING)
        return;
    const char *s = kv->value.v.str.ptr;
    const char *nl = memchr(s, '\n', kv->value.v.str.len);
    size_t len = nl ? (size_t)(nl - s) : kv->value.v.str.len;
    printf("%-24s %.*s%s\n", "chat template", (int)TRAM_MIN(len, TEMPLATE_LINE_MAX), s,
           len > TEMPLATE_LINE_MAX ? " ..." : "");
}

/* A PEFT LoRA adapter directory: its config alone (the tensors are checked
 * against a base when the adapter is served). */
static int show_adapter(const char *dir)
{
    tram_lora_adapter a;
    tram_error err;
    if (tram_lora_read_config(&a, dir, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        return 1;
    }
    printf("%-24s %s\n%-24s PEFT LoRA adapter\n%-24s %d\n%-24s %g\n%-24s %s\n%-24s %g\n%-24s", "file", dir,
           "format", "rank", a.rank, "alpha", a.alpha, "rslora", a.rslora ? "yes" : "no", "scale", a.scale,
           "targets");
    for (int t = 0; t < TRAM_LORA_N_TARGETS; t++)
        if (a.targets & (1u << t))
            printf(" %s", tram_lora_target_name(t));
    printf("\n");
    return 0;
}

static int show(const char *path)
{
    tram_gguf *g;
    tram_error err;
    struct stat st;
    char config[600];
    snprintf(config, sizeof(config), "%s/adapter_config.json", path);
    if (stat(config, &st) == 0)
        return show_adapter(path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tram: %s: Hugging Face directories are not supported by info yet (give a .gguf file)\n",
                path);
        return 1;
    }
    if (tram_gguf_open(&g, path, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        return 1;
    }
    const tram_gguf_kv *arch = tram_gguf_find_kv(g, "general.architecture");
    char arch_name[64] = "";
    if (arch && arch->value.type == TRAM_GGUF_STRING)
        snprintf(arch_name, sizeof(arch_name), "%.*s", (int)TRAM_MIN(arch->value.v.str.len, 63),
                 arch->value.v.str.ptr);
    printf("%-24s %s\n%-24s GGUF v%u, %zu bytes (%.1f MiB)\n", "file", path, "format", g->version, g->map_len,
           g->map_len / 1048576.0);
    print_key(g, "architecture", "general.architecture");
    print_key(g, "name", "general.name");
    if (arch_name[0]) {
        print_family(g, arch_name);
        print_hparams(g, arch_name);
    }
    print_tensors(g);
    print_template(g);
    tram_gguf_close(g);
    return 0;
}

/* One model, given once: -m MODEL or MODEL. */
static int model_flag(const char *flag, const char *value, void *field)
{
    const char **model = field;
    (void)flag;
    if (*model) {
        fprintf(stderr, "tram: two models, '%s' and '%s'\n", *model, value);
        return -1;
    }
    *model = value;
    return 0;
}

static const tram_flag info_flags[] = {
    {.name = "--model", .alias = "-m", .kind = TRAM_FLAG_CUSTOM, .parse = model_flag},
};

static int info(int argc, char **argv)
{
    const char *model = NULL, *path = NULL;
    const tram_flag_table table = TRAM_FLAG_TABLE(info_flags, &model);
    if (tram_flags_parse(&table, 1, argc, argv, &path, 1) < 0)
        return TRAM_EXIT_USAGE;
    if (model && path) {
        fprintf(stderr, "tram: two models, '%s' and '%s'\n", model, path);
        return TRAM_EXIT_USAGE;
    }
    return show(path ? path : model ? model : TRAM_DEFAULT_MODEL);
}

const tram_command tram_cmd_info = {
    .name = "info", .run = info, .usage = usage,
    .summary = "show a model's architecture, sizes and tensor types"};
