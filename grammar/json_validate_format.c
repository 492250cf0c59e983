/* json_validate_format.c — the `format` values the validator asserts, each
 * by its RFC: date, time, date-time (RFC 3339 5.6; a leap second only at
 * 23:59:60 UTC), duration (RFC 3339 appendix A), email (RFC 5321 mailbox:
 * a dot-atom or quoted local part, a hostname or address literal), hostname
 * (RFC 1123 labels), ipv4 (dotted decimal, no leading zeros), ipv6 (RFC
 * 4291 text, no zone), uuid (RFC 4122 hex groups, any version), uri and
 * uri-reference (RFC 3986 characters and shape), json-pointer (RFC 6901),
 * regex (compiles as `pattern` does).  Any other format is an annotation. */
#include <arpa/inet.h>
#include <string.h>

#include "grammar/json_validate_schema.h"

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* n ASCII digits at s, as a number (-1 if they are not digits). */
static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int date_ok(const char *s, size_t n)
{
    static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n != 10 || s[4] != '-' || s[7] != '-')
        return 0;
    int y = digits(s, 4), m = digits(s + 5, 2), d = digits(s + 8, 2);
    if (y < 0 || m < 1 || m > 12 || d < 1 || d > days[m - 1])
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return !(m == 2 && d == 29 && !leap);
}

static int time_ok(const char *s, size_t n)
{
    if (n < 9 || s[2] != ':' || s[5] != ':')
        return 0;
    int h = digits(s, 2), mi = digits(s + 3, 2), sec = digits(s + 6, 2);
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60)
        return 0;
    size_t i = 8;
    if (i < n && s[i] == '.') {
        size_t start = ++i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == start)
            return 0;
    }
    int off = 0; /* minutes east of UTC */
    if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z'))
        off = 0;
    else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return 0;
        off = (s[i] == '+' ? 1 : -1) * (oh * 60 + om);
    } else
        return 0;
    int utc = ((h * 60 + mi - off) % 1440 + 1440) % 1440;
    return sec < 60 || utc == 23 * 60 + 59;
}

static int date_time_ok(const char *s, size_t n)
{
    return n > 11 && (s[10] == 'T' || s[10] == 't') && date_ok(s, 10) && time_ok(s + 11, n - 11);
}

/* RFC 3339 appendix A: P then date units in order (each optional tail
 * follows the previous), T and time units likewise, or weeks alone. */
static int duration_ok(const char *s, size_t n)
{
    if (n < 3 || s[0] != 'P')
        return 0;
    size_t i = 1;
    const char *units = "YMD";
    int in_time = 0, last = -1, any = 0;
    while (i < n) {
        if (s[i] == 'T') {
            if (in_time || i + 1 == n)
                return 0;
            in_time = 1, units = "HMS", last = -1, i++;
            continue;
        }
        size_t start = i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == start || i == n)
            return 0;
        if (!in_time && s[i] == 'W')
            return !any && i + 1 == n;
        const char *u = strchr(units, s[i]);
        if (!u || !*u || (last >= 0 && u - units != last + 1))
            return 0;
        last = (int)(u - units), any = 1, i++;
    }
    return any;
}

static int label_char(char c)
{
    return is_alpha(c) || is_digit(c) || c == '-';
}

static int hostname_ok(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!label_char(s[i]))
                return 0;
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || s[start] == '-' || s[i - 1] == '-')
            return 0;
        start = i + 1;
    }
    return 1;
}

static int ipv4_ok(const char *s, size_t n)
{
    int parts = 0;
    size_t i = 0;
    while (parts < 4) {
        size_t start = i;
        while (i < n && is_digit(s[i]) && i - start < 3)
            i++;
        size_t len = i - start;
        if (len == 0 || (len > 1 && s[start] == '0') || digits(s + start, (int)len) > 255)
            return 0;
        if (++parts < 4) {
            if (i >= n || s[i] != '.')
                return 0;
            i++;
        }
    }
    return i == n;
}

static int ipv6_ok(const char *s, size_t n)
{
    char buf[64];
    unsigned char addr[16];
    if (n >= sizeof(buf) || memchr(s, 0, n))
        return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_hex(buf[i]) && buf[i] != ':' && buf[i] != '.')
            return 0;
    return inet_pton(AF_INET6, buf, addr) == 1;
}

static int uuid_ok(const char *s, size_t n)
{
    if (n != 36)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !is_hex(s[i]))
            return 0;
    return 1;
}

