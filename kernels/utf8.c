/* utf8.c — strict UTF-8 (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF), the same rules Rust's str and PCRE2 enforce. */
#include "kernels/utf8.h"

/* Allowed range of the second byte for each lead byte; later bytes are
 * always 80..BF. */
static int lead_info(unsigned char c, int *need, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xbf;
    if (c < 0x80)
        *need = 1;
    else if (c >= 0xc2 && c <= 0xdf)
        *need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        *need = 3;
        if (c == 0xe0)
            *lo = 0xa0;
        if (c == 0xed)
            *hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        *need = 4;
        if (c == 0xf0)
            *lo = 0x90;
        if (c == 0xf4)
            *hi = 0x8f;
    } else
        return 0;
    return 1;
}

/* Number of leading bytes of s[0..n) that are consistent with a valid
 * sequence, and the sequence's full length in *need. */
static size_t valid_prefix(const unsigned char *s, size_t n, int *need)
{
    unsigned char lo, hi;
    *need = 1;  /* a byte that cannot lead is an invalid sequence of its own */
    if (!n || !lead_info(s[0], need, &lo, &hi))
        return 0;
    size_t k = 1;
    while (k < (size_t)*need && k < n) {
        unsigned char a = k == 1 ? lo : 0x80, b = k == 1 ? hi : 0xbf;
        if (s[k] < a || s[k] > b)
            break;
        k++;
    }
    return k;
}

int tram_utf8_seq_len(const unsigned char *s, size_t n)
{
    int need;
    size_t k = valid_prefix(s, n, &need);
    return k && k == (size_t)need ? need : 0;
}

size_t tram_utf8_validate(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int k = tram_utf8_seq_len(u + i, len - i);
        if (!k)
            return i;
        i += (size_t)k;
    }
    return len;
}

int tram_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t tram_utf8_lossy(const char *s, size_t n, int final, char *out, size_t *consumed)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        int need;
        size_t k = valid_prefix(u + i, n - i, &need);
        if (k == (size_t)need) {
            for (size_t j = 0; j < k; j++)
                out[o++] = s[i + j];
        } else if (k == n - i && !final) {
            break;   /* may still complete */
        } else {
            /* One U+FFFD per maximal invalid subpart, like Rust's from_utf8_lossy. */
            o += (size_t)tram_utf8_put(0xfffd, out + o);
            k = k ? k : 1;
        }
        i += k;
    }
    *consumed = i;
    return o;
}
