#include "cli/batch_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/batch_output.h"
#include "cli/commands.h"
#include "server/api_error.h"
#include "server/batch_line.h"
#include "server/log.h"

/* Duplicate custom_ids named before giving up, of however many there are. */
#define MAX_DUPLICATES_SHOWN 10

typedef struct batch_run batch_run;

typedef struct {
    batch_run *run;
    int line;                 /* in the input, from 1 */
    char *custom_id;          /* the line's, or "line-N" */
    tram_batch_line req;
    tram_api_error refused;   /* status 0, or why the line cannot run */
    int skip;                 /* answered already: in OUT, or refused and written */
} batch_item;

struct batch_run {
    tram_batch_opts *opts;
    batch_item *items;
    int n;
    tram_batch_output out;
    tram_server *srv;
    int next, in_flight, window, pumping;
    int answered, failed, earlier, earlier_failed, unwritten;  /* counts of lines */
    int write_failed;
    long long tokens;         /* completion tokens of the lines answered in this run */
    double t0, drawn;         /* when the run started; when progress was last drawn */
    int draw;                 /* 1: a terminal (redrawn in place), 2: --progress elsewhere (a line a second) */
};

/* ------------------------------------------------------------ the input */

/* One input line into item: parsed (or refused), and its id. */
static int read_item(batch_item *it, const char *text, size_t len)
{
    if (tram_batch_line_parse(text, len, &it->req, &it->refused) == 0 && it->req.stream)
        tram_api_fail(&it->refused, 400, "stream", "invalid_value",
                      "'stream' must be false in a batch: each request is answered with one body.");
    if (it->req.custom_id)
        it->custom_id = strdup(it->req.custom_id);
    else if (asprintf(&it->custom_id, "line-%d", it->line) < 0)
        it->custom_id = NULL;
    return it->custom_id ? 0 : -1;
}

static int read_input(batch_run *r, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        fprintf(stderr, "tram: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    int alloc = 0, rc = 0;
    for (int line = 1; rc == 0 && (len = getline(&text, &cap, f)) >= 0; line++) {
        if (strspn(text, " \t\r\n") == (size_t)len)
            continue;
        if (r->n == alloc) {
            alloc = alloc ? 2 * alloc : 256;
            batch_item *items = realloc(r->items, (size_t)alloc * sizeof(*items));
            if (!items) {
                rc = -1;
                break;
            }
            r->items = items;
        }
        batch_item *it = &r->items[r->n++];
        *it = (batch_item){.run = r, .line = line};
        rc = read_item(it, text, (size_t)len);
    }
    if (rc || ferror(f)) {
        fprintf(stderr, "tram: cannot read %s: %s\n", path, rc ? "out of memory" : strerror(errno));
        rc = -1;
    }
    free(text);
    if (f != stdin)
        fclose(f);
    return rc;
}

static int compare_ids(const void *a, const void *b)
{
    const batch_item *x = *(batch_item *const *)a, *y = *(batch_item *const *)b;
    int c = strcmp(x->custom_id, y->custom_id);
    return c ? c : x->line - y->line;
}

/* Two lines with one custom_id could not both be answered under it: named,
 * before anything runs. */
static int check_duplicates(const batch_run *r, const char *path)
{
    batch_item **sorted = malloc((size_t)(r->n ? r->n : 1) * sizeof(*sorted));
    if (!sorted)
        return -1;
    for (int i = 0; i < r->n; i++)
        sorted[i] = &r->items[i];
    qsort(sorted, (size_t)r->n, sizeof(*sorted), compare_ids);
    int dups = 0;
    for (int i = 1; i < r->n; i++) {
        batch_item *first = sorted[i - 1], *again = sorted[i];
        if (strcmp(first->custom_id, again->custom_id))
            continue;
        if (dups++ < MAX_DUPLICATES_SHOWN)
            fprintf(stderr, "tram: %s:%d: custom_id '%.200s' is already the id of line %d\n", path,
                    again->line, again->custom_id, first->line);
        sorted[i] = first;  /* a third repeat names the first line too */
    }
    if (dups > MAX_DUPLICATES_SHOWN)
        fprintf(stderr, "tram: ... %d repeated custom_ids in all\n", dups);
    free(sorted);
    return dups ? -1 : 0;
}

static void free_items(batch_run *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->items[i].custom_id);
        tram_batch_line_free(&r->items[i].req);
    }
    free(r->items);
}

/* ------------------------------------------------------------ progress */

static void draw_progress(batch_run *r, int last)
{
    double now = tram_now(), elapsed = now - r->t0;
    if (!r->draw || (!last && now - r->drawn < (r->draw == 1 ? 0.2 : 1.0)))
        return;
    r->drawn = now;
    int done = r->earlier + r->answered + r->failed, ran = r->answered + r->failed;
    double eta = ran ? elapsed * (r->n - done) / ran : 0;
    int width = 30, fill = r->n ? width * done / r->n : width;
    fprintf(stderr, "%s[%.*s%*s] %d/%d requests  %.1f tokens/s  %.0f s  ETA %.0f s%s", r->draw == 1 ? "\r" : "",
            fill, "==============================", width - fill, "", done, r->n,
            elapsed > 0 ? r->tokens / elapsed : 0.0, elapsed, eta, r->draw == 1 && !last ? "" : "\n");
}

