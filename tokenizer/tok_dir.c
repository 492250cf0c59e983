/* tok_dir.c — a tokenizer from a Hugging Face directory: tokenizer.json
 * (byte-level BPE) or tokenizer.model (SentencePiece, through the library),
 * with tokenizer_config.json for the chat template and BOS/EOS. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer/bpe.h"
#include "tokenizer/maps.h"
#include "tokenizer/pretok.h"
#include "tokenizer/spm_lib.h"
#include "tokenizer/vocab.h"

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* Regex of one pre-tokenizer step, or NULL for a step that adds none
 * (ByteLevel without its regex).  *ok = 0 for steps tram cannot run. */
static const char *step_regex(const json_t *p, int *ok)
{
    const char *type = jstr(p, "type");
    *ok = 1;
    if (type && !strcmp(type, "ByteLevel")) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            *ok = 0;
        return json_is_false(json_object_get(p, "use_regex")) ? NULL : "gpt2";
    }
    if (type && !strcmp(type, "Digits"))
        return json_is_true(json_object_get(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+";
    if (type && !strcmp(type, "Split")) {
        const char *re = jstr(json_object_get(p, "pattern"), "Regex");
        const char *behavior = jstr(p, "behavior");
        *ok = re && behavior && !strcmp(behavior, "Isolated") && !json_is_true(json_object_get(p, "invert"));
        return re;
    }
    *ok = 0;
    return NULL;
}

static int setup_pretok(tram_tokenizer *t, const json_t *pre, const char *path, tram_error *err)
{
    const json_t *steps = pre;
    if (pre && jstr(pre, "type") && !strcmp(jstr(pre, "type"), "Sequence"))
        steps = json_object_get(pre, "pretokenizers");
    else if (pre)
        steps = NULL;
    size_t n = steps ? json_array_size(steps) : (pre ? 1 : 0);
    for (size_t i = 0; i < n; i++) {
        const json_t *p = steps ? json_array_get(steps, i) : pre;
        int ok;
        const char *re = step_regex(p, &ok);
        if (!ok)
            return tram_fail(err, "%s: pre-tokenizer '%s' is not supported", path, jstr(p, "type") ? jstr(p, "type") : "?");
        if (re && !strcmp(re, "gpt2")) {
            tram_pretok named;
            if (tram_pretok_init_named(&named, "gpt2", err))
                return -1;
            if (t->pretok.n == TRAM_PRETOK_MAX)
                return tram_fail(err, "%s: too many pre-tokenizer steps", path);
            t->pretok.re[t->pretok.n++] = named.re[0];
        } else if (re && tram_pretok_add(&t->pretok, re, err)) {
            return -1;
        }
    }
    return 0;
}

static int32_t token_id(const tram_tokenizer *t, const json_t *tok)
{
    const char *s = json_is_string(tok) ? json_string_value(tok) : jstr(tok, "content");
    return s ? tram_tokenizer_find(t, s) : -1;
}

static int read_vocab(tram_tokenizer **out, const json_t *vocab, const json_t *added, const char *path,
                      tram_error *err)
{
    int n = 0;
    const char *key;
    json_t *v;
    size_t i;
    json_object_foreach((json_t *)vocab, key, v) n = TRAM_MAX(n, (int)json_integer_value(v) + 1);
    json_array_foreach(added, i, v) n = TRAM_MAX(n, (int)json_integer_value(json_object_get(v, "id")) + 1);
    const char **pieces = calloc((size_t)TRAM_MAX(n, 1), sizeof(*pieces));
    uint32_t *len = calloc((size_t)TRAM_MAX(n, 1), sizeof(*len));
    int rc = pieces && len ? tram_tok_alloc(out, n, err) : tram_fail(err, "%s: out of memory", path);
    json_object_foreach((json_t *)vocab, key, v) {
        json_int_t id = json_integer_value(v);
        if (!rc && (id < 0 || !json_is_integer(v)))
            rc = tram_fail(err, "%s: vocab entry '%s' has no valid id", path, key);
        if (!rc)
            pieces[id] = key;
    }
    json_array_foreach(added, i, v) {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        if (!rc && (id < 0 || !jstr(v, "content")))
            rc = tram_fail(err, "%s: added_tokens[%zu] has no id or content", path, i);
        if (!rc) {
            pieces[id] = jstr(v, "content");
            (*out)->attr[id] = json_is_true(json_object_get(v, "special")) ? TRAM_ATTR_CONTROL : TRAM_ATTR_USER;
        }
    }
    for (int k = 0; !rc && k < n; k++) {
        if (!pieces[k])
            pieces[k] = "";
        len[k] = (uint32_t)strlen(pieces[k]);
    }
    if (!rc)
        rc = tram_tok_set_pieces(*out, pieces, len, err);
    free(pieces);
    free(len);
    return rc;
}

static int read_merges(tram_tokenizer *t, const json_t *merges, tram_error *err)
{
    size_t n = json_array_size(merges), i;
    json_t *m;
    if (tram_pairmap_init(&t->merges, (uint32_t)n, err))
        return -1;
    json_array_foreach(merges, i, m) {
        char buf[1024];
        const char *s = json_string_value(m);
        if (json_is_array(m)) {   /* newer tokenizer.json: ["left", "right"] */
            snprintf(buf, sizeof(buf), "%s %s", json_string_value(json_array_get(m, 0)) ? json_string_value(json_array_get(m, 0)) : "",
                     json_string_value(json_array_get(m, 1)) ? json_string_value(json_array_get(m, 1)) : "");
            s = buf;
        }
        if (!s || tram_bpe_add_merge(t, s, strlen(s), (int32_t)i, err))
            return s ? -1 : tram_fail(err, "merges[%zu] is not a string", i);
    }
    return 0;
}

/* BOS from a TemplateProcessing post-processor that starts with a special
 * token, and the token it puts after the text when it ends with one. */
static void read_post(tram_tokenizer *t, const json_t *post)
{
    const char *type = jstr(post, "type");
    if (type && !strcmp(type, "Sequence")) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(post, "processors"), i, p) read_post(t, p);
        return;
    }
    if (!type || strcmp(type, "TemplateProcessing"))
        return;
    const json_t *single = json_object_get(post, "single");
    const json_t *first = json_object_get(json_array_get(single, 0), "SpecialToken");
    const json_t *last = json_array_size(single) > 1
                             ? json_object_get(json_array_get(single, json_array_size(single) - 1), "SpecialToken")
                             : NULL;
    if (first) {
        t->bos = tram_tokenizer_find(t, jstr(first, "id") ? jstr(first, "id") : "");
        t->add_bos = t->bos >= 0;
    }
    if (last) {
        t->post_id = tram_tokenizer_find(t, jstr(last, "id") ? jstr(last, "id") : "");
        t->add_post = t->post_id >= 0;
    }
}

