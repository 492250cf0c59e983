/* The engine thread's hand-off (server/worker.c): submissions are accepted
 * or rejected, each request's outputs arrive in order, after its ACCEPTED,
 * and carry what the engine makes on its own, although the events are given
 * back and reused all along; stopping with requests in flight frees them. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "server/worker.h"
#include "tests/unit/test_util.h"

#define NREQ 3
#define NTOK 12

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wakes;
} waker;

/* A worker under test, with what it keeps pointers to. */
typedef struct {
    tram_engine_config config;
    tram_sampling_params params;   /* of every request */
    waker k;
    int seen;                      /* wake-ups taken */
    tram_worker *w;
} harness;

static void wake(void *arg)
{
    waker *k = arg;
    pthread_mutex_lock(&k->mu);
    k->wakes++;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

/* Waits for a wake-up newer than the last one taken and takes the events. */
static tram_event *next_events(harness *h)
{
    pthread_mutex_lock(&h->k.mu);
    while (h->k.wakes == h->seen)
        pthread_cond_wait(&h->k.cv, &h->k.mu);
    h->seen = h->k.wakes;
    pthread_mutex_unlock(&h->k.mu);
    return tram_worker_take_events(h->w);
}

static tram_engine_config config(void)
{
    tram_engine_config c;
    tram_engine_config_init(&c);
    c.num_threads = 1;
    c.max_model_len = 256;
    c.kv_cache_memory = (size_t)32 << 20;
    c.max_num_seqs = 8;
    return c;
}

static const char *const prompts[NREQ] = {"The cat is known for", "Every river loves", "Paris"};

/* The text each prompt gets from the engine stepped directly. */
static void expected_texts(char out[NREQ][256])
{
    tram_engine_config c = config();
    tram_sampling_params p = test_greedy_params(NTOK);
    tram_engine *e = test_engine_create(&c, TRAM_DEFAULT_MODEL);
    for (int i = 0; i < NREQ; i++) {
        test_add_request(e, (uint64_t)i, (tram_prompt){.text = prompts[i]}, &p);
        out[i][0] = 0;
    }
    while (tram_engine_has_unfinished(e)) {
        const tram_output *o;
        int n = test_step(e, &o);
        for (int j = 0; j < n; j++)
            strncat(out[o[j].request_id], o[j].text, 255 - strlen(out[o[j].request_id]));
    }
    tram_engine_destroy(e);
}

/* Requests 0..NREQ-1 from prompts, then one with a token outside the vocabulary. */
static void submit_all(tram_worker *w, const tram_sampling_params *p)
{
    static const int32_t bad = 1 << 30;
    tram_submission *list = NULL;
    for (int i = NREQ; i >= 0; i--) {
        tram_submission *s = malloc(sizeof(*s));
        cr_assert(s);
        *s = (tram_submission){
            .next = list,
            .request_id = (uint64_t)i,
            .prompt = i < NREQ ? (tram_prompt){.text = prompts[i]}
                               : (tram_prompt){.token_ids = &bad, .num_tokens = 1},
            .params = p,
        };
        list = s;
    }
    tram_worker_submit(w, list);
}

/* Starts a worker, waits until it is READY and submits every request. */
static void start_with_requests(harness *h)
{
    *h = (harness){.config = config(), .params = test_greedy_params(NTOK)};
    pthread_mutex_init(&h->k.mu, NULL);
    pthread_cond_init(&h->k.cv, NULL);
    tram_worker_config wc = {.engine = &h->config,
                             .model_path = TRAM_DEFAULT_MODEL,
                             .max_queue = 4,
                             .notify = wake,
                             .notify_arg = &h->k};
    tram_error err = {{0}};
    cr_assert_eq(tram_worker_start(&h->w, &wc, &err), 0, "%s", err.msg);
    tram_event *ev = next_events(h);
    cr_assert(ev && ev->kind == TRAM_EV_READY && !ev->next);
    tram_worker_give_back(h->w, ev);
    submit_all(h->w, &h->params);
}

Test(server_worker, outputs_in_order_through_reused_events, .timeout = 120)
{
    char want[NREQ][256], got[NREQ][256] = {{0}};
    expected_texts(want);
    harness h;
    start_with_requests(&h);
    int accepted[NREQ] = {0}, tokens[NREQ] = {0}, rejected = 0, finished = 0, events = 0;
    while (finished < NREQ || !rejected) {
        tram_event *list = next_events(&h);
        for (tram_event *ev = list; ev; ev = ev->next, events++) {
            int id = (int)ev->request_id;
            if (ev->kind == TRAM_EV_REJECTED) {
                cr_assert_eq(id, NREQ);
                cr_assert_eq(ev->error.status, 400);
                rejected = 1;
                continue;
            }
            cr_assert(id >= 0 && id < NREQ, "event for request %d", id);
            if (ev->kind == TRAM_EV_ACCEPTED) {
                cr_assert_eq(accepted[id]++, 0, "request %d accepted twice", id);
                continue;
            }
            cr_assert_eq(ev->kind, TRAM_EV_OUTPUT);
            cr_assert(accepted[id], "request %d: an output before ACCEPTED", id);
            cr_assert_eq(ev->out.num_tokens, 1);
            cr_assert_eq(ev->out.completion_tokens, ++tokens[id], "request %d out of order", id);
            strncat(got[id], ev->out.text, 255 - strlen(got[id]));
            finished += ev->out.finish_reason != TRAM_FINISH_NONE;
        }
        tram_worker_give_back(h.w, list);
    }
    for (int i = 0; i < NREQ; i++) {
        cr_assert_eq(tokens[i], NTOK);
        cr_assert_str_eq(got[i], want[i], "request %d", i);
    }
    cr_assert_geq(events, NREQ * (NTOK + 1) + 1);
    tram_worker_stop(h.w);
}

/* Under ASan this also checks that queued events and requests are freed. */
Test(server_worker, stop_with_requests_in_flight, .timeout = 120)
{
    harness h;
    start_with_requests(&h);
    tram_worker_give_back(h.w, next_events(&h));
    cr_assert_eq(tram_worker_abort(h.w, 0), 0);
    tram_worker_stop(h.w);
}
