/* Block manager: a randomized model check.  Simulated sequences allocate,
 * compute (write "KV" = the token id into a shadow of every slot), fork, hit
 * the prefix cache and free, and after every operation the pool's reference
 * counts must equal those recomputed from the live tables, cache hits must
 * carry exactly the KV of the tokens asked for, and no shared block is ever
 * written. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/block_manager.h"

enum { NB = 48, BS = 4, NSEQ = 12, CAP = 16, MAXTOK = CAP * BS, NDOCS = 3 };

typedef struct {
    int live;
    int32_t tokens[MAXTOK];
    int len, computed;
    tram_block_table t;
} sim_seq;

static int32_t docs[NDOCS][MAXTOK];
static int32_t shadow[NB][BS]; /* token whose KV each slot holds, -1 = none */
static long hit_tokens;

static void check_all(tram_block_manager *bm, sim_seq *s)
{
    tram_error err = {{0}};
    cr_assert_eq(tram_bm_check(bm, &err), 0, "%s", err.msg);
    int refs[NB] = {0}, owned = 0;
    for (int i = 0; i < NSEQ; i++)
        for (int j = 0; s[i].live && j < s[i].t.num_blocks; j++)
            refs[s[i].t.blocks[j]]++;
    for (int b = 0; b < NB; b++) {
        cr_assert_eq(tram_bm_ref_count(bm, b), refs[b], "block %d", b);
        owned += refs[b] > 0;
    }
    cr_assert_eq(owned + tram_bm_num_free(bm), NB);
    for (int i = 0; i < NSEQ; i++)
        for (int p = 0; s[i].live && p < s[i].computed; p++)
            cr_assert_eq(shadow[s[i].t.blocks[p / BS]][p % BS], s[i].tokens[p],
                         "seq %d token %d has wrong KV", i, p);
}

static void compute(tram_block_manager *bm, sim_seq *q, int upto)
{
    cr_assert_eq(tram_bm_grow(bm, &q->t, upto), 0);
    for (int p = q->computed; p < upto; p++) {
        int b = q->t.blocks[p / BS];
        cr_assert_eq(tram_bm_ref_count(bm, b), 1, "write into shared block %d", b);
        shadow[b][p % BS] = q->tokens[p];
    }
    q->computed = upto;
    tram_bm_commit(bm, &q->t, q->tokens, upto);
}

static void op_new(tram_block_manager *bm, sim_seq *q)
{
    const int32_t *doc = docs[rand() % NDOCS];
    q->len = 1 + rand() % MAXTOK;
    int shared = rand() % (q->len + 1);
    for (int p = 0; p < q->len; p++)
        q->tokens[p] = p < shared ? doc[p] : rand() % 4;
    q->computed = tram_bm_match_prefix(bm, &q->t, q->tokens, q->len);
    hit_tokens += q->computed;
    cr_assert(q->computed % BS == 0 && q->computed < q->len);
    q->live = 1;
}

static void op_append(tram_block_manager *bm, sim_seq *q)
{
    int upto = q->computed + 1 + rand() % 6;
    if (upto > q->len)
        upto = q->len;
    if (tram_bm_blocks_needed(bm, &q->t, upto) > tram_bm_num_free(bm)) {
        cr_assert_eq(tram_bm_grow(bm, &q->t, upto), -1);
        return;
    }
    compute(bm, q, upto);
}

/* Speculation: the next token and k drafts after it are computed, the first
 * `accepted` drafts being the sequence's tokens and the others wrong (their
 * slots get KV of no token, -2); then the rollback: computed stops after the
 * accepted ones, and blocks past the next token go back. */
static void op_speculate(tram_block_manager *bm, sim_seq *q)
{
    int k = 1 + rand() % 5, upto = q->computed + 1 + k;
    if (upto > MAXTOK || tram_bm_blocks_needed(bm, &q->t, upto) > tram_bm_num_free(bm))
        return;
    int accepted = rand() % (k + 1), keep = TRAM_MIN(q->computed + 1 + accepted, q->len);
    cr_assert_eq(tram_bm_grow(bm, &q->t, upto), 0);
    for (int p = q->computed; p < upto; p++) {
        int b = q->t.blocks[p / BS];
        cr_assert_eq(tram_bm_ref_count(bm, b), 1, "draft written into shared block %d", b);
        shadow[b][p % BS] = p < keep ? q->tokens[p] : -2;
    }
    q->computed = keep;
    tram_bm_commit(bm, &q->t, q->tokens, keep);
    int next = TRAM_MIN(keep + 1, q->len);
    tram_bm_truncate(bm, &q->t, next);
    cr_assert_eq(q->t.num_blocks, (TRAM_MIN(next, upto) + BS - 1) / BS, "blocks past the next token stay");
}

