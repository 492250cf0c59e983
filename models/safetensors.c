/* safetensors.c — Hugging Face model directories: config.json and single or
 * sharded safetensors files.
 *
 * A safetensors file is an 8-byte little-endian header length, a JSON header
 * naming each tensor's dtype, shape and [begin, end) byte offsets into the
 * data that follows, then the data.  Every number from the header is checked
 * against the file before a tensor is indexed, so reads never leave the
 * mapping whatever the file holds. */
#include "models/safetensors.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/dequant.h"
#include "kernels/kv_format.h"
#include "models/arch.h"
#include "models/hf_quant.h"
#include "models/json_util.h"
#include "models/moe_files.h"
#include "models/st_modules.h"

/* Every dtype of the safetensors format; the float ones can be read, and
 * E4M3 with its scales (FP8 checkpoints, models/hf_quant.h). */
enum { ST_F32, ST_F16, ST_BF16, ST_F8_E4M3 = 13 };
static const struct {
    const char *name;
    int size;
} st_dtypes[] = {
    {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
    {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

typedef struct {
    char path[1024];
    const uint8_t *map;
    size_t map_len;
} st_file;

typedef struct {
    char *name;            /* HF name */
    int file;              /* index into files */
    int dtype;             /* index into st_dtypes */
    int64_t numel;
    int ndim;
    int64_t shape[8];
    const uint8_t *data;   /* into the file's mapping */
} st_tensor;

struct tram_hf_model {
    char dir[512];
    const tram_arch *arch; /* its row, which decides the names of MoE tensors */
    int n_experts;
    st_file *files;
    int n_files;
    st_tensor *tensors;
    int n_tensors, cap_tensors;
    tram_hf_quant quant;   /* config.json's quantization_config */
};

/* ---------------------------------------------------------------- files */

static int st_map(st_file *f, tram_error *err)
{
    int fd = open(f->path, O_RDONLY);
    if (fd < 0)
        return tram_fail(err, "%s: cannot open", f->path);
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 8) {
        close(fd);
        return tram_fail(err, "%s: not a safetensors file (too short for its header length)", f->path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return tram_fail(err, "%s: cannot map the file", f->path);
    f->map = map;
    f->map_len = (size_t)st.st_size;
    return 0;
}

static int st_dtype_index(const char *name)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(st_dtypes); i++)
        if (!strcmp(name, st_dtypes[i].name))
            return (int)i;
    return -1;
}

/* A shape array into t's shape; its element count, or -1 when it is not one. */
static int64_t st_shape(const json_t *shape, st_tensor *t)
{
    if (!json_is_array(shape) || json_array_size(shape) > TRAM_ARRAY_LEN(t->shape))
        return -1;
    int64_t numel = 1;
    t->ndim = (int)json_array_size(shape);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(shape, i);
        int64_t n = json_is_integer(d) ? json_integer_value(d) : -1;
        if (n < 0 || (n && numel > (1LL << 40) / n))
            return -1;
        numel *= t->shape[i] = n;
    }
    return numel;
}

static int st_offset(const json_t *offsets, size_t i, uint64_t data_len, uint64_t *out)
{
    json_t *v = json_array_get(offsets, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > data_len)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int st_push(tram_hf_model *m, const st_tensor *t, tram_error *err)
{
    if (m->n_tensors == m->cap_tensors) {
        int cap = m->cap_tensors ? 2 * m->cap_tensors : 256;
        st_tensor *grown = realloc(m->tensors, (size_t)cap * sizeof(*grown));
        if (!grown)
            return tram_fail(err, "out of memory indexing tensors");
        m->tensors = grown;
        m->cap_tensors = cap;
    }
    m->tensors[m->n_tensors] = *t;
    m->tensors[m->n_tensors].name = strdup(t->name);
    if (!m->tensors[m->n_tensors].name)
        return tram_fail(err, "out of memory indexing tensors");
    m->n_tensors++;
    return 0;
}

/* Checks one header entry against the data section and indexes it. */
static int st_add_tensor(tram_hf_model *m, int fi, const char *name, const json_t *info,
                         const uint8_t *data, uint64_t data_len, tram_error *err)
{
    const char *path = m->files[fi].path;
    json_t *dtype = json_object_get(info, "dtype"), *offsets = json_object_get(info, "data_offsets");
    st_tensor t = {.name = (char *)name, .file = fi};
    if (!json_is_object(info) || !json_is_string(dtype))
        return tram_fail(err, "%s: tensor %s: no dtype", path, name);
    if ((t.dtype = st_dtype_index(json_string_value(dtype))) < 0)
        return tram_fail(err, "%s: tensor %s: unknown dtype '%s'", path, name, json_string_value(dtype));
    if ((t.numel = st_shape(json_object_get(info, "shape"), &t)) < 0)
        return tram_fail(err, "%s: tensor %s: shape is not a list of sizes", path, name);
    uint64_t begin, end;
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 || st_offset(offsets, 0, data_len, &begin) ||
        st_offset(offsets, 1, data_len, &end) || begin > end)
        return tram_fail(err, "%s: tensor %s: data_offsets are not [begin, end] within the %llu data bytes",
                         path, name, (unsigned long long)data_len);
    if (end - begin != (uint64_t)t.numel * (uint64_t)st_dtypes[t.dtype].size)
        return tram_fail(err, "%s: tensor %s: %llu data bytes do not hold %lld %s elements", path, name,
                         (unsigned long long)(end - begin), (long long)t.numel, st_dtypes[t.dtype].name);
    t.data = data + begin;
    return st_push(m, &t, err);
}

static int st_parse_header(tram_hf_model *m, int fi, tram_error *err)
{
    const st_file *f = &m->files[fi];
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | f->map[i];
    if (n > f->map_len - 8)
        return tram_fail(err, "%s: header length %llu exceeds the file size %zu", f->path,
                         (unsigned long long)n, f->map_len);
    json_error_t jerr;
    json_t *header = json_loadb((const char *)f->map + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!header)
        return tram_fail(err, "%s: header is not valid JSON: %s", f->path, jerr.text);
    int rc = json_is_object(header) ? 0 : tram_fail(err, "%s: header is not a JSON object", f->path);
    const char *name;
    json_t *info;
    json_object_foreach(header, name, info) {
        if (rc || !strcmp(name, "__metadata__"))
            continue;
        rc = st_add_tensor(m, fi, name, info, f->map + 8 + n, f->map_len - 8 - n, err);
    }
    json_decref(header);
    return rc;
}

static int st_add_file(tram_hf_model *m, const char *file_name, tram_error *err)
{
    if (strchr(file_name, '/') || !strcmp(file_name, "..") || !*file_name)
        return tram_fail(err, "%s: shard name '%s' is not a file name in the directory", m->dir, file_name);
    for (int i = 0; i < m->n_files; i++)
        if (!strcmp(strrchr(m->files[i].path, '/') + 1, file_name))
            return 0;
    st_file *grown = realloc(m->files, (size_t)(m->n_files + 1) * sizeof(*grown));
    if (!grown)
        return tram_fail(err, "out of memory listing shards");
    m->files = grown;
    st_file *f = &m->files[m->n_files];
    memset(f, 0, sizeof(*f));
    if (snprintf(f->path, sizeof(f->path), "%s/%s", m->dir, file_name) >= (int)sizeof(f->path))
        return tram_fail(err, "%s/%s: path too long", m->dir, file_name);
    m->n_files++;
    return st_map(f, err) || st_parse_header(m, m->n_files - 1, err) ? -1 : 0;
}

static int st_compare(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static const st_tensor *st_find(const tram_hf_model *m, const char *hf_name)
{
    st_tensor key = {.name = (char *)hf_name};
    return m->n_tensors ? bsearch(&key, m->tensors, (size_t)m->n_tensors, sizeof(key), st_compare) : NULL;
}

/* Sorted for bsearch; a name in two shards is ambiguous, so it is an error. */
static int st_sort_unique(tram_hf_model *m, tram_error *err)
{
    qsort(m->tensors, (size_t)m->n_tensors, sizeof(st_tensor), st_compare);
    for (int i = 1; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i - 1].name, m->tensors[i].name))
            return tram_fail(err, "%s: tensor %s appears in both %s and %s", m->dir, m->tensors[i].name,
                             m->files[m->tensors[i - 1].file].path, m->files[m->tensors[i].file].path);
    return 0;
}

