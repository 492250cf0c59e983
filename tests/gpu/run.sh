#!/bin/sh
# tests/gpu/run.sh — `make gpu-check`: the CUDA backend on a machine with an
# NVIDIA GPU (an H200 when lent), in one command that ends within 8 minutes:
#   1. build for sm_90a, or unpack build/gpu-bundle.tar.xz when it was carried
#   2. every CUDA op against the CPU backend (check_kernels)
#   3. end to end on dummy weights of the smollm2-135m preset (the default
#      model is too large to carry): greedy tokens and logits, CPU = CUDA;
#      then the engine under 64 concurrent requests, no leaked KV blocks
#      (check_e2e)
#   4. benchmark: copy bandwidth, bf16 GEMM rate, decode step of a preset
#      (bench_device); offline throughput of the engine on that preset
# Each step gets what is left of the 8 minutes, up to its own cap.  Full logs
# go to $OUT (default /tmp/tram-gpu-check); a compact table is printed last
# (and written to $OUT/summary.md).  Exit status: 0 when every check passed.
#
#   sh tests/gpu/run.sh bundle   on a machine without a GPU: build (portable
#        x86-64-v3 host code) and pack build/gpu-bundle.tar.xz: binaries and
#        the shared libraries a bare CUDA image lacks, to carry to the device
#        machine, which has nvcc but not tram's Debian dev packages
#
# Environment: TRAM_GPU_PRESET (benchmark preset, llama-3.1-8b),
# TRAM_GPU_SEED (kernel check seed), TRAM_GPU_BUDGET (seconds, 470).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/tram-gpu-check}
PRESET=${TRAM_GPU_PRESET:-llama-3.1-8b}
TOKENIZER=tests/fixtures/tokenizer/spm/spm.gguf
BUNDLE=build/gpu-bundle.tar.xz
START=$(date +%s)
BUDGET=${TRAM_GPU_BUDGET:-470}
PATH="$PATH:/usr/local/cuda/bin"
export PATH

# ---------------------------------------------------------------- bundle
# Checksum of every source the binaries are built from: a bundle built from
# other sources than the tree it travels with is refused, never run.
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
    for p in tram-cuda tests/gpu/check_kernels tests/gpu/check_e2e tests/gpu/bench_device; do
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

mkdir -p "$OUT"
summary=""
failed=0
row() { summary="$summary$(printf '| %-10s | %-78s |' "$1" "$2")
"; }
# Seconds a step may take: its cap, or what is left of the budget.
left() {
    l=$((BUDGET - ($(date +%s) - START)))
    [ "$l" -lt "$1" ] && echo "$((l > 5 ? l : 5))" || echo "$1"
}
# The table, last; exit with the verdict.
finish() {
    echo
    cat "$OUT/device.txt"
    printf '| %-10s | %-78s |\n' step result
    printf '%s' "$summary"
    grep '^|' "$OUT/bench.log" 2>/dev/null
    { cat "$OUT/device.txt"; printf '%s' "$summary"; grep '^|' "$OUT/bench.log" 2>/dev/null; } >"$OUT/summary.md"
    echo "gpu-check: $(($(date +%s) - START)) s, $([ "$failed" = 0 ] && echo 'all checks passed' || echo FAILED)"
    exit "$failed"
}

# ---------------------------------------------------------------- 1. build
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/device.txt" 2>&1
if [ -f "$BUNDLE" ]; then
    tar -C build -xJf "$BUNDLE" || exit 1
    if [ "$(cat build/gpu-bundle/sources.md5)" != "$(sources_sum)" ]; then
        echo "gpu-check: $BUNDLE was built from other sources than this tree: run 'sh tests/gpu/run.sh bundle' again"
        exit 1
    fi
    BIN=build/gpu-bundle/bin
    # NCCL ships with the toolkit here, inside the Python wheels there.
    NCCL_DIR=$(dirname "$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' 2>/dev/null | head -n 1)" 2>/dev/null)
    LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib:/usr/local/cuda/lib64:${NCCL_DIR:-.}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    row build "carried bundle (built for sm_90a by run.sh bundle)"
elif make cuda >"$OUT/build.log" 2>&1; then
    BIN=build/gpu-bin
    mkdir -p "$BIN" && cp bin/tram-cuda build/cuda/tests/gpu/check_kernels build/cuda/tests/gpu/check_e2e \
        build/cuda/tests/gpu/bench_device "$BIN/"
    row build "make cuda: ok"
else
    tail -n 30 "$OUT/build.log"
    echo "gpu-check: the build failed and no $BUNDLE was carried (see $OUT/build.log)"
    exit 1
fi

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
    grep '^FAIL' "$OUT/$name.log" | head -n 5 >"$OUT/$name.failed"
    while read -r line; do row "" "$line"; done <"$OUT/$name.failed"
    [ "$rc" = 0 ] || failed=1
    [ "$rc" = 2 ] && { cat "$OUT/$name.log"; finish; }
}

# ---------------------------------------------------------------- 2. kernels
check kernels 120 "$BIN/check_kernels" ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"}

# ---------------------------------------------------------------- 3. end to end
check e2e 120 "$BIN/check_e2e" smollm2-135m "$TOKENIZER"
# the greedy and engine lines are the point of this step: show them all
grep -E '^PASS +(greedy|engine)' "$OUT/e2e.log" >"$OUT/e2e.passed"
while read -r line; do row "" "$line"; done <"$OUT/e2e.passed"

# ---------------------------------------------------------------- 4. benchmark
timeout "$(left 150)" "$BIN/bench_device" "$PRESET" 1 8 64 256 >"$OUT/bench.log" 2>&1 || {
    row bench "bench_device failed (exit $?), see bench.log"
    failed=1
}
timeout "$(left 120)" "$BIN/tram-cuda" bench throughput --device cuda --load-format dummy --preset "$PRESET" \
    --tokenizer "$TOKENIZER" --num-prompts 256 --input-len 512 --output-len 128 --max-model-len 2048 \
    >"$OUT/throughput.log" 2>&1
rc=$?
tput=$(grep -E '^\| batched' "$OUT/throughput.log" | awk -F'|' '{gsub(/ /, "", $3); gsub(/ /, "", $5); print $3 " req/s, " $5 " output tok/s"}')
row throughput "$PRESET, 256 x (512 in, 128 out): ${tput:-no result} (exit $rc)"
[ "$rc" = 0 ] || failed=1
finish
