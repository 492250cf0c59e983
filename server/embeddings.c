/* embeddings.c — POST /v1/embeddings (see embeddings.h).
 *
 * A request lives from its body to its last byte: its body is parsed and
 * every input tokenized on a preparation thread (embed_request.c), each
 * input becomes one engine request (batched with everything else by the
 * scheduler), and once every input has settled the reply (up to thousands
 * of vectors, floats or base64) is written on a preparation thread too; the
 * loop only submits, collects the vectors and sends.  It stays until every
 * engine request it submitted has settled, so an event never finds it
 * freed; the client may be gone long before (req is then NULL). */
#include "server/embeddings.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/list.h"
#include "server/api_request.h"
#include "server/auth.h"
#include "server/completion.h"
#include "server/embed_request.h"
#include "server/endpoints.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/prep_pool.h"
#include "server/prompt.h"

typedef enum { IN_SUBMITTED, IN_ACCEPTED, IN_SETTLED } input_state;

typedef struct {
    struct tram_embedding *owner;
    int32_t *ids;
    int num_ids;
    input_state state;
    int aborted;                 /* an abort was sent */
    float *vector;               /* [dim] once its output came */
    int dim;
} embed_input;

typedef struct tram_embedding {
    tram_server *srv;
    struct tram_embedding *prev, *next;
    struct evhttp_request *req;  /* NULL once the client went away */
    tram_prep_task task;         /* parsing, then the reply, on the pool */
    int preparing;               /* the task is on the pool: the loop leaves the rest alone */
    struct evbuffer *body;
    tram_embed_request api;
    embed_input *inputs;
    int num_inputs, unsettled;
    long long prompt_tokens;
    tram_api_error error;        /* the first failure (status 0: none) */
    char *reply;                 /* the reply's JSON, written on the pool */
    char tenant[TRAM_TENANT_MAX + 1];
    double arrived;
} tram_embedding;

static uint64_t input_id(const embed_input *in) { return (uint64_t)(uintptr_t)in | 1; }

/* ------------------------------------------------------------ lifetime */

static void embedding_free(tram_embedding *m)
{
    tram_server *s = m->srv;
    TRAM_LIST_REMOVE(&s->embeddings, m, prev, next);
    for (int i = 0; m->inputs && i < m->num_inputs; i++) {
        free(m->inputs[i].ids);
        free(m->inputs[i].vector);
    }
    free(m->inputs);
    free(m->reply);
    if (m->body)
        evbuffer_free(m->body);
    tram_embed_request_free(&m->api);
    free(m);
    tram_completions_check_drained(s);
}

/* ------------------------------------------------------------ preparation (pool thread) */

/* Each input as token ids, checked against the vocabulary and the context:
 * a 400 naming input[i] when it does not fit. */
static int tokenize_inputs(tram_embedding *m, tram_api_error *e)
{
    const tram_engine *eng = m->srv->engine;
    /* the tokenizer adds only what it adds (BOS, a post-processor's EOS) */
    int add_bos = m->api.add_special_tokens;
    int max_len = tram_engine_max_model_len(eng);
    for (int i = 0; i < m->num_inputs; i++) {
        const tram_prompt *src = &m->api.inputs[i];
        embed_input *in = &m->inputs[i];
        char param[32];
        snprintf(param, sizeof(param), m->num_inputs > 1 ? "input[%d]" : "input", i);
        if (src->text ? tram_prompt_encode(eng, src->text, add_bos, &in->ids, &in->num_ids, e)
                      : tram_prompt_check(eng, src->token_ids, src->num_tokens, -1, param, e))
            return -1;
        if (!src->text) {
            if (!(in->ids = malloc((size_t)src->num_tokens * sizeof(int32_t))))
                return tram_api_out_of_memory(e);
            memcpy(in->ids, src->token_ids, (size_t)src->num_tokens * sizeof(int32_t));
            in->num_ids = src->num_tokens;
        }
        if (in->num_ids < 1)
            return tram_api_fail(e, 400, param, "invalid_value", "Invalid '%s': it is empty after tokenization.",
                                 param);
        if (in->num_ids > max_len)
            return tram_api_fail(e, 400, param, "context_length_exceeded", "Invalid '%s': %d tokens, but this "
                                 "model embeds at most %d tokens per input.", param, in->num_ids, max_len);
        m->prompt_tokens += in->num_ids;
    }
    return 0;
}

