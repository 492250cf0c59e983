/* st_modules.c — a sentence-transformers directory's pooling (see st_modules.h). */
#include "models/st_modules.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "models/json_util.h"

/* The last dotted part of a module's type: "sentence_transformers.models.Pooling" → "Pooling". */
static const char *module_kind(const char *type)
{
    const char *dot = strrchr(type, '.');
    return dot ? dot + 1 : type;
}

/* Pooling modes sentence-transformers names, as 6.x writes them
 * ("pooling_mode": "lasttoken") and as earlier versions did (a bool each,
 * "pooling_mode_lasttoken": true). */
static const struct {
    const char *mode, *legacy_key;
    tram_pooling pooling;   /* TRAM_POOLING_UNSET: a mode tram does not compute */
} modes[] = {
    {"cls", "pooling_mode_cls_token", TRAM_POOLING_CLS},
    {"mean", "pooling_mode_mean_tokens", TRAM_POOLING_MEAN},
    {"lasttoken", "pooling_mode_lasttoken", TRAM_POOLING_LAST},
    {"max", "pooling_mode_max_tokens", TRAM_POOLING_UNSET},
    {"mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens", TRAM_POOLING_UNSET},
    {"weightedmean", "pooling_mode_weightedmean_tokens", TRAM_POOLING_UNSET},
};

/* The index of a mode by its name (legacy 0) or its legacy key (legacy 1), or -1. */
static int find_mode(const char *name, int legacy)
{
    for (size_t i = 0; i < TRAM_ARRAY_LEN(modes); i++)
        if (!strcmp(name, legacy ? modes[i].legacy_key : modes[i].mode))
            return (int)i;
    return -1;
}

/* A mode turned on: one tram computes, and the only one. */
static int turn_on(int mode, const char *name, int *on, tram_pooling *out, const char *path, tram_error *err)
{
    if (mode < 0 || !modes[mode].pooling)
        return tram_fail(err, "%s: pooling mode '%s' is not supported (tram pools by cls, mean or lasttoken)",
                         path, name);
    if ((*on)++)
        return tram_fail(err, "%s: more than one pooling mode is on (their embeddings are concatenated, "
                              "which tram does not do)", path);
    *out = modes[mode].pooling;
    return 0;
}

/* "pooling_mode": a name, or a list of names. */
static int read_mode(const json_t *v, int *on, tram_pooling *out, const char *path, tram_error *err)
{
    if (json_is_string(v))
        return turn_on(find_mode(json_string_value(v), 0), json_string_value(v), on, out, path, err);
    size_t i;
    json_t *m;
    if (!json_is_array(v))
        return tram_fail(err, "%s: pooling_mode is neither a name nor a list of names", path);
    json_array_foreach(v, i, m) {
        const char *name = json_is_string(m) ? json_string_value(m) : "?";
        if (turn_on(find_mode(name, 0), name, on, out, path, err))
            return -1;
    }
    return 0;
}

/* One key of 1_Pooling/config.json; include_prompt must be true (false
 * leaves an instruction prompt out of the pool, which tram cannot tell). */
static int read_pooling_key(const char *key, const json_t *v, const tram_model_config *c, int *on,
                            tram_pooling *out, const char *path, tram_error *err)
{
    if (!strcmp(key, "pooling_mode"))
        return read_mode(v, on, out, path, err);
    if (find_mode(key, 1) >= 0)
        return json_is_true(v) ? turn_on(find_mode(key, 1), key, on, out, path, err) : 0;
    if (!strcmp(key, "include_prompt"))
        return json_is_false(v) ? tram_fail(err, "%s: include_prompt false is not supported (the whole "
                                                 "input is pooled)", path) : 0;
    if (!strcmp(key, "embedding_dimension") || !strcmp(key, "word_embedding_dimension"))
        return json_is_integer(v) && json_integer_value(v) == c->dim
                   ? 0 : tram_fail(err, "%s: %s is not the model's hidden size %d", path, key, c->dim);
    return tram_fail(err, "%s: '%s' is not a pooling setting tram knows", path, key);
}

