#include "server/preload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/batch_line.h"
#include "server/completion.h"
#include "server/log.h"

/* Preload requests in flight at once: enough to batch, far below --max-queue. */
#define PRELOAD_WINDOW 4

/* Two tokens: the prefill's and one decode step's.  A prompt shorter than a
 * KV block leaves nothing in the prefix cache, so the first client's
 * cached_tokens are its own. */
static const char warmup_body[] =
    "{\"prompt\": \"Hello\", \"max_tokens\": 2, \"temperature\": 0, \"response_cache\": false}";

typedef struct {
    struct tram_preload *owner;
    int line;                  /* 0: the warm-up */
    tram_api_kind kind;
    char *body;
} preload_item;

struct tram_preload {
    char *path;
    preload_item *items;       /* [0] is the warm-up */
    int n, next, in_flight;
    int pumping, failed, reported;
    tram_server *srv;
    void (*ready)(tram_server *);
    void (*fail)(tram_server *);
};

static int line_error(const char *path, int line, const char *what)
{
    tram_log(TRAM_LOG_ERROR, "%s:%d: %s", path, line, what);
    return -1;
}

/* One line into item: its endpoint and body (batch_line.h's forms). */
static int parse_line(const char *path, int line, const char *text, preload_item *item)
{
    tram_batch_line l;
    tram_api_error e = {0};
    int rc = tram_batch_line_parse(text, strlen(text), &l, &e);
    if (rc)
        line_error(path, line, e.message);
    item->kind = l.kind;
    item->body = l.body;
    item->line = line;
    l.body = NULL;
    tram_batch_line_free(&l);
    return rc;
}

static int add_item(tram_preload *p, preload_item item)
{
    preload_item *items = realloc(p->items, (size_t)(p->n + 1) * sizeof(*items));
    if (!items) {
        free(item.body);
        return -1;
    }
    p->items = items;
    p->items[p->n++] = item;
    return 0;
}

static int read_lines(tram_preload *p, FILE *f)
{
    char *text = NULL;
    size_t cap = 0;
    int rc = 0;
    for (int line = 1; rc == 0 && getline(&text, &cap, f) >= 0; line++) {
        if (strspn(text, " \t\r\n") == strlen(text))
            continue;
        preload_item item = {.owner = p};
        rc = parse_line(p->path, line, text, &item) || add_item(p, item) ? -1 : 0;
    }
    free(text);
    return rc;
}

void tram_preload_free(tram_preload *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        free(p->items[i].body);
    TRAM_FREE_ALL(p->items, p->path, p);
}

int tram_preload_read(tram_preload **out, const char *path)
{
    tram_preload *p = calloc(1, sizeof(*p));
    *out = NULL;
    if (!p || add_item(p, (preload_item){.owner = p, .kind = TRAM_API_COMPLETION,
                                         .body = strdup(warmup_body)}) ||
        !p->items[0].body) {
        tram_preload_free(p);
        return line_error(path ? path : "preload", 0, "out of memory");
    }
    p->path = strdup(path ? path : "");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (path && !f) {
        tram_log(TRAM_LOG_ERROR, "cannot open %s: %s", path, strerror(errno));
        tram_preload_free(p);
        return -1;
    }
    int rc = f ? read_lines(p, f) : 0;
    if (f)
        fclose(f);
    if (rc) {
        tram_preload_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

static void pump(tram_preload *p);

static void on_done(void *arg, int status, const json_t *body)
{
    const char *message = json_string_value(json_object_get(json_object_get(body, "error"), "message"));
    preload_item *item = arg;
    tram_preload *p = item->owner;
    p->in_flight--;
    if (status != 200 && !p->failed) {
        p->failed = 1;
        if (item->line)
            tram_log(TRAM_LOG_ERROR, "%s:%d: the request failed (%d): %s", p->path, item->line,
                     status, message ? message : "out of memory");
        else
            tram_log(TRAM_LOG_ERROR, "the warm-up request failed (%d): %s", status,
                     message ? message : "out of memory");
    }
    pump(p);
}

/* Launches what may run now; reports once everything has ended.  done()
 * may run inside a launch (a hit), which must not recurse into the loop. */
static void pump(tram_preload *p)
{
    if (p->pumping)
        return;
    p->pumping = 1;
    while (!p->failed && !p->srv->draining && p->next < p->n &&
           p->in_flight < (p->next <= 1 ? 1 : PRELOAD_WINDOW)) {
        preload_item *item = &p->items[p->next++];
        tram_api_error e = {0};
        p->in_flight++;
        if (tram_completion_start_internal(p->srv, item->kind, item->body, strlen(item->body),
                                           item->line > 0, on_done, item, &e)) {
            p->in_flight--;
            p->failed = 1;
            tram_log(TRAM_LOG_ERROR, "%s:%d: %s", item->line ? p->path : "warm-up", item->line,
                     e.message);
        }
    }
    p->pumping = 0;
    if (p->reported || p->in_flight > 0 || p->srv->draining || (!p->failed && p->next < p->n))
        return;
    p->reported = 1;
    (p->failed ? p->fail : p->ready)(p->srv);
}

void tram_preload_run(tram_preload *p, tram_server *s, void (*ready)(tram_server *),
                      void (*failed)(tram_server *))
{
    p->srv = s;
    p->ready = ready;
    p->fail = failed;
    if (tram_engine_model_config(s->engine)->embedding_only)
        p->next = 1;   /* no head to warm up: the model only embeds */
    pump(p);
}