/* Every weight_map entry must name a tensor that its shard really holds. */
static int st_check_weight_map(const tram_hf_model *m, json_t *map, const char *path, tram_error *err)
{
    const char *name;
    json_t *file;
    json_object_foreach(map, name, file) {
        const st_tensor *t = st_find(m, name);
        if (!t || strcmp(strrchr(m->files[t->file].path, '/') + 1, json_string_value(file)))
            return tram_fail(err, "%s: weight_map puts %s in %s, which does not hold it", path, name,
                             json_string_value(file));
    }
    return 0;
}

static int st_open_index(tram_hf_model *m, const char *path, tram_error *err)
{
    json_t *root, *map;
    if (tram_json_load_object(&root, path, err))
        return -1;
    int rc = json_is_object(map = json_object_get(root, "weight_map")) && json_object_size(map) > 0
                 ? 0 : tram_fail(err, "%s: no weight_map object", path);
    const char *name;
    json_t *file;
    json_object_foreach(map, name, file) {
        if (rc)
            break;
        rc = json_is_string(file) ? st_add_file(m, json_string_value(file), err)
                                  : tram_fail(err, "%s: weight_map entry %s is not a file name", path, name);
    }
    if (!rc)
        rc = st_sort_unique(m, err) || st_check_weight_map(m, map, path, err) ? -1 : 0;
    json_decref(root);
    return rc;
}

