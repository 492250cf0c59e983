/* The API key check and the key set with its tenants (server/auth.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/auth.h"

Test(server_auth, bearer_header)
{
    cr_assert(tram_auth_ok(NULL, NULL), "no key configured: everything passes");
    cr_assert(tram_auth_ok("", "junk"));
    cr_assert(tram_auth_ok("sk-abc", "Bearer sk-abc"));
    cr_assert(tram_auth_ok("sk-abc", "bearer   sk-abc  "), "scheme is case-insensitive");
    cr_assert(!tram_auth_ok("sk-abc", NULL));
    cr_assert(!tram_auth_ok("sk-abc", "sk-abc"), "the scheme is required");
    cr_assert(!tram_auth_ok("sk-abc", "Bearer sk-ab"), "a prefix of the key");
    cr_assert(!tram_auth_ok("sk-abc", "Bearer sk-abcd"), "the key plus more");
    cr_assert(!tram_auth_ok("sk-abc", "Bearer sk-abd"));
    cr_assert(!tram_auth_ok("sk-abc", "Bearer "));
    cr_assert(!tram_auth_ok("sk-abc", "Basic sk-abc"));
    /* the key repeated: equal modulo its length, still wrong */
    cr_assert(!tram_auth_ok("ab", "Bearer abab"));
}

/* A key file of the given text, in a temporary file; its path. */
static char *key_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/tram-keys-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static const char *tenant_of(const tram_api_keys *k, const char *key)
{
    char header[128];
    snprintf(header, sizeof(header), "Bearer %s", key);
    return tram_api_keys_tenant(k, header, NULL);
}

/* Command-line keys are key1, key2, ...; a file's are named or numbered
 * after them; comments and blank lines are nothing. */
Test(server_auth, keys_and_their_tenants)
{
    const char *flags[] = {"sk-one", "sk-two"};
    char *path = key_file("# tenants\n\nsk-alice alice\n  sk-bob\tbob   # the second\r\nsk-anon\nsk-alice2 alice\n");
    tram_api_keys *k;
    tram_error err = {{0}};
    cr_assert_eq(tram_api_keys_load(&k, flags, 2, path, &err), 0, "%s", err.msg);
    unlink(path);
    cr_assert_eq(tram_api_keys_count(k), 6);
    cr_assert_eq(tram_api_keys_tenants(k), 5, "alice's two keys are one tenant");
    cr_assert_str_eq(tenant_of(k, "sk-one"), "key1");
    cr_assert_str_eq(tenant_of(k, "sk-two"), "key2");
    cr_assert_str_eq(tenant_of(k, "sk-alice"), "alice");
    cr_assert_str_eq(tenant_of(k, "sk-alice2"), "alice");
    cr_assert_str_eq(tenant_of(k, "sk-bob"), "bob");
    cr_assert_str_eq(tenant_of(k, "sk-anon"), "key5");
    cr_assert_null(tenant_of(k, "sk-alic"));
    cr_assert_null(tenant_of(k, "alice"), "a tenant's name is not a key");
    cr_assert_null(tram_api_keys_tenant(k, NULL, NULL));
    cr_assert_null(tram_api_keys_tenant(k, "sk-one", NULL), "the scheme is required");
    cr_assert_str_eq(tram_api_keys_tenant(k, NULL, " sk-bob "), "bob", "X-Api-Key: the bare key");
    cr_assert_null(tram_api_keys_tenant(k, NULL, "Bearer sk-bob"), "X-Api-Key has no scheme");
    cr_assert_null(tram_api_keys_tenant(k, "Bearer sk-nope", "sk-bob"),
                   "Authorization, when sent, is the key presented");
    cr_assert_str_eq(tram_api_keys_tenant(k, "Bearer sk-bob", "sk-nope"), "bob");
    tram_api_keys_free(k);
    cr_assert_eq(tram_api_keys_load(&k, NULL, 0, NULL, &err), 0);
    cr_assert_str_eq(tram_api_keys_tenant(k, NULL, NULL), "", "no keys: everyone passes, as no tenant");
    tram_api_keys_free(k);
}

/* A bad file is refused whole, naming the line: keys never half-load. */
Test(server_auth, a_bad_key_file_names_its_line)
{
    static const struct { const char *text, *why; } bad[] = {
        {"sk-a a\nsk-b b c\n", ":2: expected a key and at most a tenant name"},
        {"sk-a a\n\nsk-a b\n", ":3: the key is given twice"},
        {"sk-a bad/name\n", ":1: a tenant name is letters"},
        {"sk-a \x01x\n", ":1: a tenant name is letters"},
        {"# nothing\n\n", "holds no key"},
        {"", "holds no key"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *path = key_file(bad[i].text);
        tram_api_keys *k = NULL;
        tram_error err = {{0}};
        cr_assert_eq(tram_api_keys_load(&k, NULL, 0, path, &err), -1, "%s", bad[i].text);
        unlink(path);
        cr_assert_null(k);
        cr_assert(strstr(err.msg, bad[i].why), "'%s': %s", bad[i].text, err.msg);
    }
    tram_api_keys *k = NULL;
    tram_error err = {{0}};
    cr_assert_eq(tram_api_keys_load(&k, NULL, 0, "/nonexistent/keys", &err), -1);
    cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);
    const char *flags[] = {"sk a"};
    cr_assert_eq(tram_api_keys_load(&k, flags, 1, NULL, &err), -1);
    cr_assert(strstr(err.msg, "--api-key number 1"), "%s", err.msg);
}
