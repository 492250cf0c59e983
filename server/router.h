/* router.h — the one entry point of every HTTP request. */
#ifndef TRAM_ROUTER_H
#define TRAM_ROUTER_H

struct evhttp_request;

/* Finds the route, checks the method, the API key, the content type and the
 * body size, then runs the handler; installed with evhttp_set_gencb, with
 * the tram_server as srv. */
void tram_router_dispatch(struct evhttp_request *req, void *srv);

#endif