static int st_open_tensors(tram_hf_model *m, tram_error *err)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", m->dir);
    if (access(path, F_OK) == 0)
        return st_open_index(m, path, err);
    snprintf(path, sizeof(path), "%s/model.safetensors", m->dir);
    if (access(path, F_OK))
        return tram_fail(err, "%s: neither model.safetensors nor model.safetensors.index.json exists", m->dir);
    return st_add_file(m, "model.safetensors", err) || st_sort_unique(m, err) ? -1 : 0;
}

/* ---------------------------------------------------------------- config.json */

/* A base model without a head ("Qwen3Model", as sentence-transformers saves
 * its Transformer): the family's layers, found by model_type. */
static int is_base_model(const char *architecture)
{
    size_t n = architecture ? strlen(architecture) : 0;
    return n > 5 && !strcmp(architecture + n - 5, "Model");
}

/* architectures[0] decides; model_type is the fallback for configs without
 * it, and for base models. */
static int hf_arch(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    json_t *archs = json_object_get(root, "architectures");
    const char *want = json_is_array(archs) ? json_string_value(json_array_get(archs, 0)) : NULL;
    const char *type = json_string_value(json_object_get(root, "model_type"));
    const tram_arch *a = tram_arch_by_hf(want, type);
    if (!a && is_base_model(want))
        a = tram_arch_by_hf(NULL, type);
    if (a) {
        snprintf(c->arch, sizeof(c->arch), "%s", a->name);
        c->qkv_bias = a->qkv_bias;
        return a->hf_qkv_bias_key ? tram_json_get_bool(root, "qkv_bias", 0, &c->qkv_bias, path, err) : 0;
    }
    char known[256];
    tram_arch_list(TRAM_ARCH_LIST_HF, known, sizeof(known));
    return tram_fail(err, "%s: architecture '%s' is not supported (%s are)", path,
                     want ? want : type ? type : "(none given)", known);
}

