#include "server/preload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One line into item: the url names the endpoint, the body is kept as text. */
static int parse_line(const char *path, int line, const char *text, preload_item *item)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    int rc = -1;
    const char *key;
    json_t *v;
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return line_error(path, line, "not a JSON object");
    }
    json_object_foreach(o, key, v) {
        if (strcmp(key, "custom_id") && strcmp(key, "method") && strcmp(key, "url") &&
            strcmp(key, "body")) {
            line_error(path, line, "unknown field (expected custom_id, method, url, body)");
            goto out;
        }
    }
    const char *url = json_string_value(json_object_get(o, "url"));
    const json_t *method = json_object_get(o, "method");
    const json_t *body = json_object_get(o, "body");
    if (method && (!json_is_string(method) || strcmp(json_string_value(method), "POST")))
        line_error(path, line, "'method' must be \"POST\"");
    else if (!url || (strcmp(url, "/v1/chat/completions") && strcmp(url, "/v1/completions")))
        line_error(path, line, "'url' must be \"/v1/chat/completions\" or \"/v1/completions\"");
    else if (!json_is_object(body))
        line_error(path, line, "'body' must be a JSON object");
    else if (!(item->body = json_dumps(body, JSON_COMPACT)))
        line_error(path, line, "out of memory");
    else
        rc = 0;
    item->kind = url && !strcmp(url, "/v1/completions") ? TRAM_API_COMPLETION : TRAM_API_CHAT;
    item->line = line;
out:
    json_decref(o);
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

void tram_preload_free(tram_preload *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        free(p->items[i].body);
    free(p->items);
    free(p->path);
    free(p);
}

static void pump(tram_preload *p);

static void on_done(void *arg, int status, const char *message)
{
    preload_item *item = arg;
    tram_preload *p = item->owner;
    p->in_flight--;
    if (status != 200 && !p->failed) {
        p->failed = 1;
        if (item->line)
            tram_log(TRAM_LOG_ERROR, "%s:%d: the request failed (%d): %s", p->path, item->line,
                     status, message);
        else
            tram_log(TRAM_LOG_ERROR, "the warm-up request failed (%d): %s", status, message);
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
    pump(p);
}
