/* completion.c — chat and text completions: one tram_completion per HTTP
 * request, from parsing to the last byte of the response.
 *
 * A request with k prompts and n samples becomes k engine requests (their ids
 * are the addresses of the completion_prompt entries) and k*n choices.  A
 * completion lives until every engine request it submitted has settled:
 * rejected, or finished (an abort finishes too), so an event never finds its
 * completion freed.  The client may be gone long before that (req is then
 * NULL).
 *
 * A client's request is prepared (parsed past the first level, rendered,
 * tokenized, its grammar compiled, its cache key made) on a thread of the
 * preparation pool, which then owns everything of the completion but the
 * fields the loop keeps (req, the list links, preparing); the loop thread
 * takes it back in prepared(), and drops it there when the client left. */
#include "server/completion.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "kernels/list.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/auth.h"
#include "server/cache_key.h"
#include "server/dialect.h"
#include "server/endpoints.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/output_check.h"
#include "server/prep_pool.h"
#include "server/prompt.h"
#include "server/structured.h"
#include "server/tool_calls.h"
#include "server/tool_grammar.h"
#include "tokenizer/tokenizer.h"

typedef enum { P_SUBMITTED, P_ACCEPTED, P_REJECTED, P_FINISHED } prompt_state;

typedef struct {
    tram_completion *completion;
    int index;
    int32_t *ids;
    int num_ids;
    char *echo;                 /* completions with echo: the prompt's text */
    prompt_state state;
    int aborted;                /* an abort was sent */
    int samples_left;
    int prompt_tokens, cached_tokens;
} completion_prompt;

/* A finished choice whose output is being checked against its JSON Schema
 * (the response's, or each forced tool call's parameters): its end waits for
 * every verdict. */
typedef struct choice_check choice_check;

typedef struct {
    choice_check *check;
    int call;                   /* the tool call checked, or -1: the whole output */
} check_ref;

struct choice_check {
    tram_completion *completion;
    completion_prompt *prompt;
    int index;                  /* the choice */
    const char *reason;         /* its finish reason once every check passed */
    int pending, n;
    check_ref *refs;            /* [n] */
    tram_check_ticket **tickets;/* [n] */
    json_t *failure;            /* the first check that failed */
};

/* What a request may do with the cache. */
enum { CACHE_MAY, CACHE_BYPASS, CACHE_NEEDED };

struct tram_completion {
    tram_server *srv;
    tram_completion *prev, *next;
    struct evhttp_request *req;  /* NULL once the client went away */
    tram_prep_task task;         /* its preparation on the pool */
    int preparing;               /* the task is on the pool: the loop leaves the rest alone */
    tram_api_kind kind;
    const tram_dialect *dialect; /* NULL, or the API spoken over chat (dialect.h) */
    void *dialect_state;
    int background;              /* answered already; runs on for its dialect, req NULL */
    int cache_use;               /* CACHE_MAY, _BYPASS or _NEEDED */
    struct evbuffer *body;       /* the body, until it is prepared */
    tram_api_error prep_error;   /* why preparing failed (status 0: it did not) */
    char *key;                   /* its response-cache key, when the cache may serve it */
    size_t key_len;
    uint64_t key_hash;
    tram_api_request api;
    const char *lora;            /* the LoRA adapter api.model names, or NULL: the base model */
    char id[48];
    tram_api_envelope env;
    completion_prompt *prompts;
    tram_api_choice *choices;    /* [num_prompts * n] */
    double *last_token_at;       /* per choice, for inter-token latency */
    int num_prompts, n, num_choices;
    int pending;                 /* prompts neither accepted nor rejected yet */
    int unfinished;              /* prompts accepted and not finished */
    int streaming;               /* the SSE response has started */
    tram_api_error error;        /* the first rejection (status 0: none) */
    int with_tools;              /* chat with tools and a tool_choice other than none */
    tram_tool_format tool_format;
    tram_tool_reader *readers;   /* with_tools: per choice, its calls read as the text comes */
    double arrived, first_token;
    long long completion_tokens;
    long long tokens_so_far;     /* generated so far, all choices (continuous usage) */
    tram_rcache_entry *flight;   /* the response-cache entry it leads or follows, or NULL */
    int follower;                /* fed by its flight's leader, never by the engine */
    char tenant[TRAM_TENANT_MAX + 1];  /* whose API key it came with (auth.h); "" without keys */
    tram_server_done done;       /* internal requests (warm-up, preload, batch): told at the end */
    void *done_arg;
    tram_jv_schema *schema;      /* the response's JSON Schema, checked as a choice stops; or NULL */
    tram_jv_schema **tool_schemas;  /* forced tool calls: each function's parameters, by tools index */
    choice_check *checks;        /* [num_choices] when anything is checked */
};

/* ------------------------------------------------------------ lifetime */

static tram_completion *completion_new(tram_server *s, struct evhttp_request *req,
                                       tram_api_kind kind, const tram_dialect *dialect, int cache_use)
{
    tram_completion *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->srv = s;
    c->req = req;
    c->kind = kind;
    c->dialect = dialect;
    c->cache_use = cache_use;
    c->arrived = tram_now();
    return c;
}

static void completion_free(tram_completion *c)
{
    for (int i = 0; c->prompts && i < c->num_prompts; i++) {
        free(c->prompts[i].ids);
        free(c->prompts[i].echo);
    }
    for (int i = 0; c->choices && i < c->num_choices; i++)
        tram_api_choice_free(&c->choices[i]);
    for (int i = 0; c->readers && i < c->num_choices; i++)
        tram_tool_reader_free(&c->readers[i]);
    for (int i = 0; c->checks && i < c->num_choices; i++) {
        choice_check *k = &c->checks[i];
        for (int j = 0; j < k->n; j++)
            if (k->tickets[j])
                tram_output_check_cancel(k->tickets[j]);
        free(k->refs);
        free(k->tickets);
        json_decref(k->failure);
    }
    free(c->checks);
    tram_jv_free(c->schema);
    for (size_t i = 0; c->tool_schemas && i < json_array_size(c->api.tools.tools); i++)
        tram_jv_free(c->tool_schemas[i]);
    TRAM_FREE_ALL(c->tool_schemas, c->readers, c->prompts, c->choices, c->last_token_at, c->key);
    if (c->body)
        evbuffer_free(c->body);
    tram_grammar_release(c->api.params.grammar);  /* structured.c's or tool_grammar.c's */
    tram_api_request_free(&c->api);
    if (c->dialect)
        c->dialect->free_state(c->dialect_state);
    free(c);
}

static void completion_unlink(tram_completion *c)
{
    TRAM_LIST_REMOVE(&c->srv->completions, c, prev, next);
    tram_completions_check_drained(c->srv);
}

