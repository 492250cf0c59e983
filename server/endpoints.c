/* endpoints.c — the small endpoints: models, health, version, metrics,
 * tokenize and detokenize. */
#include "server/endpoints.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/list.h"
#include "server/api_request.h"
#include "server/cost.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/prep_pool.h"
#include "server/prompt.h"
#include "tokenizer/tokenizer.h"

/* 1 when model names one of the engine's LoRA adapters. */
static int is_lora(const tram_server *s, const char *model)
{
    char names[64][TRAM_LORA_NAME_MAX];
    int n = s->engine ? tram_engine_lora_names(s->engine, names, 64) : 0, found = 0;
    for (int i = 0; i < n && !found; i++)
        found = !strcmp(names[i], model);
    return found;
}

int tram_check_model(const tram_server *s, const char *model, const char **lora, tram_api_error *e)
{
    if (lora)
        *lora = NULL;
    if (!model || !strcmp(model, s->model_name))
        return 0;
    for (int i = 0; i < s->cfg.num_served_model_names; i++)
        if (!strcmp(model, s->cfg.served_model_names[i]))
            return 0;
    if (lora && is_lora(s, model)) {
        *lora = model;
        return 0;
    }
    return tram_api_fail(e, 404, "model", "model_not_found",
                         "The model '%.200s' does not exist. This server serves '%s' and the LoRA adapters "
                         "/v1/models lists.", model, s->model_name);
}

/* 503 until the engine is loaded; the endpoints below need it. */
static int need_engine(tram_server *s, struct evhttp_request *req)
{
    if (s->engine)
        return 0;
    tram_api_error e = {0};
    tram_api_fail(&e, 503, NULL, NULL, TRAM_API_MSG_LOADING);
    tram_http_send_error(req, &e);
    return -1;
}

static json_t *model_entry(const tram_server *s, const char *id, const char *parent)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:i}", "id", id, "object", "model", "created",
                     (json_int_t)s->metrics_info.start_time, "owned_by", "tram", "root",
                     parent ? id : tram_engine_model_name(s->engine), "parent",
                     parent ? json_string(parent) : json_null(), "max_model_len",
                     tram_engine_max_model_len(s->engine));
}

/* One entry per served name (--served-model-name a,b), then one per LoRA
 * adapter with the base as its parent, as vLLM lists them. */