static int read_pooling_config(const char *path, const tram_model_config *c, tram_pooling *out, tram_error *err)
{
    json_t *root;
    if (tram_json_load_object(&root, path, err))
        return -1;
    const char *key;
    json_t *v;
    int on = 0, rc = 0;
    json_object_foreach(root, key, v) if (!rc) rc = read_pooling_key(key, v, c, &on, out, path, err);
    json_decref(root);
    if (!rc && on != 1)
        return tram_fail(err, "%s: no pooling mode is on", path);
    return rc;
}

/* One entry of modules.json: a Transformer at the directory itself, a
 * Pooling (its config read), a Normalize. */
static int read_module(const char *dir, const json_t *m, tram_model_config *c, int *pooled, tram_error *err)
{
    const char *type = json_string_value(json_object_get(m, "type"));
    const char *sub = json_string_value(json_object_get(m, "path"));
    char path[1024];
    snprintf(path, sizeof(path), "%s/modules.json", dir);
    if (!type || !sub)
        return tram_fail(err, "%s: a module without a type or path", path);
    const char *kind = module_kind(type);
    if (!strcmp(kind, "Transformer"))
        return sub[0] ? tram_fail(err, "%s: the Transformer module is in '%s', not in the directory itself",
                                  path, sub) : 0;
    if (!strcmp(kind, "Normalize")) {
        c->pooling_normalize = 1;
        return 0;
    }
    if (strcmp(kind, "Pooling"))
        return tram_fail(err, "%s: module %s is not supported (tram computes Transformer, Pooling and "
                              "Normalize)", path, type);
    snprintf(path, sizeof(path), "%s/%s/config.json", dir, sub);
    *pooled = 1;
    return read_pooling_config(path, c, &c->pooling, err);
}

/* What sentence-transformers does to an input before the model sees it: a
 * default prompt put before it, lower-casing (both refused), truncation
 * at max_seq_length (which becomes the context limit: a longer input is
 * refused rather than cut). */
static int read_input_rules(const char *dir, tram_model_config *c, tram_error *err)
{
    char path[1024];
    json_t *root;
    const char *prompt = NULL;
    int lower = 0, rc;
    long long max_len = 0;
    snprintf(path, sizeof(path), "%s/config_sentence_transformers.json", dir);
    if (!access(path, R_OK)) {
        if (tram_json_load_object(&root, path, err))
            return -1;
        rc = tram_json_get_string(root, "default_prompt_name", 0, &prompt, path, err);
        if (!rc && prompt)
            rc = tram_fail(err, "%s: default_prompt_name '%s' is not supported: put the prompt in the input",
                           path, prompt);
        json_decref(root);
        if (rc)
            return -1;
    }
    snprintf(path, sizeof(path), "%s/sentence_bert_config.json", dir);
    if (access(path, R_OK))
        return 0;
    if (tram_json_load_object(&root, path, err))
        return -1;
    rc = tram_json_get_bool(root, "do_lower_case", 0, &lower, path, err) ||
         tram_json_get_int(root, "max_seq_length", 0, 1, 1 << 24, &max_len, path, err);
    json_decref(root);
    if (!rc && lower)
        return tram_fail(err, "%s: do_lower_case is not supported: lower-case the input", path);
    if (!rc && max_len && max_len < c->max_seq_len)
        c->max_seq_len = (int)max_len;
    return rc ? -1 : 0;
}

static int read_modules(const char *dir, tram_model_config *c, tram_error *err)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/modules.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return tram_fail(err, "%s:%d: %s", path, je.line, je.text);
    int rc = json_is_array(root) ? 0 : tram_fail(err, "%s: not a list of modules", path), pooled = 0;
    size_t i;
    json_t *m;
    c->pooling_normalize = 0;
    json_array_foreach(root, i, m) if (!rc) rc = read_module(dir, m, c, &pooled, err);
    json_decref(root);
    if (!rc && !pooled)
        rc = tram_fail(err, "%s: no Pooling module", path);
    return rc || read_input_rules(dir, c, err) ? -1 : 0;
}

int tram_st_read_pooling(const char *dir, const json_t *root, tram_model_config *c, tram_error *err)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/modules.json", dir);
    c->pooling = TRAM_POOLING_UNSET;
    c->pooling_normalize = 1;
    c->matryoshka = json_is_true(json_object_get(root, "is_matryoshka")) ||
                    json_is_array(json_object_get(root, "matryoshka_dimensions"));
    return access(path, R_OK) ? 0 : read_modules(dir, c, err);
}