static int from_json(tram_tokenizer **out, const char *path, tram_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return tram_fail(err, "%s:%d: %s", path, je.line, je.text);
    const json_t *model = json_object_get(root, "model");
    const char *type = jstr(model, "type");
    const json_t *norm = json_object_get(root, "normalizer");
    int rc = 0;
    if (!type || strcmp(type, "BPE") || json_is_true(json_object_get(model, "byte_fallback")))
        rc = tram_fail(err, "%s: model type '%s' is not byte-level BPE", path, type ? type : "?");
    else if (norm && !json_is_null(norm) && strcmp(jstr(norm, "type") ? jstr(norm, "type") : "", "NFC"))
        rc = tram_fail(err, "%s: normalizer '%s' is not supported", path, jstr(norm, "type") ? jstr(norm, "type") : "?");
    if (!rc)
        rc = read_vocab(out, json_object_get(model, "vocab"), json_object_get(root, "added_tokens"), path, err);
    if (!rc) {
        tram_tokenizer *t = *out;
        t->kind = TRAM_TOK_BPE;
        t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
        rc = setup_pretok(t, json_object_get(root, "pre_tokenizer"), path, err) ||
             read_merges(t, json_object_get(model, "merges"), err);
        read_post(t, json_object_get(root, "post_processor"));
    }
    json_decref(root);
    return rc ? -1 : 0;
}