static int prepare(tram_embedding *m, const char *body, size_t len, tram_api_error *e)
{
    tram_server *s = m->srv;
    const char *param = NULL;
    tram_error err = {{0}};
    if (tram_embed_request_parse(&m->api, body, len, e) || tram_check_model(s, m->api.model, NULL, e))
        return -1;
    if (tram_engine_check_embed(s->engine, &m->api.params, &param, &err))
        return tram_api_fail(e, 400, param, "invalid_value", "%s", err.msg);
    m->num_inputs = m->api.num_inputs;
    if (!(m->inputs = calloc((size_t)m->num_inputs, sizeof(*m->inputs))))
        return tram_api_out_of_memory(e);
    if (m->api.ignored[0])
        tram_log(TRAM_LOG_WARNING, "embeddings: accepted and ignored: %s", m->api.ignored);
    return tokenize_inputs(m, e);
}

static void prepare_task(tram_prep_task *t)
{
    tram_embedding *m = TRAM_CONTAINER_OF(t, tram_embedding, task);
    size_t len;
    const char *body = tram_http_body_text(m->body, &len);
    if (!body)
        tram_api_out_of_memory(&m->error);
    else if (prepare(m, body, len, &m->error) && !m->error.status)
        tram_api_out_of_memory(&m->error);
    evbuffer_free(m->body);
    m->body = NULL;
}

/* ------------------------------------------------------------ the reply (pool thread) */

/* The vector's float32 bytes, little-endian, in base64 (what the OpenAI SDK decodes). */
static json_t *base64_of(const float *v, int n)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t bytes = (size_t)n * 4, out_len = (bytes + 2) / 3 * 4;
    const unsigned char *b = (const unsigned char *)v;  /* x86 and arm64 are little-endian */
    char *out = malloc(out_len + 1);
    if (!out)
        return NULL;
    for (size_t i = 0, o = 0; i < bytes; i += 3, o += 4) {
        unsigned w = (unsigned)b[i] << 16 | (i + 1 < bytes ? (unsigned)b[i + 1] << 8 : 0) |
                     (i + 2 < bytes ? b[i + 2] : 0);
        out[o] = digits[w >> 18 & 63];
        out[o + 1] = digits[w >> 12 & 63];
        out[o + 2] = i + 1 < bytes ? digits[w >> 6 & 63] : '=';
        out[o + 3] = i + 2 < bytes ? digits[w & 63] : '=';
    }
    json_t *s = json_stringn(out, out_len);
    free(out);
    return s;
}

static json_t *vector_json(const embed_input *in, int base64)
{
    if (base64)
        return base64_of(in->vector, in->dim);
    json_t *a = json_array();
    for (int d = 0; a && d < in->dim; d++)
        json_array_append_new(a, json_real(in->vector[d]));
    return a;
}

/* OpenAI's list object; floats with the 9 digits that round-trip a float32. */
static void reply_task(tram_prep_task *t)
{
    tram_embedding *m = TRAM_CONTAINER_OF(t, tram_embedding, task);
    json_t *data = json_array();
    for (int i = 0; data && i < m->num_inputs; i++)
        json_array_append_new(data, json_pack("{s:s, s:i, s:o?}", "object", "embedding", "index", i, "embedding",
                                              vector_json(&m->inputs[i], m->api.base64)));
    json_t *body = json_pack("{s:s, s:o?, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model",
                             m->srv->model_name, "usage", "prompt_tokens", (json_int_t)m->prompt_tokens,
                             "total_tokens", (json_int_t)m->prompt_tokens);
    m->reply = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(body);
}

