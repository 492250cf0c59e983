#!/bin/sh
# tests/gpu/test_dry_run.sh — `make test-gpu-dry`: tests/gpu/run.sh --dry-run
# on this machine, once clean and then with faults planted into its stand-in
# device programs (tests/gpu/standin.sh): each must be reported in the row of
# the step it hit, the steps after it must still run (or, where nothing could
# mean anything, the run must end at once), and the exit status must say so.
set -u
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
bad=0 n=0

# dry NAME EXPECTED_EXIT [VAR=VALUE...]: starts one dry run (they run side by
# side); its summary lands in $T/NAME.md, its exit status is checked by done_runs
runs=""
dry() {
    name=$1
    runs="$runs $name:$2"
    shift 2
    (env OUT="$T/$name" "$@" sh tests/gpu/run.sh --dry-run >"$T/$name.out" 2>&1; echo $? >"$T/$name.rc") &
}

done_runs() {
    wait
    for r in $runs; do
        name=${r%%:*}
        cp "$T/$name/summary.md" "$T/$name.md" 2>/dev/null || : >"$T/$name.md"
        expect "$name: exit ${r#*:}" [ "$(cat "$T/$name.rc")" = "${r#*:}" ]
    done
}

expect() {
    what=$1
    shift
    n=$((n + 1))
    if "$@"; then
        return 0
    fi
    echo "FAIL test_dry_run: $what"
    bad=$((bad + 1))
}

# has NAME REGEX: the summary of run NAME holds a line matching REGEX
has() { grep -q -E "$2" "$T/$1.md"; }
lacks() { ! has "$@"; }

dry clean 0
dry planted 1 TRAM_GPU_STANDIN=check_e2e=fail,bench_device=hang,racecheck=unsupported,memcheck=errors,check_sparse24=skip TRAM_GPU_DRY_CAP=2
dry nogpu 1 TRAM_GPU_STANDIN=check_kernels=nogpu
dry missing_lib 1 TRAM_GPU_STANDIN=ldd=missing
dry probe 1 TRAM_GPU_STANDIN=gpu_probe=fail
dry stale 1 TRAM_GPU_STANDIN=bundle=stale
dry no_bundle 1 TRAM_GPU_STANDIN=bundle=missing
dry budget 1 TRAM_GPU_STANDIN=check_kernels=hang TRAM_GPU_BUDGET=7
done_runs

for s in preflight kernels sampler-v2 memcheck racecheck e2e lora formats spec sparse24 bench throughput; do
    expect "clean: $s row passes" has clean "^\| $s +\| PASS "
done
expect "clean: rows printed as they finish" grep -q '| kernels    | PASS' "$T/clean.out"
expect "clean: commit and checksum printed" has clean '^bundle: commit .*, sources [0-9a-f]{32} \(= this tree\)'
expect "clean: logs kept" grep -q '^==== e2e (exit 0' "$T/clean/steps.log"
expect "clean: verdict" has clean 'all steps passed$'

expect "planted: failing step reported" has planted '^\| e2e +\| FAIL .*exit 1'
expect "planted: its FAIL line shown" has planted 'check_e2e planted failure'
expect "planted: hanging step timed out" has planted '^\| bench +\| FAIL .*timed out after 2 s'
expect "planted: sanitizer errors fail" has planted '^\| memcheck +\| FAIL .*exit 3'
expect "planted: refused sanitizer is a SKIP" has planted '^\| racecheck +\| SKIP .*could not run here'
expect "planted: a program's exit 77 (no cuSPARSELt) is a SKIP" has planted '^\| sparse24 +\| SKIP .*could not run here'
expect "planted: steps after a failure still run" has planted '^\| throughput +\| PASS'
expect "planted: verdict" has planted 'FAILED$'

expect "nogpu: said" has nogpu '^\| kernels +\| FAIL .*no usable GPU'
expect "nogpu: nothing after it" lacks nogpu '^\| e2e '

expect "missing library named" has missing_lib '^\| preflight +\| FAIL .*check_e2e: libjansson.so.4'
expect "missing library: no step runs" lacks missing_lib '^\| kernels '

expect "failed probe ends the preflight" has probe '^\| preflight +\| FAIL .*gpu_probe'

expect "stale bundle refused" has stale '^\| bundle +\| FAIL .*built from other sources'
expect "missing bundle: clear message" has no_bundle 'cannot build tram'

# (on a loaded machine the set-up may already have eaten the hang's share)
expect "budget: the hang timed out" has budget '^\| kernels +\| FAIL .*(timed out|budget is spent)'
expect "budget: later steps not run" has budget '^\| throughput +\| FAIL .*budget is spent'

if [ "$bad" = 0 ]; then
    echo "test_dry_run: all $n checks passed"
    exit 0
fi
echo "test_dry_run: $bad of $n checks failed (outputs in the runs above)"
exit 1