/* rope_scaling (or transformers 5's rope_parameters): absent, "default", or
 * llama3's piecewise frequency scaling; anything else would silently change
 * the model, so it is refused. */
static int hf_rope(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    double theta = 10000.0;
    json_t *rope = json_object_get(root, "rope_scaling");
    json_t *params = json_object_get(root, "rope_parameters");
    if (json_is_object(params) && tram_json_get_number(params, "rope_theta", 0, &theta, path, err))
        return -1;
    if (tram_json_get_number(root, "rope_theta", 0, &theta, path, err))
        return -1;
    if (!(theta > 1.0))
        return tram_fail(err, "%s: rope_theta %g must be greater than 1", path, theta);
    c->rope_theta = (float)theta;
    if (!json_is_object(rope))
        rope = params;
    if (!json_is_object(rope))
        return 0;
    const char *type = NULL;
    if (tram_json_get_string(rope, "type", 0, &type, path, err) ||
        tram_json_get_string(rope, "rope_type", 0, &type, path, err))
        return -1;
    if (!type || !strcmp(type, "default"))
        return 0;
    return tram_json_get_rope_scaling(rope, type, c, path, err);
}

/* Features of these families that tram's forward pass does not compute. */
static int hf_unsupported(const json_t *root, const char *path, tram_error *err)
{
    int attention_bias = 0, mlp_bias = 0;
    const char *act = "silu";
    if (tram_json_get_bool(root, "attention_bias", 0, &attention_bias, path, err) ||
        tram_json_get_bool(root, "mlp_bias", 0, &mlp_bias, path, err) ||
        tram_json_get_string(root, "hidden_act", 0, &act, path, err))
        return -1;
    if (attention_bias || mlp_bias || strcmp(act, "silu"))
        return tram_fail(err, "%s: attention_bias, mlp_bias or hidden_act '%s' is not supported", path, act);
    return 0;
}

/* A sliding window changes nothing while the context fits inside it, so the
 * window becomes the context limit instead of a feature tram lacks. */
static int hf_sliding_window(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    long long window = 0;
    int used = tram_arch_by_name(c->arch)->window != TRAM_WINDOW_OPT_IN;
    if (tram_json_get_bool(root, "use_sliding_window", 0, &used, path, err) ||
        tram_json_get_int(root, "sliding_window", 0, 0, INT_MAX, &window, path, err))  /* 0: none */
        return -1;
    if (used && window && window < c->max_seq_len)
        c->max_seq_len = (int)window;
    return 0;
}

static int hf_sizes(const json_t *root, tram_model_config *c, const char *path, tram_error *err)
{
    long long dim, layers, heads, kv = -1, head_dim = -1, ffn, vocab, max_pos = 2048;
    double eps = 1e-6;
    int tied = 0;
    if (tram_json_get_int(root, "hidden_size", 1, 1, 1 << 16, &dim, path, err) ||
        tram_json_get_int(root, "num_hidden_layers", 1, 1, 1024, &layers, path, err) ||
        tram_json_get_int(root, "num_attention_heads", 1, 1, 1024, &heads, path, err) ||
        tram_json_get_int(root, "num_key_value_heads", 0, 1, 1024, &kv, path, err) ||
        tram_json_get_int(root, "head_dim", 0, 2, 1024, &head_dim, path, err) ||
        tram_json_get_int(root, "intermediate_size", 1, 1, 1 << 20, &ffn, path, err) ||
        tram_json_get_int(root, "vocab_size", 1, 1, 1 << 22, &vocab, path, err) ||
        tram_json_get_int(root, "max_position_embeddings", 0, 1, 1 << 24, &max_pos, path, err) ||
        tram_json_get_number(root, "rms_norm_eps", 0, &eps, path, err) ||
        tram_json_get_bool(root, "tie_word_embeddings", 0, &tied, path, err))
        return -1;
    if (!(eps > 0 && eps < 1))
        return tram_fail(err, "%s: rms_norm_eps %g is out of range (0, 1)", path, eps);
    c->dim = (int)dim;
    c->n_layers = (int)layers;
    c->n_heads = (int)heads;
    c->n_kv_heads = kv > 0 ? (int)kv : (int)heads;
    c->head_dim = head_dim > 0 ? (int)head_dim : (int)(dim / heads);
    c->ffn_dim = (int)ffn;
    c->vocab_size = (int)vocab;
    c->max_seq_len = (int)max_pos;
    c->norm_eps = (float)eps;
    c->tied_embeddings = tied;
    return 0;
}