void tram_handle_models(tram_server *s, struct evhttp_request *req)
{
    if (need_engine(s, req))
        return;
    json_t *data = json_array();
    int n = s->cfg.num_served_model_names ? s->cfg.num_served_model_names : 1;
    for (int i = 0; i < n; i++)
        json_array_append_new(data, model_entry(s, s->cfg.num_served_model_names ? s->cfg.served_model_names[i]
                                                                                 : s->model_name, NULL));
    char names[64][TRAM_LORA_NAME_MAX];
    int loras = tram_engine_lora_names(s->engine, names, 64);
    for (int i = 0; i < loras; i++)
        json_array_append_new(data, model_entry(s, names[i], s->model_name));
    tram_http_send_json(req, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* Readiness (/health as vLLM has it, and /readyz): 200 once the model is
 * loaded, warmed up and preloaded, 503 before that and while draining, so a
 * balancer sends nothing new to a replica that is going away. */
void tram_handle_health(tram_server *s, struct evhttp_request *req)
{
    const char *unready = tram_server_unready(s);
    if (unready) {
        tram_api_error e = {0};
        tram_api_fail(&e, 503, NULL, NULL, "%s", unready);
        tram_http_send_error(req, &e);
        return;
    }
    tram_http_send_text(req, 200, "application/json", "{}", 2);
}

/* Liveness (/livez): the event loop answers, loading and draining included;
 * a failed engine ends the process, so answering is being alive. */
void tram_handle_live(tram_server *s, struct evhttp_request *req)
{
    (void)s;
    tram_http_send_text(req, 200, "application/json", "{}", 2);
}

void tram_handle_version(tram_server *s, struct evhttp_request *req)
{
    (void)s;
    tram_http_send_json(req, 200, json_pack("{s:s}", "version", TRAM_SERVER_VERSION));
}

/* What the server keeps beside the engine: the response cache, the cost,
 * the engine thread's busy time, the KV cache's shape. */
static void fill_service_metrics(tram_server *s, tram_metrics *m)
{
    m->engine_busy_seconds = tram_worker_busy_seconds(s->worker);
    int queued, running;
    tram_prep_pool_counts(s->prep, &queued, &running);
    m->preparing = running;
    m->prep_waiting = queued;
    m->block_size = s->cfg.engine.block_size;
    m->prefix_caching = s->cfg.engine.enable_prefix_caching;
    if ((m->has_response_cache = s->cache != NULL)) {
        tram_rcache_stats st;
        tram_rcache_stats_get(s->cache, &st);
        m->rc_hits = (double)st.hits;
        m->rc_misses = (double)st.misses;
        m->rc_coalesced = (double)st.coalesced;
        m->rc_evicted_size = (double)st.evicted_size;
        m->rc_evicted_ttl = (double)st.evicted_ttl;
        m->rc_bytes = (double)st.bytes;
        m->rc_entries = st.entries;
    }
    if ((m->has_cost = s->cost.per_hour > 0)) {
        double now = tram_now();
        m->cost_per_hour = s->cost.per_hour;
        m->cost_total = tram_cost_total(&s->cost, now);
        tram_cost_window(&s->cost, now, m->served_tokens, tram_metrics_requests(m),
                         &m->cost_per_1k_tokens, &m->cost_per_1k_requests);
    }
}

/* Gauges and the engine's own counters are read at scrape time, from the
 * snapshot the engine publishes after every step. */
void tram_handle_metrics(tram_server *s, struct evhttp_request *req)
{
    tram_metrics *m = &s->metrics;
    fill_service_metrics(s, m);
    if (s->engine) {
        tram_engine_stats st;
        tram_engine_stats_get(s->engine, &st);
        m->running = st.num_running;
        m->waiting = st.num_waiting;
        m->kv_usage = st.kv_usage;
        m->prefix_queries = (double)st.prefix_cache_queries;
        m->prefix_hits = (double)st.prefix_cache_hits;
        m->preemptions = (double)st.num_preemptions;
        m->prompt_tokens = (double)st.prompt_tokens_total;
        m->generation_tokens = (double)st.generation_tokens_total;
        m->num_blocks = st.num_blocks_total;
        m->spec_positions = tram_engine_spec_tokens(s->engine);
        m->spec_drafts = (double)st.spec_decode_num_drafts;
        m->spec_draft_tokens = (double)st.spec_decode_num_draft_tokens;
        m->spec_accepted = (double)st.spec_decode_num_accepted_tokens;
        for (int i = 0; i < TRAM_SPEC_MAX_TOKENS; i++)
            m->spec_accepted_per_pos[i] = (double)st.spec_decode_num_accepted_tokens_per_pos[i];
        m->max_lora = st.max_loras;
        memcpy(m->running_loras, st.running_loras, sizeof(m->running_loras));
        memcpy(m->waiting_loras, st.waiting_loras, sizeof(m->waiting_loras));
    }
    char *text = tram_metrics_render(m, &s->metrics_info);
    if (!text) {
        tram_http_send_json(req, 500, NULL);
        return;
    }
    tram_http_send_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
    free(text);
}

/* vLLM's /tokenize: {"prompt": text} or {"messages": [...]}, with
 * add_special_tokens (default true). */
static int tokenize(tram_server *s, const json_t *o, int32_t **ids, int *n, tram_api_error *e)
{
    const json_t *prompt = json_object_get(o, "prompt");
    const json_t *add = json_object_get(o, "add_special_tokens");
    if (add && !json_is_boolean(add))
        return tram_api_fail(e, 400, "add_special_tokens", "invalid_type",
                             "Invalid type for 'add_special_tokens': expected a boolean.");
    int add_bos = (!add || json_is_true(add)) &&
                  tram_tokenizer_adds_bos(tram_engine_tokenizer(s->engine));
    if (json_is_string(prompt))
        return tram_prompt_encode(s->engine, json_string_value(prompt), add_bos, ids, n, e);
    if (!json_object_get(o, "messages"))
        return tram_api_fail(e, 400, "prompt", "missing_required_parameter",
                             "Missing required parameter: 'prompt' (a string) or 'messages'.");
    /* the conversation as a chat request would render it (the other fields
     * are this endpoint's own) */
    json_t *chat = json_pack("{s:O, s:O?, s:O?, s:O?, s:O?}", "messages", json_object_get(o, "messages"), "tools",
                             json_object_get(o, "tools"), "chat_template_kwargs",
                             json_object_get(o, "chat_template_kwargs"), "add_generation_prompt",
                             json_object_get(o, "add_generation_prompt"), "continue_final_message",
                             json_object_get(o, "continue_final_message"));
    tram_api_request r;
    char *body = chat ? json_dumps(chat, JSON_COMPACT) : NULL;
    json_decref(chat);
    int rc = body ? tram_api_request_parse(&r, TRAM_API_CHAT, &s->defaults, body, strlen(body), e)
                  : tram_api_out_of_memory(e);
    free(body);
    if (rc)
        return -1;
    char *text;
    rc = tram_prompt_render_chat(s->chat, &r, &text, e);
    tram_api_request_free(&r);
    if (rc)
        return -1;
    rc = tram_prompt_encode(s->engine, text, 0, ids, n, e);
    free(text);
    return rc;
}

/* The reply to /tokenize: the prompt's ids; NULL with e filled on an error
 * (NULL alone: out of memory). */
static json_t *tokenize_reply(tram_server *s, const json_t *o, tram_api_error *e)
{
    int32_t *ids = NULL;
    int n = 0;
    if (tokenize(s, o, &ids, &n, e))
        return NULL;
    json_t *tokens = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(tokens, json_integer(ids[i]));
    free(ids);
    return json_pack("{s:i, s:i, s:o}", "count", n, "max_model_len",
                     tram_engine_max_model_len(s->engine), "tokens", tokens);
}

/* The reply to /detokenize: the text of the ids, as tokenize_reply. */
static json_t *detokenize_reply(tram_server *s, const json_t *o, tram_api_error *e)
{
    int32_t *ids = NULL;
    int n = 0;
    char *text = NULL;
    size_t text_len;
    const json_t *tokens = json_object_get(o, "tokens");
    if (tram_api_token_ids(tokens ? tokens : json_null(), "tokens", &ids, &n, e) ||
        tram_prompt_check(s->engine, ids, n, -1, "tokens", e) ||
        tram_tokenizer_decode(tram_engine_tokenizer(s->engine), ids, n, 0, &text, &text_len,
                              NULL)) {
        if (!e->status)
            tram_api_fail(e, 400, "tokens", "invalid_value", "The tokens cannot be decoded.");
        free(ids);
        return NULL;
    }
    free(ids);
    json_t *reply = json_pack("{s:s%}", "prompt", text, text_len);
    free(text);
    return reply;
}

/* A /tokenize or /detokenize request: its body is parsed and answered on a
 * preparation thread (a 4 MB body takes seconds to tokenize); the loop
 * thread sends the reply, or drops it when the client left. */
typedef json_t *(*job_reply)(tram_server *, const json_t *, tram_api_error *);

typedef struct tram_endpoint_job {
    tram_prep_task task;        /* first: the task is the job */
    tram_server *srv;
    struct tram_endpoint_job *prev, *next;
    struct evhttp_request *req; /* NULL once the client went away */
    struct evbuffer *body;
    job_reply reply;
    char *reply_text;           /* the reply's JSON, dumped on the pool thread too (a
                                   million token ids take a while); NULL: see error */
    tram_api_error error;
} job;

static void job_free(job *j)
{
    TRAM_LIST_REMOVE(&j->srv->jobs, j, prev, next);
    if (j->body)
        evbuffer_free(j->body);
    free(j->reply_text);
    free(j);
}

/* On the pool thread: the body is a JSON object, the model (if named) is
 * ours, and reply() makes the answer. */
static void job_run(tram_prep_task *t)
{
    job *j = (job *)t;
    size_t len;
    const char *body = tram_http_body_text(j->body, &len);
    json_t *o = body ? tram_api_parse_object(body, len, &j->error) : NULL;
    json_t *result = NULL;
    const char *lora;   /* an adapter tokenizes as its base model does */
    if (o && !tram_check_model(j->srv, json_string_value(json_object_get(o, "model")), &lora, &j->error))
        result = j->reply(j->srv, o, &j->error);
    j->reply_text = result ? json_dumps(result, JSON_COMPACT) : NULL;
    if (!j->reply_text && !j->error.status)
        tram_api_out_of_memory(&j->error);
    json_decref(result);
    json_decref(o);
    evbuffer_free(j->body);
    j->body = NULL;
}

static void job_done(tram_prep_task *t)
{
    job *j = (job *)t;
    if (j->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(j->req), NULL, NULL);
        if (j->error.status)
            tram_http_send_error(j->req, &j->error);
        else
            tram_http_send_text(j->req, 200, "application/json", j->reply_text, strlen(j->reply_text));
    }
    job_free(j);
}

/* The client went away. */
static void job_on_close(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    job *j = arg;
    tram_http_release_closed(j->req);
    j->req = NULL;
}

static void answer_model_request(tram_server *s, struct evhttp_request *req, job_reply reply)
{
    if (need_engine(s, req))
        return;
    tram_api_error e = {0};
    job *j = malloc(sizeof(*j));
    struct evbuffer *body = j ? tram_http_take_body(req) : NULL;
    if (!body) {
        free(j);
        tram_api_out_of_memory(&e);
        tram_http_send_error(req, &e);
        return;
    }
    *j = (job){.task = {.run = job_run, .done = job_done}, .srv = s, .req = req,
               .body = body, .reply = reply};
    TRAM_LIST_PUSH_HEAD(&s->jobs, j, prev, next);
    if (tram_prep_pool_submit(s->prep, &j->task)) {
        j->req = NULL;
        job_free(j);
        s->metrics.refused[TRAM_REFUSED_QUEUE_FULL]++;
        tram_api_fail(&e, 503, NULL, NULL, TRAM_API_MSG_OVERLOADED);
        tram_http_send_error(req, &e);
        return;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), job_on_close, j);
}

