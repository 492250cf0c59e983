/* dlib.c — see dlib.h. */
#include "kernels/dlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The path to open: env's value (a directory gets soname appended), else
 * the bare soname for the loader's search. */
static void path_of(char *out, size_t size, const char *env, const char *soname)
{
    const char *given = env ? getenv(env) : NULL;
    struct stat sb;
    if (!given || !*given)
        snprintf(out, size, "%s", soname);
    else if (stat(given, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(out, size, "%s/%s", given, soname);
    else
        snprintf(out, size, "%s", given);
}

int tram_dlib_open(tram_dlib *lib, const char *env, const char *soname, const char *const *names, void **syms,
                   int n, tram_error *err)
{
    path_of(lib->path, sizeof(lib->path), env, soname);
    dlerror();
    lib->handle = dlopen(lib->path, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        const char *why = dlerror(), *given = env ? getenv(env) : NULL;
        if (given && *given)
            return tram_fail(err, "cannot load %s (%s=%s): %s", lib->path, env, given, why ? why : "no reason given");
        return tram_fail(err, "cannot load %s: %s", lib->path, why ? why : "no reason given");
    }
    for (int i = 0; i < n; i++) {
        syms[i] = dlsym(lib->handle, names[i]);
        if (!syms[i]) {
            tram_fail(err, "%s has no symbol %s (too old a version?)", lib->path, names[i]);
            tram_dlib_close(lib);
            return -1;
        }
    }
    return 0;
}

void tram_dlib_close(tram_dlib *lib)
{
    if (lib->handle)
        dlclose(lib->handle);
    lib->handle = NULL;
}