/* ------------------------------------------------------------ preparation */

/* The prompts as token ids; chat has one, rendered with the template. */
static int tokenize_prompts(tram_completion *c, tram_api_error *e)
{
    const tram_engine *eng = c->srv->engine;
    const tram_tokenizer *tok = tram_engine_tokenizer(eng);
    if (c->api.kind == TRAM_API_CHAT) {
        char *text;
        if (tram_prompt_render_chat(c->srv->chat, &c->api, &text, e))
            return -1;
        /* the template writes BOS itself when the model wants one */
        int rc = tram_prompt_encode(eng, text, 0, &c->prompts[0].ids, &c->prompts[0].num_ids, e);
        free(text);
        return rc || tram_prompt_check(eng, c->prompts[0].ids, c->prompts[0].num_ids,
                                       c->api.params.max_tokens, "messages", e);
    }
    for (int i = 0; i < c->api.num_prompts; i++) {
        const tram_prompt *src = &c->api.prompts[i];
        completion_prompt *p = &c->prompts[i];
        if (src->text) {
            if (tram_prompt_encode(eng, src->text, tram_tokenizer_adds_bos(tok), &p->ids,
                                   &p->num_ids, e))
                return -1;
        } else {
            p->ids = malloc((size_t)(src->num_tokens ? src->num_tokens : 1) * sizeof(int32_t));
            if (!p->ids)
                return tram_api_out_of_memory(e);
            memcpy(p->ids, src->token_ids, (size_t)src->num_tokens * sizeof(int32_t));
            p->num_ids = src->num_tokens;
        }
        if (tram_prompt_check(eng, p->ids, p->num_ids, c->api.params.max_tokens, "prompt", e))
            return -1;
        if (c->api.echo && !src->text) {
            size_t len;
            if (tram_tokenizer_decode(tok, p->ids, p->num_ids, 0, &p->echo, &len, NULL))
                return tram_api_fail(e, 400, "prompt", "invalid_value",
                                     "Invalid 'prompt': the token ids cannot be decoded.");
        } else if (c->api.echo && !(p->echo = strdup(src->text))) {
            return tram_api_out_of_memory(e);
        }
    }
    return 0;
}

/* tools for a template whose call syntax tram cannot parse back out of the
 * reply: refused, rather than sent in a format the model was not taught. */
static int check_tools_supported(tram_completion *c, tram_api_error *e)
{
    if (c->api.tools.tools && tram_chat_template_tool_format(c->srv->chat) == TRAM_TOOLS_UNSUPPORTED)
        return tram_api_fail(e, 400, "tools", "invalid_value",
                             "Invalid 'tools': this model's chat template writes tool calls in a syntax tram cannot "
                             "parse (it parses Hermes <tool_call>, Llama 3 JSON and Mistral [TOOL_CALLS] calls).");
    return 0;
}

/* tool_choice "required" or a named function: the reply runs through the
 * grammar of the template's call syntax and the functions' schemas. */
static int enforce_tool_choice(tram_completion *c, tram_api_error *e)
{
    const tram_api_tools *t = &c->api.tools;
    if (t->choice != TRAM_TOOL_CHOICE_REQUIRED && t->choice != TRAM_TOOL_CHOICE_NAMED)
        return 0;
    if (c->api.params.grammar)
        return tram_api_fail(e, 400, "tool_choice", "invalid_value",
                             "Invalid 'tool_choice': a reply of tool calls cannot also follow "
                             "'response_format' or structured outputs.");
    const tram_engine *eng = c->srv->engine;
    c->api.params.grammar = tram_tool_grammar(tram_chat_template_tool_format(c->srv->chat), t,
                                              tram_engine_tokenizer(eng), e);
    return c->api.params.grammar ? tram_tool_validators(t, &c->tool_schemas, e) : -1;
}

/* The shape of c's error replies. */
static tram_api_protocol protocol_of(const tram_dialect *d)
{
    return d ? d->errors : TRAM_PROTOCOL_OPENAI;
}

/* The body parsed by its kind's or its dialect's parser, under an id of its kind. */
static int parse_body(tram_completion *c, tram_api_kind kind, const char *body, size_t len,
                      tram_api_error *e)
{
    c->env = (tram_api_envelope){.kind = kind, .id = c->id, .created = (long long)time(NULL),
                                 .model = c->srv->model_name};
    if (!c->dialect) {
        tram_api_make_id(kind, c->id);
        return tram_api_request_parse(&c->api, kind, &c->srv->defaults, body, len, e);
    }
    tram_api_random_id(c->dialect->id_prefix, c->id);
    json_t *root = tram_api_parse_object(body, len, e);
    if (!root)
        return -1;
    tram_dialect_request in = {.srv = c->srv, .body = root, .tenant = c->tenant, .id = c->id,
                               .created = c->env.created};
    int rc = tram_dialect_parse(c->dialect, &in, &c->srv->defaults, &c->api, &c->dialect_state, e);
    json_decref(root);
    return rc;
}

static int prepare_request(tram_completion *c, tram_api_kind kind, const char *body, size_t len,
                           tram_api_error *e)
{
    tram_server *s = c->srv;
    if (parse_body(c, kind, body, len, e) || tram_check_model(s, c->api.model, &c->lora, e) ||
        tram_structured_grammar(c->api.root, tram_engine_tokenizer(s->engine), &c->api.params.grammar, e) ||
        tram_structured_validator(c->api.root, &c->schema, e) ||
        check_tools_supported(c, e) || enforce_tool_choice(c, e))
        return -1;
    const char *param = NULL;
    tram_error err = {{0}};
    if (tram_engine_validate_params(s->engine, &c->api.params, &param, &err))
        return tram_api_fail(e, 400, param, "invalid_value", "%s", err.msg);
    c->with_tools = c->api.tools.choice != TRAM_TOOL_CHOICE_NONE;
    c->tool_format = tram_chat_template_tool_format(s->chat);
    if (c->with_tools && c->tool_format == TRAM_TOOLS_MISTRAL)
        c->api.params.skip_special_tokens = 0;  /* [TOOL_CALLS] is a special token */
    c->num_prompts = kind == TRAM_API_CHAT ? 1 : c->api.num_prompts;
    c->n = c->api.params.n;
    c->num_choices = c->num_prompts * c->n;
    c->prompts = calloc((size_t)c->num_prompts, sizeof(*c->prompts));
    c->choices = calloc((size_t)c->num_choices, sizeof(*c->choices));
    c->last_token_at = calloc((size_t)c->num_choices, sizeof(*c->last_token_at));
    c->readers = c->with_tools ? calloc((size_t)c->num_choices, sizeof(*c->readers)) : NULL;
    int checked = c->schema || c->tool_schemas;
    c->checks = checked ? calloc((size_t)c->num_choices, sizeof(*c->checks)) : NULL;
    if (!c->prompts || !c->choices || !c->last_token_at || (c->with_tools && !c->readers) || (checked && !c->checks))
        return tram_api_out_of_memory(e);
    for (int i = 0; c->readers && i < c->num_choices; i++)
        tram_tool_reader_init(&c->readers[i], c->tool_format, &c->api.tools);
    if (c->api.ignored[0])
        tram_log(TRAM_LOG_WARNING, "%s: accepted and ignored: %s", c->id, c->api.ignored);
    c->env.model = c->lora ? c->lora : s->model_name;   /* the adapter a request names is its model */
    return tokenize_prompts(c, e);
}

