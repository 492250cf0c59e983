#!/bin/sh
# tests/gpu/run.sh — `make gpu-check`: the CUDA backend on a machine with an
# NVIDIA GPU (an H200 when lent), in one command of about 5 minutes, so that
# a rerun still fits in a 15-minute lease.
#
#   sh tests/gpu/run.sh bundle    here (no GPU needed): build with portable
#        x86-64-v3 host code and pack build/gpu-bundle.tar.xz: every program
#        of tests/gpu, bin/tram-cuda, the shared libraries a bare CUDA image
#        lacks, the commit and the sources' checksum.
#   sh tests/gpu/run.sh           there: carry build/gpu-bundle.tar.xz along.
#        The device machine cannot build tram (no network for tests/deps.sh,
#        no -dev packages), so a missing bundle, or one built from other
#        sources than the tree it travels with, ends the run at once.
#   sh tests/gpu/run.sh --dry-run here: the same control flow, every step,
#        against stand-in programs (tests/gpu/standin.sh) in place of the
#        device's; tests/gpu/test_dry_run.sh (in `make test`) plants failing,
#        hanging and missing parts into it and checks that each is reported.
#
# Then a preflight (10 s, printed as it goes: nvidia-smi, the glibc version,
# ldd of every carried binary with nothing missing, gpu_probe running one
# kernel, one cuBLASLt GEMM and one CUDA graph), then the steps of the table
# below.  Each step runs under `timeout -k` with its cap (or what is left of
# TRAM_GPU_BUDGET), whatever the earlier ones did; its row is printed as it
# finishes and appended to $OUT/summary.md; its output is appended to
# $OUT/steps.log.  Only "no usable GPU" (a program's exit 2) ends the run
# early.  A step passes when its program exits 0; exit 77 means it could not
# run here (compute-sanitizer on a runtime that refuses it) and is a SKIP row.
# Exit status: 0 when no step failed.
#
# ADDING A STEP is one line in run_steps below:
#     step NAME CAP_SECONDS PROGRAM ARGS...
# where a program of tests/gpu (X.c or X.cu, linked by `make cuda` as
# build/cuda/tests/gpu/X) is "$BIN/X": the bundle carries it and the dry run
# stands in for it without further changes.  It prints lines "PASS ..." /
# "FAIL ..." (counted in the row) and may print "| ... |" table rows, which go
# into the summary.
#
# Environment: TRAM_GPU_PRESET (benchmark preset, llama-3.1-8b), TRAM_GPU_SEED
# (kernel check seed), TRAM_GPU_BUDGET (seconds, 300), TRAM_GPU_OFFLINE
# (requests,input,output of the offline run: 64,512,256).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/tram-gpu-check}
PRESET=${TRAM_GPU_PRESET:-llama-3.1-8b}
OFFLINE=${TRAM_GPU_OFFLINE:-64,512,256}
TOKENIZER=tests/fixtures/tokenizer/spm/spm.gguf
BUNDLE=${TRAM_GPU_BUNDLE:-build/gpu-bundle.tar.xz}
BUDGET=${TRAM_GPU_BUDGET:-300}
PATH="$PATH:/usr/local/cuda/bin"
export PATH

run_steps() {
    step kernels 60 "$BIN/check_kernels" ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"}
    step sampler-v2 60 "$BIN/check_kernels" --cuda-kernels sampler=2 ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"}
    step memcheck 30 sh tests/gpu/run.sh sanitize memcheck "$BIN/check_kernels" --small
    # racecheck on the sampler's variant 2 (its shared-memory histograms are the new code)
    step racecheck 30 sh tests/gpu/run.sh sanitize racecheck "$BIN/check_kernels" --cuda-kernels sampler=2 --small
    step e2e 60 "$BIN/check_e2e" smollm2-135m "$TOKENIZER"
    step lora 60 "$BIN/check_e2e" --lora smollm2-135m "$TOKENIZER"
    step formats 45 "$BIN/check_e2e" --formats smollm2-135m "$TOKENIZER"
    step spec 45 "$BIN/check_e2e" --spec smollm2-135m "$TOKENIZER"
    step nccl 60 "$BIN/check_nccl" smollm2-135m
    step variants 60 "$BIN/check_variants" ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"}
    # SKIPs unless TRAM_CUSPARSELT points at a copy of the library (not in the bundle: docs/gpu.md)
    step sparse24 30 "$BIN/check_sparse24" ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"}
    step bench 90 "$BIN/bench_device" "$PRESET" --offline "$OFFLINE,$MAX_SEQS"
    step throughput 60 "$BIN/tram-cuda" bench throughput --device cuda --load-format dummy --preset "$PRESET" \
        --tokenizer "$TOKENIZER" --num-prompts "$N_REQ" --input-len "$IN_LEN" --output-len "$OUT_LEN" \
        --max-model-len $((IN_LEN + OUT_LEN + 16)) --max-num-seqs "$MAX_SEQS" --no-peak
}
MAX_SEQS=256
IFS=, read -r N_REQ IN_LEN OUT_LEN <<EOF
$OFFLINE
EOF

