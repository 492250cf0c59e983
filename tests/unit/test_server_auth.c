/* The API key check (server/auth.c). */
#include <criterion/criterion.h>

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
