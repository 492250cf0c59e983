#!/bin/sh
# tests/gpu/run.sh — `make gpu-check`: the CUDA backend on a machine with an
# NVIDIA GPU (an H200 when lent), in one command that ends within 8 minutes:
#   1. build for sm_90a, or unpack build/gpu-bundle.tar.xz when it was carried
#      (a bundle that does not match the sources is set aside and the tree is
#      built instead)
#   2. every CUDA op against the CPU backend, device sampling against
#      kernels/cpu/sampling.c, a captured graph against direct ops (check_kernels)
#   3. end to end on dummy weights of the smollm2-135m preset (the default
#      model is too large to carry): greedy tokens and logits, CPU = CUDA; a
#      decode step replayed from a CUDA graph = the eager step, bit for bit;
#      the engine under 64 concurrent requests with graphs, preempting, and
#      eager, no leaked KV blocks (check_e2e); tensor parallelism's NCCL path
#      on a one-rank communicator: all-reduce eager and in a graph, the model's
#      logits = the plain backend's, its decode graph = eager (check_nccl)
#   4. benchmark on the preset (llama-3.1-8b, bf16, dummy weights): copy
#      bandwidth, bf16 GEMM rate, decode step at batch 1, 8, 64, 256 over a
#      context of 512, each beside its floors (bench_device); then the
#      engine's offline throughput, scaled down from 1000 requests of 1000
#      in / 1000 out to TRAM_GPU_OFFLINE, beside its floor
# Every step runs whatever the earlier ones did, under its own time cap and
# what is left of the budget; a step that fails or times out is a row of the
# table, never the end of the run (only "no usable GPU" ends it early, since
# nothing could run then).  Logs go to $OUT (default /tmp/tram-gpu-check):
# build.log, kernels.log, e2e.log, nccl.log, bench.log, throughput.log and
# summary.md, seven files, inside the device tool's eight.  The table is printed last, and
# written to $OUT/summary.md.  Exit status: 0 when every step passed.
#
#   sh tests/gpu/run.sh bundle   on a machine without a GPU: build (portable
#        x86-64-v3 host code) and pack build/gpu-bundle.tar.xz: binaries and
#        the shared libraries a bare CUDA image lacks, to carry to the device
#        machine, which has nvcc but not tram's Debian dev packages
#
# Environment: TRAM_GPU_PRESET (benchmark preset, llama-3.1-8b), TRAM_GPU_SEED
# (kernel check seed), TRAM_GPU_BUDGET (seconds, 470), TRAM_GPU_OFFLINE
# (requests,input,output of the offline run: 128,1000,1000).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/tram-gpu-check}
PRESET=${TRAM_GPU_PRESET:-llama-3.1-8b}
OFFLINE=${TRAM_GPU_OFFLINE:-128,1000,1000}
TOKENIZER=tests/fixtures/tokenizer/spm/spm.gguf
BUNDLE=build/gpu-bundle.tar.xz
START=$(date +%s)
BUDGET=${TRAM_GPU_BUDGET:-470}
PATH="$PATH:/usr/local/cuda/bin"
export PATH

# ---------------------------------------------------------------- bundle
# Checksum of every source the binaries are built from: a bundle built from
# other sources than the tree it travels with is never run.
sources_sum() {
    find engine models kernels server tokenizer tests/gpu -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.json' \) |
        LC_ALL=C sort | xargs cat | md5sum | cut -d' ' -f1
}

