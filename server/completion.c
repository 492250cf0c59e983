/* gen.c — chat and text completions: one tram_gen per HTTP request, from
 * parsing to the last byte of the response.
 *
 * A request with k prompts and n samples becomes k engine requests (their ids
 * are the addresses of the gen_prompt entries) and k*n choices.  A gen lives
 * until every engine request it submitted has settled: rejected, or finished
 * (an abort finishes too), so an event never finds its gen freed.  The client
 * may be gone long before that (req is then NULL). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api_response.h"
#include "server/log.h"
#include "server/prompt.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

typedef enum { P_SUBMITTED, P_ACCEPTED, P_REJECTED, P_FINISHED } prompt_state;

typedef struct {
    tram_gen *gen;
    int index;
    int32_t *ids;
    int num_ids;
    char *echo;                 /* completions with echo: the prompt's text */
    prompt_state state;
    int aborted;                /* an abort was sent */
    int samples_left;
    int prompt_tokens, cached_tokens;
} gen_prompt;

struct tram_gen {
    tram_server *srv;
    tram_gen *prev, *next;
    struct evhttp_request *req;  /* NULL once the client went away */
    tram_api_request api;
    char id[48];
    tram_api_envelope env;
    gen_prompt *prompts;
    tram_api_choice *choices;    /* [num_prompts * n] */
    double *last_token_at;       /* per choice, for inter-token latency */
    int num_prompts, n, num_choices;
    int pending;                 /* prompts neither accepted nor rejected yet */
    int unfinished;              /* prompts accepted and not finished */
    int streaming;               /* the SSE response has started */
    tram_api_error error;        /* the first rejection (status 0: none) */
    double arrived, first_token;
    long long completion_tokens;
};

/* ------------------------------------------------------------ lifetime */

static tram_gen *gen_new(tram_server *s, struct evhttp_request *req)
{
    tram_gen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->srv = s;
    g->req = req;
    g->arrived = tram_now();
    return g;
}

static void gen_free(tram_gen *g)
{
    for (int i = 0; g->prompts && i < g->num_prompts; i++) {
        free(g->prompts[i].ids);
        free(g->prompts[i].echo);
    }
    for (int i = 0; g->choices && i < g->num_choices; i++)
        tram_api_choice_free(&g->choices[i]);
    free(g->prompts);
    free(g->choices);
    free(g->last_token_at);
    tram_api_request_free(&g->api);
    free(g);
}

static void gen_link(tram_gen *g)
{
    tram_server *s = g->srv;
    g->next = s->gens;
    if (s->gens)
        s->gens->prev = g;
    s->gens = g;
    s->num_gens++;
}

static void gen_unlink(tram_gen *g)
{
    tram_server *s = g->srv;
    if (g->prev)
        g->prev->next = g->next;
    else
        s->gens = g->next;
    if (g->next)
        g->next->prev = g->prev;
    s->num_gens--;
    tram_server_check_drained(s);
}

/* ------------------------------------------------------------ preparation */

/* The prompts as token ids; chat has one, rendered with the template. */
static int tokenize_prompts(tram_gen *g, tram_api_error *e)
{
    const tram_engine *eng = g->srv->engine;
    const tram_tokenizer *tok = tram_engine_tokenizer(eng);
    if (g->api.kind == TRAM_API_CHAT) {
        char *text;
        if (tram_prompt_render_chat(g->srv->chat, g->api.messages, g->api.num_messages, &text, e))
            return -1;
        /* the template writes BOS itself when the model wants one */
        int rc = tram_prompt_encode(eng, text, 0, &g->prompts[0].ids, &g->prompts[0].num_ids, e);
        free(text);
        return rc || tram_prompt_check(eng, g->prompts[0].ids, g->prompts[0].num_ids,
                                       g->api.params.max_tokens, "messages", e);
    }
    for (int i = 0; i < g->api.num_prompts; i++) {
        const tram_prompt *src = &g->api.prompts[i];
        gen_prompt *p = &g->prompts[i];
        if (src->text) {
            if (tram_prompt_encode(eng, src->text, tram_tokenizer_adds_bos(tok), &p->ids,
                                   &p->num_ids, e))
                return -1;
        } else {
            p->ids = malloc((size_t)(src->num_tokens ? src->num_tokens : 1) * sizeof(int32_t));
            if (!p->ids)
                return tram_api_fail(e, 500, NULL, NULL, "Out of memory.");
            memcpy(p->ids, src->token_ids, (size_t)src->num_tokens * sizeof(int32_t));
            p->num_ids = src->num_tokens;
        }
        if (tram_prompt_check(eng, p->ids, p->num_ids, g->api.params.max_tokens, "prompt", e))
            return -1;
        if (g->api.echo && !src->text) {
            size_t len;
            if (tram_tokenizer_decode(tok, p->ids, p->num_ids, 0, &p->echo, &len, NULL))
                return tram_api_fail(e, 400, "prompt", "invalid_value",
                                     "Invalid 'prompt': the token ids cannot be decoded.");
        } else if (g->api.echo && !(p->echo = strdup(src->text))) {
            return tram_api_fail(e, 500, NULL, NULL, "Out of memory.");
        }
    }
    return 0;
}

