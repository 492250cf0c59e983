/* tok_gguf.c — a tokenizer from GGUF metadata (tokenizer.ggml.*), the way
 * llama.cpp writes it: model "gpt2" is byte-level BPE with merges, model
 * "llama" is a SentencePiece vocabulary with scores and byte fallback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/maps.h"
#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

/* Prefixes err's message with the file and key it came from. */
static int in_file(tram_error *err, const tram_gguf *g, const char *key)
{
    char msg[sizeof(err->msg)];
    if (!err)
        return -1;
    snprintf(msg, sizeof(msg), "%s", err->msg);
    return tram_fail(err, "%s: %s: %s", g->path, key, msg);
}

static const tram_gguf_value *find_array(const tram_gguf *g, const char *key, tram_gguf_type elem, int required,
                                         tram_error *err)
{
    const tram_gguf_kv *kv = tram_gguf_find_kv(g, key);
    if (!kv) {
        if (required)
            tram_fail(err, "%s: no %s in the metadata", g->path, key);
        return NULL;
    }
    if (kv->value.type != TRAM_GGUF_ARRAY || (kv->value.v.arr.elem_type != elem &&
                                              !(elem == TRAM_GGUF_INT32 && kv->value.v.arr.elem_type == TRAM_GGUF_UINT32))) {
        tram_fail(err, "%s: %s has the wrong type", g->path, key);
        return NULL;
    }
    return &kv->value;
}

/* An optional token id; -1 when absent. */
static int opt_id(const tram_gguf *g, const char *key, int32_t *out, tram_error *err)
{
    uint64_t v;
    *out = -1;
    if (!tram_gguf_find_kv(g, key))
        return 0;
    if (tram_gguf_get_u64(g, key, &v, err))
        return -1;
    *out = v > INT32_MAX ? -1 : (int32_t)v;
    return 0;
}

static int opt_bool(const tram_gguf *g, const char *key, int dflt, int *out, tram_error *err)
{
    *out = dflt;
    return tram_gguf_find_kv(g, key) ? tram_gguf_get_bool(g, key, out, err) : 0;
}

static int read_pieces(tram_tokenizer *t, const tram_gguf *g, const tram_gguf_value *tokens, tram_error *err)
{
    const char **p = tram_calloc((size_t)t->n_vocab, sizeof(*p), err);
    uint32_t *len = tram_calloc((size_t)t->n_vocab, sizeof(*len), err);
    int rc = p && len ? 0 : -1;
    for (int i = 0; !rc && i < t->n_vocab; i++) {
        tram_gguf_str s;
        rc = tram_gguf_arr_str(tokens, (uint64_t)i, &s, err);
        if (!rc && s.len > 4096)
            rc = tram_fail(err, "%s: tokenizer.ggml.tokens[%d] is %llu bytes long", g->path, i,
                           (unsigned long long)s.len);
        if (!rc) {
            p[i] = s.ptr;
            len[i] = (uint32_t)s.len;
        }
    }
    if (!rc)
        rc = tram_tok_set_pieces(t, p, len, err);
    free(p);
    free(len);
    return rc;
}

static int read_types_scores(tram_tokenizer *t, const tram_gguf *g, tram_error *err)
{
    const tram_gguf_value *types = find_array(g, "tokenizer.ggml.token_type", TRAM_GGUF_INT32, 0, err);
    const tram_gguf_value *scores = find_array(g, "tokenizer.ggml.scores", TRAM_GGUF_FLOAT32, 0, err);
    if ((types && types->v.arr.count != (uint64_t)t->n_vocab) ||
        (scores && scores->v.arr.count != (uint64_t)t->n_vocab))
        return tram_fail(err, "%s: token_type/scores do not have %d entries", g->path, t->n_vocab);
    if (scores && !(t->scores = tram_calloc((size_t)t->n_vocab, sizeof(float), err)))
        return -1;
    for (int i = 0; i < t->n_vocab; i++) {
        int64_t ty;
        double sc;
        if (types) {
            if (tram_gguf_arr_i64(types, (uint64_t)i, &ty, err))
                return -1;
            if (ty < TRAM_ATTR_NORMAL || ty > TRAM_ATTR_BYTE)
                return tram_fail(err, "%s: tokenizer.ggml.token_type[%d] = %lld is not a token type", g->path, i,
                                 (long long)ty);
            t->attr[i] = (uint8_t)ty;
        }
        if (scores) {
            if (tram_gguf_arr_f64(scores, (uint64_t)i, &sc, err))
                return -1;
            t->scores[i] = (float)sc;
        }
    }
    return 0;
}

