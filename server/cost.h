/* cost.h — what serving costs, from --cost-per-hour: a running total and the
 * cost per 1k output tokens and per 1k requests over a sliding window.
 *
 * The server samples its counters (tokens and requests served) as time
 * passes; the window's figures divide the cost of the time between the
 * oldest sample inside the window and now by what was served in it.  Cache
 * hits count as served, so the response cache shows up as a lower cost per
 * request.  Plain data on the event-loop thread. */
#ifndef TRAM_COST_H
#define TRAM_COST_H

#define TRAM_COST_SAMPLES 64   /* per window */

typedef struct {
    double t, tokens, requests;
} tram_cost_sample;

typedef struct {
    double per_hour;           /* dollars; 0: no cost metrics */
    double window;             /* seconds */
    double start;              /* when the cost began to run */
    tram_cost_sample ring[TRAM_COST_SAMPLES];
    int head, count;           /* head: the newest */
} tram_cost;

void tram_cost_init(tram_cost *c, double per_hour, double window, double now);
/* Records the counters at time now, at most TRAM_COST_SAMPLES times a window. */
void tram_cost_observe(tram_cost *c, double now, double tokens, double requests);
/* Dollars since start. */
double tram_cost_total(const tram_cost *c, double now);
/* Dollars per 1k tokens and per 1k requests over the window ending now, given
 * the counters now; NaN when nothing was served in it (or no sample is old
 * enough yet). */
void tram_cost_window(const tram_cost *c, double now, double tokens, double requests,
                      double *per_1k_tokens, double *per_1k_requests);

#endif