static int prepare(tram_gen *g, tram_api_kind kind, tram_api_error *e)
{
    tram_server *s = g->srv;
    size_t len;
    const char *body = tram_http_body(g->req, &len);
    if (tram_api_request_parse(&g->api, kind, &s->defaults, body, len, e) ||
        tram_check_model(s, g->api.model, e))
        return -1;
    const char *param = NULL;
    tram_error err = {{0}};
    if (tram_engine_validate_params(s->engine, &g->api.params, &param, &err))
        return tram_api_fail(e, 400, param, "invalid_value", "%s", err.msg);
    g->num_prompts = kind == TRAM_API_CHAT ? 1 : g->api.num_prompts;
    g->n = g->api.params.n;
    g->num_choices = g->num_prompts * g->n;
    g->prompts = calloc((size_t)g->num_prompts, sizeof(*g->prompts));
    g->choices = calloc((size_t)g->num_choices, sizeof(*g->choices));
    g->last_token_at = calloc((size_t)g->num_choices, sizeof(*g->last_token_at));
    if (!g->prompts || !g->choices || !g->last_token_at)
        return tram_api_fail(e, 500, NULL, NULL, "Out of memory.");
    tram_api_make_id(kind, g->id);
    g->env = (tram_api_envelope){kind, g->id, (long long)time(NULL), s->model_name};
    return tokenize_prompts(g, e);
}

static void on_close(struct evhttp_connection *conn, void *arg);

static int submit(tram_gen *g)
{
    tram_submission *list = NULL, **tail = &list;
    for (int i = 0; i < g->num_prompts; i++) {
        gen_prompt *p = &g->prompts[i];
        tram_submission *sub = calloc(1, sizeof(*sub));
        if (!sub) {
            while (list) {
                tram_submission *next = list->next;
                free(list);
                list = next;
            }
            return -1;
        }
        p->gen = g;
        p->index = i;
        p->samples_left = g->n;
        sub->request_id = (uint64_t)(uintptr_t)p;
        sub->prompt = (tram_prompt){NULL, p->ids, p->num_ids, 0};
        sub->params = &g->api.params;
        sub->priority = g->api.priority;
        *tail = sub;
        tail = &sub->next;
    }
    g->pending = g->num_prompts;
    evhttp_connection_set_closecb(evhttp_request_get_connection(g->req), on_close, g);
    gen_link(g);
    tram_worker_submit(g->srv->worker, list);
    return 0;
}

static void handle(tram_server *s, struct evhttp_request *req, tram_api_kind kind)
{
    tram_api_error e = {0};
    if (!s->engine || s->draining) {
        tram_api_fail(&e, 503, NULL, NULL, s->draining ? "The server is shutting down."
                                                       : "The model is still loading.");
        tram_http_send_error(req, &e);
        return;
    }
    tram_gen *g = gen_new(s, req);
    if (!g) {
        tram_api_fail(&e, 500, NULL, NULL, "Out of memory.");
        tram_http_send_error(req, &e);
        return;
    }
    if (prepare(g, kind, &e) || submit(g)) {
        if (!e.status)
            tram_api_fail(&e, 500, NULL, NULL, "Out of memory.");
        tram_log(TRAM_LOG_INFO, "%s %d %s", g->id[0] ? g->id : "request", e.status, e.message);
        tram_http_send_error(req, &e);
        gen_free(g);
    }
}

void tram_handle_chat(tram_server *s, struct evhttp_request *req)
{
    handle(s, req, TRAM_API_CHAT);
}

void tram_handle_completion(tram_server *s, struct evhttp_request *req)
{
    handle(s, req, TRAM_API_COMPLETION);
}

/* ------------------------------------------------------------ finishing */