/* A dialect's request fails naming its own fields, not the chat body's. */
static int prepare(tram_completion *c, tram_api_kind kind, const char *body, size_t len,
                   tram_api_error *e)
{
    int rc = prepare_request(c, kind, body, len, e);
    if (rc && c->dialect)
        c->dialect->rename_error(c->dialect_state, e);
    return rc;
}

static void on_close(struct evhttp_connection *conn, void *arg);

/* Every prompt waits to be accepted; the client is watched from now on. */
static void await_acceptance(tram_completion *c)
{
    for (int i = 0; i < c->num_prompts; i++)
        c->prompts[i] = (completion_prompt){
            .completion = c, .index = i, .samples_left = c->n, .ids = c->prompts[i].ids,
            .num_ids = c->prompts[i].num_ids, .echo = c->prompts[i].echo};
    c->pending = c->num_prompts;
    if (c->req)
        evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), on_close, c);
}

static int submit(tram_completion *c)
{
    tram_submission *list = tram_worker_new_submissions(c->num_prompts), *sub = list;
    if (!list)
        return -1;
    for (int i = 0; i < c->num_prompts; i++, sub = sub->next) {
        completion_prompt *p = &c->prompts[i];
        *sub = (tram_submission){
            .next = sub->next,
            .request_id = (uint64_t)(uintptr_t)p,
            .prompt = {.token_ids = p->ids, .num_tokens = p->num_ids, .lora = c->lora},
            .params = &c->api.params,
            .priority = c->api.priority,
        };
    }
    await_acceptance(c);
    tram_worker_submit(c->srv->worker, list);
    return 0;
}

/* ------------------------------------------------------------ response cache */

static int apply_prompt_event(tram_completion *c, completion_prompt *p, const tram_event *ev);

/* A hit, or a flight joined late: the records so far, as the leader got them. */
static void replay(tram_completion *c, const tram_rcache_entry *e)
{
    int n = tram_rcache_num_records(e);
    for (int i = 0; i < n; i++) {
        const tram_rcache_record *rec = tram_rcache_record_at(e, i);
        tram_event ev = {.kind = rec->kind, .out = rec->out};
        if (rec->error)
            ev.error = *rec->error;
        if (apply_prompt_event(c, &c->prompts[rec->prompt], &ev))
            return;  /* finished, and freed */
    }
}

/* The leader's event goes into its entry, then to each follower, from the
 * last: one that finishes unfollows itself, and the last takes its place. */
static void forward(tram_completion *c, const completion_prompt *p, const tram_event *ev)
{
    tram_rcache_append(c->srv->cache, c->flight, ev, p->index);
    for (int i = tram_rcache_num_followers(c->flight) - 1; i >= 0; i--) {
        tram_completion *f = tram_rcache_follower(c->flight, i);
        apply_prompt_event(f, &f->prompts[p->index], ev);
    }
}

/* The key (and its hash) when the cache may serve c, as cache_key.h makes it
 * from the token ids; out of memory, c runs without the cache.  On the pool
 * thread: the key holds the whole body. */
static void make_cache_key(tram_completion *c)
{
    tram_server *s = c->srv;
    if (!s->cache || c->cache_use == CACHE_BYPASS || !c->api.response_cache ||
        !tram_cache_eligible(&c->api, s->cfg.response_cache))
        return;
    const int32_t **ids = malloc((size_t)c->num_prompts * sizeof(*ids));
    int *num = malloc((size_t)c->num_prompts * sizeof(*num));
    if (ids && num) {
        for (int i = 0; i < c->num_prompts; i++) {
            ids[i] = c->prompts[i].ids;
            num[i] = c->prompts[i].num_ids;
        }
        tram_cache_prompts prompts = {.ids = ids, .num_ids = num, .num_prompts = c->num_prompts};
        if (!tram_cache_key(&c->api, c->lora ? c->lora : s->model_name, c->tenant, &prompts, &c->key, &c->key_len))
            c->key_hash = tram_rcache_hash(c->key, c->key_len);
    }
    free(ids);
    free(num);
}

static void cache_header(tram_completion *c, const char *status)
{
    if (c->req)
        evhttp_add_header(evhttp_request_get_output_headers(c->req), "X-Tram-Cache", status);
}

/* 0: compute the request (leading a new entry, or without the cache); 1: an
 * entry serves it (a hit, replayed now, or a flight it now follows).  The
 * body opts out with "response_cache": false (api_request.c reads it). */
static int use_cache(tram_completion *c)
{
    tram_server *s = c->srv;
    tram_rcache_entry *entry = NULL;
    tram_rcache_result r = TRAM_RCACHE_MISS;
    if (c->key)
        r = tram_rcache_lookup_hashed(s->cache, c->key, c->key_len, c->key_hash, tram_now(), &entry);
    if (!entry)
        return 0;
    if (r == TRAM_RCACHE_MISS || (r == TRAM_RCACHE_JOIN && tram_rcache_follow(s->cache, entry, c))) {
        c->flight = r == TRAM_RCACHE_MISS ? entry : NULL;
        cache_header(c, "miss");
        return 0;
    }
    c->follower = 1;
    c->flight = r == TRAM_RCACHE_JOIN ? entry : NULL;
    cache_header(c, r == TRAM_RCACHE_JOIN ? "coalesced" : "hit");
    await_acceptance(c);
    replay(c, entry);
    return 1;
}

/* On the loop thread, once c is prepared: submits it, or attaches it to the
 * cache (bypass: never; need: or fail); -1 with e filled when it cannot run
 * (the caller answers, unlinks and frees c). */
static int proceed(tram_completion *c, tram_api_error *e)
{
    int served = use_cache(c);
    if (!served && c->cache_use == CACHE_NEEDED && !c->flight)
        return tram_api_fail(e, 400, NULL, NULL, "The request is not cacheable under this "
                             "--response-cache mode (temperature > 0 without a seed, or it opts "
                             "out).");
    if (!served && submit(c)) {
        if (!e->status)
            tram_api_out_of_memory(e);
        return -1;
    }
    return 0;
}

