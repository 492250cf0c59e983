/* output_check.h — finished outputs checked against their JSON Schema
 * (grammar/json_validate.h) on a thread of their own, since a check costs
 * what the output and the schema make it cost and the event loop only does
 * I/O.  A check is queued with the text and a callback; the callback runs
 * on the loop thread when the verdict is in. */
#ifndef TRAM_SERVER_OUTPUT_CHECK_H
#define TRAM_SERVER_OUTPUT_CHECK_H

#include <stddef.h>

#include "grammar/json_validate.h"

struct event_base;

typedef struct tram_output_checker tram_output_checker;
typedef struct tram_check_ticket tram_check_ticket;

/* verdict: tram_jv_check's (0 valid, 1 invalid, -1 no verdict); f says
 * why when it is not 0. */
typedef void (*tram_check_done)(void *arg, int verdict, const tram_jv_failure *f);

/* Starts the thread; its results are delivered through base. */
int tram_output_checker_start(struct event_base *base, tram_output_checker **out, tram_error *err);

/* Stops the thread; checks not yet delivered are dropped (their callbacks
 * never run). */
void tram_output_checker_stop(tram_output_checker *k);

/* Queues a check of text[0..len) (copied) against s (retained until the
 * check ends).  Returns the ticket, or NULL when out of memory. */
tram_check_ticket *tram_output_check(tram_output_checker *k, tram_jv_schema *s, const char *text, size_t len,
                                     tram_check_done done, void *arg);

/* The caller is gone: the callback will not run.  Loop thread only. */
void tram_output_check_cancel(tram_check_ticket *t);

#endif