static int read_merges(tram_tokenizer *t, const tram_gguf *g, tram_error *err)
{
    const tram_gguf_value *m = find_array(g, "tokenizer.ggml.merges", TRAM_GGUF_STRING, 1, err);
    if (!m || m->v.arr.count > INT32_MAX || tram_pairmap_init(&t->merges, (uint32_t)m->v.arr.count, err))
        return m && m->v.arr.count > INT32_MAX ? tram_fail(err, "%s: too many merges", g->path) : -1;
    for (uint64_t i = 0; i < m->v.arr.count; i++) {
        tram_gguf_str s;
        if (tram_gguf_arr_str(m, i, &s, err) || tram_bpe_add_merge(t, s.ptr, s.len, (int32_t)i, err))
            return in_file(err, g, "tokenizer.ggml.merges");
    }
    return 0;
}

static int setup_bpe(tram_tokenizer *t, const tram_gguf *g, tram_error *err)
{
    char *pre = NULL;
    if (tram_gguf_find_kv(g, "tokenizer.ggml.pre") && tram_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))
        return -1;
    int rc = tram_pretok_init_named(&t->pretok, pre ? pre : "default", err);
    /* Llama-3's tokenizer.json has ignore_merges; its GGUF calls it llama-bpe. */
    t->ignore_merges = pre && !strcmp(pre, "llama-bpe");
    free(pre);
    return rc ? in_file(err, g, "tokenizer.ggml.pre") : read_merges(t, g, err);
}

static int read_specials(tram_tokenizer *t, const tram_gguf *g, tram_error *err)
{
    int spm = t->kind == TRAM_TOK_SPM;
    if (opt_id(g, "tokenizer.ggml.bos_token_id", &t->bos, err) ||
        opt_id(g, "tokenizer.ggml.eos_token_id", &t->eos, err) ||
        opt_id(g, "tokenizer.ggml.unknown_token_id", &t->unk_id, err) ||
        opt_bool(g, "tokenizer.ggml.add_bos_token", spm || t->ignore_merges, &t->add_bos, err) ||
        opt_bool(g, "tokenizer.ggml.add_eos_token", 0, &t->add_eos, err) ||
        opt_bool(g, "tokenizer.ggml.add_space_prefix", spm, &t->add_space_prefix, err))
        return -1;
    if (t->unk_id >= t->n_vocab)
        return tram_fail(err, "%s: unknown_token_id %d outside the vocabulary", g->path, t->unk_id);
    if (tram_gguf_find_kv(g, "tokenizer.chat_template") &&
        tram_gguf_get_str(g, "tokenizer.chat_template", &t->chat_template, err))
        return -1;
    return 0;
}

int tram_tokenizer_from_gguf(tram_tokenizer **out, const tram_gguf *g, tram_error *err)
{
    char *model = NULL;
    *out = NULL;
    if (tram_gguf_get_str(g, "tokenizer.ggml.model", &model, err))
        return -1;
    tram_tok_kind kind = !strcmp(model, "gpt2") ? TRAM_TOK_BPE : TRAM_TOK_SPM;
    if (strcmp(model, "gpt2") && strcmp(model, "llama")) {
        tram_fail(err, "%s: tokenizer.ggml.model '%s' is not supported (gpt2 or llama)", g->path, model);
        free(model);
        return -1;
    }
    free(model);
    const tram_gguf_value *tokens = find_array(g, "tokenizer.ggml.tokens", TRAM_GGUF_STRING, 1, err);
    tram_tokenizer *t = NULL;
    if (!tokens || tram_tok_alloc(&t, tokens->v.arr.count > INT32_MAX ? -1 : (int)tokens->v.arr.count, err))
        goto fail;
    t->kind = kind;
    if (read_pieces(t, g, tokens, err) || read_types_scores(t, g, err))
        goto fail;
    if (kind == TRAM_TOK_BPE ? setup_bpe(t, g, err) : (t->scores ? 0 : tram_fail(err, "%s: no tokenizer.ggml.scores", g->path)))
        goto fail;
    if (read_specials(t, g, err) || tram_tok_finish(t, err))
        goto fail;
    *out = t;
    return 0;
fail:
    tram_tokenizer_free(t);
    return -1;
}

int tram_tokenizer_load(tram_tokenizer **out, const char *path, tram_error *err)
{
    struct stat st;
    *out = NULL;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return tram_tokenizer_from_dir(out, path, err);
    tram_gguf *g;
    if (tram_gguf_open(&g, path, err))
        return -1;
    int rc = tram_tokenizer_from_gguf(out, g, err);
    tram_gguf_close(g);
    return rc;
}