/* Everything whose cost grows with the request: on a pool thread for a
 * client's request, on the loop for the internal ones (bodies tram wrote). */
static int prepare_all(tram_completion *c, const char *body, size_t len, tram_api_error *e)
{
    if (prepare(c, c->kind, body, len, e))
        return e->status ? -1 : tram_api_out_of_memory(e);
    make_cache_key(c);
    return 0;
}

/* The pool thread's part. */
static void prepare_task(tram_prep_task *t)
{
    tram_completion *c = TRAM_CONTAINER_OF(t, tram_completion, task);
    size_t len;
    const char *body = tram_http_body_text(c->body, &len);
    if (!body)
        tram_api_out_of_memory(&c->prep_error);
    else
        prepare_all(c, body, len, &c->prep_error);
    evbuffer_free(c->body);
    c->body = NULL;
}

static void finish_background(tram_completion *c, const tram_api_usage *u, const tram_api_error *error);

/* Answers a request that cannot run, and frees it. */
static void refuse(tram_completion *c, const tram_api_error *e)
{
    tram_log(TRAM_LOG_INFO, "%s %d %s", c->id[0] ? c->id : "request", e->status, e->message);
    if (c->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), NULL, NULL);
        tram_http_send_error_as(c->req, e, protocol_of(c->dialect));
    } else if (c->background) {
        tram_api_usage none = {0};
        finish_background(c, &none, e);
    }
    completion_unlink(c);
    completion_free(c);
}

/* count_tokens: the prompt as the template renders it, counted. */
static void answer_count(tram_completion *c)
{
    evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), NULL, NULL);
    tram_http_send_json(c->req, 200, json_pack("{s:i}", "input_tokens", c->prompts[0].num_ids));
    completion_unlink(c);
    completion_free(c);
}

/* A dialect's background request is answered now and runs on without its
 * client (nor the response cache: no client waits on a flight). */
static void go_background(tram_completion *c)
{
    json_t *reply = c->dialect && c->dialect->background ? c->dialect->background(c->dialect_state) : NULL;
    if (!reply)
        return;
    evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), NULL, NULL);
    tram_http_send_json(c->req, 200, reply);
    c->req = NULL;
    c->background = 1;
    free(c->key);
    c->key = NULL;
}

/* The loop thread's part, once the pool thread is done with c: a client
 * that left while its request was prepared gets nothing submitted. */
static void prepared(tram_prep_task *t)
{
    tram_completion *c = TRAM_CONTAINER_OF(t, tram_completion, task);
    c->preparing = 0;
    tram_api_error e = c->prep_error;
    if (!c->req) {
        tram_log(TRAM_LOG_INFO, "%s 499 the client left while its request was prepared",
                 c->id[0] ? c->id : "request");
        completion_unlink(c);
        completion_free(c);
    } else if (!e.status && c->dialect && c->dialect->count_only) {
        answer_count(c);
    } else if (e.status) {
        refuse(c, &e);
    } else {
        go_background(c);
        if (proceed(c, &e))
            refuse(c, &e);
    }
}

/* A 503 counted under request_refused_total's reason. */
static void refuse_now(tram_server *s, struct evhttp_request *req, const tram_dialect *dialect, int reason,
                       const char *message)
{
    tram_api_error e = {0};
    s->metrics.refused[reason]++;
    tram_api_fail(&e, 503, NULL, NULL, "%s", message);
    tram_http_send_error_as(req, &e, protocol_of(dialect));
}

/* The body goes to the pool; the client is watched from now on, so drain
 * waits for it and a disconnect is noticed while it is prepared. */
static void handle_completion_request(tram_server *s, struct evhttp_request *req, tram_api_kind kind,
                                      const tram_dialect *dialect)
{
    const char *unready = tram_server_unready(s);
    if (unready) {
        refuse_now(s, req, dialect, s->draining ? TRAM_REFUSED_DRAINING : TRAM_REFUSED_LOADING, unready);
        return;
    }
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *cc = evhttp_find_header(in, "Cache-Control");
    int bypass = (dialect && dialect->count_only) || tram_cache_control_bypasses(cc);
    tram_completion *c = completion_new(s, req, kind, dialect, bypass ? CACHE_BYPASS : CACHE_MAY);
    if (!c || !(c->body = tram_http_take_body(req))) {
        tram_api_error e = {0};
        free(c);
        tram_api_out_of_memory(&e);
        tram_http_send_error_as(req, &e, protocol_of(dialect));
        return;
    }
    /* on the loop: a SIGHUP may reload the keys */
    snprintf(c->tenant, sizeof(c->tenant), "%s", tram_api_keys_request_tenant(s->keys, req));
    c->task = (tram_prep_task){.run = prepare_task, .done = prepared};
    c->preparing = 1;
    TRAM_LIST_PUSH_HEAD(&s->completions, c, prev, next);
    if (tram_prep_pool_submit(s->prep, &c->task)) {
        completion_unlink(c);
        completion_free(c);
        refuse_now(s, req, dialect, TRAM_REFUSED_QUEUE_FULL, TRAM_API_MSG_OVERLOADED);
        return;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_close, c);
}

void tram_handle_chat(tram_server *s, struct evhttp_request *req)
{
    handle_completion_request(s, req, TRAM_API_CHAT, NULL);
}

void tram_handle_completion(tram_server *s, struct evhttp_request *req)
{
    handle_completion_request(s, req, TRAM_API_COMPLETION, NULL);
}

void tram_handle_dialect(tram_server *s, struct evhttp_request *req, const tram_dialect *d)
{
    handle_completion_request(s, req, TRAM_API_CHAT, d);
}

