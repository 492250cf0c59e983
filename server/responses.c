/* responses.c — the Responses API's dialect and the endpoints of its
 * stored responses (responses.h): GET, DELETE, and the cancel of one that
 * runs in the background. */
#include "server/responses.h"

#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"
#include "server/completion.h"
#include "server/http.h"
#include "server/response_store.h"

const tram_dialect tram_responses_dialect = {
    .id_prefix = "resp_",
    .errors = TRAM_PROTOCOL_OPENAI,
    .to_chat = tram_responses_to_chat,
    .rename_error = tram_responses_rename_error,
    .response = tram_responses_response,
    .stream_start = tram_responses_stream_start,
    .chunk = tram_responses_chunk,
    .stream_end = tram_responses_stream_end,
    .background = tram_responses_background,
    .free_state = tram_responses_free,
};

#define RESPONSES_PATH "/v1/responses/"

/* The id in the path (the router matched its prefix) and the caller's tenant. */
static void target(tram_server *s, struct evhttp_request *req, const char **id, const char **tenant)
{
    *id = tram_http_path(req) + strlen(RESPONSES_PATH);
    *tenant = tram_api_keys_request_tenant(s->keys, req);
}

static void not_found(struct evhttp_request *req, const char *id)
{
    tram_api_error e = {0};
    tram_api_fail(&e, 404, NULL, "response_not_found", "Response with id '%.100s' not found.", id);
    tram_http_send_error(req, &e);
}

void tram_handle_response_get(tram_server *s, struct evhttp_request *req)
{
    const char *id, *tenant;
    char *text = NULL;
    target(s, req, &id, &tenant);
    if (!s->responses || tram_rstore_get(s->responses, tenant, id, TRAM_RSTORE_RESPONSE, &text, tram_now())) {
        not_found(req, id);
        return;
    }
    tram_http_send_text(req, 200, "application/json", text, strlen(text));
    free(text);
}

void tram_handle_response_delete(tram_server *s, struct evhttp_request *req)
{
    const char *id, *tenant;
    target(s, req, &id, &tenant);
    if (!s->responses || tram_rstore_delete(s->responses, tenant, id, tram_now())) {
        not_found(req, id);
        return;
    }
    tram_http_send_json(req, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1));
}

#define CANCEL_SUFFIX "/cancel"

/* The reply is the response as stored, cancelled: the engine's abort
 * arrives later, and the response is stored again as it ended then. */
void tram_handle_response_cancel(tram_server *s, struct evhttp_request *req)
{
    const char *path, *tenant;
    char id[64], *text = NULL;
    target(s, req, &path, &tenant);
    snprintf(id, sizeof(id), "%.*s", (int)(strlen(path) - strlen(CANCEL_SUFFIX)), path);
    if (!s->responses || tram_rstore_get(s->responses, tenant, id, TRAM_RSTORE_RESPONSE, &text, tram_now())) {
        not_found(req, id);
        return;
    }
    json_t *r = tram_completion_cancel(s, tenant, id) ? NULL : json_loads(text, 0, NULL);
    free(text);
    if (!r) {
        tram_api_error e = {0};
        tram_api_fail(&e, 400, NULL, "invalid_request", "Response '%.100s' is not a background response that "
                      "is still running: only those can be cancelled.", id);
        tram_http_send_error(req, &e);
        return;
    }
    json_object_set_new(r, "status", json_string("cancelled"));
    tram_http_send_json(req, 200, r);
}
