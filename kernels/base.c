#include "kernels/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int tram_fail(tram_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return -1;
}

void *tram_calloc(size_t n, size_t size, tram_error *err)
{
    void *p = (n && size) ? calloc(n, size) : calloc(1, 1);
    if (!p)
        tram_fail(err, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *tram_alloc_stream(size_t bytes, tram_error *err)
{
    const size_t huge = (size_t)2 << 20;
    size_t align = bytes >= huge ? huge : 64;
    void *p = NULL;
    if (bytes > SIZE_MAX - 64 || posix_memalign(&p, align, bytes ? (bytes + 63) / 64 * 64 : 64)) {
        tram_fail(err, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    if (align == huge) /* only whole huge pages; a failure leaves 4 KiB pages */
        madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
    return p;
}

void tram_free_each(void *const *ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}

int tram_grow(void **v, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *n = realloc(*v, (size_t)c * size);
    if (!n)
        return -1;
    *v = n;
    *cap = c;
    return 0;
}

int tram_resize(void **v, size_t n, size_t size)
{
    void *p = realloc(*v, n * size);
    if (!p)
        return -1;
    *v = p;
    return 0;
}

uint64_t tram_fnv1a_more(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

double tram_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int tram_parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    static const struct { const char *suffix; double mult; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"KiB", 1024.0}, {"M", 1e6}, {"MB", 1e6},
        {"MiB", 1048576.0}, {"G", 1e9}, {"GB", 1e9}, {"GiB", 1073741824.0},
    };
    for (size_t i = 0; i < TRAM_ARRAY_LEN(units); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            double bytes = v * units[i].mult;
            if (bytes > 1e15)
                return -1;
            *out = (size_t)bytes;
            return 0;
        }
    }
    return -1;
}