int tram_completion_start_internal(tram_server *s, tram_api_kind kind, const char *body,
                                   size_t len, int must_cache, tram_server_done done,
                                   void *arg, tram_api_error *e)
{
    tram_completion *c = completion_new(s, NULL, kind, NULL, must_cache ? CACHE_NEEDED : CACHE_MAY);
    if (!c)
        return tram_api_out_of_memory(e);
    c->done = done;
    c->done_arg = arg;
    snprintf(c->tenant, sizeof(c->tenant), "%s", tram_api_keys_sole_tenant(s->keys));
    TRAM_LIST_PUSH_HEAD(&s->completions, c, prev, next);
    if (prepare_all(c, body, len, e) || proceed(c, e)) {
        completion_unlink(c);
        completion_free(c);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ finishing */

void tram_completions_check_drained(tram_server *s)
{
    if (s->draining && s->completions.count == 0 && s->num_flushing == 0 && s->jobs.count == 0 &&
        s->embeddings.count == 0)
        event_base_loopexit(s->base, NULL);
}

static void usage_of(const tram_completion *c, tram_api_usage *u)
{
    memset(u, 0, sizeof(*u));
    for (int i = 0; i < c->num_prompts; i++) {
        u->prompt_tokens += c->prompts[i].prompt_tokens;
        u->cached_tokens += c->prompts[i].cached_tokens;
    }
    u->completion_tokens = c->completion_tokens;
}

/* Writes a chunk of c's stream (to its dialect, if any) and releases it. */
static void write_chunk(tram_completion *c, json_t *chunk)
{
    if (c->dialect && chunk)
        c->dialect->chunk(c->dialect_state, chunk, c->req);
    else if (c->req && chunk)
        tram_http_sse_send(c->req, chunk);
    json_decref(chunk);
}

/* Sends a chunk of c's stream (with the usage so far when the client asked
 * for it on every chunk) and releases it. */
static void send_chunk(tram_completion *c, json_t *chunk)
{
    if (c->api.continuous_usage) {
        tram_api_usage u;
        usage_of(c, &u);
        u.completion_tokens = c->tokens_so_far;
        tram_api_chunk_set_usage(chunk, &u);
    }
    write_chunk(c, chunk);
}

/* How c ended, for its dialect. */
static tram_dialect_end end_of(const tram_completion *c, const tram_api_usage *u, const tram_api_error *error)
{
    return (tram_dialect_end){.env = &c->env, .choices = c->choices, .num_choices = c->num_choices, .usage = u,
                              .error = error};
}

/* The end of c's stream, error NULL or why it failed midway. */
static void end_stream(tram_completion *c, const tram_api_usage *u, const tram_api_error *error)
{
    if (!c->dialect) {
        tram_http_sse_done(c->req);
        return;
    }
    tram_dialect_end end = end_of(c, u, error);
    c->dialect->stream_end(c->dialect_state, &end, c->req);
}

/* The whole reply: chat's body, or its dialect's made of its end. */
static void send_response(tram_completion *c, const tram_api_usage *u)
{
    if (!c->dialect) {
        tram_http_send_json(c->req, 200, tram_api_response(&c->env, c->choices, c->num_choices, u));
        return;
    }
    tram_dialect_end end = end_of(c, u, NULL);
    tram_api_error e = {0};
    json_t *body = c->dialect->response(c->dialect_state, &end, &e);
    if (body)
        tram_http_send_json(c->req, 200, body);
    else
        tram_http_send_error_as(c->req, &e, c->dialect->errors);
}

/* A background request's end, kept by its dialect: nobody is answered. */
static void finish_background(tram_completion *c, const tram_api_usage *u, const tram_api_error *error)
{
    tram_dialect_end end = end_of(c, u, error);
    tram_api_error e = {0};
    json_t *body = c->dialect->response(c->dialect_state, &end, &e);
    if (!body)
        tram_log(TRAM_LOG_WARNING, "%s: the background response was lost: %s", c->id, e.message);
    json_decref(body);
}

static void respond(tram_completion *c, const tram_api_usage *u)
{
    if (c->error.status && !c->streaming) {
        tram_http_send_error_as(c->req, &c->error, protocol_of(c->dialect));
    } else if (c->streaming) {
        if (c->api.include_usage)
            write_chunk(c, tram_api_usage_chunk(&c->env, u));
        end_stream(c, u, c->error.status ? &c->error : NULL);
    } else {
        send_response(c, u);
    }
}

static void count_metrics(tram_completion *c, double now)
{
    tram_metrics *m = &c->srv->metrics;
    tram_histogram_observe(&m->e2e, now - c->arrived);
    m->served_tokens += (double)c->completion_tokens;
    long long prompt_tokens = 0;
    for (int i = 0; i < c->num_prompts; i++)
        prompt_tokens += c->prompts[i].num_ids;
    tram_metrics_count_tenant(m, c->tenant, prompt_tokens, c->completion_tokens);
    for (int i = 0; i < c->num_choices; i++) {
        const char *reason = c->choices[i].finish_reason;
        if (reason)  /* a reply of tool calls stopped as any other does */
            tram_metrics_count_finish(m, strcmp(reason, "tool_calls") ? reason : "stop");
    }
}

/* libevent wrote the whole reply (it does not call this when the write fails;
 * the drain deadline covers that case). */
static void on_flushed(struct evhttp_request *req, void *arg)
{
    (void)req;
    tram_server *s = arg;
    s->num_flushing--;
    tram_completions_check_drained(s);
}

/* Only a whole result is cached: no error, no choice aborted. */
static int cacheable(const tram_completion *c)
{
    if (c->error.status)
        return 0;
    for (int i = 0; i < c->num_choices; i++)
        if (!c->choices[i].finish_reason || !strcmp(c->choices[i].finish_reason, "abort"))
            return 0;
    return 1;
}

static void fail_completion(tram_completion *c, const tram_api_error *error);

/* An internal request's end, told with the status and body a client would
 * have been answered; a reply the drain cut short is no result. */
static void tell_done(tram_completion *c, const tram_api_usage *u)
{
    static const tram_api_error cut = {.status = 503, .message = TRAM_API_MSG_SHUTTING_DOWN};
    if (!c->error.status && !cacheable(c))
        c->error = cut;
    json_t *body = c->error.status ? tram_api_error_json(&c->error)
                                   : tram_api_response(&c->env, c->choices, c->num_choices, u);
    c->done(c->done_arg, c->error.status ? c->error.status : 200, body);
    json_decref(body);
}

/* The completion leaves its flight.  A leader ends the flight: followers
 * still attached (none, unless the leader ended early) fail. */
static void detach_flight(tram_completion *c, int cache_it)
{
    static const tram_api_error lost = {
        .status = 500, .message = "The identical request this one waited on ended without a result."};
    tram_rcache_entry *e = c->flight;
    c->flight = NULL;
    if (!e || c->follower) {
        if (e)
            tram_rcache_unfollow(e, c);
        return;
    }
    while (tram_rcache_num_followers(e) > 0) {
        tram_completion *f = tram_rcache_follower(e, 0);
        tram_rcache_unfollow(e, f);
        f->flight = NULL;
        fail_completion(f, &lost);
    }
    tram_rcache_complete(c->srv->cache, e, cache_it, tram_now());
}

/* Every engine request has settled: answer (if the client is still there),
 * count, log and free. */
static void finish_completion(tram_completion *c)
{
    double now = tram_now();
    tram_api_usage u;
    usage_of(c, &u);
    detach_flight(c, cacheable(c));
    if (c->error.status == 503)
        c->srv->metrics.refused[TRAM_REFUSED_QUEUE_FULL]++;
    if (c->done)
        tell_done(c, &u);
    int status = c->error.status && !c->streaming ? c->error.status : 200;
    if (c->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), NULL, NULL);
        evhttp_request_set_on_complete_cb(c->req, on_flushed, c->srv);
        c->srv->num_flushing++;
        respond(c, &u);
    } else if (c->background) {
        finish_background(c, &u, c->error.status ? &c->error : NULL);
    } else if (!c->done) {
        status = 499;  /* nginx's "client closed request" */
    }
    if (!c->error.status && !c->done)  /* internal requests are no traffic */
        count_metrics(c, now);
    tram_log(TRAM_LOG_INFO, "%s %d prompt_tokens=%lld completion_tokens=%lld cached_tokens=%lld "
             "ttft=%.3fs total=%.3fs%s%s", c->id, status, u.prompt_tokens, u.completion_tokens,
             u.cached_tokens, c->first_token ? c->first_token - c->arrived : 0.0, now - c->arrived,
             c->error.status ? " error=" : "", c->error.status ? c->error.message : "");
    completion_unlink(c);
    completion_free(c);
}