/* ------------------------------------------------------------ finishing (loop) */

static void count_metrics(tram_embedding *m)
{
    tram_metrics *mt = &m->srv->metrics;
    tram_histogram_observe(&mt->e2e, tram_now() - m->arrived);
    tram_metrics_count_tenant(mt, m->tenant, m->prompt_tokens, 0);
    tram_metrics_count_finish(mt, "stop");
}

static void answer(tram_embedding *m)
{
    int status = m->error.status ? m->error.status : m->req ? 200 : 499;
    if (m->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(m->req), NULL, NULL);
        if (m->error.status)
            tram_http_send_error(m->req, &m->error);
        else
            tram_http_send_text(m->req, 200, "application/json", m->reply, strlen(m->reply));
    }
    if (status == 200)
        count_metrics(m);
    tram_log(TRAM_LOG_INFO, "embeddings %d inputs=%d prompt_tokens=%lld total=%.3fs%s%s", status, m->num_inputs,
             m->prompt_tokens, tram_now() - m->arrived, m->error.status ? " error=" : "",
             m->error.status ? m->error.message : "");
    embedding_free(m);
}

static void replied(tram_prep_task *t)
{
    tram_embedding *m = TRAM_CONTAINER_OF(t, tram_embedding, task);
    m->preparing = 0;
    if (!m->reply && !m->error.status)
        tram_api_out_of_memory(&m->error);
    answer(m);
}

/* Every input has settled: the reply is written on the pool (or the error
 * sent now). */
static void settle(tram_embedding *m)
{
    if (m->error.status || !m->req) {
        answer(m);
        return;
    }
    m->task = (tram_prep_task){.run = reply_task, .done = replied};
    m->preparing = 1;
    if (tram_prep_pool_submit(m->srv->prep, &m->task)) {
        m->preparing = 0;
        tram_api_fail(&m->error, 503, NULL, NULL, TRAM_API_MSG_OVERLOADED);
        answer(m);
    }
}

static void abort_outstanding(tram_embedding *m)
{
    for (int i = 0; !m->preparing && i < m->num_inputs; i++) {
        embed_input *in = &m->inputs[i];
        if (in->state != IN_SETTLED && !in->aborted && tram_worker_abort(m->srv->worker, input_id(in)) == 0)
            in->aborted = 1;
    }
}

static void fail(tram_embedding *m, const tram_api_error *e)
{
    if (!m->error.status)
        m->error = *e;
    abort_outstanding(m);   /* the others' work is wasted now */
}

static void on_output(tram_embedding *m, embed_input *in, const tram_output *o)
{
    if (o->finish_reason == TRAM_FINISH_NONE)
        return;
    in->state = IN_SETTLED;
    m->unsettled--;
    if (o->embedding && (in->vector = malloc((size_t)o->embedding_dim * sizeof(float)))) {
        memcpy(in->vector, o->embedding, (size_t)o->embedding_dim * sizeof(float));
        in->dim = o->embedding_dim;
    } else if (o->embedding) {
        fail(m, &(tram_api_error){.status = 500, .message = "Out of memory."});
    } else if (!m->error.status) {
        static const tram_api_error cut = {.status = 503, .message = TRAM_API_MSG_SHUTTING_DOWN};
        fail(m, &cut);
    }
}

void tram_embedding_on_event(const tram_event *ev)
{
    embed_input *in = (embed_input *)(uintptr_t)(ev->request_id & ~(uint64_t)1);
    tram_embedding *m = in->owner;
    if (ev->kind == TRAM_EV_ACCEPTED) {
        in->state = IN_ACCEPTED;
    } else if (ev->kind == TRAM_EV_REJECTED) {
        in->state = IN_SETTLED;
        m->unsettled--;
        if (ev->error.status == 503)
            m->srv->metrics.refused[TRAM_REFUSED_QUEUE_FULL]++;
        fail(m, &ev->error);
    } else if (ev->kind == TRAM_EV_OUTPUT) {
        on_output(m, in, &ev->out);
    }
    if (m->unsettled == 0)
        settle(m);
}

