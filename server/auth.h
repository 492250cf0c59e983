/* auth.h — API keys: the Authorization: Bearer check, and the tenant each
 * key belongs to (what metrics are labelled by and the response cache is
 * separated by; never the key itself). */
#ifndef TRAM_AUTH_H
#define TRAM_AUTH_H

#include "kernels/base.h"

struct evhttp_request;

#define TRAM_TENANT_MAX 64   /* bytes of a tenant name: [A-Za-z0-9_.-] */

/* Returns 1 when the request may pass: no key is configured (key NULL or
 * ""), or header is "Bearer <key>".  The comparison takes time that depends
 * only on the length of what the client sent, never on how much of the key
 * it guessed right. */
int tram_auth_ok(const char *key, const char *authorization_header);

typedef struct tram_api_keys tram_api_keys;

/* The keys of `tram serve`: those of the command line (--api-key, each
 * labelled key1, key2, ... in order) and those of a key file (NULL: none),
 * one key a line with an optional tenant name after it (`KEY TENANT`;
 * without one the key is labelled keyN, N its place among all the keys),
 * blank lines and `#` comments ignored.  A malformed line, a key given twice
 * or a file without a key is -1 with err naming the file and the line. */
int tram_api_keys_load(tram_api_keys **out, const char *const *keys, int num_keys, const char *file,
                       tram_error *err);
void tram_api_keys_free(tram_api_keys *k);
int tram_api_keys_count(const tram_api_keys *k);
/* How many tenant names the keys have (keys sharing a name count once). */
int tram_api_keys_tenants(const tram_api_keys *k);
/* The name every key shares, or "" with no keys or several names: the
 * tenant of the requests the server makes itself (the preload), so that a
 * single tenant's preloaded replies are its own. */
const char *tram_api_keys_sole_tenant(const tram_api_keys *k);
/* The tenant of the key a request carries, NULL when it carries none of
 * them: the Authorization header's ("Bearer KEY") when it sends one, else
 * the X-Api-Key header's (Anthropic's SDKs send that one); either header may
 * be NULL.  With no keys at all (k NULL or empty) every request passes, as
 * tenant "".  Every key is compared, each over the whole of what the client
 * sent: the time says neither which key matched nor how much of one was
 * right. */
const char *tram_api_keys_tenant(const tram_api_keys *k, const char *authorization_header,
                                 const char *x_api_key_header);
/* The same read from a request's headers, for a request the router let in:
 * never NULL ("" when it carries no key and none is needed). */
const char *tram_api_keys_request_tenant(const tram_api_keys *k, struct evhttp_request *req);

#endif
