/* grammar.c — compiling a grammar, and the matcher (see grammar.h). */
#include "grammar/grammar.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/stacks.h"
#include "grammar/token_mask.h"
#include "grammar/vocab_trie.h"

struct tram_grammar {
    atomic_int refs;
    tram_gbnf ir;
    tram_vocab_trie *trie;
    tram_mask_table masks;
};

struct tram_matcher {
    const tram_grammar *g;
    tram_stackset state, next;
    tram_mask_scratch scratch;
    int ended;                 /* an end-of-generation token was accepted */
    const char *stuck;         /* why the last mask allowed nothing, or NULL */
};

static void grammar_free(tram_grammar *g)
{
    tram_mask_table_free(&g->masks);
    tram_vocab_trie_release(g->trie);
    tram_gbnf_free(&g->ir);
    free(g);
}

/* The longest tail of a large bounded count expanded into rules: the
 * longest token up to this, so that only tokens longer than this (few
 * vocabularies have any) are checked at run time near the bound. */
#define MAX_TAIL 128

/* The grammar must be able to start: its first set is computed once here
 * so that a grammar refused there (too ambiguous from its first byte, or
 * matching nothing) is refused at compile, not by every matcher; the
 * token masks of that set (what the first mask needs) are computed with
 * it, the others on first use (grammar/token_mask.h). */
static int build_start(tram_grammar *g, tram_error *err)
{
    tram_stackset st = {0};
    int32_t *buf = tram_calloc(TRAM_MAX_STACK_DEPTH + 1, sizeof(int32_t), err);
    if (!buf)
        return -1;
    tram_stacks_start(&g->ir, g->ir.root, &st, buf);
    int rc = tram_stackset_refusal(&st, err);
    if (!rc && st.n == 0 && !st.has_end)
        rc = tram_fail(err, "grammar: it matches nothing (an empty class, or a character no UTF-8 text has?)");
    rc = rc || tram_mask_table_build(&g->masks, &g->ir, g->trie, &st, err);
    tram_stackset_free(&st);
    free(buf);
    return rc;
}

tram_grammar *tram_grammar_compile_tail(const char *gbnf, const char *root_rule,
                                        const struct tram_tokenizer *tok, int tail, tram_error *err)
{
    tram_grammar *g = tram_calloc(1, sizeof(*g), err);
    if (!g)
        return NULL;
    atomic_init(&g->refs, 1);
    if (!(g->trie = tram_vocab_trie_get(tok, err)) ||
        tram_gbnf_parse(gbnf, root_rule, tail > 0 ? tail : TRAM_MIN(g->trie->max_len, MAX_TAIL), &g->ir, err) ||
        build_start(g, err)) {
        grammar_free(g);
        return NULL;
    }
    return g;
}

tram_grammar *tram_grammar_compile(const char *gbnf, const char *root_rule,
                                   const struct tram_tokenizer *tok, tram_error *err)
{
    return tram_grammar_compile_tail(gbnf, root_rule, tok, 0, err);
}

const tram_grammar *tram_grammar_retain(const tram_grammar *g)
{
    atomic_fetch_add(&((tram_grammar *)g)->refs, 1);
    return g;
}

void tram_grammar_release(const tram_grammar *g)
{
    if (g && atomic_fetch_sub(&((tram_grammar *)g)->refs, 1) == 1)
        grammar_free((tram_grammar *)g);
}

size_t tram_grammar_bytes(const tram_grammar *g)
{
    const tram_gbnf *ir = &g->ir;
    size_t bytes = sizeof(*g) + tram_mask_table_bytes(&g->masks) + (size_t)ir->num_elems * sizeof(tram_gelem) +
                   (size_t)ir->num_rules * (sizeof(int32_t) + sizeof(char *)) +
                   (size_t)ir->num_sets * sizeof(tram_byteset) + (size_t)ir->num_repeats * sizeof(tram_grepeat);
    for (int r = 0; r < ir->num_rules; r++)
        bytes += strlen(ir->rule_names[r]) + 1;
    return bytes;
}

int tram_grammar_walk_all(const tram_grammar *g, tram_error *err)
{
    return tram_mask_table_walk_all(&g->masks, &g->ir, err);
}

int tram_grammar_vocab(const tram_grammar *g) { return g->trie->vocab; }
int tram_grammar_mask_words(const tram_grammar *g) { return g->masks.words; }

void tram_matcher_free(tram_matcher *m)
{
    if (!m)
        return;
    tram_stackset_free(&m->state);
    tram_stackset_free(&m->next);
    tram_mask_scratch_free(&m->scratch);
    tram_grammar_release(m->g);
    free(m);
}

int tram_matcher_create(tram_matcher **out, const tram_grammar *g, tram_error *err)
{
    tram_matcher *m = tram_calloc(1, sizeof(*m), err);
    *out = NULL;
    if (!m)
        return -1;
    m->g = tram_grammar_retain(g);
    if (tram_mask_scratch_init(&m->scratch, g->trie, err)) {
        tram_matcher_free(m);
        return -1;
    }
    tram_stacks_start(&g->ir, g->ir.root, &m->state, m->scratch.buf);
    if (tram_stackset_incomplete(&m->state) || m->state.too_deep) {
        tram_stackset_refusal(&m->state, err);
        tram_matcher_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

static int is_eog(const tram_vocab_trie *t, int32_t id)
{
    for (int i = 0; i < t->num_eog; i++)
        if (t->eog[i] == id)
            return 1;
    return 0;
}

static int any_bit(const uint32_t *mask, int words)
{
    uint32_t any = 0;
    for (int w = 0; w < words; w++)
        any |= mask[w];
    return any != 0;
}

int tram_matcher_fill_mask(tram_matcher *m, uint32_t *mask)
{
    const tram_grammar *g = m->g;
    memset(mask, 0, (size_t)g->masks.words * sizeof(uint32_t));
    m->stuck = NULL;
    if (m->ended)
        return 0;  /* finished, not stuck: nothing is asked of it */
    m->scratch.refused_incomplete = 0;
    int failed = tram_mask_fill(&g->masks, &g->ir, g->trie, &m->state, mask, &m->scratch);
    if (m->state.has_end)
        for (int i = 0; i < g->trie->num_eog; i++)
            mask[g->trie->eog[i] >> 5] |= 1u << (g->trie->eog[i] & 31);
    if (any_bit(mask, g->masks.words))
        return 1;
    m->stuck = failed || m->scratch.refused_incomplete ? TRAM_GRAMMAR_BOUND : TRAM_GRAMMAR_DEAD_END;
    return 0;
}

const char *tram_matcher_stuck(const tram_matcher *m) { return m->stuck; }

int tram_matcher_accept(tram_matcher *m, int32_t token)
{
    const tram_grammar *g = m->g;
    if (m->ended || token < 0 || token >= g->trie->vocab)
        return 0;
    if (is_eog(g->trie, token)) {
        m->ended = m->state.has_end;
        return m->ended;
    }
    int len;
    const uint8_t *b = tram_trie_token(g->trie, token, &len);
    if (len == 0 || !tram_mask_accepts(&g->ir, &m->state, -1, b, len, &m->scratch))
        return 0;
    if (tram_stackset_copy(&m->next, &m->scratch.levels[len]))
        return 0;
    tram_stackset t = m->state;
    m->state = m->next;
    m->next = t;
    return 1;
}

int tram_matcher_can_end(const tram_matcher *m) { return m->ended || m->state.has_end; }
int tram_matcher_is_done(const tram_matcher *m) { return m->ended || (m->state.has_end && m->state.n == 0); }