static int speculating; /* the suite with speculation mixes op_speculate in */

static void op_fork(tram_block_manager *bm, const sim_seq *parent, sim_seq *child)
{
    int nblocks = TRAM_MIN(parent->computed / BS, CAP - 1);
    tram_bm_fork(bm, &parent->t, &child->t, nblocks);
    child->len = nblocks * BS + 1 + rand() % (MAXTOK - nblocks * BS);
    memcpy(child->tokens, parent->tokens, sizeof(child->tokens));
    for (int p = nblocks * BS; p < child->len; p++)
        child->tokens[p] = rand() % 4;
    child->computed = nblocks * BS;
    child->live = 1;
}

static void random_op(tram_block_manager *bm, sim_seq *s)
{
    sim_seq *q = &s[rand() % NSEQ];
    int r = rand() % 10;
    if (!q->live && r < 5) {
        op_new(bm, q);
    } else if (!q->live) {
        sim_seq *p = &s[rand() % NSEQ];
        if (p->live)
            op_fork(bm, p, q);
    } else if (r < 7 && q->computed < q->len) {
        if (speculating && rand() % 2)
            op_speculate(bm, q);
        else
            op_append(bm, q);
    } else if (r < 9 || q->computed == q->len) {
        tram_bm_release(bm, &q->t);
        q->live = 0;
    }
}

static void randomized_ops(int n_ops)
{
    srand(1234);
    for (int d = 0; d < NDOCS; d++)
        for (int p = 0; p < MAXTOK; p++)
            docs[d][p] = rand() % 4;
    memset(shadow, -1, sizeof(shadow));
    tram_error err = {{0}};
    tram_block_manager *bm;
    cr_assert_eq(tram_bm_create(&bm, NB, BS, 1, 42, &err), 0, "%s", err.msg);
    sim_seq s[NSEQ];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < NSEQ; i++)
        cr_assert_eq(tram_block_table_init(&s[i].t, CAP, &err), 0);
    for (int n = 0; n < n_ops; n++) {
        random_op(bm, s);
        check_all(bm, s);
    }
    cr_assert_gt(hit_tokens, 1000, "the test must exercise cache hits");
    for (int i = 0; i < NSEQ; i++) {
        tram_bm_release(bm, &s[i].t);
        tram_block_table_free(&s[i].t);
    }
    cr_assert_eq(tram_bm_num_free(bm), NB);
    tram_bm_destroy(bm);
}

Test(block_manager, randomized_100k_ops) { randomized_ops(100000); }

/* Rejected drafts leave KV in their slots; after the rollback no cache hit
 * may ever serve it, and the counts stay those of the live tables. */
Test(block_manager, randomized_ops_with_speculation)
{
    speculating = 1;
    randomized_ops(50000);
}

Test(block_manager, lru_evicts_least_recently_freed)
{
    tram_error err;
    tram_block_manager *bm;
    cr_assert_eq(tram_bm_create(&bm, 4, 2, 1, 7, &err), 0);
    tram_block_table a, b, c;
    tram_block_table_init(&a, 4, &err);
    tram_block_table_init(&b, 4, &err);
    tram_block_table_init(&c, 4, &err);
    int32_t ta[] = {1, 2, 3, 4, 9}, tb[] = {5, 6, 7, 8, 9};
    cr_assert_eq(tram_bm_grow(bm, &a, 4), 0);
    tram_bm_commit(bm, &a, ta, 4);
    cr_assert_eq(tram_bm_grow(bm, &b, 4), 0);
    tram_bm_commit(bm, &b, tb, 4);
    tram_bm_release(bm, &a); /* a's blocks are now the least recently used */
    tram_bm_release(bm, &b);
    cr_assert_eq(tram_bm_num_cached(bm), 4);
    cr_assert_eq(tram_bm_grow(bm, &c, 4), 0); /* evicts a's two blocks */
    tram_bm_release(bm, &c);
    cr_assert_eq(tram_bm_match_prefix(bm, &a, ta, 5), 0);
    cr_assert_eq(tram_bm_match_prefix(bm, &b, tb, 5), 4);
    tram_bm_release(bm, &b);
    /* a hit needs the same tokens, not only the same hash chain start */
    int32_t tb2[] = {5, 6, 7, 0, 9};
    cr_assert_eq(tram_bm_match_prefix(bm, &b, tb2, 5), 2);
    tram_bm_release(bm, &b);
    cr_assert_eq(tram_bm_check(bm, &err), 0, "%s", err.msg);
    tram_block_table_free(&a);
    tram_block_table_free(&b);
    tram_block_table_free(&c);
    tram_bm_destroy(bm);
}
