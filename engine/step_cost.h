/* step_cost.h — what a decode step costs by its token count, and a draft
 * model's pass by its tokens, as measured: the lines the automatic rule of
 * speculative decoding prices drafts with (engine/spec.h states the rule). */
#ifndef TRAM_STEP_COST_H
#define TRAM_STEP_COST_H

/* Step sizes, in tokens, whose own departure from the line is kept. */
#define TRAM_STEP_COST_SIZES 512

/* Recent decode steps' seconds as a line in their token count, t = a + b n,
 * least squares with older steps forgotten (engine.c measures).  The last
 * line fitted stays in force while recent steps are too alike to fit one
 * (when the rule declines every draft, the steps are all one size).  The
 * product is not linear in its rows (bench/results/verify-gemm.md: the
 * lm_head's 1, 2, 5 and 9 rows cost 10, 16, 21 and 33 ms, and from 13 rows
 * another kernel takes over), so each size also keeps what its own steps
 * measured above or below the line: at batch 4 a step of 5 tokens cost 20%
 * more than one of 4 where the line said 10% (a trace under load), and
 * the rule, verifying one draft that paid on the line, lost by it.  A
 * size's departure is the median of its last three steps' (the lesser of
 * two, or its one): noise only ever adds time (a neighbour's burst, a
 * descheduled thread), and one spike must not price a size for good.  With
 * a decayed mean, one plain step at batch 32 measured 300 ms slow where its
 * fellows took 105 kept the self-draft verifying a draft a step, which lost
 * 7%, for the rest of the run: the rule never ran that size again. */
#define TRAM_STEP_COST_SAMPLES 3
typedef struct {
    double w, n, t, nn, nt;    /* decayed sums of 1, n, t, n^2, n t */
    double a, b;               /* the last line fitted */
    /* per size below TRAM_STEP_COST_SIZES, the seconds above the line of
     * its last steps since the line was fitted, newest first, and how many */
    float off[TRAM_STEP_COST_SIZES][TRAM_STEP_COST_SAMPLES];
    unsigned char off_n[TRAM_STEP_COST_SIZES];
    int fitted;                /* a line has been fitted */
    int small;                 /* the last step asked about was a `few` one
                                  (tram_step_cost_drafts) */
} tram_step_cost;

void tram_step_cost_add(tram_step_cost *c, int tokens, double seconds);
/* 1 with a and b set once a line has been fitted; 0 before (the rule then
 * lets every draft through, which is what makes the steps vary). */
int tram_step_cost_line(const tram_step_cost *c, double *a, double *b);
/* T(n), once a line is fitted: the line at n plus what steps of n tokens
 * measured above it (the median of their last three; nothing for a size
 * not measured). */
double tram_step_cost_at(const tram_step_cost *c, double n);
/* The most drafts of the step about to be scheduled: no limit (INT_MAX)
 * once a line is fitted; before, every other step `few` and the others
 * `many`, so that the line sees steps of two sizes.  Without them a batch
 * whose every step drafts alike would never learn what its drafts cost,
 * and would keep them however slow.  The scheduler applies it in all for
 * guesses without a model, 1 and k: at batch 32, up to k guesses each made
 * each measuring step 3.3 times a plain one, which free text never gets
 * back (most of n-gram's loss there, bench/results/spec.md), while k in all
 * cost a few percent of the step and still give the line two sizes (one
 * guess, not none, in the other steps: at batch 1 a step without drafts
 * costs nearly what one with a draft does, and yields less).  For a draft
 * model, whose passes all of a step's sequences share, it applies per
 * sequence, 0 and just enough for the sizes to differ: the line then
 * knows the step without drafts, which the rule's every choice is against
 * (fitted on steps of 1 and 2 drafts each at batch 32, it put a plain step
 * at 410 ms where it measured 310, and the rule verified drafts that lost
 * for eight steps). */
int tram_step_cost_drafts(tram_step_cost *c, int few, int many);

/* What a step pays beyond its tokens' line: a draft model's passes,
 * `fixed` seconds committed so far and `per_draft` more for each draft
 * verified.  NULL where an argument takes one: nothing. */
typedef struct {
    double fixed, per_draft;
} tram_draft_price;

/* A pass of m tokens, as measured by `pass` (a tram_step_cost of pass
 * tokens): the line once fitted, before it the mean pass (the measuring
 * steps' passes are all of one size); 0 for no tokens or none measured. */
double tram_pass_cost_at(const tram_step_cost *pass, double m);

/* The price of a step of depth D: its D passes' shared part paid, p1 a
 * draft; for D = 0, a sequence that verifies a draft anyway (a probe, or a
 * lone draft that pays) pays a whole pass of its own. */
tram_draft_price tram_pass_price(const tram_step_cost *pass, int depth);

#endif