static void usage_of(const tram_gen *g, tram_api_usage *u)
{
    memset(u, 0, sizeof(*u));
    for (int i = 0; i < g->num_prompts; i++) {
        u->prompt_tokens += g->prompts[i].prompt_tokens;
        u->cached_tokens += g->prompts[i].cached_tokens;
    }
    u->completion_tokens = g->completion_tokens;
}

static void respond(tram_gen *g, const tram_api_usage *u)
{
    if (g->error.status && !g->streaming) {
        tram_http_send_error(g->req, &g->error);
    } else if (g->streaming) {
        if (g->api.include_usage) {
            json_t *usage = tram_api_usage_chunk(&g->env, u);
            tram_http_sse_send(g->req, usage);
            json_decref(usage);
        }
        tram_http_sse_done(g->req);
    } else {
        tram_http_send_json(g->req, 200, tram_api_response(&g->env, g->choices, g->num_choices, u));
    }
}

static void count_metrics(tram_gen *g, double now)
{
    tram_metrics *m = &g->srv->metrics;
    tram_histogram_observe(&m->e2e, now - g->arrived);
    for (int i = 0; i < g->num_choices; i++)
        if (g->choices[i].finish_reason)
            tram_metrics_count_finish(m, g->choices[i].finish_reason);
}

/* libevent wrote the whole reply (it does not call this when the write fails;
 * the drain deadline covers that case). */
static void on_flushed(struct evhttp_request *req, void *arg)
{
    (void)req;
    tram_server *s = arg;
    s->num_flushing--;
    tram_server_check_drained(s);
}

/* Every engine request has settled: answer (if the client is still there),
 * count, log and free. */
static void finish(tram_gen *g)
{
    double now = tram_now();
    tram_api_usage u;
    usage_of(g, &u);
    int status = g->error.status && !g->streaming ? g->error.status : 200;
    if (g->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(g->req), NULL, NULL);
        evhttp_request_set_on_complete_cb(g->req, on_flushed, g->srv);
        g->srv->num_flushing++;
        respond(g, &u);
    } else {
        status = 499;  /* nginx's "client closed request" */
    }
    if (!g->error.status)
        count_metrics(g, now);
    tram_log(TRAM_LOG_INFO, "%s %d prompt_tokens=%lld completion_tokens=%lld cached_tokens=%lld "
             "ttft=%.3fs total=%.3fs%s%s", g->id, status, u.prompt_tokens, u.completion_tokens,
             u.cached_tokens, g->first_token ? g->first_token - g->arrived : 0.0, now - g->arrived,
             g->error.status ? " error=" : "", g->error.status ? g->error.message : "");
    gen_unlink(g);
    gen_free(g);
}

static void abort_outstanding(tram_gen *g)
{
    for (int i = 0; i < g->num_prompts; i++) {
        gen_prompt *p = &g->prompts[i];
        if ((p->state == P_SUBMITTED || p->state == P_ACCEPTED) && !p->aborted &&
            tram_worker_abort(g->srv->worker, (uint64_t)(uintptr_t)p) == 0)
            p->aborted = 1;
    }
}

static void start_stream(tram_gen *g)
{
    g->streaming = 1;
    tram_http_sse_start(g->req);
    for (int i = 0; g->api.kind == TRAM_API_CHAT && i < g->num_choices; i++) {
        json_t *chunk = tram_api_chunk(&g->env, i, 1, "", 0, NULL, NULL, g->api.include_usage);
        tram_http_sse_send(g->req, chunk);
        json_decref(chunk);
    }
}

/* Called as prompts are accepted or rejected. */
static void settle(tram_gen *g)
{
    if (g->pending > 0)
        return;
    if (g->error.status)
        abort_outstanding(g);
    else if (g->api.stream && g->req && !g->streaming)
        start_stream(g);
    if (g->unfinished == 0)
        finish(g);
}

/* ------------------------------------------------------------ outputs */

/* Text (and logprobs) for one choice: a chunk when streaming, else kept for
 * the final body. */
static void emit(tram_gen *g, int ci, const char *text, size_t len,
                 const tram_logprob_entry *lp, int num_lp, const char *finish_reason)
{
    tram_api_choice *c = &g->choices[ci];
    tram_api_kind kind = g->api.kind;
    json_t *lpj = NULL;
    if (g->api.params.logprobs >= 0) {
        if (!g->streaming && !c->logprobs)
            c->logprobs = tram_api_logprobs_new(kind);
        lpj = g->streaming ? tram_api_logprobs_new(kind) : c->logprobs;
        if (lpj)
            tram_api_logprobs_append(lpj, kind, tram_engine_tokenizer(g->srv->engine), lp, num_lp,
                                     &c->text_offset);
    }
    if (!g->streaming) {
        tram_api_choice_append(c, text, len);
        return;
    }
    json_t *chunk = tram_api_chunk(&g->env, ci, 0, text, len, lpj, finish_reason,
                                   g->api.include_usage);
    if (g->req)
        tram_http_sse_send(g->req, chunk);
    json_decref(chunk);
}

