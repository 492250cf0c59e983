/* json_schema_number.c — integer and number schemas: the bounds as digit
 * ranges (see json_schema_gen.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grammar/json_schema_gen.h"

#define MAX_MAGNITUDE 9999999999999999LL /* 16 digits: every generated integer part */

static int digits_of(long long x)
{
    int d = 1;
    while (x >= 10) {
        x /= 10;
        d++;
    }
    return d;
}

static int all_char(const char *s, int n, char ch)
{
    for (int i = 0; i < n; i++)
        if (s[i] != ch)
            return 0;
    return 1;
}

/* Decimal strings lo..hi of the same length n, as GBNF. */
static void same_length(tram_strbuf *b, const char *lo, const char *hi, int n)
{
    if (n == 0)
        return;
    if (all_char(lo, n, '0') && all_char(hi, n, '9')) {
        tram_strbuf_addf(b, " [0-9]{%d}", n);
        return;
    }
    if (lo[0] == hi[0]) {
        tram_strbuf_addf(b, " \"%c\"", lo[0]);
        same_length(b, lo + 1, hi + 1, n - 1);
        return;
    }
    int lo_full = all_char(lo + 1, n - 1, '0'), hi_full = all_char(hi + 1, n - 1, '9');
    char first = (char)(lo_full ? lo[0] : lo[0] + 1), last = (char)(hi_full ? hi[0] : hi[0] - 1);
    const char *sep = "";
    char nines[20], zeros[20];
    memset(nines, '9', sizeof(nines));
    memset(zeros, '0', sizeof(zeros));
    tram_strbuf_add(b, " (", 2);
    if (!lo_full) {
        tram_strbuf_addf(b, " \"%c\"", lo[0]);
        same_length(b, lo + 1, nines, n - 1);
        sep = " |";
    }
    if (first <= last) {
        tram_strbuf_addf(b, "%s [%c-%c]", sep, first, last);
        if (n > 1)
            tram_strbuf_addf(b, " [0-9]{%d}", n - 1);
        sep = " |";
    }
    if (!hi_full) {
        tram_strbuf_addf(b, "%s \"%c\"", sep, hi[0]);
        same_length(b, zeros, hi + 1, n - 1);
    }
    tram_strbuf_add(b, " )", 2);
}

/* The integers a..b (0 <= a <= b <= MAX_MAGNITUDE), no leading zeros. */
static void nonneg_range(tram_strbuf *b, long long lo, long long hi)
{
    const char *sep = "";
    tram_strbuf_add(b, " (", 2);
    for (int len = digits_of(lo); len <= digits_of(hi); len++) {
        long long p = 1;
        for (int i = 1; i < len; i++)
            p *= 10;
        long long a = TRAM_MAX(lo, len == 1 ? 0 : p), z = TRAM_MIN(hi, p * 10 - 1);
        char sa[24], sz[24];
        snprintf(sa, sizeof(sa), "%lld", a);
        snprintf(sz, sizeof(sz), "%lld", z);
        tram_strbuf_addf(b, "%s", sep);
        same_length(b, sa, sz, len);
        sep = " |";
    }
    tram_strbuf_add(b, " )", 2);
}

/* The integers lo..hi (clamped to 16 digits); 0 when there are none.
 * Zero is "0", never "-0". */
static int int_range(tram_strbuf *b, long long lo, long long hi)
{
    lo = TRAM_MAX(lo, -MAX_MAGNITUDE);
    hi = TRAM_MIN(hi, MAX_MAGNITUDE);
    if (lo > hi)
        return 0;
    tram_strbuf_add(b, " (", 2);
    if (lo < 0) {
        tram_strbuf_add(b, " \"-\"", 4);
        nonneg_range(b, hi < 0 ? -hi : 1, -lo);
    }
    if (lo < 0 && hi >= 0)
        tram_strbuf_add(b, " |", 2);
    if (hi >= 0)
        nonneg_range(b, TRAM_MAX(lo, 0), hi);
    tram_strbuf_add(b, " )", 2);
    return 1;
}

static long long clamp_ll(double x)
{
    return x < -1e17 ? -MAX_MAGNITUDE - 1 : x > 1e17 ? MAX_MAGNITUDE + 1 : (long long)x;
}

typedef struct {
    int has_min, has_max;
    double min, max;
    int excl_min, excl_max;
} bounds;

static int read_bound(jsc *c, json_t *s, const char *key, const char *path, int *has, double *v)
{
    json_t *x = json_object_get(s, key);
    if (!x)
        return 0;
    if (!json_is_number(x))
        return JS_FAIL(c, "'%s' at %s must be a number", key, path);
    *has = 1;
    *v = json_number_value(x);
    return 0;
}

