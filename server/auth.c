#include "server/auth.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

/* Walks the client's bytes only, reading the key cyclically, so neither an
 * early mismatch nor the key's length shows in the timing. */
static int equal_constant_time(const char *given, size_t glen, const char *key, size_t klen)
{
    unsigned diff = (unsigned)(glen ^ klen);
    for (size_t i = 0; i < glen; i++)
        diff |= (unsigned char)given[i] ^ (unsigned char)key[i % klen];
    return diff == 0;
}

int tram_auth_ok(const char *key, const char *authorization_header)
{
    if (!key || !key[0])
        return 1;
    const char *h = authorization_header;
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    while (*h == ' ')
        h++;
    size_t len = strlen(h);
    while (len && (h[len - 1] == ' ' || h[len - 1] == '\t'))
        len--;
    return equal_constant_time(h, len, key, strlen(key));
}
