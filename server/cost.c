#include "server/cost.h"

#include <math.h>
#include <string.h>

void tram_cost_init(tram_cost *c, double per_hour, double window, double now)
{
    memset(c, 0, sizeof(*c));
    c->per_hour = per_hour;
    c->window = window;
    c->start = now;
    c->head = -1;
}

void tram_cost_observe(tram_cost *c, double now, double tokens, double requests)
{
    if (c->count && now - c->ring[c->head].t < c->window / TRAM_COST_SAMPLES)
        return;
    c->head = (c->head + 1) % TRAM_COST_SAMPLES;
    c->ring[c->head] = (tram_cost_sample){.t = now, .tokens = tokens, .requests = requests};
    if (c->count < TRAM_COST_SAMPLES)
        c->count++;
}

double tram_cost_total(const tram_cost *c, double now)
{
    return c->per_hour * (now - c->start) / 3600.0;
}

/* The oldest sample no older than the window, or NULL. */
static const tram_cost_sample *window_start(const tram_cost *c, double now)
{
    const tram_cost_sample *found = NULL;
    for (int k = 0; k < c->count; k++) {
        const tram_cost_sample *s =
            &c->ring[(c->head - k + TRAM_COST_SAMPLES) % TRAM_COST_SAMPLES];
        if (now - s->t > c->window)
            break;
        found = s;
    }
    return found;
}

static double per_1k(double dollars, double served)
{
    return served > 0 ? dollars / (served / 1000.0) : NAN;
}

void tram_cost_window(const tram_cost *c, double now, double tokens, double requests,
                      double *per_1k_tokens, double *per_1k_requests)
{
    const tram_cost_sample *s = window_start(c, now);
    double dollars = s ? c->per_hour * (now - s->t) / 3600.0 : 0;
    *per_1k_tokens = s ? per_1k(dollars, tokens - s->tokens) : NAN;
    *per_1k_requests = s ? per_1k(dollars, requests - s->requests) : NAN;
}