void tram_endpoint_jobs_free(tram_server *s)
{
    while (s->jobs.head) {
        job *j = s->jobs.head;
        if (j->req)
            evhttp_connection_set_closecb(evhttp_request_get_connection(j->req), NULL, NULL);
        job_free(j);
    }
}

void tram_handle_tokenize(tram_server *s, struct evhttp_request *req)
{
    answer_model_request(s, req, tokenize_reply);
}

void tram_handle_detokenize(tram_server *s, struct evhttp_request *req)
{
    answer_model_request(s, req, detokenize_reply);
}

/* ------------------------------------------------------------ LoRA runtime updates */

static const char *lora_name_of(const json_t *o, tram_api_error *e)
{
    const char *name = json_string_value(json_object_get(o, "lora_name"));
    if (!name || !*name)
        tram_api_fail(e, 400, "lora_name", "invalid_value", "'lora_name' must be a non-empty string.");
    return name;
}

/* vLLM's POST /v1/load_lora_adapter {"lora_name", "lora_path"}: the files
 * are read and checked here, on a preparation thread. */
static json_t *load_lora_reply(tram_server *s, const json_t *o, tram_api_error *e)
{
    const char *name = lora_name_of(o, e), *path = json_string_value(json_object_get(o, "lora_path")), *lora;
    tram_error err = {{0}};
    if (!name)
        return NULL;
    if (!path || !*path)
        return tram_api_fail(e, 400, "lora_path", "invalid_value", "'lora_path' must be a non-empty string."),
               NULL;
    tram_api_error unused = {0};
    if (!tram_check_model(s, name, &lora, &unused) && !lora)
        return tram_api_fail(e, 400, "lora_name", "invalid_value", "'%.200s' is the base model's name.", name), NULL;
    if (tram_engine_add_lora(s->engine, name, path, &err))
        return tram_api_fail(e, 400, "lora_path", "invalid_value", "%s", err.msg), NULL;
    tram_log(TRAM_LOG_INFO, "LoRA adapter '%s' loaded from %s", name, path);
    return json_pack("{s:s, s:s}", "lora_name", name, "status", "loaded");
}