static int atext(char c)
{
    return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-/=?^_`{|}~", c));
}

static int email_local_ok(const char *s, size_t n)
{
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        for (size_t i = 1; i + 1 < n; i++) {
            if (s[i] == '\\' && i + 2 < n)
                i++;
            else if (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
                return 0;
        }
        return 1;
    }
    if (n == 0 || s[0] == '.' || s[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(atext(s[i]) || (s[i] == '.' && s[i + 1] != '.')))
            return 0;
    return 1;
}

static int email_ok(const char *s, size_t n)
{
    const char *at = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '@')
            at = s + i; /* the last one: a quoted local part may hold '@' */
    if (!at)
        return 0;
    size_t local = (size_t)(at - s), dn = n - local - 1;
    const char *d = at + 1;
    if (!email_local_ok(s, local))
        return 0;
    if (dn > 2 && d[0] == '[' && d[dn - 1] == ']')
        return dn > 7 && !strncmp(d + 1, "IPv6:", 5) ? ipv6_ok(d + 6, dn - 7) : ipv4_ok(d + 1, dn - 2);
    return hostname_ok(d, dn);
}

/* RFC 3986 characters: unreserved, sub-delims, ":" "@" "/" "?", and "%"
 * with two hex digits; "#" once; "[" "]" only around an IPv6 host. */
static int uri_chars_ok(const char *s, size_t n)
{
    int hashes = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2]))
                return 0;
            i += 2;
        } else if (c == '#') {
            if (++hashes > 1)
                return 0;
        } else if (!(is_alpha(c) || is_digit(c) || (c && strchr("-._~!$&'()*+,;=:@/?[]", c))))
            return 0;
    }
    return 1;
}

/* "[" "]" appear only as an authority's whole host ("//[v6]:port/..."). */
static int brackets_ok(const char *s, size_t n)
{
    const char *open = memchr(s, '[', n), *close = memchr(s, ']', n);
    if (!open && !close)
        return 1;
    if (!open || !close || close < open || open < s + 2 || open[-1] != '/' || open[-2] != '/')
        return 0;
    if (memchr(close + 1, '[', (size_t)(s + n - close - 1)) || memchr(close + 1, ']', (size_t)(s + n - close - 1)))
        return 0;
    return ipv6_ok(open + 1, (size_t)(close - open - 1));
}

/* An authority ("//" up to the path): one userinfo "@" at most, a numeric
 * port. */
static int authority_ok(const char *s, size_t n)
{
    if (n < 2 || s[0] != '/' || s[1] != '/')
        return 1;
    size_t end = 2;
    while (end < n && s[end] != '/' && s[end] != '?' && s[end] != '#')
        end++;
    const char *host = s + 2, *at = memchr(host, '@', end - 2);
    if (at && memchr(at + 1, '@', (size_t)(s + end - at - 1)))
        return 0;
    if (at)
        host = at + 1;
    const char *close = memchr(host, ']', (size_t)(s + end - host));
    const char *colon = memchr(close ? close : host, ':', (size_t)(s + end - (close ? close : host)));
    for (const char *p = colon ? colon + 1 : s + end; p < s + end; p++)
        if (!is_digit(*p))
            return 0;
    return 1;
}

static size_t scheme_len(const char *s, size_t n)
{
    if (n == 0 || !is_alpha(s[0]))
        return 0;
    size_t i = 1;
    while (i < n && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'))
        i++;
    return i < n && s[i] == ':' ? i : 0;
}

static int uri_ok(const char *s, size_t n)
{
    size_t k = scheme_len(s, n);
    return k > 0 && uri_chars_ok(s + k + 1, n - k - 1) && brackets_ok(s + k + 1, n - k - 1) &&
           authority_ok(s + k + 1, n - k - 1);
}

static int uri_reference_ok(const char *s, size_t n)
{
    if (scheme_len(s, n))
        return uri_ok(s, n);
    /* a relative reference: its first segment holds no ':' */
    size_t first = 0;
    while (first < n && s[first] != '/' && s[first] != '?' && s[first] != '#')
        first++;
    return !memchr(s, ':', first) && uri_chars_ok(s, n) && brackets_ok(s, n) && authority_ok(s, n);
}

static int json_pointer_ok(const char *s, size_t n)
{
    if (n && s[0] != '/')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '~' && (i + 1 == n || (s[i + 1] != '0' && s[i + 1] != '1')))
            return 0;
    return 1;
}

static int regex_ok(const char *s, size_t n)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)s, n, JV_PCRE2_OPTIONS, &code, &off, NULL);
    pcre2_code_free(re);
    return re != NULL;
}

int jv_format_ok(const char *format, const char *s, size_t n, int *known)
{
    static const struct {
        const char *name;
        int (*ok)(const char *, size_t);
    } formats[] = {
        {"date", date_ok}, {"time", time_ok}, {"date-time", date_time_ok}, {"duration", duration_ok},
        {"email", email_ok}, {"hostname", hostname_ok}, {"ipv4", ipv4_ok}, {"ipv6", ipv6_ok},
        {"uuid", uuid_ok}, {"uri", uri_ok}, {"uri-reference", uri_reference_ok},
        {"json-pointer", json_pointer_ok}, {"regex", regex_ok},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(formats); i++)
        if (!strcmp(format, formats[i].name)) {
            *known = 1;
            return formats[i].ok(s, n);
        }
    *known = 0;
    return 1;
}
