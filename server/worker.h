/* worker.h — the engine thread and the two queues that connect it to the
 * event loop.
 *
 * The loop thread submits requests and aborts; the engine thread owns the
 * tram_engine, adds what was submitted, runs steps while anything is
 * unfinished and posts events back: a deep copy of every output, whether each
 * request was accepted, and when the engine became ready or failed.  After
 * posting it calls notify(), which must be safe from any thread (the server
 * writes an eventfd that its event loop polls).  The engine thread takes no lock that the loop
 * thread holds while it has running requests, notifies only when the loop
 * thread has taken every earlier event, and reuses the events the loop thread
 * gives back, so a decode step neither blocks on nor allocates for the HTTP
 * side. */
#ifndef TRAM_WORKER_H
#define TRAM_WORKER_H

#include <stdint.h>

#include "engine/tram.h"
#include "server/api_error.h"

typedef enum {
    TRAM_EV_READY,      /* the engine is loaded */
    TRAM_EV_FAILED,     /* loading or a step failed: the engine is gone */
    TRAM_EV_ACCEPTED,   /* request_id was added to the engine */
    TRAM_EV_REJECTED,   /* request_id was not added; see error */
    TRAM_EV_OUTPUT,     /* one tram_output */
} tram_event_kind;

typedef struct tram_event {
    struct tram_event *next;
    tram_event_kind kind;
    uint64_t request_id;
    tram_api_error error;   /* REJECTED, FAILED */
    tram_output out;        /* OUTPUT: every pointer points into this event */
    size_t cap;             /* payload bytes after the struct (the worker's) */
} tram_event;

/* One request to add, or (abort set) one to abort.  The prompt and params
 * must stay valid until the request's ACCEPTED or REJECTED event. */
typedef struct tram_submission {
    struct tram_submission *next;
    int abort;
    uint64_t request_id;
    tram_prompt prompt;
    const tram_sampling_params *params;
    const tram_embed_params *embed;   /* an embedding request (params unused); NULL: a generation */
    int priority;
} tram_submission;

typedef struct tram_worker tram_worker;

typedef struct {
    const tram_engine_config *engine;
    const char *model_path;
    const char *const *lora_modules;  /* "name=path" adapters registered once the model is loaded */
    int num_lora_modules;
    int max_queue;            /* requests allowed to wait; more are rejected with 503 */
    void (*notify)(void *arg);
    void *notify_arg;
} tram_worker_config;

/* Starts the engine thread, which loads the model (READY or FAILED follows). */
int tram_worker_start(tram_worker **out, const tram_worker_config *c, tram_error *err);
/* Stops the thread (abandoning whatever is unfinished), destroys the engine
 * and frees every queued submission and event. */
void tram_worker_stop(tram_worker *w);

/* The engine once READY, else NULL; only its any-thread functions may be used
 * (see engine/tram.h). */
const tram_engine *tram_worker_engine(const tram_worker *w);

/* Queues a list of submissions (linked by next, freed by the worker) as one
 * batch: the engine thread handles all of them before its next step. */
void tram_worker_submit(tram_worker *w, tram_submission *list);
/* n (>= 1) zeroed submissions linked by next, for the caller to fill and
 * hand to tram_worker_submit; NULL when out of memory (none is left). */
tram_submission *tram_worker_new_submissions(int n);
/* Allocates and queues an abort; returns -1 when out of memory. */
int tram_worker_abort(tram_worker *w, uint64_t request_id);

/* Any thread: seconds the engine thread has spent in steps since it started
 * (the engine's utilization is the rate of this). */
double tram_worker_busy_seconds(const tram_worker *w);

/* Takes every posted event, oldest first.  Give them back when done. */
tram_event *tram_worker_take_events(tram_worker *w);
/* Returns a list of taken events (linked by next) for reuse. */
void tram_worker_give_back(tram_worker *w, tram_event *list);

#endif
