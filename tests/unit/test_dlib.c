/* kernels/dlib.c: a library opened at run time from the environment
 * variable's path (a file or a directory) or the loader's search, its
 * symbols taken by name, and each failure one sentence naming what was
 * tried (what CUDA's 2:4 path logs when cuSPARSELt is absent). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dlib.h"

#define ENV "TRAM_TEST_DLIB"

typedef double (*cos_fn)(double);

/* libm through the loader's search, its cos found and called. */
static cos_fn open_libm(tram_dlib *lib)
{
    static const char *const names[] = {"cos", "sqrt"};
    void *syms[2] = {NULL, NULL};
    tram_error err = {{0}};
    cr_assert(!tram_dlib_open(lib, ENV, "libm.so.6", names, syms, 2, &err), "%s", err.msg);
    cr_assert(syms[0] && syms[1]);
    return (cos_fn)syms[0];
}

Test(dlib, opens_by_soname_and_takes_the_named_symbols)
{
    unsetenv(ENV);
    tram_dlib lib;
    cos_fn f = open_libm(&lib);
    cr_assert_eq(f(0.0), 1.0);
    cr_assert_str_eq(lib.path, "libm.so.6");
    tram_dlib_close(&lib);
    cr_assert_null(lib.handle);
}

Test(dlib, a_path_in_the_environment_is_the_only_place_tried)
{
    setenv(ENV, "/nonexistent/libm.so.6", 1);
    static const char *const names[] = {"cos"};
    void *sym = NULL;
    tram_dlib lib;
    tram_error err = {{0}};
    cr_assert_eq(tram_dlib_open(&lib, ENV, "libm.so.6", names, &sym, 1, &err), -1);
    cr_assert_null(lib.handle);
    cr_assert(strstr(err.msg, "cannot load /nonexistent/libm.so.6 (" ENV "=/nonexistent/libm.so.6): "), "%s",
              err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
}

Test(dlib, a_directory_in_the_environment_holds_the_soname)
{
    unsetenv(ENV);
    tram_dlib found;
    cos_fn f = open_libm(&found);
    Dl_info info;
    cr_assert(dladdr((void *)f, &info) && info.dli_fname, "where libm's cos lives");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", info.dli_fname);
    setenv(ENV, dirname(dir), 1);
    tram_dlib lib;
    open_libm(&lib);
    char want[600];
    snprintf(want, sizeof(want), "%s/libm.so.6", getenv(ENV));
    cr_assert_str_eq(lib.path, want);
    tram_dlib_close(&lib);
    tram_dlib_close(&found);
}

Test(dlib, a_missing_symbol_fails_naming_it_and_closes)
{
    unsetenv(ENV);
    static const char *const names[] = {"cos", "tram_no_such_function"};
    void *syms[2];
    tram_dlib lib;
    tram_error err = {{0}};
    cr_assert_eq(tram_dlib_open(&lib, ENV, "libm.so.6", names, syms, 2, &err), -1);
    cr_assert_null(lib.handle);
    cr_assert(strstr(err.msg, "libm.so.6 has no symbol tram_no_such_function"), "%s", err.msg);
}

Test(dlib, a_soname_the_loader_cannot_find_fails_naming_it)
{
    unsetenv(ENV);
    static const char *const names[] = {"cos"};
    void *sym = NULL;
    tram_dlib lib;
    tram_error err = {{0}};
    cr_assert_eq(tram_dlib_open(&lib, ENV, "libtram_test_absent.so.0", names, &sym, 1, &err), -1);
    cr_assert(!strncmp(err.msg, "cannot load libtram_test_absent.so.0: ", 38), "%s", err.msg);
    cr_assert_null(strstr(err.msg, ENV), "nothing said of an unset variable: %s", err.msg);
}
