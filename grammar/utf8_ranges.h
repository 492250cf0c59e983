/* utf8_ranges.h — a range of code points as the UTF-8 byte-range sequences
 * that encode exactly it (the construction RE2 and Go's regexp use), so a
 * character class can be matched one byte at a time. */
#ifndef TRAM_GRAMMAR_UTF8_RANGES_H
#define TRAM_GRAMMAR_UTF8_RANGES_H

#include <stddef.h>
#include <stdint.h>

#define TRAM_MAX_CODEPOINT 0x10FFFFu

/* Called once per sequence: byte i lies in [lo[i], hi[i]], for n bytes. */
typedef int (*tram_utf8_emit)(void *ctx, const uint8_t *lo, const uint8_t *hi, int n);

/* Splits [lo, hi] (surrogates D800-DFFF left out) into sequences; returns
 * the first nonzero value emit returned, else 0. */
int tram_utf8_split(uint32_t lo, uint32_t hi, tram_utf8_emit emit, void *ctx);

/* The character at s (avail bytes there) into *cp; returns its length, or
 * 0 when it is not UTF-8 (a bad or missing continuation byte, past
 * U+10FFFF, a surrogate). */
int tram_utf8_decode(const char *s, size_t avail, uint32_t *cp);

/* A hex digit's value, or -1. */
int tram_hex_digit(char c);

#endif