static int hf_read_config(const char *dir, tram_model_config *c, tram_hf_quant *q, tram_error *err)
{
    char path[1024];
    json_t *root;
    snprintf(path, sizeof(path), "%s/config.json", dir);
    if (tram_json_load_object(&root, path, err))
        return -1;
    memset(c, 0, sizeof(*c));
    c->rope_style = TRAM_ROPE_NEOX;
    int rc = hf_arch(root, c, path, err) || hf_unsupported(root, path, err) || hf_sizes(root, c, path, err) ||
             hf_rope(root, c, path, err) || hf_sliding_window(root, c, path, err) ||
             tram_st_read_pooling(dir, root, c, err) || tram_hf_quant_config(root, q, path, err) ? -1 : 0;
    if (!rc && tram_arch_by_name(c->arch)->moe)
        rc = tram_moe_hf_config(root, tram_arch_by_name(c->arch), c, path, err);
    json_decref(root);
    return rc;
}

/* ---------------------------------------------------------------- API */

int tram_hf_open(tram_hf_model **out, const char *dir, tram_model_config *cfg, tram_error *err)
{
    tram_hf_model *m = tram_calloc(1, sizeof(*m), err);
    if (!m)
        return -1;
    if (snprintf(m->dir, sizeof(m->dir), "%s", dir) >= (int)sizeof(m->dir)) {
        free(m);
        return tram_fail(err, "%s: path too long", dir);
    }
    if (hf_read_config(dir, cfg, &m->quant, err) || st_open_tensors(m, err)) {
        tram_hf_close(m);
        return -1;
    }
    m->arch = tram_arch_by_name(cfg->arch);
    m->n_experts = cfg->n_experts;
    *out = m;
    return 0;
}

void tram_hf_close(tram_hf_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_tensors; i++)
        free(m->tensors[i].name);
    for (int i = 0; i < m->n_files; i++)
        if (m->files[i].map)
            munmap((void *)m->files[i].map, m->files[i].map_len);
    TRAM_FREE_ALL(m->tensors, m->files, m);
}

/* transformers 5 saves with save_original_format=False the experts fused,
 * mlp.experts.gate_up_proj [E][2*ffn][dim] (gate rows, then up) and
 * mlp.experts.down_proj [E][dim][ffn], and Mixtral's router as mlp.gate:
 * expert E's gate, up or down is a contiguous run of a fused tensor. */
static const st_tensor *hf_fused(const tram_hf_model *m, const char *gguf_name, st_tensor *view)
{
    int layer, expert, used = 0;
    char kind[16], name[128];
    const char *router = m->arch->moe ? m->arch->moe->hf_fused_router : NULL;
    if (router && sscanf(gguf_name, "blk.%d.ffn_gate_inp.weight%n", &layer, &used) == 1 && !gguf_name[used]) {
        snprintf(name, sizeof(name), "model.layers.%d.%s.weight", layer, router);
        return st_find(m, name);
    }
    if (!m->n_experts || sscanf(gguf_name, "blk.%d.%15[a-z_].%d.weight%n", &layer, kind, &expert, &used) != 3 ||
        gguf_name[used] || expert < 0 || expert >= m->n_experts)
        return NULL;
    int down = !strcmp(kind, "ffn_down"), up = !strcmp(kind, "ffn_up");
    if (!down && !up && strcmp(kind, "ffn_gate"))
        return NULL;
    snprintf(name, sizeof(name), "model.layers.%d.mlp.experts.%s", layer, down ? "down_proj" : "gate_up_proj");
    const st_tensor *t = st_find(m, name);
    int64_t per_expert = t ? t->numel / m->n_experts : 0;
    if (!t || t->numel % m->n_experts || (!down && per_expert % 2))
        return NULL;
    *view = *t;
    view->numel = down ? per_expert : per_expert / 2;
    view->data += (size_t)(expert * per_expert + (up ? view->numel : 0)) * (size_t)st_dtypes[t->dtype].size;
    return view;
}