# ---------------------------------------------------------------- bundle
# Checksum of every source the binaries are built from (run.sh itself is
# not one: editing it keeps the bundle valid).
sources_sum() {
    find engine models kernels server tokenizer tests/gpu -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.json' \) |
        LC_ALL=C sort | xargs cat | md5sum | cut -d' ' -f1
}

# The programs of tests/gpu: one per X.c / X.cu.
gpu_programs() {
    for f in tests/gpu/*.c tests/gpu/*.cu; do
        [ -f "$f" ] && basename "$f" | sed 's/\.cu*$//'
    done | sort -u
}

commit_of_tree() {
    if c=$(git rev-parse --short HEAD 2>/dev/null); then
        git diff --quiet HEAD -- 2>/dev/null && echo "$c" || echo "$c + local changes"
    else
        echo "unknown (no git)"
    fi
}

bundle() {
    sum=$(sources_sum)
    # -march=native would tie the binaries to this machine's processor.
    CFLAGS="-O2 -g -march=x86-64-v3" CXXFLAGS="-O2 -g -march=x86-64-v3" \
        make cuda -j2 CUDA_BUILD=build/bundle-obj CUDA_BIN=build/bundle-obj/tram-cuda || exit 1
    rm -rf build/gpu-bundle && mkdir -p build/gpu-bundle/bin build/gpu-bundle/lib || exit 1
    cp build/bundle-obj/tram-cuda build/gpu-bundle/bin/ || exit 1
    for p in $(gpu_programs); do
        cp "build/bundle-obj/tests/gpu/$p" build/gpu-bundle/bin/ || exit 1
    done
    # Libraries outside glibc, the C++ runtime and CUDA: the device image has
    # those (newer, which stays compatible; an older copy here could not).
    ldd build/gpu-bundle/bin/* | awk '/=> \// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
        while read -r lib; do cp -L "$lib" build/gpu-bundle/lib/ || exit 1; done
    if [ "$(sources_sum)" != "$sum" ]; then
        echo "bundle: the sources changed during the build; run it again" >&2
        exit 1
    fi
    echo "$sum" >build/gpu-bundle/sources.md5
    commit_of_tree >build/gpu-bundle/commit
    tar -C build -cJf "$BUNDLE" gpu-bundle || exit 1
    ls -la "$BUNDLE"
    echo "bundle: commit $(cat build/gpu-bundle/commit), sources $(cat build/gpu-bundle/sources.md5)"
    echo "carry $BUNDLE with: sh tests/gpu/run.sh (docs/gpu.md, "The GPU check")"
    exit 0
}

# `run.sh sanitize TOOL PROGRAM ARGS`: compute-sanitizer's TOOL on a program;
# exit 3 when it reports an error (--error-exitcode), the program's own exit
# otherwise, 77 when the sanitizer is missing or this runtime refuses it.
sanitize() {
    tool=$1
    shift
    command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; exit 77; }
    compute-sanitizer --tool "$tool" --error-exitcode 3 "$@" >"$TMPDIR_SAN/san.log" 2>&1
    rc=$?
    cat "$TMPDIR_SAN/san.log"
    grep -q -E 'Device not supported|not supported on this platform|Target application.*not supported' \
        "$TMPDIR_SAN/san.log" && exit 77
    exit "$rc"
}

case "${1:-}" in
bundle) bundle ;;
sanitize)
    shift
    TMPDIR_SAN=$(mktemp -d) || exit 1
    trap 'rm -rf "$TMPDIR_SAN"' EXIT
    sanitize "$@"
    ;;
--dry-run | "") ;;
*)
    echo "usage: sh tests/gpu/run.sh [bundle | --dry-run]" >&2
    exit 2
    ;;
esac

START=$(date +%s)
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT" || exit 1
: >"$OUT/summary.md"
: >"$OUT/steps.log"
failed=0 skipped=0

# ---------------------------------------------------------------- dry run
# Stand-ins for the device's programs and tools (tests/gpu/standin.sh, which
# acts on its own name), a bundle of them with the tree's checksum, and caps
# of a few seconds; TRAM_GPU_STANDIN plants faults (see standin.sh).
CAP_MAX=600 UNPACK=build
if [ "${1:-}" = --dry-run ]; then
    mkdir -p "$TMP/tools" "$TMP/b/gpu-bundle/bin" "$TMP/b/gpu-bundle/lib" || exit 1
    for t in nvidia-smi compute-sanitizer ldd; do
        cp tests/gpu/standin.sh "$TMP/tools/$t" && chmod +x "$TMP/tools/$t" || exit 1
    done
    for p in tram-cuda $(gpu_programs); do
        cp tests/gpu/standin.sh "$TMP/b/gpu-bundle/bin/$p" && chmod +x "$TMP/b/gpu-bundle/bin/$p" || exit 1
    done
    case "${TRAM_GPU_STANDIN:-}" in
    *bundle=stale*) echo 0123456789abcdef >"$TMP/b/gpu-bundle/sources.md5" ;;
    *) sources_sum >"$TMP/b/gpu-bundle/sources.md5" ;;
    esac
    echo "dry run of $(commit_of_tree)" >"$TMP/b/gpu-bundle/commit"
    case "${TRAM_GPU_STANDIN:-}" in
    *bundle=missing*) BUNDLE=$TMP/none.tar ;;
    *) BUNDLE=$TMP/bundle.tar && tar -C "$TMP/b" -cf "$BUNDLE" gpu-bundle || exit 1 ;;  # no xz: keep it fast
    esac
    PATH="$TMP/tools:$PATH"
    export PATH
    CAP_MAX=${TRAM_GPU_DRY_CAP:-3} UNPACK=$TMP/u
fi

# ---------------------------------------------------------------- the table
# Every line goes to the terminal and to summary.md at once.
say() {
    printf '%s\n' "$*"
    printf '%s\n' "$*" >>"$OUT/summary.md"
}
row() { say "$(printf '| %-10s | %-7s | %4s s | %s |' "$1" "$2" "$3" "$4")"; }

finish() {
    verdict="all steps passed"
    [ "$skipped" = 0 ] || verdict="$verdict but $skipped could not run here"
    [ "$failed" = 0 ] || verdict="FAILED"
    say ""
    say "gpu-check: $(($(date +%s) - START)) s of a $BUDGET s budget, $verdict"
    exit "$failed"
}

# Ends the run at once: nothing after it could mean anything.
stop() {
    row "$1" FAIL "$(($(date +%s) - START))" "$2"
    failed=1
    finish
}

# Seconds a step may take: its cap, or what is left of the budget.
cap_of() {
    c=$1
    [ "$c" -gt "$CAP_MAX" ] && c=$CAP_MAX
    l=$((BUDGET - ($(date +%s) - START)))
    [ "$l" -lt "$c" ] && c=$l
    echo "$c"
}

# step NAME CAP PROGRAM ARGS...: runs it, prints and records its row.
step() {
    name=$1 cap=$(cap_of "$2")
    shift 2
    if [ "$cap" -lt "$((CAP_MAX < 5 ? CAP_MAX : 5))" ]; then
        row "$name" FAIL 0 "not run: the $BUDGET s budget is spent"
        failed=1
        return
    fi
    t0=$(date +%s)
    timeout -k 5 "$cap" "$@" >"$TMP/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    { echo "==== $name (exit $rc, $secs s): $*"; tail -n 3000 "$TMP/$name.log"; } >>"$OUT/steps.log"
    passed=$(grep -c '^PASS' "$TMP/$name.log")
    total=$(grep -c -E '^(PASS|FAIL)' "$TMP/$name.log")
    worst=$(awk '$1 == "PASS" || $1 == "FAIL" { for (i = 1; i < NF; i++) if ($i == "rel" && $(i + 1) > w) w = $(i + 1) }
                 END { print w + 0 }' "$TMP/$name.log")
    detail="$passed of $total cases pass, worst rel err $worst"
    [ "$total" = 0 ] && detail="$(grep -v '^|' "$TMP/$name.log" | tail -n 1 | cut -c 1-100)"
    [ "$total" = 0 ] && grep -q '^|' "$TMP/$name.log" && detail="table below${detail:+; $detail}"
    case $rc in
    0) verdict=PASS ;;
    77) verdict=SKIP skipped=$((skipped + 1)) detail="could not run here: $(head -n 1 "$TMP/$name.log" | cut -c 1-90)" ;;
    124 | 137) verdict=FAIL failed=1 detail="timed out after $cap s; $detail" ;;
    *) verdict=FAIL failed=1 detail="exit $rc; $detail" ;;
    esac
    row "$name" "$verdict" "$secs" "$detail"
    if [ "$verdict" = FAIL ]; then
        grep '^FAIL' "$TMP/$name.log" | head -n 5 >"$TMP/failed"
        [ -s "$TMP/failed" ] || tail -n 3 "$TMP/$name.log" | sed 's/^/log: /' >"$TMP/failed"
        while read -r line; do row "" "" "" "$(echo "$line" | cut -c 1-120)"; done <"$TMP/failed"
    fi
    grep '^|' "$TMP/$name.log" | while read -r line; do say "$line"; done
    [ "$rc" = 2 ] && stop "$name" "no usable GPU (exit 2): $(tail -n 1 "$TMP/$name.log")"
}

# ---------------------------------------------------------------- the bundle
[ -f "$BUNDLE" ] || stop bundle "no $BUNDLE: the device machine cannot build tram (no network for tests/deps.sh,
no -dev packages). Run \`sh tests/gpu/run.sh bundle\` on the build machine and carry $BUNDLE."
rm -rf "$UNPACK/gpu-bundle" && mkdir -p "$UNPACK" || exit 1
tar -C "$UNPACK" -xf "$BUNDLE" || stop bundle "$BUNDLE would not unpack"  # xz or not, tar tells
G=$UNPACK/gpu-bundle
want=$(cat "$G/sources.md5" 2>/dev/null) have=$(sources_sum)
[ "$want" = "$have" ] || stop bundle "$BUNDLE was built from other sources (bundle $want, tree $have):
rebuild it with \`sh tests/gpu/run.sh bundle\` and carry it again"
BIN=$G/bin
# NCCL ships with the toolkit here, inside the Python wheels there.
NCCL_DIR=$(dirname "$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' 2>/dev/null | head -n 1)" 2>/dev/null)
LD_LIBRARY_PATH="$(cd "$G/lib" && pwd):/usr/local/cuda/lib64:${NCCL_DIR:-.}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

say "# tram gpu-check, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "bundle: commit $(cat "$G/commit" 2>/dev/null), sources $want (= this tree)"

# ---------------------------------------------------------------- preflight
# Within 10 s, printed as it goes: is this machine able to run anything?
t0=$(date +%s)
device=$(timeout -k 1 5 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)
say "device: $device"
timeout -k 1 5 nvidia-smi 2>&1 | head -n 20
say "glibc: $(ldd --version 2>&1 | head -n 1)"
missing=$(for b in "$BIN"/* "$G"/lib/*; do
    [ -f "$b" ] && timeout -k 1 5 ldd "$b" 2>&1 | awk -v b="${b##*/}" '/not found/ {print b ": " $1}'
done | sort -u)
[ -z "$missing" ] || stop preflight "libraries missing: $(echo "$missing" | tr '\n' ' ')"
say "ldd: $(ls "$BIN" | wc -l) programs, $(ls "$G/lib" | wc -l) carried libraries, none missing"
timeout -k 1 8 "$BIN/gpu_probe" >"$TMP/probe.log" 2>&1
rc=$?
cat "$TMP/probe.log"
{ echo "==== preflight (probe exit $rc)"; cat "$TMP/probe.log"; } >>"$OUT/steps.log"
[ "$rc" = 0 ] || stop preflight "gpu_probe (one kernel, one cuBLASLt GEMM, one graph) failed, exit $rc: $(tail -n 1 "$TMP/probe.log")"
say ""
say "| step       | result  | time   | detail |"
say "|------------|---------|--------|--------|"
row preflight PASS "$(($(date +%s) - t0))" "nvidia-smi, glibc, ldd, gpu_probe: a kernel, a cuBLASLt GEMM, a graph"

run_steps
finish
