/* auth.h — API key check for the Authorization: Bearer header. */
#ifndef TRAM_AUTH_H
#define TRAM_AUTH_H

/* Returns 1 when the request may pass: no key is configured (key NULL or
 * ""), or header is "Bearer <key>".  The comparison takes time that depends
 * only on the length of what the client sent, never on how much of the key
 * it guessed right. */
int tram_auth_ok(const char *key, const char *authorization_header);

#endif