/* The tighter of the inclusive and the exclusive bound on each side. */
static int read_bounds(jsc *c, json_t *s, const char *path, bounds *bd)
{
    *bd = (bounds){0};
    int has_emin = 0, has_emax = 0;
    double emin = 0, emax = 0;
    if (read_bound(c, s, "minimum", path, &bd->has_min, &bd->min) ||
        read_bound(c, s, "maximum", path, &bd->has_max, &bd->max) ||
        read_bound(c, s, "exclusiveMinimum", path, &has_emin, &emin) ||
        read_bound(c, s, "exclusiveMaximum", path, &has_emax, &emax))
        return -1;
    if (has_emin && (!bd->has_min || emin >= bd->min)) {
        bd->has_min = bd->excl_min = 1;
        bd->min = emin;
    }
    if (has_emax && (!bd->has_max || emax <= bd->max)) {
        bd->has_max = bd->excl_max = 1;
        bd->max = emax;
    }
    return 0;
}

/* Smallest / largest integer inside the bounds. */
static long long int_lo(const bounds *bd)
{
    if (!bd->has_min)
        return -MAX_MAGNITUDE;
    double m = ceil(bd->min);
    return clamp_ll(bd->excl_min && m == bd->min ? m + 1 : m);
}

static long long int_hi(const bounds *bd)
{
    if (!bd->has_max)
        return MAX_MAGNITUDE;
    double m = floor(bd->max);
    return clamp_ll(bd->excl_max && m == bd->max ? m - 1 : m);
}

/* multipleOf is not expressed: the grammar accepts more (the end
 * validation decides), unless every value the grammar allows is a
 * multiple (multipleOf 1 of integers). */
static void note_multiple_of(jsc *c, json_t *s, const char *path, int integer)
{
    json_t *m = json_object_get(s, "multipleOf");
    if (m && !(integer && json_number_value(m) == 1.0))
        js_approximate(c, "multipleOf", path);
}

int js_gen_integer(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    bounds bd;
    if (read_bounds(c, s, path, &bd))
        return -1;
    note_multiple_of(c, s, path, 1);
    if (!bd.has_min && !bd.has_max) {
        char n[JS_NAME_MAX];
        js_shared(c, JS_USE_INTEGER, n, "integer");
        tram_strbuf_addf(b, "%s", n);
        return 0;
    }
    long long lo = int_lo(&bd), hi = int_hi(&bd);
    if (int_range(b, lo, hi))
        return 0;
    return js_empty(c, path, lo > MAX_MAGNITUDE || hi < -MAX_MAGNITUDE
                                 ? "its bounds admit no integer of at most 16 digits (the most tram writes)"
                                 : "its bounds admit no integer");
}

/* A fraction that is never zero (its last digit is not 0), so that k.f
 * lies strictly between k and k + 1: "0.000" would be 0 itself. */
#define FRACTION " \".\" [0-9]{0,14} [1-9]"

/* A bounded number: an integer in the bounds, or a fraction on an integer
 * part k whose whole open interval (k, k + 1) lies inside them (for
 * negative parts -j: (-(j + 1), -j)); no exponent. */
static int gen_bounded_number(jsc *c, const bounds *bd, const char *path, tram_strbuf *b)
{
    int n = 0;
    tram_strbuf_add(b, " (", 2);
    tram_strbuf part = {0};
    if (int_range(&part, int_lo(bd), int_hi(bd))) {
        tram_strbuf_add(b, part.s, part.len);
        n++;
    }
    tram_strbuf_free(&part);
    long long k_lo = TRAM_MAX(0, bd->has_min ? clamp_ll(ceil(bd->min)) : 0);
    long long k_hi = bd->has_max ? clamp_ll(floor(bd->max - 1)) : MAX_MAGNITUDE;
    if (int_range(&part, k_lo, k_hi))
        tram_strbuf_addf(b, "%s (%.*s" FRACTION " )", n++ ? " |" : "", (int)part.len, part.s);
    tram_strbuf_free(&part);
    long long j_lo = TRAM_MAX(0, bd->has_max ? clamp_ll(ceil(-bd->max)) : 0);
    long long j_hi = bd->has_min ? clamp_ll(floor(-bd->min - 1)) : MAX_MAGNITUDE;
    if (int_range(&part, j_lo, j_hi))
        tram_strbuf_addf(b, "%s ( \"-\" %.*s" FRACTION " )", n++ ? " |" : "", (int)part.len, part.s);
    tram_strbuf_free(&part);
    tram_strbuf_add(b, " )", 2);
    if (n)
        return 0;
    if (bd->min > bd->max || (bd->min == bd->max && (bd->excl_min || bd->excl_max)))
        return js_empty(c, path, "its bounds admit no number");
    return JS_FAIL(c, "number bounds at %s are too narrow: no integer, and no interval between two "
                      "integers, fits inside them", path);
}

int js_gen_number(jsc *c, json_t *s, const char *path, tram_strbuf *b)
{
    bounds bd;
    if (read_bounds(c, s, path, &bd))
        return -1;
    note_multiple_of(c, s, path, 0);
    if (bd.has_min || bd.has_max)
        return gen_bounded_number(c, &bd, path, b);
    char n[JS_NAME_MAX];
    js_shared(c, JS_USE_NUMBER, n, "number");
    tram_strbuf_addf(b, "%s", n);
    return 0;
}
