/* utf8_ranges.c — code point ranges as UTF-8 byte ranges (see utf8_ranges.h). */
#include "grammar/utf8_ranges.h"

#include "kernels/utf8.h"

/* [lo, hi] of one encoded length whose encodings differ only in a suffix
 * that runs over every continuation byte: one sequence of byte ranges. */
static int split_same_length(uint32_t lo, uint32_t hi, tram_utf8_emit emit, void *ctx)
{
    uint8_t a[4], b[4];
    int n = tram_utf8_put(lo, (char *)a);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) == (hi & ~m))
            continue;
        if (lo & m) {
            int rc = split_same_length(lo, lo | m, emit, ctx);
            return rc ? rc : split_same_length((lo | m) + 1, hi, emit, ctx);
        }
        if ((hi & m) != m) {
            int rc = split_same_length(lo, (hi & ~m) - 1, emit, ctx);
            return rc ? rc : split_same_length(hi & ~m, hi, emit, ctx);
        }
    }
    tram_utf8_put(hi, (char *)b);
    return emit(ctx, a, b, n);
}

int tram_utf8_split(uint32_t lo, uint32_t hi, tram_utf8_emit emit, void *ctx)
{
    if (hi > TRAM_MAX_CODEPOINT)
        hi = TRAM_MAX_CODEPOINT;
    if (lo > hi)
        return 0;
    if (lo <= 0xDFFF && hi >= 0xD800) {
        int rc = lo < 0xD800 ? tram_utf8_split(lo, 0xD7FF, emit, ctx) : 0;
        return rc || hi <= 0xDFFF ? rc : tram_utf8_split(0xE000, hi, emit, ctx);
    }
    static const uint32_t length_ends[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= length_ends[i] && hi > length_ends[i]) {
            int rc = tram_utf8_split(lo, length_ends[i], emit, ctx);
            return rc ? rc : tram_utf8_split(length_ends[i] + 1, hi, emit, ctx);
        }
    return split_same_length(lo, hi, emit, ctx);
}

int tram_utf8_decode(const char *s, size_t avail, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    int n = u[0] < 0x80 ? 1 : (u[0] & 0xE0) == 0xC0 ? 2 : (u[0] & 0xF0) == 0xE0 ? 3
          : (u[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (size_t)n > avail)
        return 0;
    uint32_t c = n == 1 ? u[0] : u[0] & (0x3Fu >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (u[i] & 0x3F);
    }
    if (c > TRAM_MAX_CODEPOINT || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return n;
}

int tram_hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