/* ------------------------------------------------------------ submission (loop) */

static int submit(tram_embedding *m)
{
    tram_submission *list = tram_worker_new_submissions(m->num_inputs), *sub = list;
    if (!list)
        return -1;
    for (int i = 0; i < m->num_inputs; i++, sub = sub->next) {
        embed_input *in = &m->inputs[i];
        in->owner = m;
        *sub = (tram_submission){.next = sub->next,
                                 .request_id = input_id(in),
                                 .prompt = {.token_ids = in->ids, .num_tokens = in->num_ids},
                                 .embed = &m->api.params,
                                 .priority = m->api.priority};
    }
    m->unsettled = m->num_inputs;
    tram_worker_submit(m->srv->worker, list);
    return 0;
}

static void prepared(tram_prep_task *t)
{
    tram_embedding *m = TRAM_CONTAINER_OF(t, tram_embedding, task);
    m->preparing = 0;
    if (!m->req && !m->error.status)
        tram_api_fail(&m->error, 499, NULL, NULL, "The client left while its request was prepared.");
    if (!m->error.status && submit(m))
        tram_api_out_of_memory(&m->error);
    if (m->error.status)
        answer(m);
}

static void on_close(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    tram_embedding *m = arg;
    tram_http_release_closed(m->req);
    m->req = NULL;
    abort_outstanding(m);
}

static void refuse_now(tram_server *s, struct evhttp_request *req, int reason, int status, const char *message)
{
    tram_api_error e = {0};
    if (reason >= 0)
        s->metrics.refused[reason]++;
    tram_api_fail(&e, status, NULL, NULL, "%s", message);
    tram_http_send_error(req, &e);
}

void tram_handle_embeddings(tram_server *s, struct evhttp_request *req)
{
    const char *unready = tram_server_unready(s);
    if (unready) {
        refuse_now(s, req, s->draining ? TRAM_REFUSED_DRAINING : TRAM_REFUSED_LOADING, 503, unready);
        return;
    }
    tram_embedding *m = calloc(1, sizeof(*m));
    if (!m || !(m->body = tram_http_take_body(req))) {
        free(m);
        refuse_now(s, req, -1, 500, "Out of memory.");
        return;
    }
    snprintf(m->tenant, sizeof(m->tenant), "%s", tram_api_keys_request_tenant(s->keys, req));
    m->srv = s;
    m->req = req;
    m->arrived = tram_now();
    m->task = (tram_prep_task){.run = prepare_task, .done = prepared};
    m->preparing = 1;
    TRAM_LIST_PUSH_HEAD(&s->embeddings, m, prev, next);
    if (tram_prep_pool_submit(s->prep, &m->task)) {
        m->req = NULL;
        embedding_free(m);
        refuse_now(s, req, TRAM_REFUSED_QUEUE_FULL, 503, TRAM_API_MSG_OVERLOADED);
        return;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_close, m);
}

/* ------------------------------------------------------------ all of them */

/* A request that waits sends and reads nothing: libevent would not notice
 * its client leaving. */
void tram_embeddings_poll_disconnects(tram_server *s)
{
    for (tram_embedding *m = s->embeddings.head, *next; m; m = next) {
        next = m->next;
        tram_http_poll_hangup(m->req);  /* runs on_close */
    }
}

void tram_embeddings_abort_all(tram_server *s)
{
    for (tram_embedding *m = s->embeddings.head; m; m = m->next)
        abort_outstanding(m);
}

void tram_embeddings_fail_all(tram_server *s)
{
    static const tram_api_error failed = {.status = 500, .message = "The engine failed."};
    for (;;) {
        tram_embedding *m = s->embeddings.head;
        while (m && m->preparing && s->prep)
            m = m->next;
        if (!m)
            return;
        m->error = failed;
        m->preparing = 0;
        answer(m);
    }
}
