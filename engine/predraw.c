/* predraw.c — see predraw.h. */
#include "engine/predraw.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* At most this many threads draw at once: more samplers than the bits of
 * the free mask would never be claimed. */
enum { MAX_DRAWERS = 32 };

struct tram_predraw {
    tram_backend *be;
    int samplers;
    tram_sampler *sampler[MAX_DRAWERS];
    atomic_uint busy; /* bit i: sampler i is drawing */
};

int tram_predraw_create(tram_predraw **out, tram_backend *be, int vocab, tram_error *err)
{
    *out = NULL;
    int threads = be->host_run && be->host_threads ? be->host_threads(be) : 1;
    if (threads < 2)
        return 0;
    tram_predraw *p = tram_calloc(1, sizeof(*p), err);
    if (!p)
        return -1;
    p->be = be;
    p->samplers = TRAM_MIN(threads, MAX_DRAWERS);
    for (int i = 0; i < p->samplers; i++)
        if (tram_sampler_create(&p->sampler[i], vocab, err)) {
            tram_predraw_destroy(p);
            return -1;
        }
    *out = p;
    return 0;
}

void tram_predraw_destroy(tram_predraw *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->samplers; i++)
        tram_sampler_destroy(p->sampler[i]);
    free(p);
}

/* A sampler no other thread is drawing with.  The pool runs at most
 * `samplers` chunks at once (its threads), so one is always free; the wait
 * only covers a thread that has not yet cleared its bit. */
static int claim(tram_predraw *p)
{
    for (;;) {
        unsigned busy = atomic_load(&p->busy);
        for (int i = 0; i < p->samplers; i++)
            if (!(busy & (1u << i)) && atomic_compare_exchange_weak(&p->busy, &busy, busy | (1u << i)))
                return i;
        sched_yield();
    }
}

typedef struct {
    tram_predraw *p;
    const tram_draw *draws;
} draw_job;

static void draw_chunk(void *arg, int begin, int end)
{
    const draw_job *j = arg;
    int i = claim(j->p);
    for (int d = begin; d < end; d++)
        *j->draws[d].out = tram_sample(j->p->sampler[i], j->draws[d].row, &j->draws[d].in);
    atomic_fetch_and(&j->p->busy, ~(1u << i));
}

/* One draw a chunk: a thread descheduled in the middle holds one draw, not
 * its share.  Not a stealable job (pool.h): a late thread would go on
 * reading a sequence's tokens after the step that owns them has moved on. */
void tram_predraw_run(tram_predraw *p, const tram_draw *draws, int n)
{
    draw_job j = {.p = p, .draws = draws};
    p->be->host_run(p->be, n, 1, draw_chunk, &j);
}
