/* dlib.h — a shared library opened at run time and the symbols a caller
 * names taken from it: an optional dependency the binary does not link, so
 * that tram starts without it and says why a path needing it is not taken
 * (kernels/cuda/sparse24.cu's cuSPARSELt, 237 MB, not a CUDA toolkit part).
 *
 * Where: the path in environment variable `env` when it is set (a file, or
 * a directory holding `soname`), and only there: a user's explicit choice
 * that fails is reported, not replaced by another copy; else `soname`
 * through the dynamic loader's own search (LD_LIBRARY_PATH, the cache). */
#ifndef TRAM_DLIB_H
#define TRAM_DLIB_H

#include "kernels/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    void *handle;    /* dlopen's; NULL when closed */
    char path[512];  /* what was opened (or tried) */
} tram_dlib;

/* Opens the library and fills syms[i] with the address of names[i], i < n.
 * Fails (lib closed) with one sentence naming the path tried and the
 * loader's reason, or the first missing symbol. */
int tram_dlib_open(tram_dlib *lib, const char *env, const char *soname, const char *const *names, void **syms,
                   int n, tram_error *err);
void tram_dlib_close(tram_dlib *lib);

#ifdef __cplusplus
}
#endif

#endif
