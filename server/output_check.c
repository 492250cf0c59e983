/* output_check.c — the schema-check thread (see output_check.h).  Tickets
 * move from the queue (loop thread to checker) to the done list (checker to
 * loop thread), both under one mutex; an event made active from the checker
 * tells the loop to deliver the done list.  A ticket belongs to the checker
 * until its callback runs, so a caller that leaves only marks it. */
#include "server/output_check.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct tram_check_ticket {
    tram_check_ticket *next;
    tram_jv_schema *schema;
    char *text;
    size_t len;
    tram_check_done done;
    void *arg;
    int cancelled;
    int verdict;
    tram_jv_failure failure;
};

struct tram_output_checker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    tram_check_ticket *queue, **queue_tail, *finished;
    int stopping;
    struct event *deliver;
};

static void ticket_free(tram_check_ticket *t)
{
    tram_jv_free(t->schema);
    free(t->text);
    free(t);
}

static void free_list(tram_check_ticket *t)
{
    while (t) {
        tram_check_ticket *next = t->next;
        ticket_free(t);
        t = next;
    }
}

static void *checker_main(void *arg)
{
    tram_output_checker *k = arg;
    pthread_mutex_lock(&k->lock);
    for (;;) {
        while (!k->queue && !k->stopping)
            pthread_cond_wait(&k->wake, &k->lock);
        if (k->stopping)
            break;
        tram_check_ticket *t = k->queue;
        k->queue = t->next;
        if (!k->queue)
            k->queue_tail = &k->queue;
        pthread_mutex_unlock(&k->lock);
        t->verdict = tram_jv_check(t->schema, t->text, t->len, &t->failure);
        pthread_mutex_lock(&k->lock);
        t->next = k->finished;
        k->finished = t;
        event_active(k->deliver, EV_READ, 0);
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

/* On the loop thread: every finished ticket's callback, then the ticket. */
static void on_deliver(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    tram_output_checker *k = arg;
    pthread_mutex_lock(&k->lock);
    tram_check_ticket *t = k->finished;
    k->finished = NULL;
    pthread_mutex_unlock(&k->lock);
    while (t) {
        tram_check_ticket *next = t->next;
        if (!t->cancelled)
            t->done(t->arg, t->verdict, &t->failure);
        ticket_free(t);
        t = next;
    }
}

int tram_output_checker_start(struct event_base *base, tram_output_checker **out, tram_error *err)
{
    tram_output_checker *k = tram_calloc(1, sizeof(*k), err);
    if (!k)
        return -1;
    k->queue_tail = &k->queue;
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->wake, NULL);
    if (!(k->deliver = event_new(base, -1, 0, on_deliver, k)) || pthread_create(&k->thread, NULL, checker_main, k)) {
        if (k->deliver)
            event_free(k->deliver);
        free(k);
        return tram_fail(err, "cannot start the schema-check thread");
    }
    *out = k;
    return 0;
}

void tram_output_checker_stop(tram_output_checker *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    k->stopping = 1;
    pthread_cond_signal(&k->wake);
    pthread_mutex_unlock(&k->lock);
    pthread_join(k->thread, NULL);
    free_list(k->queue);
    free_list(k->finished);
    event_free(k->deliver);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->wake);
    free(k);
}

tram_check_ticket *tram_output_check(tram_output_checker *k, tram_jv_schema *s, const char *text, size_t len,
                                     tram_check_done done, void *arg)
{
    tram_check_ticket *t = calloc(1, sizeof(*t));
    if (!t || !(t->text = malloc(len + 1))) {
        free(t);
        return NULL;
    }
    memcpy(t->text, text, len);
    t->text[len] = 0;
    t->len = len;
    t->schema = tram_jv_retain(s);
    t->done = done;
    t->arg = arg;
    pthread_mutex_lock(&k->lock);
    *k->queue_tail = t;
    k->queue_tail = &t->next;
    pthread_cond_signal(&k->wake);
    pthread_mutex_unlock(&k->lock);
    return t;
}

void tram_output_check_cancel(tram_check_ticket *t)
{
    t->cancelled = 1;
}