/* A follower has nothing in the engine: its leader's aborts reach it; nor
 * has a completion being prepared. */
static void abort_outstanding(tram_completion *c)
{
    if (c->preparing)
        return;
    for (int i = 0; !c->follower && i < c->num_prompts; i++) {
        completion_prompt *p = &c->prompts[i];
        if ((p->state == P_SUBMITTED || p->state == P_ACCEPTED) && !p->aborted &&
            tram_worker_abort(c->srv->worker, (uint64_t)(uintptr_t)p) == 0)
            p->aborted = 1;
    }
}

static void start_stream(tram_completion *c)
{
    c->streaming = 1;
    if (c->dialect) {
        c->dialect->stream_start(c->dialect_state, c->req, &c->env, c->prompts[0].num_ids);
        return;
    }
    tram_http_sse_start(c->req);
    for (int i = 0; c->api.kind == TRAM_API_CHAT && i < c->num_choices; i++)
        send_chunk(c, tram_api_chunk(&c->env, &(tram_api_delta){.index = i, .role = 1,
                                                        .text = c->with_tools ? NULL : ""},
                                     c->api.include_usage));
}

/* Called as prompts are accepted or rejected; 1 when it finished c. */
static int settle_prompts(tram_completion *c)
{
    if (c->pending > 0)
        return 0;
    if (c->error.status)
        abort_outstanding(c);
    else if (c->api.stream && c->req && !c->streaming)
        start_stream(c);
    if (c->unfinished > 0)
        return 0;
    finish_completion(c);
    return 1;
}

/* ------------------------------------------------------------ outputs */

/* Text (and logprobs) for one choice: a chunk when streaming, else kept for
 * the final body. */
static void emit_choice_text(tram_completion *c, int ci, const char *text, size_t len,
                 const tram_logprob_entry *lp, int num_lp, const char *finish_reason)
{
    tram_api_choice *choice = &c->choices[ci];
    tram_api_kind kind = c->api.kind;
    json_t *lpj = NULL;
    if (c->api.params.logprobs >= 0) {
        if (!c->streaming && !choice->logprobs)
            choice->logprobs = tram_api_logprobs_new(kind);
        lpj = c->streaming ? tram_api_logprobs_new(kind) : choice->logprobs;
        if (lpj)
            tram_api_logprobs_append(lpj, kind, tram_engine_tokenizer(c->srv->engine), lp, num_lp,
                                     &choice->text_offset);
    }
    if (!c->streaming || c->schema) /* a checked stream keeps its text for the check */
        tram_api_choice_append(choice, text, len);
    if (!c->streaming)
        return;
    send_chunk(c, tram_api_chunk(&c->env,
                                 &(tram_api_delta){.index = ci, .text = text, .len = len, .logprobs = lpj,
                                                   .finish_reason = finish_reason},
                                 c->api.include_usage));
}

/* Streams the choice's content text[sent..upto), with the logprobs kept so
 * far and the finish reason when given. */
static void send_content(tram_completion *c, int ci, size_t upto, const char *finish_reason)
{
    tram_api_choice *choice = &c->choices[ci];
    if (upto <= choice->sent && !choice->logprobs && !finish_reason)
        return;
    const char *text = upto > choice->sent ? choice->text + choice->sent : NULL;
    tram_api_delta d = {.index = ci, .text = text, .len = upto > choice->sent ? upto - choice->sent : 0,
                        .logprobs = choice->logprobs, .finish_reason = finish_reason};
    send_chunk(c, tram_api_chunk(&c->env, &d, c->api.include_usage));
    choice->logprobs = NULL;
    choice->sent = TRAM_MAX(choice->sent, upto);
}

/* Streams what the choice's reader is sure of so far: content, then each
 * call's name and the pieces of its arguments as they are written. */
static void stream_tools(tram_completion *c, int ci)
{
    tram_tool_delta d;
    while (tram_tool_reader_next(&c->readers[ci], &d)) {
        if (d.kind == TRAM_TOOL_DELTA_CONTENT)
            send_content(c, ci, d.to, NULL);
        else
            send_chunk(c, tram_api_tool_call_chunk(&c->env, ci, d.index, d.id, d.name, d.text, d.len,
                                                   c->api.include_usage));
    }
}

/* The end of a reply that may hold tool calls: when the whole text is
 * calls, the content is the text before them and the reason "tool_calls"
 * (or still "length": the calls it completed before max_tokens cut it).
 * Returns the finish reason. */
static const char *finish_with_tools(tram_completion *c, int ci, const char *reason, int hold)
{
    tram_api_choice *choice = &c->choices[ci];
    tram_tool_reader *r = &c->readers[ci];
    int cut = !strcmp(reason, "length"), failed = !strcmp(reason, "error");
    tram_tool_reader_finish(r, cut, failed || !strcmp(reason, "abort"));
    json_t *calls = tram_tool_reader_calls(r);
    if (calls && !cut && !failed)
        reason = "tool_calls";
    if (!c->streaming || hold) { /* a held stream keeps the calls for their checks */
        choice->tool_calls = calls;
        choice->len = r->content_end;
        if (choice->text)
            choice->text[choice->len] = 0;
    }
    if (!c->streaming)
        return reason;
    stream_tools(c, ci);
    if (!hold)
        send_content(c, ci, 0, reason);
    if (!hold)
        json_decref(calls);
    return reason;
}

