#include "server/auth.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>

#define MAX_KEY_BYTES 512

typedef struct {
    char *key;
    size_t len;
    char tenant[TRAM_TENANT_MAX + 1];
} api_key;

struct tram_api_keys {
    api_key *keys;
    int n, cap;
};

/* Walks the client's bytes only, reading the key cyclically, so neither an
 * early mismatch nor the key's length shows in the timing. */
static int equal_constant_time(const char *given, size_t glen, const char *key, size_t klen)
{
    unsigned diff = (unsigned)(glen ^ klen);
    for (size_t i = 0; i < glen; i++)
        diff |= (unsigned char)given[i] ^ (unsigned char)key[i % klen];
    return diff == 0;
}

/* s without its leading blanks, and in *len the length of what is left
 * without the trailing spaces and tabs. */
static const char *trimmed(const char *s, size_t *len)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    *len = n;
    return s;
}

/* The token of "Bearer TOKEN" (the scheme in any case, blanks around the
 * token), or NULL. */
static const char *bearer_token(const char *h, size_t *len)
{
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    return trimmed(h + 7, len);
}

int tram_auth_ok(const char *key, const char *authorization_header)
{
    if (!key || !key[0])
        return 1;
    size_t len;
    const char *token = bearer_token(authorization_header, &len);
    return token && equal_constant_time(token, len, key, strlen(key));
}

/* The key a request presents: Authorization's bearer token when it sends
 * that header, else X-Api-Key's value (blanks around it dropped), or NULL. */
static const char *presented_key(const char *authorization, const char *x_api_key, size_t *len)
{
    if (authorization || !x_api_key)
        return bearer_token(authorization, len);
    return trimmed(x_api_key, len);
}

const char *tram_api_keys_tenant(const tram_api_keys *k, const char *authorization_header,
                                 const char *x_api_key_header)
{
    if (!k || !k->n)
        return "";
    size_t len;
    const char *token = presented_key(authorization_header, x_api_key_header, &len);
    if (!token)
        return NULL;
    int found = -1;
    for (int i = 0; i < k->n; i++) {
        int same = equal_constant_time(token, len, k->keys[i].key, k->keys[i].len);
        found = same ? i : found;   /* keys are unique: at most one is the same */
    }
    return found < 0 ? NULL : k->keys[found].tenant;
}

const char *tram_api_keys_request_tenant(const tram_api_keys *k, struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *tenant = tram_api_keys_tenant(k, evhttp_find_header(in, "Authorization"),
                                              evhttp_find_header(in, "X-Api-Key"));
    return tenant ? tenant : "";
}

int tram_api_keys_count(const tram_api_keys *k)
{
    return k ? k->n : 0;
}

int tram_api_keys_tenants(const tram_api_keys *k)
{
    int n = 0;
    for (int i = 0; k && i < k->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(k->keys[i].tenant, k->keys[j].tenant);
        n += !seen;
    }
    return n;
}

const char *tram_api_keys_sole_tenant(const tram_api_keys *k)
{
    return tram_api_keys_tenants(k) == 1 ? k->keys[0].tenant : "";
}

void tram_api_keys_free(tram_api_keys *k)
{
    for (int i = 0; k && i < k->n; i++)
        free(k->keys[i].key);
    if (k)
        free(k->keys);
    free(k);
}

/* What is wrong with key, or NULL: printable ASCII without blanks, as a
 * Bearer token is sent. */
static const char *bad_key(const char *key, size_t len, const tram_api_keys *k)
{
    if (!len || len > MAX_KEY_BYTES)
        return "a key has 1 to 512 characters";
    for (size_t i = 0; i < len; i++)
        if (key[i] < 0x21 || key[i] > 0x7e)
            return "a key is printable ASCII without blanks";
    for (int i = 0; i < k->n; i++)
        if (k->keys[i].len == len && !memcmp(k->keys[i].key, key, len))
            return "the key is given twice";
    return NULL;
}

static const char *bad_tenant(const char *name, size_t len)
{
    if (!len || len > TRAM_TENANT_MAX)
        return "a tenant name has 1 to 64 characters";
    for (size_t i = 0; i < len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i]))
            return "a tenant name is letters, digits, '_', '.' and '-'";
    return NULL;
}

/* Adds key[0..len) for tenant[0..tlen) (tlen 0: the label keyN); the reason
 * it cannot, or NULL. */
static const char *add_key(tram_api_keys *k, const char *key, size_t len, const char *tenant, size_t tlen)
{
    const char *why = bad_key(key, len, k);
    if (!why && tlen)
        why = bad_tenant(tenant, tlen);
    if (why)
        return why;
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 8;
        api_key *grown = realloc(k->keys, (size_t)cap * sizeof(*grown));
        if (!grown)
            return "out of memory";
        k->keys = grown;
        k->cap = cap;
    }
    api_key *a = &k->keys[k->n];
    if (!(a->key = malloc(len + 1)))
        return "out of memory";
    memcpy(a->key, key, len);
    a->key[len] = 0;
    a->len = len;
    if (tlen)
        snprintf(a->tenant, sizeof(a->tenant), "%.*s", (int)tlen, tenant);
    else
        snprintf(a->tenant, sizeof(a->tenant), "key%d", k->n + 1);
    k->n++;
    return NULL;
}

/* The next blank-separated field of *s, or NULL at the end of the line or a
 * comment. */
static const char *field(const char **s, size_t *len)
{
    const char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p || *p == '#' || *p == '\n' || *p == '\r')
        return NULL;
    const char *start = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
        p++;
    *len = (size_t)(p - start);
    *s = p;
    return start;
}

/* One line of a key file: nothing (blank or comment), or KEY [TENANT]. */
static const char *add_line(tram_api_keys *k, const char *line)
{
    size_t klen, tlen = 0;
    const char *key = field(&line, &klen);
    if (!key)
        return NULL;
    const char *tenant = field(&line, &tlen);
    size_t more;
    if (tenant && field(&line, &more))
        return "expected a key and at most a tenant name ('#' starts a comment)";
    return add_key(k, key, klen, tenant, tenant ? tlen : 0);
}

static int add_file(tram_api_keys *k, const char *path, tram_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return tram_fail(err, "%s: cannot open the file", path);
    char *line = NULL;
    size_t cap = 0;
    int number = 0, had = k->n, rc = 0;
    while (!rc && getline(&line, &cap, f) >= 0) {
        number++;
        const char *why = strlen(line) > 4096 ? "the line is longer than 4096 bytes" : add_line(k, line);
        if (why)
            rc = tram_fail(err, "%s:%d: %s", path, number, why);
    }
    if (!rc && ferror(f))
        rc = tram_fail(err, "%s: read error", path);
    if (!rc && k->n == had)
        rc = tram_fail(err, "%s: holds no key (an empty key file would let every request in)", path);
    free(line);
    fclose(f);
    return rc;
}

int tram_api_keys_load(tram_api_keys **out, const char *const *keys, int num_keys, const char *file,
                       tram_error *err)
{
    tram_api_keys *k = calloc(1, sizeof(*k));
    *out = NULL;
    if (!k)
        return tram_fail(err, "out of memory");
    for (int i = 0; i < num_keys; i++) {
        const char *why = add_key(k, keys[i], strlen(keys[i]), NULL, 0);
        if (why) {
            tram_api_keys_free(k);
            return tram_fail(err, "--api-key number %d: %s", i + 1, why);
        }
    }
    if (file && add_file(k, file, err)) {
        tram_api_keys_free(k);
        return -1;
    }
    *out = k;
    return 0;
}
