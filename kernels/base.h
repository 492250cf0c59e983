/* base.h — error reporting and small helpers shared by every module.
 *
 * Convention: a function that can fail returns 0 on success and -1 on error,
 * after filling a tram_error with a message a user can act on (it names the
 * file or field and what is wrong).  Bad input is never an abort(). */
#ifndef TRAM_BASE_H
#define TRAM_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char msg[512];
} tram_error;

/* Formats msg into err (err may be NULL) and returns -1, so that callers can
 * write `return tram_fail(err, "...", ...);`. */
int tram_fail(tram_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation that cannot be ignored: returns NULL and fills err on failure. */
void *tram_calloc(size_t n, size_t size, tram_error *err);

/* Memory a kernel streams through (weights, the KV cache, scratch): 64-byte
 * aligned, and from 2 MiB up aligned to 2 MiB and advised to transparent
 * huge pages, so that a pass over it misses the TLB once per 2 MiB instead
 * of once per 4 KiB page: a batch-1 GEMV over 1 GB of Q4_1 weights, beyond
 * the cache, ran 1.3-1.5x faster so on a 2-core KVM guest, where a TLB miss
 * is a nested page walk (bench/results/roofline.md).  The advice is a hint:
 * without THP it changes nothing.  Contents undefined; free() frees. */
void *tram_alloc_stream(size_t bytes, tram_error *err);

/* Frees the n pointers at ptrs (NULLs too); TRAM_FREE_ALL(a, b, ...) frees
 * its arguments, so a destructor's run of plain frees reads as one line. */
void tram_free_each(void *const *ptrs, size_t n);
#ifndef __cplusplus
#define TRAM_FREE_ALL(...) \
    tram_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))
#endif

/* Grows the array *v of *cap items of `size` bytes (doubling, from 8) so
 * that it holds `need`: -1 when out of memory, *v and *cap then unchanged. */
int tram_grow(void **v, int *cap, int need, size_t size);

/* Reallocates the array *v to n items of `size` bytes: -1 when out of
 * memory, *v then unchanged (and still to be freed), for arrays that grow
 * together and whose count moves only once all of them have. */
int tram_resize(void **v, size_t n, size_t size);

/* Monotonic clock in seconds. */
double tram_now(void);

/* Parses sizes like "2GiB", "512MiB", "1.5G", "4096" into bytes. */
int tram_parse_size(const char *s, size_t *out);

/* splitmix64's finalizer: a cheap, well-mixed 64-bit hash of x, used for
 * hash tables, block hashes and counter-based random numbers. */
static inline uint64_t tram_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* 64-bit FNV-1a, the one byte-string hash: h continued over the n bytes
 * at p (a hash starts from TRAM_FNV1A_OFFSET); tram_fnv1a hashes one run.
 * Hash tables, caches and the dummy weights' streams key on it. */
#define TRAM_FNV1A_OFFSET 14695981039346656037ULL
uint64_t tram_fnv1a_more(uint64_t h, const void *p, size_t n);

static inline uint64_t tram_fnv1a(const void *p, size_t n)
{
    return tram_fnv1a_more(TRAM_FNV1A_OFFSET, p, n);
}

#define TRAM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TRAM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TRAM_MAX(a, b) ((a) > (b) ? (a) : (b))

#ifdef __cplusplus
}
#endif

#endif
