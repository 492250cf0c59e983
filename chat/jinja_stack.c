/* jinja_stack.c — parses and renders run on a thread of their own, with the
 * stack the interpreter's depth limits are derived from (JJ_STACK_BYTES in
 * jinja_impl.h): the caller's thread may have far less (a main thread under
 * `ulimit -s 2048`, a pool worker), and a deep template must end in an
 * error, never in a stack overflow.  The stack is mapped, not touched: a
 * shallow render uses a few pages of it. */
#include <pthread.h>
#include <string.h>

#include "chat/jinja_impl.h"

typedef struct {
    void (*fn)(void *);
    void *arg;
} sized_call;

static void *run_call(void *p)
{
    sized_call *c = p;
    c->fn(c->arg);
    return NULL;
}

int jj_run_sized(void (*fn)(void *), void *arg, tram_error *err)
{
    sized_call c = {fn, arg};
    pthread_attr_t attr;
    pthread_t thread;
    int rc = pthread_attr_init(&attr);
    if (!rc) {
        rc = pthread_attr_setstacksize(&attr, JJ_STACK_BYTES);
        if (!rc)
            rc = pthread_create(&thread, &attr, run_call, &c);
        pthread_attr_destroy(&attr);
    }
    if (rc)
        return tram_fail(err, "chat template: cannot start a thread with a %u MiB stack for the template (%s)",
                         JJ_STACK_BYTES >> 20, strerror(rc));
    pthread_join(thread, NULL);
    return 0;
}