static void observe_latency(tram_gen *g, int ci, double now, double queue_time)
{
    tram_metrics *m = &g->srv->metrics;
    if (!g->first_token) {
        g->first_token = now;
        tram_histogram_observe(&m->ttft, now - g->arrived);
        tram_histogram_observe(&m->queue, queue_time);
    }
    if (g->last_token_at[ci])
        tram_histogram_observe(&m->itl, now - g->last_token_at[ci]);
    g->last_token_at[ci] = now;
}

static void on_output(tram_gen *g, gen_prompt *p, const tram_output *o)
{
    int ci = p->index * g->n + o->sample_index;
    tram_api_choice *c = &g->choices[ci];
    p->prompt_tokens = o->prompt_tokens;
    p->cached_tokens = o->cached_tokens;
    if (o->num_tokens > 0)
        observe_latency(g, ci, tram_now(), o->queue_time);
    const char *reason = tram_finish_reason_name(o->finish_reason);
    if (!c->started) {
        c->started = 1;
        if (p->echo)
            emit(g, ci, p->echo, strlen(p->echo), o->prompt_logprobs,
                 o->prompt_logprobs ? o->prompt_tokens : 0, NULL);
    }
    emit(g, ci, o->text, o->text_len, o->logprobs, o->logprobs ? o->num_tokens : 0, reason);
    if (!reason)
        return;
    c->finish_reason = reason;
    g->completion_tokens += o->completion_tokens;
    if (--p->samples_left > 0)
        return;
    p->state = P_FINISHED;
    if (--g->unfinished == 0 && g->pending == 0)
        finish(g);
}

void tram_gen_on_event(tram_server *s, const tram_event *ev)
{
    (void)s;
    gen_prompt *p = (gen_prompt *)(uintptr_t)ev->request_id;
    tram_gen *g = p->gen;
    switch (ev->kind) {
    case TRAM_EV_ACCEPTED:
        p->state = P_ACCEPTED;
        g->pending--;
        g->unfinished++;
        settle(g);
        break;
    case TRAM_EV_REJECTED:
        p->state = P_REJECTED;
        g->pending--;
        if (!g->error.status)
            g->error = ev->error;
        settle(g);
        break;
    case TRAM_EV_OUTPUT:
        on_output(g, p, &ev->out);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------ connections */

/* The client went away.  libevent 2.1 has already detached req from a
 * connection that failed (EOF, write error): ending it is what frees it.
 * When we free the connection ourselves, libevent frees req after this. */
static void on_close(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    tram_gen *g = arg;
    struct evhttp_request *req = g->req;
    g->req = NULL;
    if (req && !evhttp_request_get_connection(req))
        evhttp_send_reply_end(req);
    abort_outstanding(g);
}

/* While a request waits or a non-streamed one runs, nothing reads or writes
 * its socket, so libevent would not notice the client leaving. */
void tram_gen_poll_disconnects(tram_server *s)
{
    for (tram_gen *g = s->gens, *next; g; g = next) {
        next = g->next;
        struct evhttp_connection *conn = g->req ? evhttp_request_get_connection(g->req) : NULL;
        if (!conn)
            continue;
        struct pollfd pfd = {bufferevent_getfd(evhttp_connection_get_bufferevent(conn)), POLLRDHUP, 0};
        if (pfd.fd >= 0 && poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            evhttp_connection_free(conn);  /* runs on_close */
    }
}

void tram_gen_abort_all(tram_server *s)
{
    for (tram_gen *g = s->gens; g; g = g->next)
        abort_outstanding(g);
}

void tram_gen_fail_all(tram_server *s)
{
    static const tram_api_error failed = {500, "The engine failed.", "", NULL};
    while (s->gens) {
        tram_gen *g = s->gens;
        g->error = failed;
        if (g->req)
            evhttp_connection_set_closecb(evhttp_request_get_connection(g->req), NULL, NULL);
        if (g->req && g->streaming)
            tram_http_sse_done(g->req);
        else if (g->req)
            tram_http_send_error(g->req, &g->error);
        tram_log(TRAM_LOG_ERROR, "%s 500 the engine failed", g->id);
        gen_unlink(g);
        gen_free(g);
    }
}
