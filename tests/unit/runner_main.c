/* The unit runner's main: Criterion's own, run from a private copy of the
 * executable.
 *
 * Criterion (through BoxFort) starts every test by exec'ing the runner's path
 * again, as /proc/self/exe named it when the run began.  In a tree where
 * others relink build/tests/unit/run while a long run is under way, the tests
 * started after the relink would exec a different binary, jump to a stale
 * address and be reported as "crashed during its setup or teardown".  So the
 * runner first copies itself to a file of its own, re-executes from there and
 * removes the copy at the end.  The re-execution also sets GOMP_SPINCOUNT
 * (unless set) as bin/tram does: OpenMP workers spinning long between
 * parallel regions slow everything down on a loaded 2-core machine.
 *
 * Under LeakSanitizer (make test-asan) only the tests' processes are checked
 * for leaks: the runner process runs nothing of tram's, and Criterion itself
 * leaks a few bytes there when tests run in parallel. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/defaults.h"

#define SNAPSHOT_ENV "TRAM_UNIT_SNAPSHOT"

/* Set by main, which the tests' processes never run (BoxFort enters them
 * through its own entry point). */
static int in_runner;

/* LeakSanitizer asks this at exit; nonzero skips the leak check. */
__attribute__((used)) int __lsan_is_turned_off(void);
__attribute__((used)) int __lsan_is_turned_off(void) { return in_runner; }

/* Copies /proc/self/exe to a new executable file; 0 and its path, or -1. */
static int snapshot_self(char *path, size_t n)
{
    snprintf(path, n, "%s/tram-unit-run-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int in = open("/proc/self/exe", O_RDONLY), out = mkstemp(path);
    struct stat st;
    int ok = in >= 0 && out >= 0 && fstat(in, &st) == 0 && fchmod(out, 0700) == 0;
    for (off_t done = 0; ok && done < st.st_size;) {
        ssize_t k = sendfile(out, in, NULL, (size_t)(st.st_size - done));
        ok = k > 0;
        done += ok ? k : 0;
    }
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    if (!ok && out >= 0)
        unlink(path);
    return ok ? 0 : -1;
}

int main(int argc, char *argv[])
{
    const char *snapshot = getenv(SNAPSHOT_ENV);
    char path[4096];
    if (!snapshot) {
        if (!getenv("OMP_WAIT_POLICY"))
            setenv("GOMP_SPINCOUNT", TRAM_GOMP_SPINCOUNT, 0); /* libgomp reads it at start-up */
        if (snapshot_self(path, sizeof(path)) == 0 && setenv(SNAPSHOT_ENV, path, 1) == 0) {
            execv(path, argv);
            unlink(path);
        }
        fprintf(stderr, "unit runner: could not run from a private copy; running in place\n");
    }
    in_runner = 1;
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    if (snapshot && strstr(snapshot, "/tram-unit-run-")) /* never a file we did not make */
        unlink(snapshot);
    return result;
}