/* A base model's names lack the "model." of its *ForCausalLM
 * ("layers.0.self_attn.q_proj.weight"). */
static const st_tensor *hf_lookup(const tram_hf_model *m, const char *gguf_name, st_tensor *view)
{
    char hf_name[256] = "";
    static const char prefix[] = "model.";
    const st_tensor *t = tram_arch_hf_name(m->arch, gguf_name, hf_name, sizeof(hf_name)) ? NULL
                                                                                            : st_find(m, hf_name);
    if (!t && !strncmp(hf_name, prefix, sizeof(prefix) - 1))
        t = st_find(m, hf_name + sizeof(prefix) - 1);
    return t ? t : hf_fused(m, gguf_name, view);
}

int tram_hf_has_tensor(const tram_hf_model *m, const char *gguf_name)
{
    st_tensor view;
    return hf_lookup(m, gguf_name, &view) != NULL;
}

/* t's values as f32 into out[numel]; name is how the caller asked for it. */
static int st_read(const tram_hf_model *m, const st_tensor *t, float *out, int64_t numel, tram_error *err)
{
    if (t->numel != numel)
        return tram_fail(err, "%s: tensor %s has %lld elements, expected %lld", m->files[t->file].path,
                         t->name, (long long)t->numel, (long long)numel);
    if (t->dtype == ST_F32) {
        memcpy(out, t->data, (size_t)numel * sizeof(float));
        return 0;
    }
    if (t->dtype != ST_F16 && t->dtype != ST_BF16)
        return tram_fail(err, "%s: tensor %s has dtype %s (F32, F16, BF16 can be read)",
                         m->files[t->file].path, t->name, st_dtypes[t->dtype].name);
    for (int64_t i = 0; i < numel; i++) {
        uint16_t h;
        memcpy(&h, t->data + 2 * i, sizeof(h));   /* the data need not be aligned */
        out[i] = t->dtype == ST_F16 ? tram_f16_to_f32(h) : tram_bf16_to_f32(h);
    }
    return 0;
}

/* ---------------------------------------------------------------- FP8 weights */

/* An FP8 checkpoint's "<module>.weight_scale" beside t, "<module>.weight". */
static const st_tensor *fp8_scale_of(const tram_hf_model *m, const st_tensor *t)
{
    char name[300];
    if (!m->quant.fp8 || t->dtype != ST_F8_E4M3)
        return NULL;
    snprintf(name, sizeof(name), "%s_scale", t->name);
    return st_find(m, name);
}

int tram_hf_is_fp8(const tram_hf_model *m, const char *gguf_name)
{
    st_tensor view;
    const st_tensor *t = hf_lookup(m, gguf_name, &view);
    return t && fp8_scale_of(m, t);
}

float tram_hf_fp8_act_max(const tram_hf_model *m) { return m->quant.act_max; }

/* t's codes, and its scales: one per row ([rows] or [rows, 1]) or one for
 * the tensor, repeated. */
