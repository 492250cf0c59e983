/* step_cost.c — the measured cost of a step and of a draft model's pass,
 * for speculation's automatic rule (see step_cost.h). */
#include "engine/step_cost.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "kernels/base.h"

/* A step's time counts for a twentieth of the line. */
#define COST_DECAY 0.95
/* Below this variance of the recent token counts the line is not refitted:
 * steps a token or two apart (batch 32 alternating 32 and 33 tokens) have a
 * slope the step time's noise swamps (measured under load: intercept -233
 * ms, slope 15 ms a token, for a 250 ms step). */
#define COST_MIN_VARIANCE 2.0
/* Nor from fewer steps than this (by decayed weight): two would fit any noise. */
#define COST_MIN_WEIGHT 3.5

/* The least-squares line of the decayed sums, or 0 when they do not fit
 * one: too few steps, too alike, or a slope below 0, which only noise gives
 * (more tokens never cost less) and which would make drafts look free. */
static int fit_line(const tram_step_cost *c, double *a, double *b)
{
    if (c->w < COST_MIN_WEIGHT)
        return 0;
    double mn = c->n / c->w, mt = c->t / c->w, var = c->nn / c->w - mn * mn;
    if (var < COST_MIN_VARIANCE)
        return 0;
    double slope = (c->nt / c->w - mn * mt) / var;
    if (slope < 0)
        return 0;
    *b = slope;
    *a = mt - slope * mn;
    return 1;
}

void tram_step_cost_add(tram_step_cost *c, int tokens, double seconds)
{
    double n = tokens;
    c->w = c->w * COST_DECAY + 1;
    c->n = c->n * COST_DECAY + n;
    c->t = c->t * COST_DECAY + seconds;
    c->nn = c->nn * COST_DECAY + n * n;
    c->nt = c->nt * COST_DECAY + n * seconds;
    c->fitted |= fit_line(c, &c->a, &c->b);
    if (c->fitted && tokens >= 0 && tokens < TRAM_STEP_COST_SIZES) {
        float *off = c->off[tokens];
        memmove(off + 1, off, (TRAM_STEP_COST_SAMPLES - 1) * sizeof(*off));
        off[0] = (float)(seconds - (c->a + c->b * n));
        c->off_n[tokens] = (unsigned char)TRAM_MIN(c->off_n[tokens] + 1, TRAM_STEP_COST_SAMPLES);
    }
}

/* What a size's steps measured above the line: the median of three, the
 * lesser of two (step_cost.h). */
static double size_departure(const tram_step_cost *c, int size)
{
    const float *off = c->off[size];
    switch (c->off_n[size]) {
    case 0:
        return 0;
    case 1:
        return off[0];
    case 2:
        return fmin(off[0], off[1]);
    default:
        return fmax(fmin(off[0], off[1]), fmin(fmax(off[0], off[1]), off[2]));
    }
}

double tram_step_cost_at(const tram_step_cost *c, double n)
{
    double t = c->a + c->b * n;
    int size = (int)n;
    if (size >= 0 && size < TRAM_STEP_COST_SIZES)
        t += size_departure(c, size);
    return t;
}

int tram_step_cost_line(const tram_step_cost *c, double *a, double *b)
{
    *a = c->a;
    *b = c->b;
    return c->fitted;
}

int tram_step_cost_drafts(tram_step_cost *c, int few, int many)
{
    c->small = !c->fitted && !c->small;
    return c->fitted ? INT_MAX : c->small ? few : many;
}

double tram_pass_cost_at(const tram_step_cost *pass, double m)
{
    if (m <= 0 || pass->w <= 0)
        return 0;
    return pass->fitted ? fmax(0, tram_step_cost_at(pass, m)) : pass->t / pass->w;
}

tram_draft_price tram_pass_price(const tram_step_cost *pass, int depth)
{
    double p0 = pass->fitted ? fmax(0, pass->a) : tram_pass_cost_at(pass, 1);
    double p1 = pass->fitted ? pass->b : 0;
    return depth > 0 ? (tram_draft_price){.fixed = depth * p0, .per_draft = p1}
                     : (tram_draft_price){.per_draft = p0 + p1};
}