/* POST /v1/unload_lora_adapter {"lora_name"}: refused (409) while requests
 * that use it are unfinished, rather than waiting for them. */
static json_t *unload_lora_reply(tram_server *s, const json_t *o, tram_api_error *e)
{
    const char *name = lora_name_of(o, e), *lora = NULL;
    tram_error err = {{0}};
    if (!name)
        return NULL;
    tram_api_error unused = {0};
    if (tram_check_model(s, name, &lora, &unused) || !lora)
        return tram_api_fail(e, 404, "lora_name", "model_not_found", "No LoRA adapter named '%.200s' is loaded.",
                             name), NULL;
    if (tram_engine_remove_lora(s->engine, name, &err))
        return tram_api_fail(e, 409, "lora_name", "conflict", "%s", err.msg), NULL;
    tram_log(TRAM_LOG_INFO, "LoRA adapter '%s' unloaded", name);
    return json_pack("{s:s, s:s}", "lora_name", name, "status", "unloaded");
}

/* The two endpoints exist only with --enable-lora-runtime-updates. */
static int lora_updates_on(tram_server *s, struct evhttp_request *req)
{
    if (s->cfg.enable_lora_runtime_updates)
        return 1;
    tram_api_error e = {0};
    tram_api_fail(&e, 404, NULL, "unknown_url", "Invalid URL (POST %s): LoRA adapters are loaded at runtime only "
                  "with --enable-lora-runtime-updates.", tram_http_path(req));
    tram_http_send_error(req, &e);
    return 0;
}

void tram_handle_load_lora(tram_server *s, struct evhttp_request *req)
{
    if (lora_updates_on(s, req))
        answer_model_request(s, req, load_lora_reply);
}

void tram_handle_unload_lora(tram_server *s, struct evhttp_request *req)
{
    if (lora_updates_on(s, req))
        answer_model_request(s, req, unload_lora_reply);
}
