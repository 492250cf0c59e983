/* endpoints.h — the small endpoints: models, health, version, metrics,
 * tokenize and detokenize (these two on a preparation thread). */
#ifndef TRAM_ENDPOINTS_H
#define TRAM_ENDPOINTS_H

#include "server/api_error.h"
#include "server/state.h"

struct evhttp_request;

void tram_handle_models(tram_server *s, struct evhttp_request *req);
void tram_handle_health(tram_server *s, struct evhttp_request *req);  /* readiness */
void tram_handle_live(tram_server *s, struct evhttp_request *req);    /* liveness */
void tram_handle_version(tram_server *s, struct evhttp_request *req);
void tram_handle_metrics(tram_server *s, struct evhttp_request *req);
void tram_handle_tokenize(tram_server *s, struct evhttp_request *req);
void tram_handle_detokenize(tram_server *s, struct evhttp_request *req);
/* POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's), with
 * --enable-lora-runtime-updates; 404 without it. */
void tram_handle_load_lora(tram_server *s, struct evhttp_request *req);
void tram_handle_unload_lora(tram_server *s, struct evhttp_request *req);

/* Frees the /tokenize and /detokenize requests still held, at teardown
 * (once the preparation threads have stopped). */
void tram_endpoint_jobs_free(tram_server *s);

/* 404 with OpenAI's message when the request names a model we do not serve;
 * *lora is model when it names a LoRA adapter of the engine, else NULL. */
int tram_check_model(const tram_server *s, const char *model, const char **lora, tram_api_error *e);

#endif