/* Chat with tools: the text is kept whole and read for calls as it comes. */
static const char *emit_with_tools(tram_completion *c, int ci, const tram_output *o,
                                   const char *reason, int hold)
{
    tram_api_choice *choice = &c->choices[ci];
    tram_api_kind kind = c->api.kind;
    tram_api_choice_append(choice, o->text, o->text_len);
    if (c->api.params.logprobs >= 0 && (choice->logprobs ||
                                        (choice->logprobs = tram_api_logprobs_new(kind))))
        tram_api_logprobs_append(choice->logprobs, kind, tram_engine_tokenizer(c->srv->engine),
                                 o->logprobs, o->logprobs ? o->num_tokens : 0, &choice->text_offset);
    tram_tool_reader_feed(&c->readers[ci], choice->text ? choice->text : "", choice->len);
    if (reason)
        return finish_with_tools(c, ci, reason, hold);
    if (c->streaming)
        stream_tools(c, ci);
    return NULL;
}

static void observe_latency(tram_completion *c, int ci, double now, double queue_time)
{
    tram_metrics *m = &c->srv->metrics;
    if (!c->first_token) {
        c->first_token = now;
        tram_histogram_observe(&m->ttft, now - c->arrived);
        if (!c->follower)  /* a follower's queue time is its leader's, counted once */
            tram_histogram_observe(&m->queue, queue_time);
    }
    if (c->last_token_at[ci])
        tram_histogram_observe(&m->itl, now - c->last_token_at[ci]);
    c->last_token_at[ci] = now;
}

/* The last chunk of a held choice: its finish reason, and the error object
 * when its output failed its schema. */
static void send_final(tram_completion *c, int ci, const char *reason)
{
    tram_api_choice *choice = &c->choices[ci];
    tram_api_delta d = {.index = ci, .logprobs = choice->logprobs, .finish_reason = reason};
    json_t *chunk = tram_api_chunk(&c->env, &d, c->api.include_usage);
    choice->logprobs = NULL;
    tram_api_choice_set_error(json_array_get(json_object_get(chunk, "choices"), 0), choice->error);
    send_chunk(c, chunk);
}

/* Choice ci has ended with reason (held: its last chunk is still to send);
 * 1 when that finished c. */
static int end_choice(tram_completion *c, completion_prompt *p, int ci, const char *reason, int held)
{
    tram_api_choice *choice = &c->choices[ci];
    choice->finish_reason = reason;
    if (held && c->checks && c->checks[ci].failure) {
        choice->error = json_incref(c->checks[ci].failure);
        c->srv->metrics.schema_invalid++;
    }
    if (held && c->streaming)
        send_final(c, ci, reason);
    if (--p->samples_left > 0)
        return 0;
    p->state = P_FINISHED;
    if (--c->unfinished > 0 || c->pending > 0)
        return 0;
    finish_completion(c);
    return 1;
}

/* The error object of an output that failed its schema, named as vLLM
 * names a finish_reason "error" choice's cause. */
static json_t *check_failure(int call, int verdict, const tram_jv_failure *f)
{
    char msg[700];
    if (call >= 0)
        snprintf(msg, sizeof(msg), "tool call %d's arguments %s their parameters schema: %s", call,
                 verdict > 0 ? "fail" : "could not be checked against", f->message);
    else
        snprintf(msg, sizeof(msg), "the output %s its JSON Schema: %s",
                 verdict > 0 ? "fails" : "could not be checked against", f->message);
    return json_pack("{s:s, s:s, s:s, s:s}", "message", msg, "type", "invalid_output", "param", f->path,
                     "code", f->keyword[0] ? f->keyword : "unchecked");
}

static void on_checked(void *arg, int verdict, const tram_jv_failure *f)
{
    check_ref *ref = arg;
    choice_check *k = ref->check;
    k->tickets[ref - k->refs] = NULL;
    if (verdict && !k->failure)
        k->failure = check_failure(ref->call, verdict, f);
    if (--k->pending == 0)
        end_choice(k->completion, k->prompt, k->index, k->failure ? "error" : k->reason, 1);
}

/* The error object of a choice the engine ended with TRAM_FINISH_ERROR
 * (code: tram_output.error), in the shape of check_failure's. */
static json_t *engine_failure(const char *code)
{
    const char *why = !code ? "the engine could not go on"
                      : !strcmp(code, TRAM_GRAMMAR_DEAD_END) ? "the grammar allows no token here and cannot end"
                      : !strcmp(code, TRAM_GRAMMAR_BOUND) ? "the grammar passed a bound computing the next token's mask"
                      : "every token the grammar allows is held back by the sampling (min_tokens)";
    char msg[300];
    snprintf(msg, sizeof(msg), "the output cannot be completed: %s; the text so far is incomplete", why);
    return json_pack("{s:s, s:s, s:n, s:s}", "message", msg, "type", "invalid_output", "param", "code",
                     code ? code : "engine_error");
}

/* The schema a tool call's arguments must meet (its function's parameters). */
static tram_jv_schema *call_schema(const tram_completion *c, const json_t *call)
{
    const char *name = json_string_value(json_object_get(json_object_get(call, "function"), "name"));
    for (size_t i = 0; name && i < json_array_size(c->api.tools.tools); i++) {
        const json_t *fn = json_object_get(json_array_get(c->api.tools.tools, i), "function");
        if (!strcmp(json_string_value(json_object_get(fn, "name")), name))
            return c->tool_schemas[i];
    }
    return NULL;
}

/* Queues choice ci's checks: the output against the response's schema, or
 * each tool call's arguments against its function's.  Returns how many
 * were queued; none (and a failure recorded) when one cannot be. */
static int start_checks(tram_completion *c, completion_prompt *p, int ci, const char *reason)
{
    tram_api_choice *choice = &c->choices[ci];
    choice_check *k = &c->checks[ci];
    const json_t *calls = c->tool_schemas ? choice->tool_calls : NULL;
    int n = c->tool_schemas ? (int)json_array_size(calls) : 1;
    *k = (choice_check){.completion = c, .prompt = p, .index = ci, .reason = reason, .n = n,
                        .refs = calloc((size_t)(n ? n : 1), sizeof(check_ref)),
                        .tickets = calloc((size_t)(n ? n : 1), sizeof(tram_check_ticket *))};
    for (int i = 0; i < n && k->refs && k->tickets; i++) {
        const json_t *call = json_array_get(calls, (size_t)i);
        const char *args = json_string_value(json_object_get(json_object_get(call, "function"), "arguments"));
        tram_jv_schema *schema = c->tool_schemas ? call_schema(c, call) : c->schema;
        const char *text = c->tool_schemas ? args : choice->text ? choice->text : "";
        k->refs[i] = (check_ref){k, c->tool_schemas ? i : -1};
        if (!schema || !text ||
            !(k->tickets[i] = tram_output_check(c->srv->checker, schema, text, strlen(text), on_checked, &k->refs[i])))
            break;
        k->pending++;
    }
    if (k->pending < n && !k->failure) {
        tram_jv_failure f = {.message = "out of memory, or a call to an unknown function"};
        k->failure = check_failure(-1, -1, &f);
    }
    return k->pending; /* with a failure recorded, those queued still end it, as "error" */
}

