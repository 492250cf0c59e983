/* pretok.c — pre-tokenizers: the text is cut into words by a chain of
 * regexes before BPE, as HF's Split / ByteLevel / Digits pre-tokenizers do
 * (every match and every gap between matches becomes a word, and each word is
 * cut again by the next regex of the chain).  PCRE2 with UTF + UCP + JIT. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/pretok.h"
#include "kernels/utf8.h"

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_RE                                                                             \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const struct {
    const char *name;
    const char *re[TRAM_PRETOK_MAX];
} presets[] = {
    {"default", {GPT2_RE}},
    {"gpt2", {GPT2_RE}},
    {"gpt-2", {GPT2_RE}},
    {"llama3", {LLAMA3_RE}},
    {"llama-bpe", {LLAMA3_RE}},
    {"llama-v3", {LLAMA3_RE}},
    {"qwen2", {QWEN2_RE}},
    {"smollm", {"\\p{N}", GPT2_RE}},   /* HF: Digits(individual) then ByteLevel */
};

/* HF's regexes run on Oniguruma, whose \s also matches U+0085 (NEL); PCRE2's
 * \s with UCP does not.  Rewrites \s and \S so both engines agree. */
static char *onig_spaces(const char *pattern, tram_error *err)
{
    size_t n = strlen(pattern);
    char *out = tram_calloc(n * 12 + 1, 1, err);
    if (!out)
        return NULL;
    char *o = out;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < n) {
            char d = pattern[++i];
            const char *rep = NULL;
            if (d == 's')
                rep = in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
            else if (d == 'S' && !in_class)
                rep = "[^\\s\\x{85}]";
            if (rep) {
                o += strlen(strcpy(o, rep));
            } else {
                *o++ = c;
                *o++ = d;
            }
            continue;
        }
        if (c == '[')
            in_class = 1;
        else if (c == ']')
            in_class = 0;
        *o++ = c;
    }
    return out;
}

int tram_pretok_add(tram_pretok *p, const char *pattern, tram_error *err)
{
    if (p->n == TRAM_PRETOK_MAX)
        return tram_fail(err, "pre-tokenizer: more than %d regex splits", TRAM_PRETOK_MAX);
    char *pat = onig_spaces(pattern, err);
    if (!pat)
        return -1;
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                                   &off, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        return tram_fail(err, "pre-tokenizer regex '%s': %s at offset %zu", pattern, (char *)msg, (size_t)off);
    }
    /* Without JIT PCRE2 still matches correctly, only slower. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    p->re[p->n++] = re;
    return 0;
}

int tram_pretok_init_named(tram_pretok *p, const char *name, tram_error *err)
{
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < TRAM_ARRAY_LEN(presets); i++) {
        if (strcmp(presets[i].name, name))
            continue;
        for (int k = 0; k < TRAM_PRETOK_MAX && presets[i].re[k]; k++)
            if (tram_pretok_add(p, presets[i].re[k], err))
                return -1;
        return 0;
    }
    return tram_fail(err, "tokenizer.ggml.pre: unsupported pre-tokenizer '%s' (known: gpt2, llama-bpe, qwen2, smollm)",
                     name);
}

void tram_pretok_free(tram_pretok *p)
{
    for (int i = 0; i < p->n; i++)
        pcre2_code_free(p->re[i]);
    memset(p, 0, sizeof(*p));
}

int tram_pretok_scratch_init(tram_pretok_scratch *s, const tram_pretok *p, tram_error *err)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < p->n; i++)
        if (!(s->md[i] = pcre2_match_data_create_from_pattern(p->re[i], NULL)))
            return tram_fail(err, "pre-tokenizer: out of memory");
    s->mctx = pcre2_match_context_create(NULL);
    s->jit = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!s->mctx || !s->jit)
        return tram_fail(err, "pre-tokenizer: out of memory");
    pcre2_jit_stack_assign(s->mctx, NULL, s->jit);
    return 0;
}

void tram_pretok_scratch_free(tram_pretok_scratch *s)
{
    for (int i = 0; i < TRAM_PRETOK_MAX; i++)
        pcre2_match_data_free(s->md[i]);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit);
}

typedef struct {
    const tram_pretok *p;
    tram_pretok_scratch *s;
    tram_pretok_fn fn;
    void *ctx;
    tram_error *err;
} split_state;

static int split_level(split_state *st, int level, const char *text, size_t len);

/* A piece of level `level`: a final word, or input of the next regex. */
static int emit(split_state *st, int level, const char *text, size_t len)
{
    if (!len)
        return 0;
    if (level + 1 < st->p->n)
        return split_level(st, level + 1, text, len);
    return st->fn(st->ctx, text, len);
}

static int split_level(split_state *st, int level, const char *text, size_t len)
{
    pcre2_match_data *md = st->s->md[level];
    size_t pos = 0, from = 0;
    while (from < len) {
        int rc = pcre2_match(st->p->re[level], (PCRE2_SPTR)text, len, from, PCRE2_NO_UTF_CHECK, md, st->s->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return tram_fail(st->err, "pre-tokenizer: regex match failed (PCRE2 error %d)", rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (a == b) {   /* an empty match splits nothing: search on from the next character */
            int k = tram_utf8_seq_len((const unsigned char *)text + a, len - a);
            from = a + (size_t)(k ? k : 1);
            continue;
        }
        int r = emit(st, level, text + pos, a - pos);
        if (r || (r = emit(st, level, text + a, b - a)))
            return r;
        pos = from = b;
    }
    return emit(st, level, text + pos, len - pos);
}

int tram_pretok_split(const tram_pretok *p, tram_pretok_scratch *s, const char *text, size_t len,
                      tram_pretok_fn fn, void *ctx, tram_error *err)
{
    split_state st = {.p = p, .s = s, .fn = fn, .ctx = ctx, .err = err};
    if (!p->n)
        return fn(ctx, text, len);
    return split_level(&st, 0, text, len);
}