static int fp8_read(const tram_hf_model *m, const st_tensor *t, uint8_t *codes, float *scales, int64_t rows,
                    int64_t cols, tram_error *err)
{
    const st_tensor *s = fp8_scale_of(m, t);
    const char *path = m->files[t->file].path;
    if (!s)
        return tram_fail(err, "%s: tensor %s is F8_E4M3 without a weight_scale (or the config has no FP8 "
                              "quantization_config)", path, t->name);
    if (t->numel != rows * cols || (t->ndim == 2 && t->shape[1] != cols))
        return tram_fail(err, "%s: FP8 tensor %s is not %lld x %lld", path, t->name, (long long)rows,
                         (long long)cols);
    if (s->numel != rows && s->numel != 1)
        return tram_fail(err, "%s: %s holds %lld scales: neither one per output row (%lld) nor one for the tensor",
                         path, s->name, (long long)s->numel, (long long)rows);
    if (st_read(m, s, scales, s->numel, err))
        return -1;
    for (int64_t r = s->numel; r < rows; r++)
        scales[r] = scales[0];
    memcpy(codes, t->data, (size_t)(rows * cols));
    return 0;
}

int tram_hf_read_fp8(tram_hf_model *m, const char *gguf_name, uint8_t *codes, float *scales, int64_t rows,
                     int64_t cols, tram_error *err)
{
    st_tensor view;
    const st_tensor *t = hf_lookup(m, gguf_name, &view);
    if (!t)
        return tram_fail(err, "%s: tensor %s is missing", m->dir, gguf_name);
    return fp8_read(m, t, codes, scales, rows, cols, err);
}

/* An FP8 tensor as f32: e4m3(code) * scale[row]. */
static int fp8_dequantize(const tram_hf_model *m, const st_tensor *t, float *out, int64_t numel, tram_error *err)
{
    int64_t rows = t->ndim >= 1 ? t->shape[0] : 1, cols = rows ? numel / rows : 0;
    float *scales = tram_calloc(rows ? rows : 1, sizeof(float), err);
    uint8_t *codes = scales ? tram_calloc((size_t)TRAM_MAX(numel, 1), 1, err) : NULL;
    int rc = codes && t->numel == numel ? fp8_read(m, t, codes, scales, rows, cols, err)
             : codes ? tram_fail(err, "%s: tensor %s has %lld elements, expected %lld", m->files[t->file].path,
                                 t->name, (long long)t->numel, (long long)numel)
                     : -1;
    for (int64_t i = 0; !rc && i < numel; i++)
        out[i] = tram_fp8_e4m3_decode(codes[i]) * scales[i / cols];
    free(scales);
    free(codes);
    return rc;
}

int tram_hf_read_f32(tram_hf_model *m, const char *gguf_name, float *out, int64_t numel, tram_error *err)
{
    st_tensor view;
    const st_tensor *t = hf_lookup(m, gguf_name, &view);
    if (!t)
        return tram_fail(err, "%s: tensor %s is missing", m->dir, gguf_name);
    if (t->dtype == ST_F8_E4M3)
        return fp8_dequantize(m, t, out, numel, err);
    return st_read(m, t, out, numel, err);
}

/* ---------------------------------------------------------------- one file by its own names */

int tram_st_open_file(tram_hf_model **out, const char *path, tram_error *err)
{
    tram_hf_model *m = tram_calloc(1, sizeof(*m), err);
    if (!m)
        return -1;
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 1;
    snprintf(m->dir, sizeof(m->dir), "%.*s", dir_len, slash ? path : ".");
    if (st_add_file(m, slash ? slash + 1 : path, err) || st_sort_unique(m, err)) {
        tram_hf_close(m);
        return -1;
    }
    *out = m;
    return 0;
}

int tram_st_count(const tram_hf_model *m) { return m->n_tensors; }

const char *tram_st_name(const tram_hf_model *m, int i) { return m->tensors[i].name; }

int64_t tram_st_dim(const tram_hf_model *m, int i, int d)
{
    const st_tensor *t = &m->tensors[i];
    return d >= 0 && d < t->ndim ? t->shape[d] : -1;
}

int tram_st_read_named(tram_hf_model *m, const char *name, float *out, int64_t numel, tram_error *err)
{
    const st_tensor *t = st_find(m, name);
    if (!t)
        return tram_fail(err, "%s: tensor %s is missing", m->files[0].path, name);
    return st_read(m, t, out, numel, err);
}