/* 1 when it finished c. */
static int on_output(tram_completion *c, completion_prompt *p, const tram_output *o)
{
    int ci = p->index * c->n + o->sample_index;
    tram_api_choice *choice = &c->choices[ci];
    p->prompt_tokens = o->prompt_tokens;
    p->cached_tokens = o->cached_tokens;
    if (o->num_tokens > 0)
        observe_latency(c, ci, tram_now(), o->queue_time);
    c->tokens_so_far += o->num_tokens;
    const char *reason = tram_finish_reason_name(o->finish_reason);
    if (o->stop_string && !choice->stop_string && !(choice->stop_string = strdup(o->stop_string)))
        tram_log(TRAM_LOG_WARNING, "%s: out of memory keeping the stop string", c->id);
    if (!choice->started) {
        choice->started = 1;
        if (p->echo)
            emit_choice_text(c, ci, p->echo, strlen(p->echo), o->prompt_logprobs,
                 o->prompt_logprobs ? o->prompt_tokens : 0, NULL);
    }
    /* a complete output is checked against its schema before it ends, and
     * one the engine ended with an error carries it on its last chunk */
    int failed = o->finish_reason == TRAM_FINISH_ERROR;
    if (failed && !choice->error)
        choice->error = engine_failure(o->error);
    int hold = (reason && !strcmp(reason, "stop") && c->checks) || failed;
    if (c->with_tools)
        reason = emit_with_tools(c, ci, o, reason, hold);
    else
        emit_choice_text(c, ci, o->text, o->text_len, o->logprobs, o->logprobs ? o->num_tokens : 0,
                         hold ? NULL : reason);
    if (!reason)
        return 0;
    c->completion_tokens += o->completion_tokens;
    if (hold && !failed && start_checks(c, p, ci, reason) > 0)
        return 0;
    return end_choice(c, p, ci, hold && !failed && c->checks[ci].failure ? "error" : reason, hold);
}

/* One event for prompt p of c, from the engine or from c's flight; 1 when it
 * finished c. */
static int apply_prompt_event(tram_completion *c, completion_prompt *p, const tram_event *ev)
{
    switch (ev->kind) {
    case TRAM_EV_ACCEPTED:
        p->state = P_ACCEPTED;
        c->pending--;
        c->unfinished++;
        return settle_prompts(c);
    case TRAM_EV_REJECTED:
        p->state = P_REJECTED;
        c->pending--;
        if (!c->error.status)
            c->error = ev->error;
        return settle_prompts(c);
    case TRAM_EV_OUTPUT:
        return on_output(c, p, &ev->out);
    default:
        return 0;
    }
}

void tram_completion_on_event(const tram_event *ev)
{
    completion_prompt *p = (completion_prompt *)(uintptr_t)ev->request_id;
    tram_completion *c = p->completion;
    if (c->flight)
        forward(c, p, ev);
    apply_prompt_event(c, p, ev);
}

/* ------------------------------------------------------------ connections */

/* The last follower of flight left: a leader whose own client left too
 * computes for no one, unless it is an internal request (a preload fills
 * the cache). */
static void abort_if_unwanted(tram_server *s, const tram_rcache_entry *flight)
{
    if (!flight || tram_rcache_num_followers(flight) > 0)
        return;
    for (tram_completion *c = s->completions.head; c; c = c->next)
        if (c->flight == flight && !c->follower) {
            if (!c->req && !c->done)
                abort_outstanding(c);
            return;
        }
}

/* The client went away. */
static void on_close(struct evhttp_connection *conn, void *arg)
{
    (void)conn;
    tram_completion *c = arg;
    tram_http_release_closed(c->req);
    c->req = NULL;
    if (c->preparing)  /* prepared() drops it */
        return;
    if (c->follower) {  /* it only leaves: the leader runs on for the others */
        tram_rcache_entry *flight = c->flight;
        tram_server *s = c->srv;
        detach_flight(c, 0);
        completion_unlink(c);
        completion_free(c);
        abort_if_unwanted(s, flight);
    } else if (!c->flight || tram_rcache_num_followers(c->flight) == 0) {
        abort_outstanding(c);
    }
}

/* While a request waits or a non-streamed one runs, nothing reads or writes
 * its socket, so libevent would not notice the client leaving. */
void tram_completions_poll_disconnects(tram_server *s)
{
    for (tram_completion *c = s->completions.head, *next; c; c = next) {
        next = c->next;
        tram_http_poll_hangup(c->req);  /* runs on_close */
    }
}

int tram_completion_cancel(tram_server *s, const char *tenant, const char *id)
{
    for (tram_completion *c = s->completions.head; c; c = c->next)
        if (c->background && !strcmp(c->id, id) && !strcmp(c->tenant, tenant)) {
            abort_outstanding(c);
            return 0;
        }
    return -1;
}

void tram_completions_abort_all(tram_server *s)
{
    for (tram_completion *c = s->completions.head; c; c = c->next)
        abort_outstanding(c);
}

/* Answers c with error now, whatever it waits for, and frees it. */
static void fail_completion(tram_completion *c, const tram_api_error *error)
{
    c->error = *error;
    detach_flight(c, 0);
    if (c->req)
        evhttp_connection_set_closecb(evhttp_request_get_connection(c->req), NULL, NULL);
    if (c->req && c->streaming) {
        tram_api_usage u;
        usage_of(c, &u);
        end_stream(c, &u, &c->error);
    } else if (c->req) {
        tram_http_send_error_as(c->req, &c->error, protocol_of(c->dialect));
    } else if (c->background) {
        tram_api_usage u;
        usage_of(c, &u);
        finish_background(c, &u, &c->error);
    }
    if (c->done)
        tell_done(c, NULL);
    tram_log(TRAM_LOG_ERROR, "%s %d %s", c->id, error->status, error->message);
    completion_unlink(c);
    completion_free(c);
}

/* While the pool runs, a completion being prepared belongs to it: it is
 * failed at teardown, once the pool has stopped. */
void tram_completions_fail_all(tram_server *s)
{
    static const tram_api_error failed = {.status = 500, .message = "The engine failed."};
    for (;;) {  /* from the head each time: a leader's failure frees its followers */
        tram_completion *c = s->completions.head;
        while (c && c->preparing && s->prep)
            c = c->next;
        if (!c)
            return;
        fail_completion(c, &failed);
    }
}
