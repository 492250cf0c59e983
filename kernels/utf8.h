/* utf8.h — strict UTF-8 (RFC 3629): validation, encoding one code point, and
 * the lossy decode that turns invalid bytes into U+FFFD. */
#ifndef TRAM_UTF8_H
#define TRAM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0
 * when it is invalid or cut short. */
int tram_utf8_seq_len(const unsigned char *s, size_t n);
/* Offset of the first invalid byte, or len when s is valid UTF-8. */
size_t tram_utf8_validate(const char *s, size_t len);
/* Appends the code point's UTF-8 form to out; returns its length (1..4). */
int tram_utf8_put(uint32_t cp, char *out);
/* Copies s[0..n) to out (capacity 3n) with every maximal invalid subpart
 * replaced by U+FFFD; unless final, an incomplete sequence at the end is left
 * unconsumed.  Returns the bytes written; *consumed the bytes read. */
size_t tram_utf8_lossy(const char *s, size_t n, int final, char *out, size_t *consumed);

#endif