bundle() {
    # -march=native would tie the binaries to this machine's processor.
    CFLAGS="-O2 -g -march=x86-64-v3" CXXFLAGS="-O2 -g -march=x86-64-v3" \
        make cuda CUDA_BUILD=build/bundle-obj CUDA_BIN=build/bundle-obj/tram-cuda || exit 1
    rm -rf build/gpu-bundle && mkdir -p build/gpu-bundle/bin build/gpu-bundle/lib || exit 1
    for p in tram-cuda tests/gpu/check_kernels tests/gpu/check_e2e tests/gpu/check_nccl tests/gpu/bench_device; do
        cp "build/bundle-obj/$p" build/gpu-bundle/bin/ || exit 1
    done
    # Libraries outside glibc, the C++ runtime and CUDA: the device image has
    # those (newer, which stays compatible; an older copy here could not).
    ldd build/gpu-bundle/bin/* | awk '/=> \// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
        while read -r lib; do cp -L "$lib" build/gpu-bundle/lib/ || exit 1; done
    sources_sum >build/gpu-bundle/sources.md5
    tar -C build -cJf "$BUNDLE" gpu-bundle || exit 1
    ls -la "$BUNDLE"
    echo "carry $BUNDLE with: sh tests/gpu/run.sh (README.md, section GPU)"
    exit 0
}
[ "${1:-}" = bundle ] && bundle

mkdir -p "$OUT" || exit 1
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
summary=""
failed=0
row() { summary="$summary$(printf '| %-10s | %-86s |' "$1" "$2")
"; }
# Seconds a step may take: its cap, or what is left of the budget.
left() {
    l=$((BUDGET - ($(date +%s) - START)))
    [ "$l" -lt "$1" ] && echo "$((l > 5 ? l : 5))" || echo "$1"
}
# The table, last (and in summary.md); exit with the verdict.
finish() {
    {
        echo "device: $device"
        echo "commit: $commit, $(date -u '+%Y-%m-%d %H:%M UTC')"
        printf '| %-10s | %-86s |\n' step result
        printf '%s' "$summary"
        echo
        grep '^|' "$OUT/bench.log" 2>/dev/null
        [ -n "$offline_row" ] && echo "$offline_row"
        echo "gpu-check: $(($(date +%s) - START)) s, $([ "$failed" = 0 ] && echo 'all checks passed' || echo FAILED)"
    } >"$OUT/summary.md"
    echo
    cat "$OUT/summary.md"
    exit "$failed"
}
offline_row=""
if commit=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD -- || commit="$commit + local changes"
else
    commit="unknown (no git here)"
fi
device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)

# ---------------------------------------------------------------- 1. build
BIN=""
use_bundle() {
    tar -C build -xJf "$BUNDLE" || { row build "$BUNDLE would not unpack: building instead"; return 1; }
    if [ "$(cat build/gpu-bundle/sources.md5)" != "$(sources_sum)" ]; then
        row build "$BUNDLE was built from other sources: building instead"
        return 1
    fi
    BIN=build/gpu-bundle/bin
    # NCCL ships with the toolkit here, inside the Python wheels there.
    NCCL_DIR=$(dirname "$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' 2>/dev/null | head -n 1)" 2>/dev/null)
    LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib:/usr/local/cuda/lib64:${NCCL_DIR:-.}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    row build "carried bundle (built for sm_90a by run.sh bundle)"
}
build_here() {
    if timeout "$(left 300)" make cuda >"$OUT/build.log" 2>&1; then
        BIN=build/gpu-bin
        mkdir -p "$BIN" && cp bin/tram-cuda build/cuda/tests/gpu/check_kernels build/cuda/tests/gpu/check_e2e \
            build/cuda/tests/gpu/check_nccl build/cuda/tests/gpu/bench_device "$BIN/" && row build "make cuda: ok" &&
            return 0
    fi
    tail -n 30 "$OUT/build.log"
    row build "make cuda failed and no usable bundle: nothing can run (build.log)"
    failed=1
    finish
}
{ [ -f "$BUNDLE" ] && use_bundle; } || build_here

# Runs a check program; its PASS/FAIL lines make the row.  Exit 2 of a
# program means no usable GPU: nothing else can run then.
check() {
    name=$1 cap=$2
    shift 2
    timeout "$(left "$cap")" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    passed=$(grep -c '^PASS' "$OUT/$name.log")
    total=$(grep -c -E '^(PASS|FAIL)' "$OUT/$name.log")
    worst=$(awk '$1 == "PASS" || $1 == "FAIL" { for (i = 1; i < NF; i++) if ($i == "rel" && $(i + 1) > w) w = $(i + 1) } END { print w + 0 }' "$OUT/$name.log")
    row "$name" "$passed of $total pass (exit $rc$([ "$rc" = 124 ] && echo ', timed out')), worst rel err $worst"
    grep '^FAIL' "$OUT/$name.log" | head -n 5 >"$TMP/failed"
    [ "$rc" = 0 ] || [ -s "$TMP/failed" ] || tail -n 2 "$OUT/$name.log" | sed 's/^/log: /' >"$TMP/failed"
    while read -r line; do row "" "$line"; done <"$TMP/failed"
    [ "$rc" = 0 ] || failed=1
    if [ "$rc" = 2 ]; then
        cat "$OUT/$name.log"
        finish
    fi
}

# ---------------------------------------------------------------- 2. kernels
check kernels 120 "$BIN/check_kernels" ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"}

# ---------------------------------------------------------------- 3. end to end
check e2e 150 "$BIN/check_e2e" smollm2-135m "$TOKENIZER"
# the greedy, graph and engine lines are the point of this step: show them all
grep -E '^(PASS +(greedy|graph|engine)|INFO)' "$OUT/e2e.log" >"$TMP/passed"
while read -r line; do row "" "$line"; done <"$TMP/passed"
check nccl 60 "$BIN/check_nccl" smollm2-135m

# ---------------------------------------------------------------- 4. benchmark
IFS=, read -r n_req in_len out_len <<EOF
$OFFLINE
EOF
max_seqs=256
timeout "$(left 120)" "$BIN/bench_device" "$PRESET" --offline "$n_req,$in_len,$out_len,$max_seqs" 1 8 64 256 \
    >"$OUT/bench.log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then
    row bench "$PRESET decode steps and floors: table below"
else
    row bench "bench_device failed (exit $rc$([ "$rc" = 124 ] && echo ', timed out')), see bench.log"
    failed=1
fi
timeout "$(left 200)" "$BIN/tram-cuda" bench throughput --device cuda --load-format dummy --preset "$PRESET" \
    --tokenizer "$TOKENIZER" --num-prompts "$n_req" --input-len "$in_len" --output-len "$out_len" \
    --max-model-len $((in_len + out_len + 16)) --max-num-seqs "$max_seqs" --no-peak >"$OUT/throughput.log" 2>&1
rc=$?
tput=$(awk -F'|' '/^\| batched/ {gsub(/ /, "", $5); print $5}' "$OUT/throughput.log")
floor=$(awk -F'|' '/^\| offline floor/ {print $5}' "$OUT/bench.log" | awk '{print $1}')
scale="$n_req x ($in_len in, $out_len out), scaled from 1000 requests"
if [ "$rc" = 0 ] && [ -n "$tput" ]; then
    row throughput "$PRESET, $scale: $tput output tok/s"
    offline_row="| offline measured | $scale | $tput output tok/s | floor ${floor:-?} output tok/s |"
else
    row throughput "$PRESET, $scale: no result (exit $rc$([ "$rc" = 124 ] && echo ', timed out')), see throughput.log"
    failed=1
fi
finish