/* The last line on stderr: what happened to every line of the input. */
static void summary(const batch_run *r)
{
    double el = r->t0 ? tram_now() - r->t0 : 0;
    int ran = r->answered + r->failed;
    fprintf(stderr, "tram: %d requests: %d answered, %d failed (error lines), %d in %s already "
                    "(%d of them failed), %d to run again; %d in %.1f s: %.2f requests/s, %.1f generated tokens/s\n",
            r->n, r->answered, r->failed, r->earlier, r->opts->output,
            r->earlier_failed, r->n - r->answered - r->failed - r->earlier, ran, el, el > 0 ? ran / el : 0.0,
            el > 0 ? r->tokens / el : 0.0);
}

/* ------------------------------------------------------------ running */

static void pump(batch_run *r);

static long long completion_tokens(const json_t *body)
{
    return json_integer_value(json_object_get(json_object_get(body, "usage"), "completion_tokens"));
}

/* Writes one answer; 5xx answers (the engine failed, the run was stopped)
 * are left for a rerun. */
static void record(batch_run *r, const batch_item *it, int status, const json_t *body)
{
    tram_error err = {{0}};
    if (status >= 500) {
        r->unwritten++;
        fprintf(stderr, "%stram: %s:%d (%s): %d, not written; a rerun runs it again\n", r->draw == 1 ? "\n" : "",
                r->opts->input, it->line, it->custom_id, status);
    } else if (r->write_failed || tram_batch_output_write(&r->out, it->custom_id, status, body, &err)) {
        if (!r->write_failed)
            fprintf(stderr, "tram: %s\n", err.msg);
        r->write_failed = 1;
    } else if (status == 200) {
        r->answered++;
        r->tokens += completion_tokens(body);
    } else {
        r->failed++;
    }
}

static void on_answer(void *arg, int status, const json_t *body)
{
    batch_item *it = arg;
    batch_run *r = it->run;
    r->in_flight--;
    record(r, it, status, body);
    draw_progress(r, 0);
    pump(r);
}

/* Keeps a window of lines in flight (twice what the engine runs at once,
 * as vLLM's run-batch does), and ends the job when all are answered, or
 * when it is stopping (a signal, a failed write) and none is in flight. */
static void pump(batch_run *r)
{
    if (r->pumping)
        return;
    r->pumping = 1;
    if (r->write_failed)
        tram_server_stop(r->srv);
    while (!tram_server_stopping(r->srv) && r->in_flight < r->window && r->next < r->n) {
        batch_item *it = &r->items[r->next++];
        if (it->skip)
            continue;
        r->in_flight++;
        tram_server_submit(r->srv, it->req.kind, it->req.body, strlen(it->req.body), on_answer, it);
    }
    r->pumping = 0;
    if (r->in_flight == 0 && r->next == r->n)
        tram_server_stop(r->srv);
}

static void on_ready(tram_server *s, void *arg)
{
    batch_run *r = arg;
    r->srv = s;
    r->t0 = tram_now();
    pump(r);
}

/* Marks what is answered already, and writes the error lines of the lines
 * refused before running; returns how many lines are left to run. */
static int settle_known(batch_run *r)
{
    int left = 0;
    for (int i = 0; i < r->n; i++) {
        batch_item *it = &r->items[i];
        int status = tram_batch_output_status(&r->out, it->custom_id);
        it->skip = status || it->refused.status;
        r->earlier += status != 0;
        r->earlier_failed += status != 0 && status != 200;
        if (!status && it->refused.status) {
            json_t *body = tram_api_error_json(&it->refused);
            record(r, it, it->refused.status, body);
            json_decref(body);
        }
        left += !it->skip;
    }
    return left;
}

static int exit_status(const batch_run *r, int server_rc)
{
    if (server_rc || r->write_failed || r->answered + r->failed + r->earlier < r->n)
        return TRAM_EXIT_BATCH_UNFINISHED;
    return r->failed + r->earlier_failed ? TRAM_EXIT_BATCH_FAILED_LINES : 0;
}

static int run_job(batch_run *r)
{
    tram_server_job job = {.ready = on_ready, .arg = r};
    tram_server_config c = r->opts->server;
    c.job = &job;
    c.max_queue = 1 << 30;  /* the window bounds what waits */
    r->window = 2 * TRAM_MAX(c.engine.max_num_seqs, 1);
    tram_log_set_level(TRAM_LOG_WARNING);  /* a log line per request would bury the progress */
    int rc = tram_server_run(&c);
    draw_progress(r, 1);
    return rc;
}

int tram_batch_run(tram_batch_opts *o)
{
    batch_run r = {.opts = o, .draw = isatty(2) ? 1 : o->progress ? 2 : 0};
    tram_error err = {{0}};
    if (read_input(&r, o->input) || check_duplicates(&r, o->input) ||
        tram_batch_output_open(&r.out, o->output, &err)) {
        if (err.msg[0])
            fprintf(stderr, "tram: %s\n", err.msg);
        free_items(&r);
        return TRAM_EXIT_INPUT;
    }
    int server_rc = settle_known(&r) > 0 && !r.write_failed ? run_job(&r) : 0;
    if (tram_batch_output_close(&r.out, &err)) {
        fprintf(stderr, "tram: %s\n", err.msg);
        r.write_failed = 1;
    }
    summary(&r);
    int rc = exit_status(&r, server_rc);
    free_items(&r);
    return rc;
}