static int from_model(tram_tokenizer **out, const char *path, tram_error *err)
{
    tram_spm_lib *lib;
    char msg[400];
    if (tram_spm_lib_load(&lib, path, msg, sizeof(msg)))
        return tram_fail(err, "%s", msg);
    int n = tram_spm_lib_size(lib);
    const char **pieces = calloc((size_t)n, sizeof(*pieces));
    uint32_t *len = calloc((size_t)n, sizeof(*len));
    int rc = pieces && len ? tram_tok_alloc(out, n, err) : tram_fail(err, "%s: out of memory", path);
    if (!rc) {
        tram_tokenizer *t = *out;
        t->lib = lib;
        lib = NULL;
        t->kind = TRAM_TOK_SPM_LIB;
        t->scores = tram_calloc((size_t)n, sizeof(float), err);
        for (int i = 0; t->scores && i < n; i++) {
            int attr;
            pieces[i] = tram_spm_lib_piece(t->lib, i, &t->scores[i], &attr);
            len[i] = (uint32_t)strlen(pieces[i]);
            t->attr[i] = (uint8_t)attr;
        }
        rc = t->scores ? tram_tok_set_pieces(t, pieces, len, err) : -1;
        t->unk_id = tram_spm_lib_special_id(t->lib, 0);
        t->bos = tram_spm_lib_special_id(t->lib, 1);
        t->eos = tram_spm_lib_special_id(t->lib, 2);
        t->add_bos = t->bos >= 0;
        t->add_space_prefix = tram_spm_lib_add_dummy_prefix(t->lib);
    }
    if (lib)
        tram_spm_lib_free(lib);
    free(pieces);
    free(len);
    return rc;
}

/* tokenizer_config.json: the chat template and the BOS/EOS choices. */
static int read_config(tram_tokenizer *t, const char *path, tram_error *err)
{
    json_error_t je;
    if (access(path, R_OK))
        return 0;
    /* It reads no integers, and save_pretrained writes model_max_length as
     * 10^30 when the model sets none, beyond any JSON integer jansson keeps. */
    json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    if (!root)
        return tram_fail(err, "%s:%d: %s", path, je.line, je.text);
    const json_t *tmpl = json_object_get(root, "chat_template");
    const char *s = json_string_value(tmpl);
    size_t i;
    json_t *v;
    json_array_foreach(tmpl, i, v) if (!strcmp(jstr(v, "name") ? jstr(v, "name") : "", "default")) s = jstr(v, "template");
    if (s && !(t->chat_template = strdup(s))) {
        json_decref(root);
        return tram_fail(err, "%s: out of memory", path);
    }
    int32_t id = token_id(t, json_object_get(root, "bos_token"));
    if (id >= 0)
        t->bos = id;
    if ((id = token_id(t, json_object_get(root, "eos_token"))) >= 0)
        t->eos = id;
    if (json_is_boolean(json_object_get(root, "add_bos_token")))
        t->add_bos = json_is_true(json_object_get(root, "add_bos_token"));
    if (json_is_boolean(json_object_get(root, "add_eos_token")))
        t->add_eos = json_is_true(json_object_get(root, "add_eos_token"));
    json_decref(root);
    return 0;
}

int tram_tokenizer_from_dir(tram_tokenizer **out, const char *dir, tram_error *err)
{
    char json_path[4096], model_path[4096], config_path[4096];
    snprintf(json_path, sizeof(json_path), "%s/tokenizer.json", dir);
    snprintf(model_path, sizeof(model_path), "%s/tokenizer.model", dir);
    snprintf(config_path, sizeof(config_path), "%s/tokenizer_config.json", dir);
    *out = NULL;
    int rc;
    if (!access(json_path, R_OK)) {
        rc = from_json(out, json_path, err);
        /* A SentencePiece model's tokenizer.json is not byte-level: use its tokenizer.model. */
        if (rc && !access(model_path, R_OK)) {
            tram_tokenizer_free(*out);
            *out = NULL;
            rc = from_model(out, model_path, err);
        }
    } else if (!access(model_path, R_OK)) {
        rc = from_model(out, model_path, err);
    } else {
        return tram_fail(err, "%s: neither tokenizer.json nor tokenizer.model", dir);
    }
    if (!rc)
        rc = read_config(*out, config_path, err) || tram_tok_finish(*out, err) ? -1 : 0;
    if (rc) {
        tram_tokenizer_free(*out);
        *out = NULL;
    }
    return rc;
}
